// Monotonic nanosecond clock for metrics and deadlines.
#ifndef FEEDLINE_SRC_CORE_CLOCK_H_
#define FEEDLINE_SRC_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace feedline::core {

// steady_clock through the vDSO: ~20 ns per call on x86-64 Linux, cheap enough
// to bracket every op of every sample (see bench/micro/engine_benchmark.cc).
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_CLOCK_H_
