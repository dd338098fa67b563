#include "src/core/process.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace feedline::core {
namespace {

std::atomic<pid_t> cached_pid{0};

void RereadInChild() { cached_pid.store(::getpid(), std::memory_order_relaxed); }

pid_t InstallOnce() {
  // A static's initialiser runs once, even when threads race to it.
  static const bool installed = [] {
    cached_pid.store(::getpid(), std::memory_order_relaxed);
    return pthread_atfork(nullptr, nullptr, &RereadInChild) == 0;
  }();
  // Without the handler a child could read its parent's id: ask each time.
  return installed ? cached_pid.load(std::memory_order_relaxed) : ::getpid();
}

}  // namespace

pid_t CurrentPid() { return InstallOnce(); }

}  // namespace feedline::core
