// SampleRunner: one worker's side of the per-sample chain. Owns the worker's
// Sample scratch and op states, runs the ops of one sample back to back and
// records per-op counters. Used by exactly one thread.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_SAMPLE_RUNNER_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_SAMPLE_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "feedline/sample.h"
#include "feedline/status.h"
#include "src/engine/detail/scratch_gate.h"

namespace feedline::detail {

// Adds to a counter that only one thread writes: a plain load and store, no
// locked read-modify-write; readers on other threads see a recent value.
inline void Bump(std::atomic<uint64_t>& counter, uint64_t delta) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

struct OpCounters {
  std::atomic<uint64_t> items{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> busy_ns{0};
};

// One worker's counters, on their own cache lines; written by the worker,
// read by Metrics() and the stall watchdog.
struct alignas(64) WorkerCounters {
  explicit WorkerCounters(size_t num_ops) : ops(num_ops) {}

  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> busy_ns{0};
  std::atomic<uint64_t> wait_input_ns{0};
  std::atomic<uint64_t> blocked_output_ns{0};
  std::atomic<uint64_t> parked_ns{0};
  std::atomic<uint64_t> scratch_bytes{0};
  // What the worker is doing now, for the stall watchdog: op_start_ns is 0
  // when idle.
  std::atomic<int64_t> op_start_ns{0};
  std::atomic<uint64_t> current_sample{0};
  std::atomic<uint32_t> current_op{0};
  std::vector<OpCounters> ops;
};

class SampleRunner {
 public:
  // `gate` charges the samples' scratch to the budget (may be null: none).
  SampleRunner(const Pipeline* pipeline, const std::atomic<bool>* cancelled,
               WorkerCounters* counters, ScratchGate* gate = nullptr);

  struct Outcome {
    Status status;  // OK, or the failing op's status
    size_t failed_op = 0;
  };

  // Runs every op on sample `id`, writing field i to outputs[i].
  Outcome Run(uint64_t epoch, uint64_t epoch_key, uint64_t id, bool is_padding,
              const std::vector<void*>& outputs);

  // The sample as the last Run left it (its location names a failure).
  const Sample& sample() const { return sample_; }

 private:
  // After a sample: gives back the large-sample allowance, trims scratch
  // above the per-worker mark, and records what the worker now holds.
  void SettleScratch();

  const Pipeline* pipeline_;
  WorkerCounters* counters_;
  ScratchGate* gate_;
  std::vector<std::unique_ptr<OpState>> states_;
  Sample sample_;
};

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_SAMPLE_RUNNER_H_
