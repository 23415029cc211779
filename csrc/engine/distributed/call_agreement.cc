#include "engine/distributed/call_agreement.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <sstream>

namespace tpu::engine::distributed {
namespace {

// Fixed layout, the same length on every rank: [op, dtype, count, total, numel hash,
// sends(size), recvs(size)].
constexpr int kHeader = 5;

int64_t hash_numels(const std::vector<int64_t>& numels) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t n : numels) h = (h ^ static_cast<uint64_t>(n)) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

std::string describe(const std::vector<int64_t>& row) {
  std::ostringstream s;
  s << row[2] << " tensor(s) of ";
  s << (row[1] >= 0 ? c10::toString(static_cast<at::ScalarType>(row[1])) : "no dtype");
  s << ", " << row[3] << " elements";
  return s.str();
}

}  // namespace

bool call_checks_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCH_TPU_DIST_CHECK_CALLS");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

CallSignature signature_of(const char* op, c10d::OpType type, const std::vector<at::Tensor>& tensors) {
  CallSignature s;
  s.op = op;
  s.op_code = static_cast<int64_t>(type);
  for (const at::Tensor& t : tensors) {
    s.dtype = static_cast<int64_t>(t.scalar_type());
    s.numels.push_back(t.numel());
  }
  return s;
}

void check_ranks_agree(c10d::Backend& host, int rank, int size, const CallSignature& mine) {
  const int64_t width = kHeader + 2 * size;
  at::Tensor row = at::zeros({width}, at::kLong);
  int64_t* r = row.data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t n : mine.numels) total += n;
  r[0] = mine.op_code;
  r[1] = mine.dtype;
  r[2] = static_cast<int64_t>(mine.numels.size());
  r[3] = total;
  r[4] = hash_numels(mine.numels);
  bool all_to_all = !mine.send_numels.empty();
  for (int j = 0; all_to_all && j < size; ++j) {
    r[kHeader + j] = mine.send_numels.at(j);
    r[kHeader + size + j] = mine.recv_numels.at(j);
  }
  at::Tensor rows = at::empty({size * width}, at::kLong);
  host._allgather_base(rows, row)->wait();
  const int64_t* all = rows.data_ptr<int64_t>();
  auto at_rank = [&](int i) { return std::vector<int64_t>(all + i * width, all + (i + 1) * width); };

  // Every rank checks every pair, so all ranks raise together (none is left waiting).
  std::ostringstream problem;
  for (int i = 0; i < size && problem.tellp() == 0; ++i) {
    std::vector<int64_t> other = at_rank(i);
    if (other[0] != r[0]) {
      problem << "rank " << i << " is in another collective (c10d OpType " << other[0] << ", rank " << rank
              << "'s is " << r[0] << ")";
    } else if ((other[1] != r[1] && other[1] >= 0 && r[1] >= 0) ||
               (!all_to_all && (other[2] != r[2] || other[4] != r[4]))) {
      problem << "rank " << i << " passed " << describe(other) << ", rank " << rank << " passed "
              << describe(at_rank(rank));
    }
    for (int j = 0; all_to_all && j < size && problem.tellp() == 0; ++j) {
      int64_t sends = all[i * width + kHeader + j], expects = all[j * width + kHeader + size + i];
      if (sends != expects) {
        problem << "rank " << i << " sends " << sends << " elements to rank " << j << ", which expects " << expects;
      }
    }
  }
  TORCH_CHECK(problem.tellp() == 0, "torch.distributed ", mine.op, " on the tpu backend: the ranks' calls do not match: ",
              problem.str());
}

}  // namespace tpu::engine::distributed
