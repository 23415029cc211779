#include "engine/device/process_mappings.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace tpu::engine {

int64_t process_mapping_count() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static thread_local char buf[1 << 16];
  int64_t lines = 0;
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    for (const char* p = buf; (p = static_cast<const char*>(std::memchr(p, '\n', buf + n - p))) != nullptr; ++p) ++lines;
  }
  ::close(fd);
  return lines;
}

int64_t process_mapping_limit() {
  static const int64_t limit = [] {
    int fd = ::open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return int64_t{-1};
    char text[32] = {};
    ssize_t n = ::read(fd, text, sizeof(text) - 1);
    ::close(fd);
    return n > 0 ? static_cast<int64_t>(std::strtoll(text, nullptr, 10)) : int64_t{-1};
  }();
  return limit;
}

}  // namespace tpu::engine
