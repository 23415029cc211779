// torch_tpu._C._GraphExecutable: the compile driver's entry from Python (torch_tpu/compile/).
//
// The spec arrives as plain Python data (torch_tpu/compile/graph_spec.py writes it):
//   {"name": str, "values": [(scalar_type, sizes, strides)], "inputs": [id], "outputs": [id|-1],
//    "nodes": [(target, rule, source, args, outputs, random, writes_first_arg)],
//    "runtime_dims": [(value id, dim, length input's value id, offset)],  (optional)
//    "static_operand_nodes": [node index]}  (optional)
// with each argument a (kind, payload) pair; kinds are NodeArg::Kind's names in lower case.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "engine/compile/metrics.h"
#include "engine/device/dtypes.h"
#include "engine/graph/graph_executable.h"

namespace py = pybind11;
using namespace tpu::engine;
using namespace tpu::engine::graph;

namespace {

Number to_number(const py::handle& h) {
  Number n;
  if (py::isinstance<py::bool_>(h)) {
    n.kind = Number::Kind::Bool;
    n.i = h.cast<bool>();
  } else if (py::isinstance<py::int_>(h)) {
    n.kind = Number::Kind::Int;
    n.i = h.cast<int64_t>();
  } else {
    n.kind = Number::Kind::Float;
    n.d = h.cast<double>();
  }
  return n;
}

NodeArg to_arg(const py::handle& h) {
  using K = NodeArg::Kind;
  auto pair = h.cast<py::tuple>();
  std::string kind = pair[0].cast<std::string>();
  py::handle v = pair[1];
  NodeArg a;
  if (kind == "none") {
    a.kind = K::None;
  } else if (kind == "ref") {
    a.kind = K::Ref;
    a.refs = {v.cast<int>()};
  } else if (kind == "ref_list") {
    a.kind = K::RefList;
    a.refs = v.cast<std::vector<int>>();
  } else if (kind == "int") {
    a.kind = K::Int;
    a.i = v.cast<int64_t>();
  } else if (kind == "scalar_type") {
    a.kind = K::ScalarType;
    a.i = v.cast<int64_t>();
  } else if (kind == "double") {
    a.kind = K::Double;
    a.d = v.cast<double>();
  } else if (kind == "bool") {
    a.kind = K::Bool;
    a.b = v.cast<bool>();
  } else if (kind == "int_list") {
    a.kind = K::IntList;
    a.ints = v.cast<std::vector<int64_t>>();
  } else if (kind == "string") {
    a.kind = K::String;
    a.s = v.cast<std::string>();
  } else if (kind == "number") {
    a.kind = K::Number;
    a.numbers = {to_number(v)};
  } else if (kind == "number_list") {
    a.kind = K::NumberList;
    for (py::handle e : v.cast<py::list>()) a.numbers.push_back(to_number(e));
  } else {
    throw std::invalid_argument("graph spec: unknown argument kind " + kind);
  }
  return a;
}

GraphSpec to_spec(const py::dict& d) {
  GraphSpec spec;
  spec.name = d["name"].cast<std::string>();
  for (py::handle v : d["values"].cast<py::list>()) {
    auto t = v.cast<py::tuple>();
    ValueMeta m;
    m.dtype = to_hlo(static_cast<c10::ScalarType>(t[0].cast<int>()), spec.name.c_str());
    m.sizes = t[1].cast<std::vector<int64_t>>();
    m.strides = t[2].cast<std::vector<int64_t>>();
    spec.values.push_back(std::move(m));
  }
  spec.inputs = d["inputs"].cast<std::vector<int>>();
  spec.outputs = d["outputs"].cast<std::vector<int>>();
  for (py::handle n : d["nodes"].cast<py::list>()) {
    auto t = n.cast<py::tuple>();
    Node node;
    node.target = t[0].cast<std::string>();
    node.rule = t[1].cast<std::string>();
    node.source = t[2].cast<std::string>();
    for (py::handle a : t[3].cast<py::list>()) node.args.push_back(to_arg(a));
    node.outputs = t[4].cast<std::vector<int>>();
    node.random = t[5].cast<bool>();
    node.writes_first_arg = t[6].cast<bool>();
    spec.nodes.push_back(std::move(node));
  }
  if (d.contains("runtime_dims")) {
    for (py::handle r : d["runtime_dims"].cast<py::list>()) {
      auto t = r.cast<py::tuple>();
      spec.runtime_dims.push_back({t[0].cast<int>(), t[1].cast<int64_t>(), t[2].cast<int>(), t[3].cast<int64_t>()});
    }
  }
  if (d.contains("static_operand_nodes")) spec.static_operand_nodes = d["static_operand_nodes"].cast<std::vector<int>>();
  return spec;
}

}  // namespace

// libtpu's verdict on one module, as Python sees it (also used by _aot_check_stats).
py::dict aot_result_dict(const tpu::engine::AotResult& r) {
  py::dict d;
  d["label"] = r.label;
  d["accepted"] = r.accepted;
  d["message"] = r.message;
  d["compile_seconds"] = r.compile_seconds;
  d["flops"] = r.flops;
  d["bytes_accessed"] = r.bytes_accessed;
  d["optimal_seconds"] = r.optimal_seconds;
  d["uncosted_custom_calls"] = r.uncosted_custom_calls;
  d["roofline_seconds"] = r.roofline_seconds;
  d["cached"] = r.cached;
  return d;
}

void register_graph_bindings(py::module& m) {
  m.def("_count_recompile", &tpu::engine::count_recompile);
  m.def("_scalar_type_index", [](const py::handle& dtype) {  // torch.float32 -> c10::ScalarType
    if (!THPDtype_Check(dtype.ptr())) throw py::type_error("expected a torch.dtype");
    return static_cast<int>(reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type);
  });
  py::class_<GraphExecutable, std::shared_ptr<GraphExecutable>>(m, "_GraphExecutable")
      .def(py::init([](const py::dict& d) { return std::make_shared<GraphExecutable>(to_spec(d)); }))
      .def("run", [](GraphExecutable& g, const std::vector<at::Tensor>& inputs) {
        std::vector<at::Tensor> outs;
        {
          py::gil_scoped_release release;
          outs = g.run(inputs);
        }
        py::list result;
        for (const at::Tensor& t : outs) result.append(t.defined() ? py::cast(t) : py::none());
        return result;
      })
      .def("prepare", [](GraphExecutable& g, const std::vector<at::Tensor>& inputs) {
        py::gil_scoped_release release;
        g.prepare(inputs);
      })
      .def_property_readonly("name", [](const GraphExecutable& g) { return g.spec().name; })
      .def_property_readonly("compiles", &GraphExecutable::compiles)
      .def_property_readonly("runs", &GraphExecutable::runs)
      .def("last_module", &GraphExecutable::last_module)
      .def("last_aot", [](const GraphExecutable& g) -> py::object {
        auto r = g.last_aot();
        return r ? py::object(aot_result_dict(*r)) : py::object(py::none());
      });
}
