// torch_tpu._C: the tpu c10d backend as a pybind class derived from torch's c10d.Backend, so
// `torch.distributed.Backend.register_backend` can hand it to ProcessGroup.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "engine/distributed/host_transport_backend.h"

namespace py = pybind11;
using tpu::engine::distributed::HostTransportBackend;

// Called by torch_tpu.distributed on first use: c10d.Backend's Python type must exist before a
// class can derive from it, and importing torch.distributed while torch itself is still being
// imported (autoload) is not safe.
void register_distributed_bindings(py::module& m) {
  m.def("_init_distributed_bindings", [m]() mutable {
    if (py::hasattr(m, "_HostTransportBackend")) return;
    py::module::import("torch.distributed");
    py::class_<HostTransportBackend, c10d::Backend, c10::intrusive_ptr<HostTransportBackend>>(m, "_HostTransportBackend")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int>(), py::arg("host"), py::arg("rank"), py::arg("size"))
      .def_property_readonly("bytes_to_host", &HostTransportBackend::bytes_to_host)
      .def_property_readonly("bytes_from_host", &HostTransportBackend::bytes_from_host);
  });
}
