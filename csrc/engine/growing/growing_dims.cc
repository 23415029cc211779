#include "engine/growing/growing_dims.h"

#include <ATen/ATen.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/device/storage.h"

namespace tpu::engine {

std::optional<int64_t> padded_capacity(const at::Tensor& t, int64_t dim) {
  if (!t.defined() || !t.is_privateuseone() || t.dim() == 0 || t.storage_offset() != 0 || t.numel() == 0) {
    return std::nullopt;
  }
  if (!storage_buffer(t).growable) return std::nullopt;
  int64_t rows = t.size(dim);
  int64_t others = t.numel() / rows;
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  if (storage_elems % others != 0) return std::nullopt;
  int64_t capacity = storage_elems / others;
  if (capacity < rows) return std::nullopt;
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 0; --i) {
    int64_t extent = i == dim ? capacity : t.size(i);
    if (t.size(i) != 1 && t.stride(i) != expected) return std::nullopt;
    expected *= extent;
  }
  return capacity;
}

void mark_growable(const at::Tensor& t) { storage_buffer(t).growable = true; }

at::Tensor whole_capacity(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = capacity;
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= sizes[i];
  }
  return t.as_strided(sizes, strides, 0);
}

std::optional<Spare> spare_rows(const at::Tensor& t) {
  if (!growing_dims_enabled() || !t.defined() || !t.is_privateuseone() || t.is_conj() || t.is_neg() ||
      !storage_buffer(t).growable) {
    return std::nullopt;
  }
  std::optional<Spare> found;
  for (int64_t d = 0; d < t.dim(); ++d) {
    std::optional<int64_t> capacity = padded_capacity(t, d);
    if (!capacity || *capacity == t.size(d)) continue;
    // A dim of extent 1 skips the stride check, so it can pass by accident next to the real one.
    if (found && t.size(d) == 1) continue;
    if (found && t.size(found->dim) != 1) return std::nullopt;  // ambiguous: leave it to the rule
    found = Spare{d, *capacity, t.size(d)};
  }
  return found;
}

std::optional<Spare> shared_growth(const std::vector<at::Tensor>& operands, int64_t rank) {
  std::optional<Spare> grows;
  for (const at::Tensor& t : operands) {
    if (std::optional<Spare> g = spare_rows(t)) {
      Spare at{g->dim + rank - t.dim(), g->capacity, g->length};
      if (grows && (grows->dim != at.dim || grows->capacity != at.capacity || grows->length != at.length)) {
        return std::nullopt;
      }
      grows = at;
    }
  }
  for (const at::Tensor& t : operands) {
    int64_t local = grows ? grows->dim - (rank - t.dim()) : -1;
    if (local >= 0 && !spare_rows(t) && t.size(local) != 1) return std::nullopt;
  }
  return grows;
}

at::Tensor rows_below(int64_t n, int64_t length, int64_t dim, int64_t rank, const at::Tensor& like) {
  std::vector<int64_t> shape(rank, 1);
  shape[dim] = n;
  return at::arange(n, like.options().dtype(at::kLong)).lt(length).view(shape);
}

at::Tensor as_padded_prefix(const at::Tensor& whole, int64_t dim, int64_t length) {
  mark_growable(whole);
  note_grown(whole, length, whole.size(dim));
  std::vector<int64_t> sizes = whole.sizes().vec();
  sizes[dim] = length;
  return whole.as_strided(sizes, whole.strides(), 0);
}

namespace {
// The latest growing tensors made (appends, and results over a capacity): their storage, length
// and capacity. Only live storages count, so lengths of finished generations do not linger.
struct Grown {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
  int64_t length = 0, capacity = 0;
};
std::mutex g_grown_mu;
std::array<Grown, 64> g_grown;
size_t g_grown_next = 0;
}  // namespace

void note_grown(const at::Tensor& t, int64_t length, int64_t capacity) {
  std::lock_guard<std::mutex> lock(g_grown_mu);
  g_grown[g_grown_next++ % g_grown.size()] = Grown{t.storage().getWeakStorageImpl(), length, capacity};
}

std::optional<int64_t> capacity_of_grown_length(int64_t length) {
  std::lock_guard<std::mutex> lock(g_grown_mu);
  for (const Grown& g : g_grown) {
    if (g.length == length && g.capacity > length && !g.storage.expired()) return g.capacity;
  }
  return std::nullopt;
}

int64_t capacity_for(int64_t length) {
  int64_t c = 128;
  while (c < length) c *= 2;
  return c;
}

bool growing_dims_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCH_TPU_GROWING_DIMS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace tpu::engine
