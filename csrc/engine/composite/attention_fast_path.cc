// nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast paths
// (_native_multi_head_attention, _transformer_encoder_layer_fwd) as tpu kernels composed of
// lowered ops: projections (linear), scores (matmul), _masked_softmax / _softmax, layer_norm,
// gelu/relu. PyTorch takes these paths for PrivateUse1 tensors in eval mode under no_grad; the
// math follows PyTorch's CPU kernels (q scaled by 1/sqrt(head_dim) after its bias, masks turned
// into booleans where true means "left out", weights averaged over heads on request).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

namespace tpu::engine {
namespace {

void check_mha_arguments(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
                         int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias) {
  const int64_t D = embed_dim;
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.sizes()[2] == embed_dim, "passed-in embed_dim ", embed_dim, " didn't match last dim of query ",
              query.sizes()[2]);
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(D * 3 == qkv_weight.sizes()[0], "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(D == qkv_weight.sizes()[1], "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.sizes()[0] == 3 * D, "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(num_head > 0 && D % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights,
    bool average_attn_weights, std::optional<int64_t> mask_type) {
  check_mha_arguments(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias);
  const int64_t B = query.size(0), T = query.size(1), D = embed_dim, head_dim = D / num_head;
  if (B * T * D == 0) return {at::empty_like(query), at::Tensor()};
  auto weights = qkv_weight.chunk(3, 0);
  auto biases = qkv_bias.chunk(3, 0);
  // [B, T, D] -> [B, heads, T, head_dim]
  auto heads = [&](const at::Tensor& x, int i) {
    return at::linear(x, weights[i], biases[i]).view({B, T, num_head, head_dim}).transpose(1, 2);
  };
  at::Tensor q = heads(query, 0).mul(1.0 / std::sqrt(static_cast<double>(head_dim)));
  at::Tensor k = heads(key, 1), v = heads(value, 2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));
  if (mask.has_value() && mask->defined()) {
    at::Tensor left_out = mask->scalar_type() == at::kBool ? *mask : mask->to(at::kBool);
    scores = at::_masked_softmax(scores, left_out, scores.dim() - 1, mask_type);
  } else {
    scores = at::_softmax(scores, -1, false);
  }
  at::Tensor context = at::matmul(scores, v).transpose(1, 2).reshape({B, T, D});
  at::Tensor out = at::linear(context, proj_weight, proj_bias);
  if (!need_weights) return {out, at::Tensor()};
  if (average_attn_weights) scores = scores.sum(1).div(static_cast<double>(num_head));
  return {out, scores};
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  auto norm = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::layer_norm(x, {embed_dim}, w, b, eps);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(at::_native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                                   proj_bias, mask, /*need_weights=*/false,
                                                   /*average_attn_weights=*/true, mask_type));
  x = x.add(src);
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  at::Tensor residual = x;
  if (norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  TORCH_CHECK(x.dim() == 3, "batched input size should be 3");
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2).add(residual);
  if (!norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  return x;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd);
}

}  // namespace
}  // namespace tpu::engine
