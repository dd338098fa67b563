// A consumer for live-loader tests: takes batches at a set pace and
// measures the second half (starvation, rate, demand, service time), and
// the options of a loader whose threads, ring and read-ahead the tuner
// sets. Shared by the tuner's tests (tests/engine) and the read-ahead's
// (tests/io), which both watch the tuner on a live loader.
#ifndef FEEDLINE_TESTS_ENGINE_CONSUME_H_
#define FEEDLINE_TESTS_ENGINE_CONSUME_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "feedline/batch.h"
#include "feedline/loader.h"
#include "feedline/metrics.h"
#include "gtest/gtest.h"

namespace feedline::testing {

struct RunResult {
  uint32_t threads_end = 0;
  double starved = 0;    // consumer wait share over the measured part
  double rate = 0;       // samples/s the consumer took over the measured part
  double demand = 0;     // samples/s the consumer would take if never kept waiting
  double service_s = 0;  // workers' busy time per sample over the measured part
  uint64_t max_charged = 0;
};

// Consumes `batches` batches spending `step` on each; measures the last half.
inline RunResult Consume(Loader& loader, int batches, std::chrono::microseconds step) {
  RunResult r;
  Batch b;
  bool end = false;
  double wait = 0, total = 0;
  uint64_t samples = 0;
  WorkerMetrics at_half;
  for (int i = 0; i < batches; ++i) {
    if (i == batches / 2) at_half = loader.Metrics().WorkerTotals();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(loader.Next(&b, &end).ok());
    if (end) {
      --i;
      continue;
    }
    const auto t1 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(step);
    const auto t2 = std::chrono::steady_clock::now();
    if (i >= batches / 2) {
      samples += b.size();
      wait += std::chrono::duration<double>(t1 - t0).count();
      total += std::chrono::duration<double>(t2 - t0).count();
    }
    const MetricsSnapshot m = loader.Metrics();
    r.max_charged = std::max(r.max_charged, m.tuner.charged_bytes);
    EXPECT_LE(m.tuner.charged_bytes, m.tuner.ram_budget);
  }
  r.starved = wait / total;
  r.rate = static_cast<double>(samples) / total;
  r.demand = total > wait ? static_cast<double>(samples) / (total - wait) : 0;
  const WorkerMetrics end_totals = loader.Metrics().WorkerTotals();
  const uint64_t done = end_totals.samples - at_half.samples;
  r.service_s =
      done > 0 ? 1e-9 * static_cast<double>(end_totals.busy_ns - at_half.busy_ns) / done : 0;
  r.threads_end = loader.num_threads();
  return r;
}

inline LoaderOptions AutoOptions(uint64_t batch, uint32_t cpu_budget) {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = true;
  o.cpu_budget = cpu_budget;
  o.tune_interval_ms = 20;
  o.max_bytes = 64 << 20;
  return o;
}

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_ENGINE_CONSUME_H_
