// Engine metrics: always-on counters the doctor and the tuner read.
//
// Counters are per worker thread (relaxed atomics on separate cache lines)
// and summed when a snapshot is taken, so recording them costs two clock
// reads per op per sample and no shared writes. The measured overhead is in
// docs/engine.md.
//
// Thread safety: snapshots are plain values.
#ifndef FEEDLINE_METRICS_H_
#define FEEDLINE_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "feedline/batch.h"
#include "feedline/export.h"

namespace feedline {

struct FEEDLINE_EXPORT OpMetrics {
  std::string name;
  uint64_t items = 0;    // Apply() calls that returned
  uint64_t errors = 0;   // of which non-OK
  uint64_t busy_ns = 0;  // time inside Apply()
};

struct FEEDLINE_EXPORT WorkerMetrics {
  uint64_t samples = 0;
  uint64_t busy_ns = 0;            // running a sample's op chain
  uint64_t wait_input_ns = 0;      // idle: no sample to take (epoch done, not started)
  uint64_t blocked_output_ns = 0;  // a sample was ready to take but no batch buffer was free
  uint64_t parked_ns = 0;          // set aside by the tuner
  uint64_t scratch_bytes =
      0;  // the worker's own buffers (decode scratch) kept after its last sample
};

struct FEEDLINE_EXPORT RingMetrics {
  uint64_t batches_started = 0;    // got a buffer
  uint64_t batches_completed = 0;  // every sample done
  uint64_t batches_delivered = 0;  // handed to the consumer
  uint32_t depth_filling = 0;      // batches being filled now
  uint32_t depth_ready = 0;        // complete, waiting for the consumer
  uint32_t buffers_allocated = 0;
  uint32_t buffers_max = 0;               // K: the ring depth the budget allows
  uint32_t buffers_held_by_consumer = 0;  // delivered batches still referenced
  uint64_t batch_bytes = 0;
  uint64_t bytes_held = 0;  // buffers_allocated * batch_bytes
  uint64_t peak_bytes_held = 0;
  uint64_t max_bytes = 0;  // the budget
};

struct FEEDLINE_EXPORT ConsumerMetrics {
  uint64_t next_calls = 0;
  uint64_t batches = 0;
  uint64_t wait_ns = 0;  // time inside Next() waiting for a batch: the loop's starvation
};

struct FEEDLINE_EXPORT ErrorMetrics {
  uint64_t total = 0;          // sample errors seen in delivered batches
  uint64_t skipped = 0;        // dropped under the skip policy
  uint64_t empty_batches = 0;  // batches all of whose samples were skipped: not delivered
  std::map<std::string, uint64_t> by_reason;  // SampleError::Reason() -> count
  std::vector<SampleError> log;               // the first error_log_capacity errors
  uint64_t log_dropped = 0;                   // errors not kept in `log`
};

// What the tuner chose and why (docs/tuner.md).
struct FEEDLINE_EXPORT TunerMetrics {
  bool threads_auto = false;
  bool ring_auto = false;
  bool read_ahead_auto = false;
  uint32_t cpu_budget = 0;
  uint64_t ram_budget = 0;  // max_bytes
  // The training loop's CPU, measured over the tuner's last window (0 before
  // one closed, or with no tuner): the process's CPU minus the loader's
  // threads', in cores, on average and while the loop stepped (outside
  // Next; 0 when it spent under 5% of the time there).
  double trainer_cpu_cores = 0;
  double trainer_step_cores = 0;
  // Worker threads allowed while the loop steps: with an auto cpu_budget,
  // the cores minus those the step was measured using (all of them are lent
  // to workers while it waits in Next); otherwise cpu_budget, a hard cap.
  uint32_t effective_cpu_budget = 0;
  uint32_t threads = 0;         // active now
  uint32_t max_threads = 0;     // started (the budget, or the fixed count)
  uint32_t ring_depth = 0;      // buffers the ring may use now
  uint32_t max_ring_depth = 0;  // what the budget allows
  uint32_t read_ahead_in_flight = 0;
  uint64_t read_ahead_bytes = 0;
  uint64_t reserved_bytes = 0;  // the ops' (read-ahead) share of the budget
  uint64_t scratch_allowance_bytes =
      0;                       // the large-sample decode allowance (Sample::ChargeScratch)
  uint64_t scratch_waits = 0;  // large samples that waited for the allowance
  uint64_t scratch_bytes = 0;  // workers' scratch, summed
  // Memory charged to the budget now: ring buffers + reserved + allowance + scratch.
  uint64_t charged_bytes = 0;
  uint64_t peak_charged_bytes = 0;
  uint64_t windows = 0;          // measurement windows seen
  uint64_t changes = 0;          // decisions that changed something
  std::vector<std::string> log;  // the latest changes, "t=1.20s threads 4 -> 2: ..."
};

struct FEEDLINE_EXPORT MetricsSnapshot {
  uint64_t uptime_ns = 0;              // since the loader was created
  uint32_t num_threads = 0;            // active worker threads
  std::vector<OpMetrics> ops;          // in pipeline order
  std::vector<WorkerMetrics> workers;  // one per thread
  RingMetrics ring;
  ConsumerMetrics consumer;
  ErrorMetrics errors;
  TunerMetrics tuner;

  WorkerMetrics WorkerTotals() const;
  // Multi-line human-readable summary.
  std::string ToString() const;
};

}  // namespace feedline

#endif  // FEEDLINE_METRICS_H_
