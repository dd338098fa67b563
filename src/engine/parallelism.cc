#include "src/engine/detail/parallelism.h"

#include <algorithm>

namespace feedline::detail {
namespace {

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

Result<Parallelism> PlanParallelism(const PipelineDemand& demand, const LoaderOptions& options) {
  Parallelism par;
  par.cpu_budget = options.cpu_budget;
  par.threads_auto = options.num_threads == 0;
  const uint32_t threads = par.threads_auto ? par.cpu_budget : options.num_threads;
  if (threads > kMaxThreads) {
    return InvalidArgumentError("num_threads " + std::to_string(threads) + " exceeds " +
                                std::to_string(kMaxThreads));
  }
  par.max_threads = par.initial_threads = threads;  // all of them for the first batch
  par.ring_auto = options.ring_depth == 0;
  // Ops' own buffers (read-ahead) come out of the budget first.
  const uint64_t reserved = demand.reserved_bytes;
  if (reserved >= options.max_bytes) {
    return ResourceExhaustedError("max_bytes=" + std::to_string(options.max_bytes) +
                                  " is all taken by the ops' " + std::to_string(reserved) +
                                  " reserved bytes (read-ahead); no room for a batch");
  }
  const uint64_t batch_budget = options.max_bytes - reserved;
  if (demand.batch_bytes > batch_budget) {
    return ResourceExhaustedError(
        "max_bytes=" + std::to_string(options.max_bytes) +
        (reserved ? " (" + std::to_string(reserved) + " reserved for read-ahead)" : "") +
        " cannot hold one batch: " + std::to_string(options.batch_size) + " samples need " +
        Bytes(demand.batch_bytes) + " (" + demand.batch_detail + ")");
  }
  // The large-sample allowance for ops that charge decode scratch
  // (ScratchGate): a quarter of the budget, less where that would leave the
  // ring less than its minimum.
  if (demand.charges_scratch) {
    const uint64_t min_ring = (par.ring_auto ? 2 : 1) * demand.batch_bytes;
    par.scratch_allowance =
        std::min(options.max_bytes / 4, batch_budget - std::min(batch_budget, min_ring));
  }
  const uint64_t ring_budget = batch_budget - par.scratch_allowance;
  par.max_ring_depth = static_cast<uint32_t>(std::min<uint64_t>(
      par.ring_auto ? kMaxAutoRingDepth : options.ring_depth, ring_budget / demand.batch_bytes));
  if (par.ring_auto && par.max_ring_depth < 2) {
    // A loop holds one batch while it asks for the next: an auto ring
    // needs room for two.
    return ResourceExhaustedError(
        "max_bytes=" + std::to_string(options.max_bytes) + " holds one batch of " +
        Bytes(demand.batch_bytes) +
        (reserved ? " (after " + std::to_string(reserved) + " reserved for read-ahead)" : "") +
        "; an auto ring needs two (" + std::to_string(2 * demand.batch_bytes + reserved) +
        " bytes): raise the budget, or set ring_depth = 1 and release each batch "
        "before asking for the next");
  }
  // By default three: one batch held by the consumer, one ready, one filling.
  par.initial_ring_depth =
      par.ring_auto ? std::clamp<uint32_t>(options.auto_ring_start, 2, par.max_ring_depth)
                    : par.max_ring_depth;
  par.reserved_bytes = reserved + par.scratch_allowance;
  // The tuner sizes one read-ahead; a pipeline with several keeps their
  // configured limits (one window's rate and latency cannot be split
  // between them).
  par.read_ahead = demand.read_aheads == 1;
  return par;
}

}  // namespace feedline::detail
