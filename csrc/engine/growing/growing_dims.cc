#include "engine/growing/growing_dims.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/device/storage.h"

namespace tpu::engine {

namespace {
// A dim that an expand broadcast (stride 0, more than one row): it holds no storage of its own.
// BART's positions arange(L).expand(B, -1) are a padded prefix of the arange's bucket.
bool broadcast_dim(const at::Tensor& t, int64_t i) { return t.stride(i) == 0 && t.size(i) > 1; }

// Whether `t`'s strides are the row-major strides of its sizes with `capacity` rows along `dim`
// (dims of one row, whose strides say nothing, and broadcast dims aside).
bool row_major_with_capacity(const at::Tensor& t, int64_t dim, int64_t capacity) {
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 0; --i) {
    if (i != dim && broadcast_dim(t, i)) continue;
    if (t.size(i) != 1 && t.stride(i) != expected) return false;
    expected *= i == dim ? capacity : t.size(i);
  }
  return true;
}

// Whether `t`'s strides are those of the dense tensor of its sizes with `capacity` rows along
// `dim`, in some order of the dims (a transposed or permuted view of a padded result: q, k and
// v of attention are [B, L, H, D] results viewed as [B, H, L, D]). Size-1 and broadcast dims are
// skipped; `dim` must have more than one row, its stride deciding where it sits.
bool dense_with_capacity_in_some_order(const at::Tensor& t, int64_t dim, int64_t capacity) {
  if (t.size(dim) == 1) return false;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.size(i) != 1 && !broadcast_dim(t, i)) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (t.stride(*it) != expected) return false;
    expected *= *it == dim ? capacity : t.size(*it);
  }
  return true;
}
}  // namespace

std::optional<int64_t> padded_capacity(const at::Tensor& t, int64_t dim) {
  if (!t.defined() || !t.is_privateuseone() || t.dim() == 0 || t.storage_offset() != 0 || t.numel() == 0) {
    return std::nullopt;
  }
  if (!storage_buffer(t).growable || broadcast_dim(t, dim)) return std::nullopt;
  int64_t rows = t.size(dim);
  int64_t others = 1;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i != dim && !broadcast_dim(t, i)) others *= t.size(i);
  }
  int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  if (storage_elems % others != 0) return std::nullopt;
  int64_t capacity = storage_elems / others;
  // A view of one part of a bigger padded storage (freq[0] of Qwen3.5's [3, B, C, D] rotary
  // frequencies): the storage's own row stride says the capacity; the element count would make
  // the other parts' rows look like spare ones of this view (3 * C).
  const StorageBuffer& buffer = storage_buffer(t);
  if (buffer.padded_stride == t.stride(dim) && buffer.padded_capacity >= rows && buffer.padded_capacity < capacity) {
    capacity = buffer.padded_capacity;
  }
  if (capacity < rows) return std::nullopt;
  if (row_major_with_capacity(t, dim, capacity) || dense_with_capacity_in_some_order(t, dim, capacity)) return capacity;
  return std::nullopt;
}

void mark_growable(const at::Tensor& t) { storage_buffer(t).growable = true; }

namespace {

// The strides of `t` widened to `capacity` rows along `dim` (whole_capacity's view).
std::vector<int64_t> capacity_strides(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = capacity;
  // A permuted view, or a view of part of a padded storage, keeps its strides and offset; a
  // row-major prefix at offset 0 gets the capacity's row-major strides, those of its dims of one
  // row included: such a stride says nothing and is often left from the length (arange(L)[None, :]
  // has stride L there), so the view and every call signature that holds it are the same for
  // every length in the bucket.
  const StorageBuffer& s = storage_buffer(t);
  bool keeps_strides = t.storage_offset() != 0 ||
                       (t.size(dim) > 1 && !row_major_with_capacity(t, dim, capacity) &&
                        (dense_with_capacity_in_some_order(t, dim, capacity) ||
                         (s.padded_stride == t.stride(dim) && s.padded_capacity == capacity)));
  std::vector<int64_t> strides = t.strides().vec();
  if (!keeps_strides) {
    int64_t st = 1;
    for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
      if (i != dim && broadcast_dim(t, i)) continue;  // stays 0
      strides[i] = st;
      st *= sizes[i];
    }
  }
  return strides;
}

// Whether the capacity's view of `t` stays inside its storage: a view whose strides only look
// like a padded prefix's (a reshape of part of one) must not be widened past the storage.
bool capacity_fits(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> strides = capacity_strides(t, dim, capacity);
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += ((d == dim ? capacity : t.size(d)) - 1) * strides[d];
  return last < static_cast<int64_t>(t.storage().nbytes() / t.element_size());
}

}  // namespace

at::Tensor whole_capacity(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = capacity;
  return t.as_strided(sizes, capacity_strides(t, dim, capacity), t.storage_offset());
}

namespace {
// A view of part of a padded storage (x[..., 8:] of a padded [B, C, 16], or its transpose): the
// dim that walks the storage's growing axis from its first row, with fewer rows than the
// capacity. The view's other dims stay inside the storage's other dims, so the rows past its
// size along that dim are the storage's spare rows.
std::optional<Spare> prefix_of_padded_storage(const at::Tensor& t) {
  const StorageBuffer& s = storage_buffer(t);
  if (s.padded_stride <= 0 || s.padded_capacity <= 0 || t.numel() == 0) return std::nullopt;
  if ((t.storage_offset() / s.padded_stride) % s.padded_capacity != 0) return std::nullopt;  // not from row 0
  std::optional<Spare> found;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) != s.padded_stride || t.size(d) <= 1 || t.size(d) >= s.padded_capacity) continue;
    if (found) return std::nullopt;  // ambiguous
    found = Spare{d, s.padded_capacity, t.size(d)};
  }
  return found;
}
}  // namespace

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
  if (!found) found = prefix_of_padded_storage(t);
  if (found && !capacity_fits(t, found->dim, found->capacity)) return std::nullopt;
  return found;
}

std::optional<Spare> square_rows(const at::Tensor& t) {
  if (!growing_dims_enabled() || !t.defined() || !t.is_privateuseone() || t.is_conj() || t.is_neg() ||
      t.storage_offset() != 0 || t.numel() == 0) {
    return std::nullopt;
  }
  const StorageBuffer& s = storage_buffer(t);
  if (!s.growable || s.square_outer_stride <= 0 || s.square_inner_stride <= 0) return std::nullopt;
  int64_t outer = -1, inner = -1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 1 || t.stride(d) == 0) continue;
    bool is_outer = t.stride(d) == s.square_outer_stride, is_inner = t.stride(d) == s.square_inner_stride;
    if (!is_outer && !is_inner) continue;
    int64_t& slot = is_outer ? outer : inner;
    if (slot >= 0) return std::nullopt;  // another dim walks a padded axis: not a prefix of it
    slot = d;
  }
  if (outer < 0 || inner < 0 || t.size(outer) != t.size(inner) || t.size(outer) >= s.padded_capacity) {
    return std::nullopt;
  }
  Spare found{std::min(outer, inner), s.padded_capacity, t.size(outer), std::max(outer, inner)};
  // The widened view must stay inside the storage (its other dims inside the storage's).
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t extent = d == outer || d == inner ? found.capacity : t.size(d);
    last += (extent - 1) * t.stride(d);
  }
  if (last >= static_cast<int64_t>(t.storage().nbytes() / t.element_size())) return std::nullopt;
  return found;
}

at::Tensor whole_square(const at::Tensor& t, const Spare& s) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[s.dim] = sizes[s.dim2] = s.capacity;
  return t.as_strided(sizes, t.strides(), t.storage_offset());
}

at::Tensor as_padded_square(const at::Tensor& whole, int64_t d1, int64_t d2, int64_t length) {
  mark_growable(whole);
  std::vector<int64_t> sizes = whole.sizes().vec();
  if (whole.storage_offset() == 0 && whole.size(d1) == whole.size(d2) && whole.stride(d1) > whole.stride(d2) &&
      whole.stride(d2) > 0 && static_cast<size_t>(whole.numel() * whole.element_size()) == whole.storage().nbytes()) {
    StorageBuffer& s = storage_buffer(whole);
    s.padded_capacity = whole.size(d1);
    s.square_outer_stride = whole.stride(d1);
    s.square_inner_stride = whole.stride(d2);
  }
  sizes[d1] = sizes[d2] = length;
  return whole.as_strided(sizes, whole.strides(), 0);
}

namespace {
// The padded dims of `t` in a rank-`rank` broadcast: one (spare_rows) or, with `square`, two.
std::optional<Spare> padded_in_broadcast(const at::Tensor& t, int64_t rank, bool square) {
  std::optional<Spare> g = spare_rows(t);
  if (!g && square) g = square_rows(t);
  if (!g) return std::nullopt;
  int64_t shift = rank - t.dim();
  return Spare{g->dim + shift, g->capacity, g->length, g->dim2 >= 0 ? g->dim2 + shift : -1};
}
}  // namespace

std::optional<Spare> shared_growth(const std::vector<at::Tensor>& operands, int64_t rank, bool square) {
  std::optional<Spare> grows;
  std::vector<int64_t> dims;  // in broadcast coordinates
  std::vector<std::optional<Spare>> padded;
  for (const at::Tensor& t : operands) padded.push_back(padded_in_broadcast(t, rank, square));
  for (const std::optional<Spare>& g : padded) {
    if (!g) continue;
    if (grows && (grows->capacity != g->capacity || grows->length != g->length)) return std::nullopt;
    for (int64_t d : {g->dim, g->dim2}) {
      if (d >= 0 && std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
    }
    grows = g;
  }
  if (!grows || dims.size() > (square ? 2u : 1u)) return std::nullopt;
  std::sort(dims.begin(), dims.end());
  // Along every padded dim, each operand is padded too or broadcasts (extent 1).
  for (size_t i = 0; i < operands.size(); ++i) {
    const at::Tensor& t = operands[i];
    const std::optional<Spare>& g = padded[i];
    for (int64_t d : dims) {
      int64_t local = d - (rank - t.dim());
      if (local < 0 || (g && (g->dim == d || g->dim2 == d))) continue;
      if (t.size(local) != 1) return std::nullopt;
    }
  }
  return Spare{dims[0], grows->capacity, grows->length, dims.size() == 2 ? dims[1] : -1};
}

namespace {
thread_local bool g_engine_arange = false;
}  // namespace

EngineArange::EngineArange() : previous_(g_engine_arange) { g_engine_arange = true; }
EngineArange::~EngineArange() { g_engine_arange = previous_; }
bool EngineArange::active() { return g_engine_arange; }

at::Tensor rows_below(int64_t n, int64_t length, int64_t dim, int64_t rank, const at::Tensor& like) {
  std::vector<int64_t> shape(rank, 1);
  shape[dim] = n;
  at::Tensor positions;
  {
    EngineArange own;
    positions = at::arange(n, like.options().dtype(at::kLong));
  }
  return positions.lt(length).view(shape);
}

at::Tensor zero_rows_to_capacity(const at::Tensor& t, int64_t dim, int64_t capacity) {
  std::vector<int64_t> pad(2 * t.dim(), 0);  // constant_pad_nd pads the last dim first
  pad[2 * (t.dim() - 1 - dim) + 1] = capacity - t.size(dim);
  return at::constant_pad_nd(t, pad, 0);
}

void adopt_padded_storage(const at::Tensor& t, const at::Tensor& whole, int64_t dim) {
  std::vector<int64_t> sizes = t.sizes().vec();
  t.unsafeGetTensorImpl()->set_storage_keep_dtype(whole.storage());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, whole.strides(), 0);
  as_padded_prefix(whole, dim, t.size(dim));  // marks the storage and notes the length
}

at::Tensor as_padded_prefix(const at::Tensor& whole, int64_t dim, int64_t length) {
  mark_growable(whole);
  if (whole.storage_offset() == 0 && static_cast<size_t>(whole.numel() * whole.element_size()) == whole.storage().nbytes()) {
    StorageBuffer& s = storage_buffer(whole);
    s.padded_stride = whole.stride(dim);
    s.padded_capacity = whole.size(dim);
  }
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

bool plain_tpu_tensor(const at::Tensor& t) {
  constexpr c10::DispatchKeySet wrapped({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                         c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchGradWrapper,
                                         c10::DispatchKey::Conjugate, c10::DispatchKey::Negative});
  return t.defined() && t.is_privateuseone() && t.layout() == at::kStrided && t.has_storage() &&
         !t.key_set().has_any(wrapped);
}

bool growing_dims_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCH_TPU_GROWING_DIMS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace tpu::engine
