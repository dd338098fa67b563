// How many cores and how much memory this process may use: the defaults of
// the loader's CPU and RAM budgets (docs/tuner.md); and the CPU clocks the
// tuner reads to see how much of them the training loop uses.
#ifndef FEEDLINE_SRC_CORE_CPU_H_
#define FEEDLINE_SRC_CORE_CPU_H_

#include <time.h>

#include <cstdint>
#include <string_view>

namespace feedline::core {

// Cores in the process's affinity mask (what taskset/cgroup cpusets allow),
// capped by the tightest CPU quota of the process's cgroup and its parents
// (cgroup v2 cpu.max, found through /proc/self/cgroup; or v1
// cfs_quota_us / cfs_period_us), rounded up, at least 1.
uint32_t AvailableCores();

// CPU time consumed so far, in nanoseconds (monotonic; 0 if the clock
// cannot be read): by the whole process (every thread, live or exited), and
// by the calling thread.
uint64_t ProcessCpuNs();
uint64_t ThreadCpuNs();

// The CPU clock of one thread, readable from any thread while that thread
// lives (pthread_getcpuclockid). Reading it after the thread exited is the
// caller's bug: the clock may name a new thread by then.
class ThreadCpuClock {
 public:
  // The calling thread's clock.
  static ThreadCpuClock Current();
  ThreadCpuClock() = default;
  bool valid() const { return valid_; }
  // Nanoseconds of CPU the thread has used; 0 if not valid or unreadable.
  uint64_t ReadNs() const;

 private:
  clockid_t id_ = CLOCK_THREAD_CPUTIME_ID;
  bool valid_ = false;
};

// Memory the process could still take: MemAvailable from /proc/meminfo,
// capped by the tightest memory.max - memory.current of its cgroup and its
// parents (v2), or limit_in_bytes - usage_in_bytes (v1).
uint64_t AvailableMemoryBytes();

// A default RAM budget: `fraction` of AvailableMemoryBytes(), at least
// 64 MiB. (The loader's fraction is kDefaultRamFraction in loader.h; core
// knows nothing above it.)
uint64_t DefaultRamBudget(double fraction);

namespace detail {
// Parsers, exposed for tests. Return 0 when there is no limit or the text is
// not understood.
double ParseCgroupV2CpuMax(std::string_view text);       // "max 100000" or "150000 100000"
uint64_t ParseMeminfoAvailable(std::string_view text);   // bytes
uint64_t ParseCgroupMemoryValue(std::string_view text);  // "max" -> 0
}  // namespace detail

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_CPU_H_
