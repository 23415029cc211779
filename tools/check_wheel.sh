#!/usr/bin/env bash
# `make test-wheel`: the package as a user installs it, without the Makefile. From a clean copy of
# the committed tree, in a new venv that has only torch (and the build tools):
#   1. plain `pip install .` (build isolation) stops at once, saying what to do;
#   2. an sdist is built, and `pip wheel --no-build-isolation` builds the wheel from the sdist
#      (what pip does for `pip install --no-build-isolation torch-tpu-*.tar.gz`), so both are
#      complete and the build never imports a half-built torch_tpu;
#   3. the wheel is installed beside torch, and a tpu op, the torch-version check and the
#      Transformers demo run there, from outside the source tree.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/src"
git -C "$ROOT" archive HEAD | tar -x -C "$WORK/src"
"$PYTHON" -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
PIP="$PY -m pip"
$PIP install -q --upgrade pip
$PIP install -q torch==2.13.0
$PIP install -q setuptools wheel cmake ninja numpy build
$PIP install -q --no-deps lammps-jax-pjrt-cpu==0.11.2

echo "1. plain pip install . (build isolation) must refuse with a sentence"
if (cd "$WORK/src" && $PIP install --no-deps . >"$WORK/isolated.log" 2>&1); then
  echo "plain pip install . succeeded: it should have stopped"; exit 1
fi
grep -q "no-build-isolation" "$WORK/isolated.log" || { cat "$WORK/isolated.log"; echo "no hint in the refusal"; exit 1; }
echo "   refused, naming --no-build-isolation"

echo "2. sdist, then the wheel from the sdist"
(cd "$WORK/src" && $PY -m build -q --sdist --no-isolation -o "$WORK/sdist" .)
ls -l "$WORK"/sdist/*.tar.gz
TORCH_TPU_BUILD_JOBS="${JOBS:-2}" $PIP wheel -q --no-build-isolation --no-deps -w "$WORK/dist" "$WORK"/sdist/torch_tpu-*.tar.gz
ls -l "$WORK"/dist/*.whl
unzip -l "$WORK"/dist/torch_tpu-*.whl | grep -q "torch_tpu/_build_info.py" || { echo "the wheel lacks _build_info.py"; exit 1; }

echo "3. the wheel installed beside torch"
$PIP install -q --no-deps "$WORK"/dist/torch_tpu-*.whl
cd "$WORK"
TORCH_TPU_QUIET=1 "$PY" -c "
import torch, torch_tpu
assert '$WORK/venv' in torch_tpu.__file__, torch_tpu.__file__  # the installed wheel, not the source tree
print('tpu op from the wheel:', torch.randn(2, device='tpu').sum().item(), torch.tpu.get_device_name())"
# Beside another torch release, the import names both versions instead of an undefined symbol.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c "
import torch
torch.__version__ = '2.12.1+cpu'
try:
    import torch_tpu
except ImportError as e:
    assert 'built against torch 2.13.0' in str(e) and '2.12.1' in str(e), e
    print('   another torch:', e)
else:
    raise SystemExit('torch_tpu imported beside another torch release')"
$PIP install -q "transformers==5.24.0" "accelerate==1.15.0"
TORCH_TPU_QUIET=1 "$PY" "$WORK/src/examples/demo_llm.py" --max-new-tokens 8
echo "wheel check passed"
