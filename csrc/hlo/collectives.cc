#include "hlo/collectives.h"

#include <stdexcept>

#include "hlo/ops.h"

namespace tpu::hlo {
namespace {

std::string dense_2d(const std::vector<std::vector<int64_t>>& rows) {
  if (rows.empty()) throw std::invalid_argument("collective: no replica groups");
  size_t width = rows[0].size();
  std::string s = "dense<[";
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != width) throw std::invalid_argument("collective: replica groups of different sizes");
    s += r ? ", [" : "[";
    for (size_t i = 0; i < width; ++i) s += (i ? ", " : "") + std::to_string(rows[r][i]);
    s += "]";
  }
  return s + "]> : tensor<" + std::to_string(rows.size()) + "x" + std::to_string(width) + "xi64>";
}

std::string groups_attr(const ReplicaGroups& groups) { return "replica_groups = " + dense_2d(groups); }

std::string combiner(Builder& b, DType t, const std::string& kind) {
  if (kind != "add" && kind != "mul" && kind != "max" && kind != "min") {
    throw std::invalid_argument("collective: unknown reduction " + kind);
  }
  return scalar_region(b, t, reduction_op(kind, t));
}

int64_t group_size(const ReplicaGroups& groups) { return groups.empty() ? 0 : static_cast<int64_t>(groups[0].size()); }

std::vector<int64_t> scaled_dim(const Value& x, int64_t dim, int64_t numerator, int64_t denominator) {
  if (dim < 0 || dim >= x.rank()) throw std::invalid_argument("collective: dim out of range");
  std::vector<int64_t> shape = x.shape();
  if ((shape[dim] * numerator) % denominator != 0) {
    throw std::invalid_argument("collective: dim " + std::to_string(dim) + " of size " + std::to_string(shape[dim]) +
                                " does not split into " + std::to_string(denominator) + " blocks");
  }
  shape[dim] = shape[dim] * numerator / denominator;
  return shape;
}

}  // namespace

Value all_reduce(Builder& b, Value x, const std::string& kind, const ReplicaGroups& groups) {
  std::string body = combiner(b, x.dtype(), kind);
  return b.emit1("stablehlo.all_reduce", {x}, x.type, groups_attr(groups), {body});
}

Value all_gather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups) {
  Type out(x.dtype(), scaled_dim(x, dim, group_size(groups), 1));
  return b.emit1("stablehlo.all_gather", {x}, out,
                 "all_gather_dim = " + std::to_string(dim) + " : i64, " + groups_attr(groups));
}

Value reduce_scatter(Builder& b, Value x, int64_t dim, const std::string& kind, const ReplicaGroups& groups) {
  Type out(x.dtype(), scaled_dim(x, dim, 1, group_size(groups)));
  std::string body = combiner(b, x.dtype(), kind);
  return b.emit1("stablehlo.reduce_scatter", {x}, out,
                 "scatter_dimension = " + std::to_string(dim) + " : i64, " + groups_attr(groups), {body});
}

Value all_to_all(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups) {
  int64_t n = group_size(groups);
  Value split{x.id, Type(x.dtype(), scaled_dim(x, split_dim, 1, n))};
  Type out(x.dtype(), scaled_dim(split, concat_dim, n, 1));
  return b.emit1("stablehlo.all_to_all", {x}, out,
                 "split_dimension = " + std::to_string(split_dim) + " : i64, concat_dimension = " +
                     std::to_string(concat_dim) + " : i64, split_count = " + std::to_string(n) + " : i64, " +
                     groups_attr(groups));
}

Value collective_permute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& source_target) {
  std::vector<std::vector<int64_t>> pairs;
  for (const auto& [s, t] : source_target) pairs.push_back({s, t});
  return b.emit1("stablehlo.collective_permute", {x}, x.type, "source_target_pairs = " + dense_2d(pairs));
}

}  // namespace tpu::hlo
