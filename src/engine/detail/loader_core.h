// LoaderCore: the engine's claim/ring state machine (docs/engine.md). All
// state shared by the worker threads, the consumer, the tuner thread and the
// batches it delivered. Loader (loader.cc) is the public face; the parts live
// in their own files: the state machine (loader_core.cc), the metrics
// snapshot (loader_metrics.cc), the tuner driver (tuner_driver.cc); the error
// policy (ErrorLedger), the parallelism plan (PlanParallelism) and the decode
// scratch gate (ScratchGate) are classes of their own that know nothing of
// the ring.
//
// Thread safety: as annotated; members under "Constant after construction"
// are read without the lock.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_LOADER_CORE_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_LOADER_CORE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/batch.h"
#include "feedline/loader.h"
#include "feedline/metrics.h"
#include "feedline/sample.h"
#include "feedline/sampler.h"
#include "src/core/cpu.h"
#include "src/core/mutex.h"
#include "src/core/process.h"
#include "src/engine/detail/batch_data.h"
#include "src/engine/detail/error_ledger.h"
#include "src/engine/detail/parallelism.h"
#include "src/engine/detail/sample_runner.h"
#include "src/engine/detail/scratch_gate.h"
#include "src/engine/detail/tuner_policy.h"

namespace feedline::detail {

using core::CondVar;
using core::Mutex;
using core::MutexLock;

// How often Next() looks for stalled ops when stall_timeout_ms is set.
inline constexpr int64_t kStallPollNs = 50'000'000;
// Wake-ups in groups (LoaderCore::wake_group_): at most kWakeGroupMax
// batches per wake-up, for batches that come less than
// kGroupMaxIntervalNs apart; a complete front waits at most kGroupWaitNs.
inline constexpr uint32_t kWakeGroupMax = 8;
inline constexpr int64_t kGroupMaxIntervalNs = 1'000'000;
inline constexpr int64_t kGroupWaitNs = 2'000'000;
inline constexpr size_t kTunerLogLines = 32;

inline std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

// A batch being filled or waiting for the consumer.
struct Slot {
  uint64_t epoch = 0;
  uint64_t batch = 0;
  std::unique_ptr<Buffer> buffer;
  std::unique_ptr<BytesFields> bytes;                    // the kBytes fields, if any
  uint64_t remaining = 0;                                // samples not yet finished
  std::vector<std::pair<uint64_t, SampleError>> errors;  // (index in batch, error)
};

}  // namespace feedline::detail

namespace feedline {

using detail::CondVar;
using detail::Mutex;
using detail::MutexLock;
using detail::Parallelism;
using detail::Slot;

// Declared in feedline (batch.h names it as a batch's home).
class LoaderCore final : public detail::BufferHome,
                         public std::enable_shared_from_this<LoaderCore> {
 public:
  LoaderCore(Pipeline pipeline, LoaderOptions options, Sampler sampler, Parallelism par);

  void WorkerLoop(size_t worker);
  // The tuner's thread: measures a window, asks the policy, applies.
  void TunerLoop();
  // deadline_ns = 0: wait as long as it takes; else give up at that NowNs().
  Status Next(Batch* batch, bool* end_of_epoch, int64_t deadline_ns, bool* timed_out);
  void Reset(uint64_t epoch, uint64_t batch);
  std::string SaveState() const;
  void Cancel();
  void ReleaseAfterJoin();
  // Tells the ops which samples come next (BackgroundWork::OnPlan). Takes mu_ only
  // to read the plan; the ops run without it.
  void NotifyPlan() EXCLUDES(mu_);
  MetricsSnapshot Metrics() const;
  void Return(std::unique_ptr<Buffer> buffer) override;

  uint64_t epoch() const {
    MutexLock l(&mu_);
    return epoch_;
  }
  SamplerPosition position() const {
    MutexLock l(&mu_);
    return {epoch_, deliver_batch_};
  }
  uint32_t active_threads() const {
    MutexLock l(&mu_);
    return active_threads_;
  }

  // Constant after construction.
  const Pipeline pipeline_;
  const LoaderOptions options_;
  const Sampler sampler_;
  const std::shared_ptr<const detail::BatchLayout> layout_;
  const Parallelism par_;
  const uint32_t num_threads_;  // started
  const uint32_t max_ring_depth_;
  const int64_t start_ns_;
  const pid_t creator_pid_ = core::CurrentPid();
  std::vector<std::unique_ptr<detail::WorkerCounters>> counters_;
  std::atomic<bool> cancelled_{false};
  detail::ScratchGate scratch_gate_;
  // Set by ~Loader after the workers are joined: from then on returned
  // buffers are freed. Not on Cancel (or a stall): a caller may still have
  // them pinned and must unpin them before closing.
  std::atomic<bool> closed_{false};

 private:
  enum class Claim { kWork, kNoInput, kNoBuffer, kParked, kPlanNext, kExit };
  Claim CheckClaim(size_t worker) const REQUIRES(mu_);
  struct Totals;
  Totals ReadTotals() const EXCLUDES(mu_);
  detail::TunerConfig CurrentConfig() const EXCLUDES(mu_);
  // Applies `to` within the RAM budget; returns what was applied.
  detail::TunerConfig Apply(const detail::TunerConfig& from, detail::TunerConfig to,
                            std::vector<std::string> why) EXCLUDES(mu_);
  uint64_t ScratchBytes(uint64_t* per_thread_max) const;
  // The RAM budget's one rule for every increase: `ring` buffers (or those
  // allocated, if more), the reserved bytes, the scratch seen, and for each
  // of the first `threads` workers that never ran the largest scratch seen.
  uint64_t ChargedFor(uint32_t threads, uint32_t ring, uint32_t allocated) const;
  // Every op's read-ahead, summed (the tuner sizes it when there is one).
  ReadAheadMetrics ReadAheadSum() const;
  uint64_t ChargedBytes() const REQUIRES(mu_);
  void Log(std::string line) REQUIRES(mu_);
  Slot& SlotForClaim(const EpochPlan& plan, uint64_t batch) REQUIRES(mu_);
  // Lets claims move on to `plan`, the next epoch's, unless a Reset or an
  // end of epoch installed a plan since `generation`. True if it did.
  bool InstallNextPlan(std::shared_ptr<const EpochPlan> plan, uint64_t generation) REQUIRES(mu_);
  void InstallPlan() REQUIRES(mu_);
  void DrainAndClear(MutexLock* lock) REQUIRES(mu_);
  // Sets *empty (and delivers nothing) when every sample was skipped.
  Status DeliverSlot(Slot slot, Batch* batch, bool* empty) REQUIRES(mu_);
  Status CheckStalls() REQUIRES(mu_);
  bool ConsumerHoldsAllBuffers() const REQUIRES(mu_);
  // The batch the consumer waits for is complete, and so are the
  // `group` - 1 after it (or the epoch ends before them); docs/engine.md,
  // "Wake-ups in groups".
  bool FrontComplete(uint32_t group) const REQUIRES(mu_);
  Status ConsumerHoldsAllBuffersError() const REQUIRES(mu_);
  void Stop(Status status) REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar work_cv_;     // workers: something to claim, or exit
  CondVar ready_cv_;    // consumer: front batch complete, or stop
  CondVar drained_cv_;  // Reset: no sample in flight
  CondVar tuner_cv_;    // the tuner: stop

  // The stream position and plan.
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  uint64_t deliver_batch_ GUARDED_BY(mu_) = 0;             // next batch to hand to the consumer
  std::shared_ptr<const EpochPlan> plan_ GUARDED_BY(mu_);  // epoch_'s; null until installed
  // Claims run ahead of delivery and cross into the next epoch once every
  // sample of this one is claimed, so an epoch boundary is no bubble:
  // claim_plan_ is plan_ or the next epoch's plan.
  std::shared_ptr<const EpochPlan> claim_plan_ GUARDED_BY(mu_);
  uint64_t claim_key_ GUARDED_BY(mu_) = 0;
  uint64_t next_claim_ GUARDED_BY(mu_) = 0;  // next position in claim_plan_->ids to process
  bool planning_ GUARDED_BY(mu_) = false;    // a worker is computing the next epoch's plan
  uint64_t plan_generation_ GUARDED_BY(mu_) =
      0;             // bumped by InstallPlan: a stale next plan is dropped
  Mutex notify_mu_;  // OnPlan calls, one at a time, in order; taken before mu_, never while holding
                     // it
  bool draining_ GUARDED_BY(mu_) = false;
  uint64_t active_samples_ GUARDED_BY(mu_) = 0;  // claimed, not finished
  Status stopped_ GUARDED_BY(mu_);               // sticky stream error

  // The ring.
  std::deque<Slot> inflight_ GUARDED_BY(mu_);  // batches deliver_batch_, deliver_batch_+1, ...
  std::vector<std::unique_ptr<Buffer>> free_buffers_ GUARDED_BY(mu_);
  uint32_t buffers_allocated_ GUARDED_BY(mu_) = 0;
  uint32_t buffers_out_ GUARDED_BY(mu_) = 0;  // held by delivered batches

  // What the tuner controls (constant unless auto).
  uint32_t active_threads_ GUARDED_BY(mu_) = 1;  // workers with a higher index park
  uint32_t ring_depth_ GUARDED_BY(mu_) = 1;      // buffers the ring may allocate now
  // Workers with an index from step_threads_ up park while the consumer is
  // outside Next (it steps): the cores it uses are lent to them only while
  // it waits (docs/tuner.md, "The trainer's cores"). num_threads_ unless
  // par_.lend_trainer_cores.
  uint32_t step_threads_ GUARDED_BY(mu_) = 1;
  uint32_t reserved_cores_ GUARDED_BY(mu_) = 0;
  bool consumer_waiting_ GUARDED_BY(mu_) = false;  // inside Next, waiting for a batch
  // Wake-ups in groups (docs/engine.md): a consumer that keeps finding
  // the ring empty sleeps until wake_group_ batches are complete (2 to
  // kWakeGroupMax, as the ring has room), not one, so a starved loop pays
  // one sleep and one wake per group. A worker about to sleep wakes it for
  // the batch it has (no wait on a batch nobody produces). starved: its
  // last batch came after a wait; credit: the complete batches that wait
  // brought beyond the first, which the next calls take without one. Only
  // for batches that come faster than kGroupMaxIntervalNs (where a wake-up
  // is a visible share of a batch's cost). A complete front is held back
  // at most until the first sample that finishes kGroupWaitNs after it, or
  // until a worker would sleep. 0: the consumer waits for one batch.
  uint32_t wake_group_ GUARDED_BY(mu_) = 0;
  bool consumer_starved_ GUARDED_BY(mu_) = false;
  uint32_t group_credit_ GUARDED_BY(mu_) = 0;
  int64_t front_complete_ns_ GUARDED_BY(mu_) = 0;  // when the front completed, under a group wait
  int64_t last_delivery_ns_ GUARDED_BY(mu_) = 0;
  int64_t delivery_interval_ns_ GUARDED_BY(mu_) = INT64_MAX;  // smoothed, between deliveries
  std::deque<std::string> tuner_log_ GUARDED_BY(mu_);
  uint64_t tuner_windows_ GUARDED_BY(mu_) = 0;
  uint64_t tuner_changes_ GUARDED_BY(mu_) = 0;
  mutable uint64_t peak_charged_ GUARDED_BY(mu_) = 0;  // sampled at each snapshot and window

  // The CPU clocks the tuner reads (docs/tuner.md): each live worker's,
  // the CPU of those that exited, and the consumer thread's CPU inside Next.
  std::vector<core::ThreadCpuClock> worker_clocks_ GUARDED_BY(mu_);
  uint64_t exited_worker_cpu_ns_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> consumer_next_cpu_ns_{0};
  double trainer_cores_ GUARDED_BY(mu_) = 0;       // last window
  double trainer_step_cores_ GUARDED_BY(mu_) = 0;  // last window

  // Metrics.
  uint64_t batches_started_ GUARDED_BY(mu_) = 0;
  uint64_t batches_completed_ GUARDED_BY(mu_) = 0;
  uint64_t batches_delivered_ GUARDED_BY(mu_) = 0;
  uint64_t peak_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t next_calls_ GUARDED_BY(mu_) = 0;
  uint64_t consumer_wait_ns_ GUARDED_BY(mu_) = 0;
  detail::ErrorLedger errors_ GUARDED_BY(mu_);
};

}  // namespace feedline

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_LOADER_CORE_H_
