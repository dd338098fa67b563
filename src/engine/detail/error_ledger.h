// ErrorLedger: the loader's error policy (loader.h, "Errors"). Counts sample
// errors in delivery order, keeps a bounded log, and decides for each error
// whether the sample is skipped or the stream stops; knows nothing of the
// ring or the threads.
//
// Thread safety: none; the loader calls it under its lock.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_ERROR_LEDGER_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_ERROR_LEDGER_H_

#include <cstdint>

#include "feedline/loader.h"
#include "feedline/metrics.h"
#include "feedline/status.h"

namespace feedline::detail {

class ErrorLedger {
 public:
  ErrorLedger(ErrorPolicy policy, uint64_t max_errors, uint32_t log_capacity)
      : policy_(policy), max_errors_(max_errors), log_capacity_(log_capacity) {}

  // Records a sample error. OK: the sample is skipped (counted); otherwise
  // the status that stops the stream: the error itself under kRaise, or a
  // summary by reason once max_errors is exceeded.
  Status Record(const SampleError& error);
  // A batch none of whose samples survived: not delivered, counted.
  void CountEmptyBatch() { ++metrics_.empty_batches; }

  const ErrorMetrics& metrics() const { return metrics_; }

 private:
  const ErrorPolicy policy_;
  const uint64_t max_errors_;
  const uint32_t log_capacity_;
  ErrorMetrics metrics_;
};

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_ERROR_LEDGER_H_
