#!/usr/bin/env bash
# `make test-wheel`: the package as a user installs it, without the Makefile. A clean copy of the
# committed tree is built into a wheel in a new venv that has only torch (and the build tools),
# the wheel is installed into that venv beside torch, and a tpu op and the Transformers demo run
# there, from outside the source tree.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/src"
git -C "$ROOT" archive HEAD | tar -x -C "$WORK/src"
"$PYTHON" -m venv "$WORK/venv"
PIP="$WORK/venv/bin/python -m pip"
$PIP install -q --upgrade pip
$PIP install -q torch==2.13.0
$PIP install -q setuptools wheel cmake ninja numpy
$PIP install -q --no-deps lammps-jax-pjrt-cpu==0.11.2
echo "building the wheel"
(cd "$WORK/src" && TORCH_TPU_BUILD_JOBS="${JOBS:-2}" $PIP wheel -q --no-build-isolation --no-deps -w "$WORK/dist" .)
ls -l "$WORK"/dist/*.whl
$PIP install -q --no-deps "$WORK"/dist/torch_tpu-*.whl
cd "$WORK"
TORCH_TPU_QUIET=1 "$WORK/venv/bin/python" -c "
import torch, torch_tpu
assert '$WORK/venv' in torch_tpu.__file__, torch_tpu.__file__  # the installed wheel, not the source tree
print('tpu op from the wheel:', torch.randn(2, device='tpu').sum().item(), torch.tpu.get_device_name())"
$PIP install -q "transformers==5.24.0" "accelerate==1.15.0"
TORCH_TPU_QUIET=1 "$WORK/venv/bin/python" "$WORK/src/examples/demo_llm.py" --max-new-tokens 8
echo "wheel check passed"
