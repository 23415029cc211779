// Which host-to-device copies land in a bucket (growing_dims.h, upload_bucket), and the lengths
// they carry.
//
// generate() and a model's forward meet a prompt first as its token ids: `input_ids` and
// `attention_mask`, int64 [batch, length], copied from the tokenizer's CPU tensors. Uploaded
// into a padded prefix of a bucket's columns, every op computed from them runs over the bucket
// (bucketed_ops.cc, growing_pointwise.cc) and a new prompt length compiles nothing while it falls
// into a bucket already seen. Only fresh tensors (the result of .to("tpu")) are bucketed: a copy_
// into an existing tensor keeps that tensor's storage, which others may share. A batch of one's
// padded prefix [1, L] of [1, C] is still contiguous (strides [C, 1]); a left-padded batch's
// [B, L] of [B, C] is not, as a grown KV cache is not. Its contiguous copies keep the bucket
// (generate() copies its ids at once; bucketed_ops.cc), its projections run over the bucket's
// rows (growing_matmul.cc), and view() makes it dense where a view needs that (growing_view.cc).
#include <ATen/ATen.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {

namespace {
enum class Policy { Off, PowersOfTwo, Fine };

Policy policy() {
  static const Policy p = [] {
    const char* v = std::getenv("TORCH_TPU_BUCKETING");
    if (!growing_dims_enabled() || (v != nullptr && std::strcmp(v, "0") == 0)) return Policy::Off;
    if (v != nullptr && std::strcmp(v, "fine") == 0) return Policy::Fine;
    return Policy::PowersOfTwo;
  }();
  return p;
}
}  // namespace

bool bucketing_enabled() { return policy() != Policy::Off; }

int64_t bucket_for(int64_t length) {
  if (policy() != Policy::Fine) return capacity_for(length);
  // Four buckets per doubling from 16 (5/8, 6/8, 7/8 and 8/8 of the next power of two): the
  // padding is at most a quarter of the rows, for four times the buckets of powers of two.
  if (length <= 16) return 16;
  int64_t p = 16;
  while (p < length) p *= 2;
  int64_t step = p / 8;
  return (length + step - 1) / step * step;
}

// A batch of prompts has a few rows; an int64 table of many short rows ([10000, 2] pairs) is not
// one, and padding each of its rows to a bucket would multiply its size.
constexpr int64_t kMaxBatchRows = 64;

std::optional<int64_t> upload_bucket(const at::Tensor& dst) {
  if (!bucketing_enabled() || dst.scalar_type() != at::kLong || dst.dim() != 2 || dst.size(1) < 2 ||
      dst.size(0) > kMaxBatchRows ||
      dst.storage_offset() != 0 || !dst.is_contiguous() || dst.storage().use_count() != 1 ||
      dst.numel() * dst.element_size() != static_cast<int64_t>(dst.storage().nbytes())) {
    return std::nullopt;
  }
  int64_t capacity = bucket_for(dst.size(1));
  if (capacity == dst.size(1)) return std::nullopt;  // already a bucket's length
  return capacity;
}

namespace {
// Only live uploads count: a length uploaded long ago must not bucket a later arange of it.
struct Bucketed {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
  int64_t length = 0, capacity = 0;
};
std::mutex g_mu;
std::array<Bucketed, 16> g_lengths;  // the latest bucketed uploads
size_t g_next = 0;
}  // namespace

void note_bucketed_length(const at::Tensor& t, int64_t length, int64_t capacity) {
  forget_aranges();  // a new prompt: the earlier aranges' lengths meant something else
  std::lock_guard<std::mutex> lock(g_mu);
  g_lengths[g_next++ % g_lengths.size()] = {t.storage().getWeakStorageImpl(), length, capacity};
}

std::optional<int64_t> capacity_of_bucketed_length(int64_t length) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Bucketed& b : g_lengths) {
    if (b.length == length && b.capacity > length && !b.storage.expired()) return b.capacity;
  }
  return std::nullopt;
}

}  // namespace tpu::engine
