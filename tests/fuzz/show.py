"""python -m tests.fuzz.show SEED INDEX: print a case's repro snippet and run it in this process."""
import sys


def main():
    seed, index = int(sys.argv[1]), int(sys.argv[2])
    import torch_tpu  # noqa: F401
    from . import execute, report
    from .cases import make_case
    case = make_case(seed, index)
    res = {"cls": "?", "detail": ""} if "--no-run" in sys.argv else execute.run_case(case)
    print(report.repro(case, res))


if __name__ == "__main__":
    main()
