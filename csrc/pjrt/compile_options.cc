#include "pjrt/compile_options.h"

namespace tpu::pjrt {
namespace {

// Protobuf wire format helpers: field key = (number << 3) | wire_type.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_int_field(std::string& out, int field, int64_t v) {
  put_varint(out, static_cast<uint64_t>(field) << 3);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

}  // namespace

std::string CompileOptions::encode() const {
  // ExecutableBuildOptionsProto: num_replicas = 4, num_partitions = 5,
  // use_spmd_partitioning = 6, device_assignment = 9.
  std::string build;
  put_int_field(build, 4, num_replicas);
  put_int_field(build, 5, num_partitions);
  if (use_spmd_partitioning) put_int_field(build, 6, 1);
  if (!device_assignment.empty()) {
    // DeviceAssignmentProto: replica_count = 1, computation_count = 2,
    // computation_devices = 3 {replica_device_ids = 1}: one entry per computation (partition),
    // listing its device for each replica.
    std::string assignment;
    put_int_field(assignment, 1, num_replicas);
    if (num_replicas > 1) {
      put_int_field(assignment, 2, 1);
      std::string computation;
      for (int64_t id : device_assignment) put_int_field(computation, 1, id);
      put_bytes_field(assignment, 3, computation);
    } else {
      put_int_field(assignment, 2, static_cast<int64_t>(device_assignment.size()));
      for (int64_t id : device_assignment) {
        std::string computation;
        put_int_field(computation, 1, id);
        put_bytes_field(assignment, 3, computation);
      }
    }
    put_bytes_field(build, 9, assignment);
  }
  // CompileOptionsProto: executable_build_options = 3, compile_portable_executable = 4.
  std::string options;
  put_bytes_field(options, 3, build);
  if (portable) put_int_field(options, 4, 1);
  return options;
}

}  // namespace tpu::pjrt
