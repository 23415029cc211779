// Convolutions along a padded prefix's growing dim (growing_dims.h).
//
// Qwen3.5's linear-attention layers run a causal depthwise conv1d over the prompt's hidden
// states (padding = kernel - 1 on both sides, then [..., :L]). Run exactly, its result has
// L + 3 rows, so every op after it, up to the next layer's projections, compiled once per prompt
// length. Here the conv runs over the bucket: the spare rows become zeros (what the conv's own
// padding holds), the capacity is padded on the left by the conv's padding and on the right so
// that the result has exactly `capacity` rows, and the conv runs without padding. Output row j
// reads input rows j - padding .. j - padding + dilation * (kernel - 1), the same rows (true or
// zero) the exact conv reads, so the first L + 2 * padding - dilation * (kernel - 1) rows are the
// exact result's: a padded prefix of the same capacity, its modules keyed on the bucket alone.
#include <ATen/ATen.h>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {

bool convolution_over_capacity(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
  constexpr size_t kArgs = 9;
  if (!op.schema().overload_name().empty() || op.schema().arguments().size() != kArgs) return false;
  size_t first = stack->size() - kArgs;
  const at::Tensor input = (*stack)[first].toTensor();
  std::optional<Spare> s = spare_rows(input);
  if (!s || s->dim < 2) return false;  // a padded batch or channel dim is not a window
  const at::Tensor weight = (*stack)[first + 1].toTensor();
  const c10::IValue& bias_value = (*stack)[first + 2];
  std::optional<at::Tensor> bias;
  if (!bias_value.isNone()) bias = bias_value.toTensor();
  if (spare_rows(weight) || (bias && spare_rows(*bias))) return false;
  std::vector<int64_t> stride = (*stack)[first + 3].toIntVector();
  std::vector<int64_t> padding = (*stack)[first + 4].toIntVector();
  std::vector<int64_t> dilation = (*stack)[first + 5].toIntVector();
  bool transposed = (*stack)[first + 6].toBool();
  std::vector<int64_t> output_padding = (*stack)[first + 7].toIntVector();
  int64_t groups = (*stack)[first + 8].toInt();
  const size_t spatial = static_cast<size_t>(input.dim() - 2);
  // Malformed calls take the rule, which raises PyTorch's error.
  if (transposed || weight.dim() != input.dim() || stride.size() != spatial || padding.size() != spatial ||
      dilation.size() != spatial) {
    return false;
  }
  const size_t axis = static_cast<size_t>(s->dim - 2);
  const int64_t kernel = weight.size(s->dim), pad = padding[axis], dil = dilation[axis];
  if (stride[axis] != 1 || kernel < 1 || pad < 0 || dil < 1) return false;
  const int64_t reach = dil * (kernel - 1);
  const int64_t out_length = s->length + 2 * pad - reach;
  // Right zeros that make the result exactly `capacity` rows; a conv padded past its reach (a
  // result longer than its input) or one whose result does not fit the bucket runs exactly.
  const int64_t right = reach - pad;
  if (out_length < 1 || right < 0 || out_length > s->capacity) return false;
  const int64_t capacity = s->capacity;
  at::Tensor whole = whole_capacity(input, s->dim, capacity);
  // Spare rows hold anything (NaN from an earlier op over the bucket): zeros, as padding holds.
  at::Tensor zeroed = at::where(rows_below(capacity, s->length, s->dim, input.dim(), input), whole,
                                at::scalar_tensor(0, input.options()));
  std::vector<int64_t> pad_pairs(2 * spatial, 0);  // constant_pad_nd: pairs from the last dim back
  pad_pairs[2 * (spatial - 1 - axis)] = pad;
  pad_pairs[2 * (spatial - 1 - axis) + 1] = right;
  std::vector<int64_t> no_padding = padding;
  no_padding[axis] = 0;
  at::Tensor out = at::convolution(at::constant_pad_nd(zeroed, pad_pairs, 0), weight, bias, stride, no_padding,
                                   dilation, /*transposed=*/false, output_padding, groups);
  TORCH_INTERNAL_ASSERT(out.size(s->dim) == capacity, "convolution over capacity: result ", out.sizes());
  torch::jit::drop(*stack, kArgs);
  torch::jit::push(*stack, as_padded_prefix(out, s->dim, out_length));
  return true;
}

}  // namespace tpu::engine
