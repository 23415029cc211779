# torch-tpu: `make demo` and `make test` set everything up from nothing (idempotent).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.deps-stamp
JOBS ?= 2
# pytest-xdist workers for the test suites: one per core, at most 4 (each loads the plugins and,
# with the AOT check, libtpu). Each test file stays on one worker (--dist loadfile), in order.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
# The newest CPU PJRT plugin we test against (installed without its jax dependency).
NEW_CPU_PLUGIN := lammps-jax-pjrt-cpu==0.11.2

.PHONY: setup build wheel test-wheel demo quickstart test test-cpp test-python test-cpu-isa test-aot-slice test-aot test-oldest-plugin test-oldest-plugin-full test-fused-slice test-fused fuzz bench bench-eager bench-compile bench-llm bench-diffusion bench-projection bench-attention bench-parallel docs clean

setup: $(STAMP) build

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(VENV)/bin/python requirements-dev.txt
	$(PIP) install -q --upgrade pip
	# torch first, alone: the CPU build from the local file (any other request pulls CUDA).
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-deps $(NEW_CPU_PLUGIN)
	# libtpu: the real TPU compiler, used ahead-of-time (no TPU needed) by the C++ AOT tests.
	$(PIP) install -q -r requirements-aot.txt
	@if [ ! -f /usr/include/gtest/gtest.h ]; then \
	  (apt-get update -qq && apt-get install -y -qq libgtest-dev >/dev/null) || \
	  echo "warning: could not install libgtest-dev; C++ tests will be skipped"; fi
	touch $(STAMP)

build: $(STAMP)
	TORCH_TPU_BUILD_JOBS=$(JOBS) $(PIP) install -q --no-build-isolation --no-deps -e .

# With libtpu installed, every program is also compiled for a v6e chip (docs/tpu_aot.md).
AOT_TOPOLOGY = $$($(PY) -c "import importlib.util as u; print('v6e:1x1' if u.find_spec('libtpu') else '')")

# A wheel of the package (dist/), built against the torch in .venv.
wheel: setup
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 TORCH_TPU_BUILD_JOBS=$(JOBS) $(PIP) wheel -q --no-build-isolation --no-deps -w dist .

# The wheel as a user installs it: built from a clean copy of the committed tree in a new venv
# with only torch, installed there, then a tpu op and the demo run (tools/check_wheel.sh; a long
# check, outside `make test`: it builds the C++ core from scratch).
test-wheel:
	JOBS=$(JOBS) PYTHON=$(PYTHON) bash tools/check_wheel.sh

# The user's Transformers script with the shipped tiny Qwen3.5 checkpoint (examples/demo_llm.py).
demo: setup
	TORCH_TPU_AOT_CHECK=$(AOT_TOPOLOGY) $(PY) examples/demo_llm.py

# Train a small MLP eagerly, then compiled (examples/quickstart.py).
quickstart: setup
	TORCH_TPU_AOT_CHECK=$(AOT_TOPOLOGY) $(PY) examples/quickstart.py

test: setup test-cpp test-python test-cpu-isa test-aot-slice test-oldest-plugin test-fused-slice test-accelerator-dry

test-cpp: $(STAMP)
	@if [ -f /usr/include/gtest/gtest.h ]; then \
	  cmake -S . -B build-cpp -G Ninja -DTORCH_TPU_BUILD_EXTENSION=OFF -DTORCH_TPU_BUILD_TESTS=ON \
	    -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  cmake --build build-cpp -j$(JOBS) >/dev/null && \
	  TORCH_TPU_TEST_PLUGIN=$$($(PY) -c "import torch_tpu._discovery as d; print(d.cpu_plugin_path())") \
	  TORCH_TPU_LIBTPU=$$($(PY) -c "import libtpu, os; print(os.path.join(os.path.dirname(libtpu.__file__), 'libtpu.so'))") \
	    ./build-cpp/tpu_cpp_tests; \
	else echo "C++ tests skipped: GoogleTest not installed"; exit 1; fi

# The model-level suites (Transformers families, Diffusers pipelines, demos, torchrun) emit the
# same op modules the op-level tests do, thousands of times over; they run once, in test-python.
MODEL_SUITES := test_vision_training.py test_transformers_families.py test_diffusers.py test_demo_llm.py test_distributed.py \
  test_bucketing_generate.py
OP_SUITE := tests/python $(foreach f,$(MODEL_SUITES),--ignore=tests/python/$(f))
# A representative slice of the op-level suite (element-wise, reductions, indexing, nn, conv,
# shapes, views, conj/neg views, FFT, torch.compile, optimizers, the AOT tool itself) for the
# passes that cost more per module: libtpu's compile of every module for a v6e chip (issue 3)
# and the oldest CPU plugin. With ~3000 op-level tests, running them all through both would
# take CI past its budget; `make test-aot` and `make test-oldest-plugin-full` do (long suites).
SLICE := $(addprefix tests/python/,test_ops_elementwise.py test_ops_reduce.py test_ops_index.py \
  test_ops_nn.py test_ops_conv.py test_ops_shape.py test_views.py test_math_bits.py test_ops_fft.py \
  test_compile.py test_optim.py test_aot_check.py test_ops_attention.py test_bucketing.py test_bucketed_graphs.py test_bucketed_masks.py \
  test_bucketed_conv.py test_bucketed_chunks.py test_bucketed_reshape.py)
AOT_ENV = TORCH_TPU_AOT_CHECK=$$($(PY) -c "import libtpu" 2>/dev/null && echo v6e:1x1)

# --durations: the slowest tests are listed at the end, to keep CI within its time budget.
test-python: setup
	TORCH_TPU_QUIET=1 $(PYTEST) -q --durations=30 $(OP_SUITE)
	TORCH_TPU_QUIET=1 $(PYTEST) -q --durations=15 $(foreach f,$(MODEL_SUITES),tests/python/$(f))

# PyTorch's CPU kernels, our reference, answer differently at NaN/inf by vector ISA (docs/limits.md
# "PyTorch CPU's own scalar and vector loops disagree"): test-python ran the NaN-sensitive suites
# with this host's own ISA; these runs repeat them with each lower one PyTorch can select here
# (`default` always, `avx2` on an AVX-512 host), so a test that holds only on one kind of host fails.
ISA_SLICE := $(addprefix tests/python/,test_ops_activations_losses.py test_ops_reduce.py \
  test_ops_elementwise.py test_ops_stats_special.py test_cpu_loops.py test_fuzz_slice.py)
test-cpu-isa: setup
	@for isa in $$($(PY) tools/lower_cpu_capabilities.py); do \
	  echo "ATEN_CPU_CAPABILITY=$$isa:"; \
	  ATEN_CPU_CAPABILITY=$$isa TORCH_TPU_QUIET=1 $(PYTEST) -q $(ISA_SLICE) || exit 1; done

# Every module the slice compiles is also compiled by libtpu for a v6e chip: counts are printed
# at the end, undocumented rejections fail the run (docs/tpu_aot.md).
test-aot-slice: setup
	TORCH_TPU_QUIET=1 $(AOT_ENV) $(PYTEST) -q --durations=15 $(SLICE)

# Fused eager (docs/eager_modes.md): the suites again with ops recorded and run as programs. The
# op suite compiles every stream's program at its first run (TORCH_TPU_FUSED_COMPILE=inline, the
# default), so each op is assembled into a fused program; the model suites run with background
# compiles (a new stream running op by op meanwhile). `make test` runs a slice (the mode's own
# tests, views, element-wise, indexing, the fuzz slice, growing dims, Transformers generate); `make test-fused`
# runs the op suite and the model suites.
FUSED_OP_SLICE := $(addprefix tests/python/,test_fused_eager.py test_views.py test_ops_elementwise.py \
  test_ops_index.py test_fuzz_slice.py test_growing_dims.py)
test-fused-slice: setup
	TORCH_TPU_QUIET=1 TORCH_TPU_EAGER_MODE=fused $(PYTEST) -q $(FUSED_OP_SLICE)
	TORCH_TPU_QUIET=1 TORCH_TPU_EAGER_MODE=fused TORCH_TPU_FUSED_COMPILE=background $(PYTEST) -q tests/python/test_transformers.py

test-fused: setup
	TORCH_TPU_QUIET=1 TORCH_TPU_EAGER_MODE=fused $(PYTEST) -q $(OP_SUITE)
	TORCH_TPU_QUIET=1 TORCH_TPU_EAGER_MODE=fused TORCH_TPU_FUSED_COMPILE=background $(PYTEST) -q $(foreach f,$(MODEL_SUITES),tests/python/$(f))

test-aot: setup
	TORCH_TPU_QUIET=1 $(AOT_ENV) $(PYTEST) -q $(OP_SUITE)

# StableHLO text has no cross-version guarantee: rerun emitted-module tests on the oldest CPU
# plugin we support (PJRT 0.81) so syntax drift shows up here.
test-oldest-plugin: setup
	TORCH_TPU_QUIET=1 TORCH_TPU_CPU_PLUGIN=xla_plugins.xla_cpu_pjrt $(PYTEST) -q $(SLICE)

# tools/accelerator_check.sh's steps on the plugin under `tpu` here, tiny sizes (the real run
# needs the GPU machine: docs/accelerator.md).
test-accelerator-dry: setup
	OUT=$$(mktemp -d) PYTHON=$(PY) bash tools/accelerator_check.sh --dry-run

# The extension compiled and linked against torch 2.11's headers and libraries (a downloaded
# wheel, never imported): the oldest release supported (docs/accelerator.md).
check-torch-2.11: setup
	bash tools/check_torch_release.sh 2.11.0

test-oldest-plugin-full: setup
	TORCH_TPU_QUIET=1 TORCH_TPU_CPU_PLUGIN=xla_plugins.xla_cpu_pjrt $(PYTEST) -q $(OP_SUITE)

# Differential fuzzing, CPU vs tpu (tests/fuzz): random calls of the lowered ops; prints the
# summary by class and op, and a repro per failing case. `make test` runs a 300-case slice.
FUZZ_CASES ?= 20000
FUZZ_SEED ?= 0
fuzz: setup
	TORCH_TPU_QUIET=1 $(PY) -m tests.fuzz --cases $(FUZZ_CASES) --seed $(FUZZ_SEED)

bench: setup
	$(PY) benchmarks/run.py

# Strict vs fused eager vs compiled: launches, host time, XLA:CPU time, v6e estimate (docs/eager_modes.md).
bench-eager: setup
	$(PY) benchmarks/eager_modes.py

# torch.compile(backend="tpu") vs our eager vs PyTorch CPU eager and Inductor (docs/compile.md).
bench-compile: setup
	$(PY) benchmarks/compile.py

# One denoising step of the SD3.5 / Qwen-Image transformers: eager, compiled, CPU, Inductor (issue 9).
bench-diffusion: setup
	$(PY) benchmarks/diffusion.py

# The seed's models on v6e (Qwen-Image 1024x1024 on v6e-1 and v6e-4, SD3.5 Medium, Qwen3.5-9B prefill
# and decode), projected from libtpu's cost analysis of
# full-width graphs of a few blocks of the real model classes (issues 9 and 30; about 40 min on 2 cores).
bench-projection: setup
	$(PY) benchmarks/qwen_image_projection.py
	$(PY) benchmarks/sd35_projection.py
	$(PY) benchmarks/llm_projection.py

# Masked and causal attention: libtpu's v6e estimate, exact form vs the form lowered for libtpu.
bench-attention: setup
	$(PY) benchmarks/attention_projection.py

# Prefill/decode tokens/s of ~10M and ~100M Qwen3/Qwen3.5 models vs PyTorch CPU (issue 8).
# Tensor parallelism over 1/2/4 emulated chips: memory and traffic per rank (docs/parallel.md).
bench-parallel: setup
	$(PY) benchmarks/parallel.py

bench-llm: setup
	$(PY) benchmarks/llm_generate.py
	$(PY) benchmarks/serving.py
	$(PY) benchmarks/serving.py --family gemma3
	$(PY) benchmarks/serving.py --family qwen3_5
	$(PY) benchmarks/serving.py --batch 3

docs: setup
	TORCH_TPU_QUIET=1 $(PY) tools/gen_ops_table.py > docs/supported_ops.md
	TORCH_TPU_QUIET=1 $(PY) tools/gen_op_coverage.py > docs/op_coverage.md

clean:
	rm -rf build build-cpp $(VENV) torch_tpu/_C*.so *.egg-info
