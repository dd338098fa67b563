#include "src/engine/detail/error_ledger.h"

#include <string>

namespace feedline::detail {

Status ErrorLedger::Record(const SampleError& error) {
  ++metrics_.total;
  ++metrics_.by_reason[error.Reason()];
  if (metrics_.log.size() < log_capacity_) {
    metrics_.log.push_back(error);
  } else {
    ++metrics_.log_dropped;
  }
  if (policy_ == ErrorPolicy::kRaise) return Status(error.status.code(), error.ToString());
  if (metrics_.total > max_errors_) {
    std::string msg = "too many sample errors: " + std::to_string(metrics_.total) +
                      " > max_errors=" + std::to_string(max_errors_) + " (";
    bool first = true;
    for (const auto& [reason, n] : metrics_.by_reason) {
      msg += (first ? "" : ", ") + reason + ": " + std::to_string(n);
      first = false;
    }
    msg += "); last: " + error.ToString();
    return Status(error.status.code(), msg);
  }
  ++metrics_.skipped;
  return Status::OK();
}

}  // namespace feedline::detail
