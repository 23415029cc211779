#include "pjrt/error.h"

#include "pjrt/api.h"

namespace tpu::pjrt {

const char* error_code_name(abi::ErrorCode code) {
  static const char* const kNames[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return (i >= 0 && i <= 16) ? kNames[i] : "UNKNOWN_CODE";
}

void throw_if_error(const Api& api, abi::Error* error, const char* what) {
  if (error == nullptr) return;
  throw take_error(api, error, what);
}

PjrtError take_error(const Api& api, abi::Error* error, const char* what) {
  abi::Error_Message_Args msg{};
  msg.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Error_Message_Args, message_size);
  msg.error = error;
  reinterpret_cast<void (*)(abi::Error_Message_Args*)>(api.slot(abi::kError_Message))(&msg);
  std::string text(msg.message ? msg.message : "", msg.message ? msg.message_size : 0);

  abi::Error_GetCode_Args code_args{};
  code_args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Error_GetCode_Args, code);
  code_args.error = error;
  abi::ErrorCode code = abi::kUnknown;
  if (api.slot(abi::kError_GetCode) != nullptr) {
    auto* err = reinterpret_cast<abi::Error* (*)(abi::Error_GetCode_Args*)>(
        api.slot(abi::kError_GetCode))(&code_args);
    if (err == nullptr) code = code_args.code;
  }
  abi::Error_Destroy_Args destroy{};
  destroy.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Error_Destroy_Args, error);
  destroy.error = error;
  reinterpret_cast<void (*)(abi::Error_Destroy_Args*)>(api.slot(abi::kError_Destroy))(&destroy);
  return PjrtError(code, std::string(what) + " failed [" + error_code_name(code) + "]: " + text);
}

}  // namespace tpu::pjrt
