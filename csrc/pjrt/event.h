// RAII owner of a PJRT_Event.
#pragma once

#include <memory>

#include "pjrt/api.h"

namespace tpu::pjrt {

class Event {
 public:
  Event(std::shared_ptr<const Api> api, abi::Event* event) : api_(std::move(api)), event_(event) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Blocks until the event fires; throws the event's error, if any.
  void await(const char* what) const;
  bool is_ready() const;

 private:
  std::shared_ptr<const Api> api_;
  abi::Event* event_;
};

}  // namespace tpu::pjrt
