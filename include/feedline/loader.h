// Loader: the engine. Turns a Pipeline into an ordered stream of ready
// batches using N worker threads, K recycled batch buffers and a byte budget.
//
//   auto loader = feedline::Loader::Create(pipeline, options);  // Result<unique_ptr<Loader>>
//   feedline::Batch batch;
//   bool end = false;
//   while (true) {
//     FEEDLINE_RETURN_IF_ERROR((*loader)->Next(&batch, &end));
//     if (end) break;
//     Train(batch);
//   }
//
// Output is deterministic: the batches of an epoch, bytes included, depend on
// (pipeline, seed, epoch, rank, world size, batch size, drop_last) only, not
// on the thread count, buffer count or timing (docs/engine.md says why).
//
// Epochs: the loader starts at options.start_epoch. Next() reports the end of
// an epoch once (end_of_epoch = true, no batch), then continues with the next
// epoch. SetEpoch() jumps to the start of any epoch.
//
// Errors: a sample error carries its sample id, op and location
// (SampleError). Under ErrorPolicy::kRaise, Next() returns it at the batch
// where it occurred, after all earlier batches, and the stream stops: every
// later call returns the same error. Under kSkip the sample is dropped from
// its batch (which is then shorter; Batch::skipped() names what is missing)
// and counted; a batch whose every sample was skipped is never delivered
// (counted in ErrorMetrics::empty_batches), so the loop never sees an empty
// batch. With world_size > 1 such a batch stops the stream with DataLoss
// instead: skipping it would give this rank fewer batches than the others,
// and the job would hang at its next collective. Error max_errors + 1 stops
// the stream with a summary.
// Errors are counted in delivery order, so which error trips the limit is
// deterministic too.
//
// Thread safety: Next, NextFor, SetEpoch and RestoreState must be called from
// one thread at a time (the consumer); a call while another thread is inside
// one of them returns FailedPrecondition naming the misuse (it never waits,
// and never hands out the same samples twice). After fork() the child's copy
// of a loader refuses every consumer call with FailedPrecondition, and
// destroying it there leaks it instead of joining threads that only exist
// in the parent. Cancel, Metrics, SaveState, epoch and
// num_batches are safe for concurrent use from any thread. Destroying the
// loader cancels it and joins its threads (promptly as long as ops return;
// a long op should poll Sample::cancelled()); batches still held stay valid.
#ifndef FEEDLINE_LOADER_H_
#define FEEDLINE_LOADER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "feedline/batch.h"
#include "feedline/buffer.h"
#include "feedline/export.h"
#include "feedline/metrics.h"
#include "feedline/sample.h"
#include "feedline/sampler.h"
#include "feedline/status.h"

namespace feedline {

inline constexpr uint32_t kMaxAutoRingDepth = 32;
inline constexpr double kDefaultRamFraction = 0.25;
// Decode scratch a worker may keep between samples (Sample::ChargeScratch);
// a sample needing more takes the loader's large-sample allowance, a quarter
// of max_bytes, one sample at a time, and gives it back when it ends.
inline constexpr uint64_t kRetainedScratchBytes = uint64_t{32} << 20;

// Cores this process may use, as the loader counts them for cpu_budget: the
// affinity mask (taskset, cpusets) capped by the tightest cgroup CPU quota
// of the process and its parents, rounded up, at least 1. The doctor and the
// CLI count cores with this too, so every part agrees.
FEEDLINE_EXPORT uint32_t AvailableCores();

enum class ErrorPolicy {
  kRaise,  // the first sample error stops the stream (default)
  kSkip,   // drop bad samples, count them; error max_errors + 1 stops the stream
};

struct FEEDLINE_EXPORT LoaderOptions {
  // Sampling (see sampler.h).
  uint64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  bool drop_last = false;
  uint64_t start_epoch = 0;

  // Parallelism. 0 = auto: the tuner runs between 1 and cpu_budget worker
  // threads, as many as keep the consumer fed (docs/tuner.md); it starts
  // with all of them, for the first batch. A positive count is used as is.
  uint32_t num_threads = 0;
  // Cores the tuner may use. 0: AvailableCores(), shared with the training
  // loop: the tuner measures the loop's CPU while it steps (outside Next)
  // and keeps that many cores for it then, lending them to workers while it
  // waits in Next (docs/tuner.md; TunerMetrics::effective_cpu_budget). A
  // positive budget is a hard cap on worker threads.
  uint32_t cpu_budget = 0;

  // Memory: the RAM budget. Batch buffers, the ops' reserved bytes
  // (read-ahead), the large-sample allowance (with ops that charge decode
  // scratch) and the workers' scratch stay within `max_bytes`; a budget
  // too small for one batch is an error naming the bytes needed. 0 = auto:
  // kDefaultRamFraction (a quarter) of the memory available to the process.
  // The ring holds at most `ring_depth` batch buffers (in production, ready,
  // or held by the consumer), fewer if the budget says so. ring_depth 0 =
  // auto: start at 3 and grow (never shrink; buffers may be pinned) when the
  // consumer waits on a ring too shallow for the jitter, or holds every
  // buffer; at most kMaxAutoRingDepth.
  uint32_t ring_depth = 0;
  uint32_t auto_ring_start = 3;  // with ring_depth 0: buffers to start with (at least 2)
  uint64_t max_bytes = 0;
  std::shared_ptr<BufferAllocator> allocator;  // null: NewHostAllocator()

  // How often the tuner measures and decides, when anything is auto.
  uint32_t tune_interval_ms = 40;

  // Errors.
  ErrorPolicy error_policy = ErrorPolicy::kRaise;
  uint64_t max_errors = 0;           // with kSkip: errors tolerated before failing
  uint32_t error_log_capacity = 64;  // SampleErrors kept in Metrics().errors.log

  // A single op running longer than this is reported by Next() as
  // DeadlineExceeded naming the op and sample, and the stream stops. 0: off.
  uint64_t stall_timeout_ms = 0;

  // Restore states saved at another world size when the global batch size
  // (batch_size * world_size) is unchanged (sampler.h).
  bool elastic = false;
};

class FEEDLINE_EXPORT Loader {
 public:
  // Validates everything and starts the worker threads. Errors:
  // InvalidArgument for bad options or a pipeline without samples or fields;
  // ResourceExhausted when max_bytes cannot hold one batch.
  static Result<std::unique_ptr<Loader>> Create(Pipeline pipeline, LoaderOptions options);

  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Blocks until the next batch is ready. On success sets either *batch (and
  // *end_of_epoch = false) or *end_of_epoch = true. Errors: the sample error
  // or error summary that stopped the stream (sticky); Cancelled after
  // Cancel(); DeadlineExceeded for a stalled op; ResourceExhausted (not
  // sticky) when the consumer holds every buffer the budget allows, so no
  // further batch can be produced until it releases one.
  Status Next(Batch* batch, bool* end_of_epoch);

  // As Next, but waits at most `timeout` for the batch. On expiry it returns
  // OK with neither a batch nor the end of the epoch and sets *timed_out;
  // nothing is consumed, so the next call picks up where this one stopped.
  // For callers that must stay responsive while waiting (the Python binding
  // checks for Ctrl-C between waits).
  Status NextFor(Batch* batch, bool* end_of_epoch, std::chrono::nanoseconds timeout,
                 bool* timed_out);

  // Restarts at the first batch of `epoch`, discarding batches in flight.
  // Errors: FailedPrecondition on misuse (below).
  Status SetEpoch(uint64_t epoch);

  // The position before the batch the next Next() would return (batches in
  // flight are not state: they are recomputed). See Sampler::SaveState.
  std::string SaveState() const;
  // Continues from a saved position, discarding batches in flight. Errors as
  // for Sampler::RestoreState; on error the position is unchanged.
  Status RestoreState(std::string_view state);

  // Stops the stream from any thread: every wait wakes, Next() returns
  // Cancelled. Idempotent.
  void Cancel();

  MetricsSnapshot Metrics() const;

  const Sampler& sampler() const;
  uint64_t num_batches() const;  // per epoch, on every rank
  uint64_t epoch() const;        // the epoch of the next batch
  // The next batch to deliver: what SaveState() would save. A framework
  // that counts its own steps checks its count against it on resume.
  SamplerPosition position() const;
  uint32_t num_threads() const;  // active worker threads now (the tuner may change it)

  class Impl;

 private:
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedline

#endif  // FEEDLINE_LOADER_H_
