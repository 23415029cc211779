#include "engine/call/recompile_log.h"

#include <algorithm>
#include <sstream>

#include "engine/call/key_tags.h"
#include "engine/compile/metrics.h"
#include "engine/device/dtypes.h"

namespace tpu::engine {
namespace {


struct Field {
  int arg = -1, elem = -1;
  std::string name;  // "shape", "stride", "dtype", ...
  std::vector<int64_t> values;
};

std::vector<int64_t> take(const std::vector<int64_t>& key, size_t& pos, int64_t n) {
  n = std::max<int64_t>(0, std::min<int64_t>(n, static_cast<int64_t>(key.size() - pos)));
  std::vector<int64_t> out(key.begin() + pos, key.begin() + pos + n);
  pos += n;
  return out;
}

void parse_entry(const std::vector<int64_t>& key, size_t& pos, int arg, int elem, std::vector<Field>& out) {
  if (pos >= key.size()) return;
  int64_t tag = key[pos++];
  auto field = [&](const std::string& name, std::vector<int64_t> values) { out.push_back({arg, elem, name, std::move(values)}); };
  switch (tag) {
    case kTpuTensor: {
      auto head = take(key, pos, 3);  // dtype, device, storage index
      field("dtype", {head[0]});
      field("device", {head[1]});
      // A storage's first use carries its dtype, state and layout; later uses refer to it.
      int64_t index = head.size() == 3 ? head[2] : -1;
      bool seen = false;
      for (const Field& f : out) seen |= f.name == "storage index" && !f.values.empty() && f.values[0] == index;
      field("storage index", {index});
      if (head.size() == 3 && !seen) {
        auto st = take(key, pos, 3);  // storage dtype, unwritten, layout rank
        field("storage dtype", {st[0]});
        field("storage state (1 = unwritten)", {st[1]});
        field("storage layout", take(key, pos, st.size() == 3 ? st[2] : 0));
      }
      auto meta = take(key, pos, 3);  // dim, has_offset, access
      if (meta.size() < 3) return;
      field("nonzero storage offset", {meta[1]});
      field("view access", {meta[2]});
      field("shape", take(key, pos, meta[0]));
      field("stride", take(key, pos, meta[0]));
      return;
    }
    case kCpuScalar: {
      std::vector<int64_t> v = take(key, pos, 2);
      field(v.size() == 2 && v[1] >= 2 ? "CPU scalar dtype (a value past 32 bits)" : "CPU scalar dtype", v);
      return;
    }
    case kList: {
      int64_t n = pos < key.size() ? key[pos++] : 0;
      field("list length", {n});
      for (int64_t e = 0; e < n; ++e) parse_entry(key, pos, arg, static_cast<int>(e), out);
      return;
    }
    case kScalar: field("scalar kind", take(key, pos, 1)); return;
    case kWideScalar: field("scalar kind (a value past 32 bits)", take(key, pos, 1)); return;
    case kInt: field("int value", take(key, pos, 1)); return;
    case kScalarType: field("dtype value", take(key, pos, 1)); return;
    case kDouble: field("float value", take(key, pos, 1)); return;
    case kBool: field("bool value", take(key, pos, 1)); return;
    case kStr: field("string value", take(key, pos, pos < key.size() ? key[pos++] : 0)); return;
    case kInts: case kBools: case kDoubles: field("list value", take(key, pos, pos < key.size() ? key[pos++] : 0)); return;
    case kDevice: field("device value", take(key, pos, 2)); return;
    default: field("argument kind", {tag}); return;  // kNone, kGenerator
  }
}

std::vector<Field> parse_key(const std::vector<int64_t>& key, size_t first, size_t num_args) {
  std::vector<Field> fields;
  size_t pos = first;
  for (size_t a = 0; a < num_args && pos < key.size(); ++a) parse_entry(key, pos, static_cast<int>(a), -1, fields);
  return fields;
}

std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

}  // namespace

std::string describe_key_change(const KeyShape& shape, const std::vector<int64_t>& previous,
                                const std::vector<int64_t>& key) {
  if (previous == key) return "";
  std::vector<Field> a = parse_key(previous, shape.first, shape.num_args);
  std::vector<Field> b = parse_key(key, shape.first, shape.num_args);
  // The first argument (or list item) that differs; among its differing fields the one a user
  // recognises first (shape before the storage layout that follows from it).
  static const std::vector<std::string> priority{"shape", "dtype", "stride", "nonzero storage offset"};
  auto rank = [&](const std::string& name) {
    auto it = std::find(priority.begin(), priority.end(), name);
    return static_cast<int>(it - priority.begin());
  };
  const Field* best_x = nullptr;
  const Field* best_y = nullptr;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const Field& x = a[i];
    const Field& y = b[i];
    if (best_y != nullptr && (y.arg != best_y->arg || y.elem != best_y->elem)) break;
    if (x.arg == y.arg && x.elem == y.elem && x.name == y.name && x.values == y.values) continue;
    if (x.name != y.name || x.arg != y.arg || x.elem != y.elem) {
      if (best_y == nullptr) best_x = &x, best_y = &y;
      break;
    }
    if (best_y == nullptr || rank(y.name) < rank(best_y->name)) best_x = &x, best_y = &y;
  }
  if (best_y != nullptr) {
    const Field& x = *best_x;
    const Field& y = *best_y;
    std::ostringstream s;
    s << shape.name(y.arg);
    if (y.elem >= 0) s << " item " << y.elem;
    auto base = [](const std::string& name) { return name.substr(0, name.find(" (")); };
    if (x.name != y.name && x.arg == y.arg && x.elem == y.elem && base(x.name) == base(y.name)) {
      // An integer scalar crossed 32 bits (key_tags.h, kWideScalar)
      s << ": " << base(y.name) << ": " << (y.name.size() > x.name.size() ? "a value past 32 bits" : "a value within 32 bits");
      return s.str();
    }
    if (x.name != y.name || x.arg != y.arg || x.elem != y.elem) {
      s << ": kind of argument changed";
      return s.str();
    }
    s << ": " << y.name;
    if (y.name == "dtype" || y.name == "storage dtype") {
      s << " " << to_torch(static_cast<hlo::DType>(x.values.at(0))) << " -> " << to_torch(static_cast<hlo::DType>(y.values.at(0)));
    } else {
      s << " " << list_str(x.values) << " -> " << list_str(y.values);
    }
    if ((y.name == "shape" || y.name == "stride") && x.values.size() == y.values.size()) {
      for (size_t d = 0; d < y.values.size(); ++d) {
        if (x.values[d] != y.values[d]) {
          s << " (dim " << d << ")";
          break;
        }
      }
    }
    return s.str();
  }
  return "argument list changed";
}

KeyShape KeyShape::of(const c10::FunctionSchema& schema) {
  KeyShape shape;
  shape.first = 1;  // key[0] is the schema
  shape.num_args = schema.arguments().size();
  shape.name = [&schema](int arg) {
    std::string s = "argument " + std::to_string(arg);
    if (arg >= 0 && arg < static_cast<int>(schema.arguments().size())) s += " (" + schema.arguments()[arg].name() + ")";
    return s;
  };
  return shape;
}

KeyShape KeyShape::of_inputs(size_t num_inputs) {
  KeyShape shape;
  shape.first = 0;
  shape.num_args = num_inputs;
  shape.name = [](int i) { return "input " + std::to_string(i); };
  return shape;
}

void RecompileLog::note(const void* owner, const std::string& label, const std::vector<int64_t>& key,
                        const KeyShape& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = latest_.find(owner);
  if (it == latest_.end()) {
    latest_.emplace(owner, key);
    return;
  }
  if (it->second == key) return;  // the same signature rebuilt (after an eviction)
  count_recompile(label, describe_key_change(shape, it->second, key));
  it->second = key;
}

void RecompileLog::forget(const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_.erase(owner);
}

void RecompileLog::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  latest_.clear();
}

}  // namespace tpu::engine
