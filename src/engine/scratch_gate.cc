#include "src/engine/detail/scratch_gate.h"

#include <algorithm>
#include <string>

namespace feedline::detail {

ScratchGate::ScratchGate(uint64_t retained_bytes, uint64_t allowance_bytes, uint64_t budget_bytes)
    : retained_bytes_(retained_bytes),
      allowance_bytes_(allowance_bytes),
      budget_bytes_(budget_bytes) {}

Status ScratchGate::Charge(uint64_t before, uint64_t bytes, std::string_view what,
                           bool* holds_allowance) {
  const uint64_t total = before + bytes;
  if (total <= retained_bytes_) return Status::OK();
  if (total > allowance_bytes_) {
    return ResourceExhaustedError(
        std::string(what) + " needs " + std::to_string(total) +
        " bytes of scratch; the RAM budget (max_bytes=" + std::to_string(budget_bytes_) +
        ") allows " + std::to_string(std::max(retained_bytes_, allowance_bytes_)) +
        " bytes for one sample: raise the budget or lower the decode limits");
  }
  if (*holds_allowance) return Status::OK();
  core::MutexLock l(&mu_);
  bool waited = false;
  while (held_ && !cancelled_) {
    waited = true;
    cv_.Wait(&l);
  }
  if (cancelled_) return CancelledError("loader cancelled while waiting for decode scratch");
  if (waited) waits_.fetch_add(1, std::memory_order_relaxed);
  held_ = true;
  *holds_allowance = true;
  return Status::OK();
}

void ScratchGate::Release() {
  core::MutexLock l(&mu_);
  held_ = false;
  cv_.Signal();
}

void ScratchGate::Cancel() {
  core::MutexLock l(&mu_);
  cancelled_ = true;
  cv_.SignalAll();
}

}  // namespace feedline::detail
