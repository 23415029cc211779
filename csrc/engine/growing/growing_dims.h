// Growing dims: tensors that grow by a few rows per step along one dim (a KV cache extended by
// torch.cat once per generated token; generate()'s input_ids and attention_mask) live in
// storages with spare capacity, so the modules that touch them depend on the capacity, not on
// the length, and a generate of N tokens compiles O(log N) executables instead of O(N).
//
// A tensor with spare capacity is a *padded prefix*: a view at offset 0 showing the first
// size(d) of `capacity` rows of a dense storage along dim d, with the capacity's row-major
// strides (so it is not contiguous unless the dims before d are 1). Ops see it as an ordinary
// strided view; views of a few rows (x[:, -1:]) key on the capacity and take their offset at
// runtime. Two ops handle the growth itself: cat appends into a copy of the storage
// (growing_cat.cc) and scaled_dot_product_attention attends over the whole capacity with the
// rows past the length masked (engine/composite/fused_attention.cc). docs/transformers.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <optional>
#include <string>

namespace tpu::engine {

// The capacity along `dim` if `t` is a padded prefix of a growable storage along `dim`
// (capacity >= t.size(dim); equal when full), else nullopt.
std::optional<int64_t> padded_capacity(const at::Tensor& t, int64_t dim);

// Marks `t`'s storage as one with spare capacity (only storages the growth path made are
// treated as padded prefixes: an ordinary slice x[:, :3] of a bigger tensor is not).
void mark_growable(const at::Tensor& t);

// The whole storage of padded prefix `t`: `t` with size `capacity` along `dim`.
at::Tensor whole_capacity(const at::Tensor& t, int64_t dim, int64_t capacity);

// The capacity a growing dim gets for `length` rows: the next power of two, at least 128 (a
// TPU tiles the two minor dims by 8-16 x 128; a short generation then compiles its decode
// modules once, and the spare rows of a KV cache cost little: 9 MB for a 9B model's 36 layers).
int64_t capacity_for(int64_t length);

// The growing dim of `t` if it is a padded prefix with spare rows: the dim, the capacity and the
// length (nullopt for ordinary tensors, full ones, conj/neg views, or when ambiguous).
struct Spare {
  int64_t dim, capacity, length;
  int64_t dim2 = -1;  // a second padded dim with the same length and capacity (square_rows), or -1
};
std::optional<Spare> spare_rows(const at::Tensor& t);

// A tensor padded along two dims with the same length and capacity: an attention mask built by
// comparing query positions [L, 1] with key positions [1, L] of one bucket (a sliding window,
// a padded batch's mask) is [L, L] of a [C, C] storage. dim < dim2; nullopt for other tensors
// (spare_rows never returns these). Only pointwise ops and attention take them over the bucket.
std::optional<Spare> square_rows(const at::Tensor& t);
// `t` with both padded dims widened to the capacity.
at::Tensor whole_square(const at::Tensor& t, const Spare& s);
// `whole` (the capacity along dims d1 < d2) as a square padded prefix of `length` rows in both.
at::Tensor as_padded_square(const at::Tensor& whole, int64_t d1, int64_t d2, int64_t length);

// The growth the tensors of one broadcast share: every growing operand grows along the same
// dim of the rank-`rank` broadcast with the same length and capacity, and every other operand has
// extent 1 there. nullopt when none grows or they disagree. `dim` is in broadcast coordinates.
// With `square`, operands may grow along two dims (dim and dim2) with one length and capacity:
// query positions [L, 1] against key positions [1, L], or a square mask with either.
std::optional<Spare> shared_growth(const std::vector<at::Tensor>& operands, int64_t rank, bool square = false);

// While alive, aranges on this thread are the engine's own (positions over a capacity): exact, and
// not remembered as lengths of the user's tensors. Without it, the many rows_below() of a deep
// model pushed a prompt's length out of the recent aranges, and its decode step's
// arange(kv_length) left the bucket.
class EngineArange {
 public:
  EngineArange();
  ~EngineArange();
  EngineArange(const EngineArange&) = delete;
  EngineArange& operator=(const EngineArange&) = delete;
  static bool active();

 private:
  bool previous_;
};

// Positions 0..n-1 along `dim` of a rank-`rank` tensor, shaped to broadcast along it, compared
// with `length` (a runtime scalar): true for the rows a padded prefix holds.
at::Tensor rows_below(int64_t n, int64_t length, int64_t dim, int64_t rank, const at::Tensor& like);

// `whole` (size `capacity` along `dim`) as a padded prefix of `length` rows, marked growable.
at::Tensor as_padded_prefix(const at::Tensor& whole, int64_t dim, int64_t length);

// `t` followed by zero rows along `dim` up to `capacity` (a dense tensor, the whole of a bucket).
at::Tensor zero_rows_to_capacity(const at::Tensor& t, int64_t dim, int64_t capacity);

// Moves `t` (a tensor that owns its storage) onto `whole`, a dense tensor of t's sizes with more
// rows along `dim`, whose first rows hold t's values: `t` becomes a padded prefix of it.
void adopt_padded_storage(const at::Tensor& t, const at::Tensor& whole, int64_t dim);

// Growing tensors (appends, results over a capacity) remember their lengths while they live, so
// that an arange of such a length (the mask's key positions, arange(kv_length)) is made with the
// same capacity.
void note_grown(const at::Tensor& t, int64_t length, int64_t capacity);
std::optional<int64_t> capacity_of_grown_length(int64_t length);

// Calls run over a growing argument's whole capacity, so their modules depend on the capacity,
// not on the length. Each returns true when it handled the call (its result is on the stack),
// false to leave the call to the rule. growing_reads.cc: constant_pad_nd, index.Tensor;
// growing_pointwise.cc: pointwise ops and full reductions; arange of a grown length.
bool pad_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool index_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool pointwise_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool reduction_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool arange_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Clears the remembered aranges (whose lengths and layouts a repeated arange of one length
// keeps, growing_pointwise.cc): a new prompt's upload starts a new sequence of lengths, and
// an earlier step's arange(3) of a 3-token prompt must not bucket this step's arange(3) of
// three batch indices.
void forget_aranges();
// growing_conv.cc: a convolution along the growing dim (a causal conv1d over a prompt).
bool convolution_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// growing_copy.cc: copy_ of a padded prefix into one of the same bucket; false: not handled.
bool copy_over_capacity(const at::Tensor& dst, const at::Tensor& src);

// growing_reshape.cc: padded prefix `self` (spare rows `s`) copied into the layout of `shape` in
// the same bucket, where one dim of `shape` carries the bucket (the padded dim merged with the
// dims before it, or split back): the whole bucket in that layout (that dim widened to its
// capacity, the true elements of each block first), the dim, and its true extent.
struct BucketLayout {
  at::Tensor whole;
  int64_t dim, length;
};
std::optional<BucketLayout> relayout_in_bucket(const at::Tensor& self, const Spare& s, c10::IntArrayRef shape);

// bucketed_ops.cc: the op's rule over every padded operand's whole capacity, the length a
// runtime size that XLA masks with; for the rules that declare how they take padded operands
// (lowering::PaddedOperands, beside each rule).
bool runs_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// That declaration for ATen op `name` ("sum.dim_IntList", "index_copy_"), as compiled graphs
// that run per bucket read it (torch_tpu/compile/trace_comparison.py): "exact", "keeps_dim",
// "stats_keep_dim", "indices_only", "contiguous", "prefix", "scatter", "full_reduction",
// "batch_dims", "rows_with_indices";
// nullopt: none.
std::optional<std::string> bucketing_kind(const std::string& name);

// Per capacity: calls run over it, the compiles they caused, and the rows they held (true rows
// and capacity rows: the padding's share is 1 - rows / capacity_rows).
struct BucketStats {
  int64_t calls = 0, compiles = 0, rows = 0, capacity_rows = 0;
};
std::map<int64_t, BucketStats> bucket_stats();
void reset_bucket_stats();
// Calls that decided from PyTorch's meta kernels whether they run over the capacity (a new form
// of call), and calls that reused such a decision (the same form at another length).
struct BucketDecisions {
  int64_t decided = 0, reused = 0;
};
BucketDecisions bucket_decisions();

// torch_tpu.mark_dynamic: moves `t` (a tpu tensor that owns its storage) into a padded prefix
// of capacity_for(t.size(dim)) rows along `dim`, so ops on it run over the bucket.
void mark_dynamic(const at::Tensor& t, int64_t dim);

// The bucket a host-to-device copy into `dst` uploads into, or nullopt: a fresh tensor (its
// storage unshared) of token ids, int64 [batch, length] with length >= 2 and batch <= 64, is uploaded as a
// padded prefix of bucket_for(length) columns (bucketed_uploads.cc; TORCH_TPU_BUCKETING=0:
// never).
std::optional<int64_t> upload_bucket(const at::Tensor& dst);
// The bucket of a size that varies (TORCH_TPU_BUCKETING): capacity_for(length) (powers of two
// from 128, the default), or with `fine` four buckets per doubling from 16.
int64_t bucket_for(int64_t length);
// Lengths of live bucketed uploads (`t`'s storage alive): an arange of such a length
// (cache_position) is made over the same bucket.
void note_bucketed_length(const at::Tensor& t, int64_t length, int64_t capacity);
std::optional<int64_t> capacity_of_bucketed_length(int64_t length);
bool bucketing_enabled();

// Whether pointwise_over_capacity may take calls of `op`: functional pointwise ops with one
// tensor result, no generator, no memory format (clone's copy is its own rule's: bucketed_ops.cc).
bool takes_pointwise_growth(const c10::FunctionSchema& schema, bool pointwise_tag);
// The same for in-place pointwise ops that write self only (add_, mul_): their path over the
// capacity (inplace_pointwise_over_capacity, growing_pointwise.cc) runs only while self is the
// one tensor of its storage.
bool takes_inplace_pointwise_growth(const c10::FunctionSchema& schema, bool pointwise_tag);
bool inplace_pointwise_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The arguments' side of both: one tensor result, no generator, memory format or list argument.
bool takes_pointwise_arguments(const c10::FunctionSchema& schema);

// A dense tpu tensor with a storage of ours: not a fake, functional or functorch wrapper, not
// sparse, no conj/neg bit (kernels registered above the Python key, such as matmul and reshape at
// AutogradPrivateUse1, see such tensors too).
bool plain_tpu_tensor(const at::Tensor& t);

// TORCH_TPU_GROWING_DIMS=0 turns the mechanism off (every length compiles its own modules).
bool growing_dims_enabled();

}  // namespace tpu::engine
