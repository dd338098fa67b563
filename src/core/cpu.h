// How many cores and how much memory this process may use: the defaults of
// the loader's CPU and RAM budgets (docs/tuner.md).
#ifndef FEEDLINE_SRC_CORE_CPU_H_
#define FEEDLINE_SRC_CORE_CPU_H_

#include <cstdint>
#include <string_view>

namespace feedline::core {

// Cores in the process's affinity mask (what taskset/cgroup cpusets allow),
// capped by the tightest CPU quota of the process's cgroup and its parents
// (cgroup v2 cpu.max, found through /proc/self/cgroup; or v1
// cfs_quota_us / cfs_period_us), rounded up, at least 1.
uint32_t AvailableCores();

// The loader's default CPU budget: AvailableCores() minus one for the
// training thread, at least 1.
uint32_t DefaultCpuBudget();

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
double ParseCgroupV2CpuMax(std::string_view text);  // "max 100000" or "150000 100000"
uint64_t ParseMeminfoAvailable(std::string_view text);  // bytes
uint64_t ParseCgroupMemoryValue(std::string_view text);  // "max" -> 0
}  // namespace detail

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_CPU_H_
