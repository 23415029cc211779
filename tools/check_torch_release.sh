#!/usr/bin/env bash
# Compiles and links torch_tpu._C against another torch release's headers and libraries, taken
# from its wheel and never imported (this machine keeps its own torch), then checks that every
# torch symbol the module needs is defined by that release's libraries.
#
#   tools/check_torch_release.sh 2.11.0      (make check-torch-2.11)
#
# The wheel is PyPI's (a CUDA build: only its CPU headers and libraries are used) and is kept
# in ~/.cache/torch-tpu-wheels. The module is built in build-torch-<version>/, not in torch_tpu/.
set -euo pipefail
VERSION=${1:?usage: tools/check_torch_release.sh <torch version, e.g. 2.11.0>}
PY=${PYTHON:-.venv/bin/python}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TORCH_TPU_WHEEL_CACHE:-$HOME/.cache/torch-tpu-wheels}
BUILD=$ROOT/build-torch-$VERSION
TAG=$("$PY" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
mkdir -p "$CACHE"

WHEEL=$(ls "$CACHE"/torch-"$VERSION"-"$TAG"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  "$PY" -m pip download -q --no-deps "torch==$VERSION" -d "$CACHE"
  WHEEL=$(ls "$CACHE"/torch-"$VERSION"-"$TAG"-*.whl | head -1)
fi
UNPACKED=$CACHE/torch-$VERSION-$TAG
if [ ! -d "$UNPACKED/torch/include" ]; then
  rm -rf "$UNPACKED" && mkdir -p "$UNPACKED"
  (cd "$UNPACKED" && unzip -q "$WHEEL" 'torch/include/*' 'torch/lib/*' 'torch/version.py')
fi
echo "torch $VERSION: $(grep -m1 '__version__' "$UNPACKED/torch/version.py")"

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DPython3_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=Release \
  -DTORCH_TPU_TORCH_ROOT="$UNPACKED/torch" > /dev/null
cmake --build "$BUILD" --target _C -j"${JOBS:-2}"
MODULE=$(ls "$BUILD"/_C*.so)

# Every strong undefined symbol of c10/ATen/torch must be defined by the release's libraries (a
# module links with undefined symbols allowed; this is what its import would find missing).
LIBS="$UNPACKED/torch/lib"
MISSING=$(comm -23 \
  <(nm -D --undefined-only "$MODULE" | awk '$1 == "U" {print $2}' | grep -E 'c10|torch|_ZN2at' | sort -u) \
  <(for lib in libtorch.so libtorch_cpu.so libc10.so libtorch_python.so; do
      nm -D --defined-only "$LIBS/$lib" | awk '{print $3}'; done | sort -u))
if [ -n "$MISSING" ]; then
  echo "torch $VERSION lacks symbols torch_tpu._C needs:"
  echo "$MISSING" | c++filt | head -40
  exit 1
fi
echo "torch_tpu._C builds and links against torch $VERSION; all its torch symbols resolve ($MODULE)"
