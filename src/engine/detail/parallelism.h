// The parallelism plan: how many worker threads and batch buffers a loader
// starts with, which of them the tuner may change, and how the RAM budget is
// split (ops' reserved bytes, the large-sample scratch allowance, the ring).
// A pure function of what the pipeline needs and the options, so that every
// rule about budgets is in one place and testable without threads.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_PARALLELISM_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_PARALLELISM_H_

#include <cstdint>
#include <string>

#include "feedline/loader.h"
#include "feedline/status.h"

namespace feedline::detail {

inline constexpr uint32_t kMaxThreads = 1024;

struct Parallelism {
  uint32_t max_threads = 1;      // started
  uint32_t initial_threads = 1;  // active at first
  // Ring depth: batch buffers the ring may use (docs/engine.md, "The ring").
  uint32_t max_ring_depth = 1;      // what LoaderOptions::ring_depth and the budget allow
  uint32_t initial_ring_depth = 1;  // where an auto ring starts
  uint32_t cpu_budget = 1;
  uint64_t reserved_bytes = 0;     // the ops' share of max_bytes, and the scratch allowance
  uint64_t scratch_allowance = 0;  // the large-sample allowance (ScratchGate)
  bool threads_auto = false;
  bool ring_auto = false;
  bool read_ahead = false;  // an op has a read-ahead to size
  // cpu_budget was auto and so are the threads: cpu_budget is every core
  // available, and the tuner keeps for the training loop, while it steps,
  // the cores it measures the loop using (docs/tuner.md, "The trainer's
  // cores"). Set by Loader::Create, which resolves the budget.
  bool lend_trainer_cores = false;
};

// What the pipeline asks of the budget, read off its ops and fields.
struct PipelineDemand {
  uint64_t batch_bytes = 0;      // one batch buffer
  std::string batch_detail;      // "image float32 602112 bytes/sample, ..." for errors
  uint64_t reserved_bytes = 0;   // the ops' own buffers (read-ahead)
  bool charges_scratch = false;  // an op charges decode scratch
  int read_aheads = 0;           // ops with a read-ahead the tuner could size
};

// `options` with max_bytes and cpu_budget already resolved (not 0).
// Errors: InvalidArgument for a thread count over kMaxThreads;
// ResourceExhausted naming the bytes when the budget cannot hold the ring's
// minimum.
Result<Parallelism> PlanParallelism(const PipelineDemand& demand, const LoaderOptions& options);

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_PARALLELISM_H_
