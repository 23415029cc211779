"""Differential fuzzer: random calls of the ATen ops we lower, run on CPU and on `tpu`, compared.

Modules, one responsibility each:
  optable      which ops are fuzzed (from `_C._register_kernels()`), their schemas, shape hints
  tensors      random tensor inputs (shape, dtype, values with special values, view chain) as code
  cases        a whole case (op + arguments) from (seed, index), deterministic
  execute      runs one case on CPU and on tpu in this process and compares the results
  classify     the failure classes and the comparison of two results
  worker       the subprocess that runs cases sent over a pipe
  runner       drives workers: per-case timeout (hang), worker death (crash), restarts
  report       summary tables and repro snippets
  known_limits documented differences (docs/limits.md) not counted as failures
  __main__     CLI: python -m tests.fuzz --cases N --seed S
"""
