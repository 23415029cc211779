// What differs between the torch releases the extension builds against (2.11 through 2.13; the
// oldest is checked by `make check-torch-2.11`, docs/accelerator.md). Each difference is
// handled where it arises, named by this macro, so that dropping a release finds them all.
#pragma once

#include <torch/headeronly/version.h>

#define TORCH_TPU_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
