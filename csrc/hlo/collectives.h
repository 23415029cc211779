// Cross-replica collectives as StableHLO ops: the form a c10d collective takes on a TPU, where
// libtpu moves the bytes over ICI inside the executable (docs/parallel.md). A module using them
// is built with Builder::module(..., num_replicas = N) and compiled with CompileOptions
// {num_replicas = N}; each replica runs the same program on its own chip.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace tpu::hlo {

// Replica ids per group, e.g. {{0, 1, 2, 3}} (every replica in one group).
using ReplicaGroups = std::vector<std::vector<int64_t>>;

// Element-wise reduction across each group; kind: "add", "mul", "max", "min".
Value all_reduce(Builder& b, Value x, const std::string& kind, const ReplicaGroups& groups);
// The group's values concatenated along `dim` (in group order).
Value all_gather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups);
// all_reduce, then replica i of a group keeps block i of `dim` (dim must divide by group size).
Value reduce_scatter(Builder& b, Value x, int64_t dim, const std::string& kind, const ReplicaGroups& groups);
// Splits `split_dim` into group-size blocks, sends block j to the group's j-th replica and
// concatenates what arrives along `concat_dim`.
Value all_to_all(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups);
// Replica `source` sends its value to `target`; replicas that receive nothing get zeros.
Value collective_permute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& source_target);

}  // namespace tpu::hlo
