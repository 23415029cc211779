#include "pjrt/event.h"

namespace tpu::pjrt {

Event::~Event() {
  if (event_ == nullptr) return;
  abi::Event_Destroy_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Event_Destroy_Args, event);
  args.event = event_;
  try {
    api_->call(abi::kEvent_Destroy, &args, "PJRT_Event_Destroy");
  } catch (...) {  // destructors must not throw
  }
}

void Event::await(const char* what) const {
  if (event_ == nullptr) return;
  // Event_Await returns the event's own error; Event_Error would abort on a pending event.
  abi::Event_Await_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Event_Await_Args, event);
  args.event = event_;
  api_->call(abi::kEvent_Await, &args, what);
}

bool Event::is_ready() const {
  if (event_ == nullptr) return true;
  abi::Event_IsReady_Args args{};
  args.struct_size = TPU_PJRT_STRUCT_SIZE(abi::Event_IsReady_Args, is_ready);
  args.event = event_;
  api_->call(abi::kEvent_IsReady, &args, "PJRT_Event_IsReady");
  return args.is_ready;
}

}  // namespace tpu::pjrt
