// Our own declarations of the parts of the PJRT C API that torch-tpu uses.
//
// Written from the public spec (field order, slot order, struct sizes and enum values are
// facts of the ABI); the upstream header is deliberately not copied. Structs are declared at
// the newest layout we know (PJRT 0.114): a plugin reads only the prefix it knows, so one set
// of declarations serves every plugin from 0.81 on. Every call is gated on the plugin's
// function table size and a non-NULL slot (see Api::has in api.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpu::pjrt::abi {

struct Error;
struct Client;
struct Device;
struct DeviceDescription;
struct Memory;
struct Buffer;
struct Event;
struct Executable;
struct LoadedExecutable;
struct TopologyDescription;
struct SerializedExecutable;

struct ExtensionBase {
  size_t struct_size;
  int type;
  ExtensionBase* next;
};

// Every *_Args struct starts with this prefix.
#define TPU_PJRT_ARGS_PREFIX \
  size_t struct_size;        \
  ExtensionBase* extension_start

// The "_STRUCT_SIZE" of a PJRT struct is offsetof(last) + sizeof(last), not sizeof().
#define TPU_PJRT_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)nullptr)->last))

enum ErrorCode : int {
  kOk = 0, kCancelled = 1, kUnknown = 2, kInvalidArgument = 3, kDeadlineExceeded = 4,
  kNotFound = 5, kAlreadyExists = 6, kPermissionDenied = 7, kResourceExhausted = 8,
  kFailedPrecondition = 9, kAborted = 10, kOutOfRange = 11, kUnimplemented = 12,
  kInternal = 13, kUnavailable = 14, kDataLoss = 15, kUnauthenticated = 16,
};

// PJRT_Buffer_Type values.
enum BufferType : int {
  kInvalid = 0, kPred = 1, kS8 = 2, kS16 = 3, kS32 = 4, kS64 = 5, kU8 = 6, kU16 = 7,
  kU32 = 8, kU64 = 9, kF16 = 10, kF32 = 11, kF64 = 12, kBF16 = 13, kC64 = 14, kC128 = 15,
  kF8E5M2 = 16, kF8E4M3FN = 17,
};

enum NamedValueType : int { kString = 0, kInt64 = 1, kInt64List = 2, kFloat = 3, kBool = 4 };

enum HostBufferSemantics : int {
  kImmutableOnlyDuringCall = 0,
  kImmutableUntilTransferCompletes = 1,
  kImmutableZeroCopy = 2,
  kMutableZeroCopy = 3,
};

struct NamedValue {
  TPU_PJRT_ARGS_PREFIX;
  const char* name;
  size_t name_size;
  NamedValueType type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
};

struct ApiVersion {
  TPU_PJRT_ARGS_PREFIX;
  int major_version;
  int minor_version;
};

// The function table: slot i lives at byte 40 + 8*i.
struct ApiTable {
  size_t struct_size;
  ExtensionBase* extension_start;
  ApiVersion pjrt_api_version;
  void* slots[1];  // really (struct_size - 40) / 8 entries
};
static_assert(offsetof(ApiTable, slots) == 40, "PJRT_Api function table starts at byte 40");

// Slot numbers of the functions we call (identical in every PJRT version from 0.57 on).
enum Slot : int {
  kError_Destroy = 0, kError_Message = 1, kError_GetCode = 2, kPlugin_Initialize = 3,
  kPlugin_Attributes = 4, kEvent_Destroy = 5, kEvent_IsReady = 6, kEvent_Error = 7,
  kEvent_Await = 8, kEvent_OnReady = 9, kClient_Create = 10, kClient_Destroy = 11,
  kClient_PlatformName = 12, kClient_ProcessIndex = 13, kClient_PlatformVersion = 14,
  kClient_Devices = 15, kClient_AddressableDevices = 16, kClient_Compile = 20,
  kClient_DefaultDeviceAssignment = 21, kClient_BufferFromHostBuffer = 22,
  kDeviceDescription_Id = 23, kDeviceDescription_ProcessIndex = 24,
  kDeviceDescription_Attributes = 25, kDeviceDescription_Kind = 26,
  kDeviceDescription_DebugString = 27,
  kDevice_GetDescription = 29, kDevice_LocalHardwareId = 31, kDevice_MemoryStats = 34,
  kExecutable_Destroy = 40, kExecutable_Name = 41, kExecutable_NumReplicas = 42,
  kExecutable_NumPartitions = 43, kExecutable_NumOutputs = 44,
  kExecutable_GetCostAnalysis = 46, kExecutable_OptimizedProgram = 48, kExecutable_Serialize = 49, kLoadedExecutable_Destroy = 50,
  kLoadedExecutable_GetExecutable = 51, kLoadedExecutable_AddressableDevices = 52,
  kLoadedExecutable_Execute = 55, kExecutable_DeserializeAndLoad = 56, kBuffer_Destroy = 58,
  kBuffer_ElementType = 59, kBuffer_Dimensions = 60, kBuffer_OnDeviceSizeInBytes = 64,
  kBuffer_Device = 65, kBuffer_Delete = 67, kBuffer_IsDeleted = 68, kBuffer_CopyToDevice = 69,
  kBuffer_ToHostBuffer = 70, kBuffer_ReadyEvent = 72, kTopologyDescription_Create = 82,
  kTopologyDescription_Destroy = 83, kTopologyDescription_PlatformName = 84,
  kTopologyDescription_PlatformVersion = 85, kTopologyDescription_GetDeviceDescriptions = 86,
  kTopologyDescription_Serialize = 87, kTopologyDescription_Attributes = 88,
  kCompile = 89, kExecutable_OutputElementTypes = 90, kExecutable_OutputDimensions = 91,
  kExecutable_GetCompiledMemoryStats = 96,
};

struct Error_Destroy_Args { TPU_PJRT_ARGS_PREFIX; Error* error; };
struct Error_Message_Args { TPU_PJRT_ARGS_PREFIX; const Error* error; const char* message; size_t message_size; };
struct Error_GetCode_Args { TPU_PJRT_ARGS_PREFIX; const Error* error; ErrorCode code; };
struct Plugin_Initialize_Args { TPU_PJRT_ARGS_PREFIX; };
struct Plugin_Attributes_Args { TPU_PJRT_ARGS_PREFIX; const NamedValue* attributes; size_t num_attributes; };

struct Event_Destroy_Args { TPU_PJRT_ARGS_PREFIX; Event* event; };
struct Event_IsReady_Args { TPU_PJRT_ARGS_PREFIX; Event* event; bool is_ready; };
struct Event_Error_Args { TPU_PJRT_ARGS_PREFIX; Event* event; };
struct Event_Await_Args { TPU_PJRT_ARGS_PREFIX; Event* event; };

struct Client_Create_Args {
  TPU_PJRT_ARGS_PREFIX;
  const NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};
struct Client_Destroy_Args { TPU_PJRT_ARGS_PREFIX; Client* client; };
struct Client_PlatformName_Args { TPU_PJRT_ARGS_PREFIX; Client* client; const char* platform_name; size_t platform_name_size; };
struct Client_PlatformVersion_Args { TPU_PJRT_ARGS_PREFIX; Client* client; const char* platform_version; size_t platform_version_size; };
struct Client_Devices_Args { TPU_PJRT_ARGS_PREFIX; Client* client; Device* const* devices; size_t num_devices; };

struct Program {
  TPU_PJRT_ARGS_PREFIX;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};
struct Client_Compile_Args {
  TPU_PJRT_ARGS_PREFIX;
  Client* client;
  const Program* program;
  const char* compile_options;
  size_t compile_options_size;
  LoadedExecutable* executable;  // out
};
struct Client_DefaultDeviceAssignment_Args {
  TPU_PJRT_ARGS_PREFIX;
  Client* client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;
  int* default_assignment;
};
struct Client_BufferFromHostBuffer_Args {
  TPU_PJRT_ARGS_PREFIX;
  Client* client;
  const void* data;
  BufferType type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;
  size_t num_byte_strides;
  HostBufferSemantics host_buffer_semantics;
  Device* device;
  Memory* memory;
  void* device_layout;
  Event* done_with_host_buffer;  // out
  Buffer* buffer;                // out
};

struct DeviceDescription_Id_Args { TPU_PJRT_ARGS_PREFIX; DeviceDescription* device_description; int id; };
struct DeviceDescription_ProcessIndex_Args { TPU_PJRT_ARGS_PREFIX; DeviceDescription* device_description; int process_index; };
struct DeviceDescription_Attributes_Args { TPU_PJRT_ARGS_PREFIX; DeviceDescription* device_description; size_t num_attributes; const NamedValue* attributes; };
struct DeviceDescription_Kind_Args { TPU_PJRT_ARGS_PREFIX; DeviceDescription* device_description; const char* device_kind; size_t device_kind_size; };
struct DeviceDescription_DebugString_Args { TPU_PJRT_ARGS_PREFIX; DeviceDescription* device_description; const char* debug_string; size_t debug_string_size; };
struct Device_GetDescription_Args { TPU_PJRT_ARGS_PREFIX; Device* device; DeviceDescription* device_description; };
struct Device_LocalHardwareId_Args { TPU_PJRT_ARGS_PREFIX; Device* device; int local_hardware_id; };
struct Device_MemoryStats_Args {
  TPU_PJRT_ARGS_PREFIX;
  Device* device;
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use; bool peak_bytes_in_use_is_set;
  int64_t num_allocs; bool num_allocs_is_set;
  int64_t largest_alloc_size; bool largest_alloc_size_is_set;
  int64_t bytes_limit; bool bytes_limit_is_set;
  int64_t bytes_reserved; bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved; bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit; bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes; bool largest_free_block_bytes_is_set;
  int64_t pool_bytes; bool pool_bytes_is_set;
  int64_t peak_pool_bytes; bool peak_pool_bytes_is_set;
  int64_t peak_allocated_bytes; bool peak_allocated_bytes_is_set;
};

struct Executable_Destroy_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; };
struct Executable_Name_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; const char* executable_name; size_t executable_name_size; };
struct Executable_NumReplicas_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; size_t num_replicas; };
struct Executable_NumPartitions_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; size_t num_partitions; };
struct Executable_NumOutputs_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; size_t num_outputs; };
struct Executable_GetCostAnalysis_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; size_t num_properties; const NamedValue* properties; };
// Two calls: with program->code NULL the plugin fills code_size; then it writes that many bytes.
struct Executable_OptimizedProgram_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; Program* program; };
struct Executable_Serialize_Args {
  TPU_PJRT_ARGS_PREFIX;
  const Executable* executable;
  const char* serialized_bytes;  // out
  size_t serialized_bytes_size;  // out
  SerializedExecutable* serialized_executable;  // out
  void (*serialized_executable_deleter)(SerializedExecutable*);  // out
};
struct Executable_OutputElementTypes_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; BufferType* output_types; size_t num_output_types; };
struct Executable_OutputDimensions_Args { TPU_PJRT_ARGS_PREFIX; Executable* executable; size_t num_outputs; const int64_t* dims; const size_t* dim_sizes; };
struct Executable_GetCompiledMemoryStats_Args {
  TPU_PJRT_ARGS_PREFIX;
  Executable* executable;
  int64_t generated_code_size_in_bytes;
  int64_t argument_size_in_bytes;
  int64_t output_size_in_bytes;
  int64_t alias_size_in_bytes;
  int64_t temp_size_in_bytes;
  int64_t host_generated_code_size_in_bytes;
  int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes;
  int64_t host_alias_size_in_bytes;
  int64_t host_temp_size_in_bytes;
  int64_t peak_memory_in_bytes;
  int64_t total_size_in_bytes;
  int64_t total_allocation_bytes;
  int64_t indefinite_allocations;
  int64_t peak_unpadded_heap_bytes;
};
struct LoadedExecutable_Destroy_Args { TPU_PJRT_ARGS_PREFIX; LoadedExecutable* executable; };
struct LoadedExecutable_GetExecutable_Args { TPU_PJRT_ARGS_PREFIX; LoadedExecutable* loaded_executable; Executable* executable; };
struct LoadedExecutable_AddressableDevices_Args { TPU_PJRT_ARGS_PREFIX; LoadedExecutable* executable; Device* const* addressable_devices; size_t num_addressable_devices; };

struct ExecuteOptions {
  TPU_PJRT_ARGS_PREFIX;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  void* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  void* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  void* hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
};
struct LoadedExecutable_Execute_Args {
  TPU_PJRT_ARGS_PREFIX;
  LoadedExecutable* executable;
  ExecuteOptions* options;
  Buffer* const* const* argument_lists;
  size_t num_devices;
  size_t num_args;
  Buffer** const* output_lists;
  Event** device_complete_events;
  Device* execute_device;
};
struct Executable_DeserializeAndLoad_Args {
  TPU_PJRT_ARGS_PREFIX;
  Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  LoadedExecutable* loaded_executable;  // out
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
  void* load_options;
};

struct Buffer_Destroy_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; };
struct Buffer_ElementType_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; BufferType type; };
struct Buffer_Dimensions_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; const int64_t* dims; size_t num_dims; };
struct Buffer_OnDeviceSizeInBytes_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; size_t on_device_size_in_bytes; };
struct Buffer_Device_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; Device* device; };
struct Buffer_Delete_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; };
struct Buffer_IsDeleted_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; bool is_deleted; };
struct Buffer_CopyToDevice_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; Device* dst_device; Buffer* dst_buffer; };
struct Buffer_ToHostBuffer_Args {
  TPU_PJRT_ARGS_PREFIX;
  Buffer* src;
  void* host_layout;
  void* dst;
  size_t dst_size;
  Event* event;  // out
};
struct Buffer_ReadyEvent_Args { TPU_PJRT_ARGS_PREFIX; Buffer* buffer; Event* event; };

struct TopologyDescription_Create_Args {
  TPU_PJRT_ARGS_PREFIX;
  const char* topology_name;
  size_t topology_name_size;
  const NamedValue* create_options;
  size_t num_options;
  TopologyDescription* topology;  // out
};
struct TopologyDescription_Destroy_Args { TPU_PJRT_ARGS_PREFIX; TopologyDescription* topology; };
struct TopologyDescription_PlatformName_Args {
  TPU_PJRT_ARGS_PREFIX;
  TopologyDescription* topology;
  const char* platform_name;  // out, owned by the topology
  size_t platform_name_size;
};
struct TopologyDescription_PlatformVersion_Args {
  TPU_PJRT_ARGS_PREFIX;
  TopologyDescription* topology;
  const char* platform_version;  // out, owned by the topology
  size_t platform_version_size;
};
struct TopologyDescription_GetDeviceDescriptions_Args {
  TPU_PJRT_ARGS_PREFIX;
  TopologyDescription* topology;
  DeviceDescription* const* descriptions;  // out, array owned by the topology
  size_t num_descriptions;                 // out
};
struct TopologyDescription_Serialize_Args {
  TPU_PJRT_ARGS_PREFIX;
  TopologyDescription* topology;
  const char* serialized_bytes;  // out
  size_t serialized_bytes_size;  // out
  void* serialized_topology;     // out, freed with the deleter
  void (*serialized_topology_deleter)(void*);  // out
};
struct TopologyDescription_Attributes_Args {
  TPU_PJRT_ARGS_PREFIX;
  TopologyDescription* topology;
  const NamedValue* attributes;  // out, owned by the topology
  size_t num_attributes;
};
struct Compile_Args {
  TPU_PJRT_ARGS_PREFIX;
  const TopologyDescription* topology;
  const Program* program;
  const char* compile_options;
  size_t compile_options_size;
  Client* client;
  Executable* executable;  // out
};

// Sizes at PJRT 0.114 (facts of the ABI); a mismatch means a field was declared wrongly.
#define TPU_PJRT_CHECK_SIZE(type, last, n) \
  static_assert(TPU_PJRT_STRUCT_SIZE(type, last) == n, #type " has the wrong size")
TPU_PJRT_CHECK_SIZE(NamedValue, value_size, 56);
TPU_PJRT_CHECK_SIZE(Program, format_size, 48);
TPU_PJRT_CHECK_SIZE(Error_Message_Args, message_size, 40);
TPU_PJRT_CHECK_SIZE(Error_GetCode_Args, code, 28);
TPU_PJRT_CHECK_SIZE(Plugin_Attributes_Args, num_attributes, 32);
TPU_PJRT_CHECK_SIZE(Event_IsReady_Args, is_ready, 25);
TPU_PJRT_CHECK_SIZE(Client_Create_Args, kv_try_get_user_arg, 88);
TPU_PJRT_CHECK_SIZE(Client_Devices_Args, num_devices, 40);
TPU_PJRT_CHECK_SIZE(Client_Compile_Args, executable, 56);
TPU_PJRT_CHECK_SIZE(Client_DefaultDeviceAssignment_Args, default_assignment, 48);
TPU_PJRT_CHECK_SIZE(Client_BufferFromHostBuffer_Args, buffer, 120);
TPU_PJRT_CHECK_SIZE(DeviceDescription_Id_Args, id, 28);
TPU_PJRT_CHECK_SIZE(DeviceDescription_ProcessIndex_Args, process_index, 28);
TPU_PJRT_CHECK_SIZE(DeviceDescription_Attributes_Args, attributes, 40);
TPU_PJRT_CHECK_SIZE(DeviceDescription_Kind_Args, device_kind_size, 40);
TPU_PJRT_CHECK_SIZE(Device_GetDescription_Args, device_description, 32);
TPU_PJRT_CHECK_SIZE(Device_LocalHardwareId_Args, local_hardware_id, 28);
TPU_PJRT_CHECK_SIZE(Device_MemoryStats_Args, peak_allocated_bytes_is_set, 201);
TPU_PJRT_CHECK_SIZE(Executable_NumReplicas_Args, num_replicas, 32);
TPU_PJRT_CHECK_SIZE(Executable_NumPartitions_Args, num_partitions, 32);
TPU_PJRT_CHECK_SIZE(Executable_NumOutputs_Args, num_outputs, 32);
TPU_PJRT_CHECK_SIZE(Executable_GetCostAnalysis_Args, properties, 40);
TPU_PJRT_CHECK_SIZE(Executable_OptimizedProgram_Args, program, 32);
TPU_PJRT_CHECK_SIZE(Executable_Serialize_Args, serialized_executable_deleter, 56);
TPU_PJRT_CHECK_SIZE(Executable_OutputElementTypes_Args, num_output_types, 40);
TPU_PJRT_CHECK_SIZE(Executable_OutputDimensions_Args, dim_sizes, 48);
TPU_PJRT_CHECK_SIZE(Executable_GetCompiledMemoryStats_Args, peak_unpadded_heap_bytes, 144);
TPU_PJRT_CHECK_SIZE(LoadedExecutable_GetExecutable_Args, executable, 32);
TPU_PJRT_CHECK_SIZE(LoadedExecutable_AddressableDevices_Args, num_addressable_devices, 40);
TPU_PJRT_CHECK_SIZE(ExecuteOptions, num_hlo_output_callbacks, 144);
TPU_PJRT_CHECK_SIZE(LoadedExecutable_Execute_Args, execute_device, 80);
TPU_PJRT_CHECK_SIZE(Executable_DeserializeAndLoad_Args, load_options, 72);
TPU_PJRT_CHECK_SIZE(Buffer_ElementType_Args, type, 28);
TPU_PJRT_CHECK_SIZE(Buffer_Dimensions_Args, num_dims, 40);
TPU_PJRT_CHECK_SIZE(Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes, 32);
TPU_PJRT_CHECK_SIZE(Buffer_IsDeleted_Args, is_deleted, 25);
TPU_PJRT_CHECK_SIZE(Buffer_CopyToDevice_Args, dst_buffer, 40);
TPU_PJRT_CHECK_SIZE(Buffer_ToHostBuffer_Args, event, 56);
TPU_PJRT_CHECK_SIZE(Buffer_ReadyEvent_Args, event, 32);
TPU_PJRT_CHECK_SIZE(TopologyDescription_Create_Args, topology, 56);
TPU_PJRT_CHECK_SIZE(TopologyDescription_Destroy_Args, topology, 24);
TPU_PJRT_CHECK_SIZE(TopologyDescription_PlatformName_Args, platform_name_size, 40);
TPU_PJRT_CHECK_SIZE(TopologyDescription_PlatformVersion_Args, platform_version_size, 40);
TPU_PJRT_CHECK_SIZE(TopologyDescription_GetDeviceDescriptions_Args, num_descriptions, 40);
TPU_PJRT_CHECK_SIZE(TopologyDescription_Serialize_Args, serialized_topology_deleter, 56);
TPU_PJRT_CHECK_SIZE(TopologyDescription_Attributes_Args, num_attributes, 40);
TPU_PJRT_CHECK_SIZE(Compile_Args, executable, 64);

}  // namespace tpu::pjrt::abi
