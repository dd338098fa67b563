// How many cores this process may run on.
#ifndef FEEDLINE_SRC_CORE_CPU_H_
#define FEEDLINE_SRC_CORE_CPU_H_

#include <cstdint>

namespace feedline::core {

// Cores in the process's affinity mask (what taskset/cgroups cpusets allow),
// at least 1. The cgroup CPU quota is the tuner's concern (a later issue).
uint32_t AvailableCores();

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_CPU_H_
