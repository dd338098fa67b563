// ScratchGate: charges a sample's decode scratch to the loader's RAM budget
// before it is allocated (docs/reliability.md 36).
//
// Two tiers, so that the outcome for a sample never depends on timing or on
// the thread count (the stream stays deterministic):
// - up to `retained_bytes` per sample: a worker's own scratch. It needs no
//   permission; what a worker keeps between samples is trimmed back to this
//   mark after each sample and counted in the budget as workers' scratch.
// - above it, up to `allowance_bytes`: the large-sample allowance, carved out
//   of the budget when the loader starts. One sample holds it at a time; the
//   others wait (a holder never waits on anything, so this cannot deadlock),
//   and the holder's scratch is freed when its sample ends.
// - above the allowance: ResourceExhausted naming the size and the budget.
//
// Thread safety: safe for concurrent use.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_SCRATCH_GATE_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_SCRATCH_GATE_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "feedline/status.h"
#include "src/core/mutex.h"

namespace feedline::detail {

class ScratchGate {
 public:
  ScratchGate(uint64_t retained_bytes, uint64_t allowance_bytes, uint64_t budget_bytes);

  uint64_t retained_bytes() const { return retained_bytes_; }
  uint64_t allowance_bytes() const { return allowance_bytes_; }

  // A sample that has charged `before` bytes asks for `bytes` more. Sets
  // *holds_allowance when it now holds the large-sample allowance (it must
  // Release() it when the sample ends). Waits while another sample holds
  // it; Cancelled once Cancel() was called.
  Status Charge(uint64_t before, uint64_t bytes, std::string_view what, bool* holds_allowance);
  void Release();
  // Wakes every waiter; later charges that would wait return Cancelled.
  void Cancel();

  // Large samples that waited for the allowance, for metrics.
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }

 private:
  // Constant after construction.
  const uint64_t retained_bytes_;
  const uint64_t allowance_bytes_;
  const uint64_t budget_bytes_;

  std::atomic<uint64_t> waits_{0};
  core::Mutex mu_;
  core::CondVar cv_;
  bool held_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
};

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_SCRATCH_GATE_H_
