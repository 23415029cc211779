#!/usr/bin/env bash
# The engine on a real accelerator: the CUDA PJRT plugin under `tpu`, in one prepared run.
#
#   tools/accelerator_check.sh              # on the GPU machine (the device tool); about 8 minutes
#   tools/accelerator_check.sh --dry-run    # anywhere: the same steps on the plugin already under
#                                           # `tpu`, tiny sizes, no build (make test-accelerator-dry)
#
# Steps, each with its own time limit, each logged; a failing step does not stop the others:
#   1. env      what runs here: GPU, Python, torch, the CUDA PJRT plugin
#   2. build    the extension against the torch installed here (pip, no build isolation, no deps)
#   3. ops      an op-level slice of the test suite on `tpu`
#   4. models   one test of each model suite (Transformers families, Diffusers)
#   5. demos    examples/demo_llm.py and examples/demo_sd.py --compile
#   6. bench    benchmarks/accelerator.py: ~1B Llama decode and an SD3.5-medium-layout step at
#               1024x1024, `tpu` against PyTorch CUDA eager and Inductor
# Writes at most 8 files to $OUT (default ./accelerator_out): env.txt, build.log, ops.log,
# models.log, demos.log, bench.log, accelerator.md and summary.txt.
#
# The machine has no network. Transformers, Diffusers and their dependencies must be there
# already or be given as wheels: ACCELERATOR_WHEELS=DIR installs them with pip --no-index
# (a session fills DIR beforehand with `pip download --python-version 3.12 --only-binary=:all:
#  -d DIR transformers diffusers`, for that machine's Python).
set -u
DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1
OUT="${OUT:-$PWD/accelerator_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
[ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && [ "$DRY_RUN" = 1 ] && PY=.venv/bin/python
SCRATCH=$(mktemp -d)  # the executable cache and the demo's image: not part of the report
export TORCH_TPU_QUIET=1 TORCH_TPU_CACHE_DIR="$SCRATCH/cache"
if [ "$DRY_RUN" = 0 ]; then
  export TORCH_TPU_PJRT_PLUGIN=cuda
  JOBS=$(nproc)
fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

step() {  # step NAME SECONDS LOG COMMAND...
  local name=$1 limit=$2 log=$3
  shift 3
  local start=$SECONDS
  timeout "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  local verdict=ok
  [ $rc -ne 0 ] && verdict="FAILED (exit $rc$([ $rc -eq 124 ] && echo ', time limit'))"
  echo "$name: $verdict in $((SECONDS - start)) s" | tee -a "$SUMMARY"
}

# 1. env
{
  echo "date: $(date -u)"; echo "commit: $(git rev-parse HEAD 2>/dev/null)"; echo "dry run: $DRY_RUN"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  "$PY" -c "import torch_tpu._discovery as d; print('cuda plugin', d.cuda_plugin_path())" 2>&1 | tail -1
} > "$OUT/env.txt" 2>&1

# 2. build
if [ "$DRY_RUN" = 0 ]; then
  if [ -n "${ACCELERATOR_WHEELS:-}" ]; then
    step wheels 120 "$OUT/build.log" "$PY" -m pip install -q --no-index --find-links "$ACCELERATOR_WHEELS" transformers diffusers
  fi
  step build 300 "$OUT/build.log" env TORCH_TPU_BUILD_JOBS="$JOBS" "$PY" -m pip install -q --no-build-isolation --no-deps -e .
else
  echo "build: skipped (dry run: the extension built here)" | tee -a "$SUMMARY" > "$OUT/build.log"
fi

# 3. ops: element-wise, reductions, indexing, nn, conv, attention, views, random, memory
OPS="tests/python/test_ops_elementwise.py tests/python/test_ops_reduce.py tests/python/test_ops_index.py
     tests/python/test_ops_nn.py tests/python/test_ops_conv.py tests/python/test_ops_attention.py
     tests/python/test_views.py tests/python/test_ops_random.py tests/python/test_engine.py"
[ "$DRY_RUN" = 1 ] && OPS="tests/python/test_ops_index.py tests/python/test_engine.py"
# shellcheck disable=SC2086
step ops 240 "$OUT/ops.log" "$PY" -m pytest -q -x -p no:cacheprovider $(ls $OPS 2>/dev/null)

# 4. models: greedy tokens of every Transformers family, every Diffusers pipeline, against the CPU
if [ "$DRY_RUN" = 1 ]; then
  step models 240 "$OUT/models.log" "$PY" -m pytest -q -p no:cacheprovider \
    "tests/python/test_transformers_families.py::test_prompt_on_cpu_gives_pytorchs_device_mismatch_error"
else
  step models 240 "$OUT/models.log" "$PY" -m pytest -q -p no:cacheprovider \
    tests/python/test_transformers_families.py tests/python/test_diffusers.py \
    -k "test_greedy_32_tokens_match_cpu or test_pipeline_matches_cpu"
fi

# 5. demos
step demo_llm 120 "$OUT/demos.log" "$PY" examples/demo_llm.py --max-new-tokens 16 --cache dynamic
step demo_sd 180 "$OUT/demos.log" "$PY" examples/demo_sd.py --compile --out "$SCRATCH/demo_sd.png"

# 6. bench
if [ "$DRY_RUN" = 1 ]; then
  step bench 300 "$OUT/bench.log" "$PY" benchmarks/accelerator.py --dry-run --out "$OUT"
else
  step bench 420 "$OUT/bench.log" "$PY" benchmarks/accelerator.py --out "$OUT"
fi

rm -rf "$SCRATCH"
! grep -q FAILED "$SUMMARY"
