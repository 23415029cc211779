// PJRT errors as C++ exceptions that carry the PJRT status code.
#pragma once

#include <stdexcept>
#include <string>

#include "pjrt/pjrt_abi.h"

namespace tpu::pjrt {

class Api;

class PjrtError : public std::runtime_error {
 public:
  PjrtError(abi::ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  abi::ErrorCode code() const { return code_; }

 private:
  abi::ErrorCode code_;
};

// Name of an absl/PJRT status code ("INVALID_ARGUMENT", ...).
const char* error_code_name(abi::ErrorCode code);

// Consumes `error` (may be NULL): reads code and message, destroys it, throws PjrtError
// prefixed with `what` ("PJRT_Client_Compile: ...").
void throw_if_error(const Api& api, abi::Error* error, const char* what);
// The same for a non-NULL `error`, returned instead of thrown (for callers that must not unwind
// through a failed plugin call, see Client::try_deserialize).
PjrtError take_error(const Api& api, abi::Error* error, const char* what);

}  // namespace tpu::pjrt
