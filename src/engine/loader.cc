#include "feedline/loader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <thread>

#include <unistd.h>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/core/clock.h"
#include "src/core/cpu.h"
#include "src/core/detail/fingerprint.h"
#include "src/core/mutex.h"
#include "src/engine/detail/batch_data.h"
#include "src/engine/detail/error_ledger.h"
#include "src/engine/detail/sample_runner.h"
#include "src/engine/detail/scratch_gate.h"
#include "src/engine/detail/tuner_policy.h"

namespace feedline {
namespace {

using core::CondVar;
using core::Mutex;
using core::MutexLock;
using core::NowNs;

constexpr uint32_t kMaxThreads = 1024;
// How often Next() looks for stalled ops when stall_timeout_ms is set.
constexpr int64_t kStallPollNs = 50'000'000;

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

// A batch being filled or waiting for the consumer.
struct Slot {
  uint64_t epoch = 0;
  uint64_t batch = 0;
  std::unique_ptr<Buffer> buffer;
  uint64_t remaining = 0;  // samples not yet finished
  std::vector<std::pair<uint64_t, SampleError>> errors;  // (index in batch, error)
};

// How many threads and buffers, and which of them the tuner may change.
struct Parallelism {
  uint32_t max_threads = 1;      // started
  uint32_t initial_threads = 1;  // active at first
  uint32_t max_buffers = 1;      // what ring_depth and the budget allow
  uint32_t initial_ring = 1;
  uint32_t cpu_budget = 1;
  uint64_t reserved_bytes = 0;   // the ops' share of max_bytes, and the scratch allowance
  uint64_t scratch_allowance = 0;  // the large-sample allowance (ScratchGate)
  bool threads_auto = false;
  bool ring_auto = false;
  bool read_ahead = false;       // an op has a read-ahead to size
};

constexpr size_t kTunerLogLines = 32;

}  // namespace

// All state shared by the worker threads, the consumer and the batches it
// delivered. Owned by shared_ptr: a Batch keeps it alive so that releasing a
// buffer after the Loader is gone is safe.
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
  // Tells the ops which samples come next (SampleOp::OnPlan). Takes mu_ only
  // to read the plan; the ops run without it.
  void NotifyPlan() EXCLUDES(mu_);
  MetricsSnapshot Metrics() const;
  void Return(std::unique_ptr<Buffer> buffer) override;

  uint64_t epoch() const {
    MutexLock l(&mu_);
    return epoch_;
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
  const uint32_t max_buffers_;
  const int64_t start_ns_;
  const pid_t creator_pid_ = ::getpid();
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
  Status ConsumerHoldsAllBuffersError() const REQUIRES(mu_);
  void Stop(Status status) REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar work_cv_;     // workers: something to claim, or exit
  CondVar ready_cv_;    // consumer: front batch complete, or stop
  CondVar drained_cv_;  // Reset: no sample in flight
  CondVar tuner_cv_;    // the tuner: stop

  // The stream position and plan.
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  uint64_t deliver_batch_ GUARDED_BY(mu_) = 0;  // next batch to hand to the consumer
  std::shared_ptr<const EpochPlan> plan_ GUARDED_BY(mu_);  // epoch_'s; null until installed
  // Claims run ahead of delivery and cross into the next epoch once every
  // sample of this one is claimed, so an epoch boundary is no bubble:
  // claim_plan_ is plan_ or the next epoch's plan.
  std::shared_ptr<const EpochPlan> claim_plan_ GUARDED_BY(mu_);
  uint64_t claim_key_ GUARDED_BY(mu_) = 0;
  uint64_t next_claim_ GUARDED_BY(mu_) = 0;  // next position in claim_plan_->ids to process
  bool planning_ GUARDED_BY(mu_) = false;    // a worker is computing the next epoch's plan
  uint64_t plan_generation_ GUARDED_BY(mu_) = 0;  // bumped by InstallPlan: a stale next plan is dropped
  Mutex notify_mu_;  // OnPlan calls, one at a time, in order; taken before mu_, never while holding it
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
  uint32_t ring_limit_ GUARDED_BY(mu_) = 1;      // buffers the ring may allocate now
  std::deque<std::string> tuner_log_ GUARDED_BY(mu_);
  uint64_t tuner_windows_ GUARDED_BY(mu_) = 0;
  uint64_t tuner_changes_ GUARDED_BY(mu_) = 0;
  mutable uint64_t peak_charged_ GUARDED_BY(mu_) = 0;  // sampled at each snapshot and window

  // Metrics.
  uint64_t batches_started_ GUARDED_BY(mu_) = 0;
  uint64_t batches_completed_ GUARDED_BY(mu_) = 0;
  uint64_t batches_delivered_ GUARDED_BY(mu_) = 0;
  uint64_t peak_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t next_calls_ GUARDED_BY(mu_) = 0;
  uint64_t consumer_wait_ns_ GUARDED_BY(mu_) = 0;
  detail::ErrorLedger errors_ GUARDED_BY(mu_);
};

LoaderCore::LoaderCore(Pipeline pipeline, LoaderOptions options, Sampler sampler, Parallelism par)
    : pipeline_(std::move(pipeline)),
      options_(std::move(options)),
      sampler_(std::move(sampler)),
      layout_(std::make_shared<detail::BatchLayout>(
          detail::BatchLayout::Make(options_.batch_size, pipeline_.fields))),
      par_(par),
      num_threads_(par.max_threads),
      max_buffers_(par.max_buffers),
      start_ns_(NowNs()),
      scratch_gate_(kRetainedScratchBytes, par.scratch_allowance, options_.max_bytes),
      errors_(options_.error_policy, options_.max_errors, options_.error_log_capacity) {
  for (uint32_t i = 0; i < num_threads_; ++i) {
    counters_.push_back(std::make_unique<detail::WorkerCounters>(pipeline_.ops.size()));
  }
  MutexLock l(&mu_);
  active_threads_ = par_.initial_threads;
  ring_limit_ = par_.initial_ring;
  epoch_ = options_.start_epoch;
  InstallPlan();
}

void LoaderCore::NotifyPlan() {
  // Serialised, and each call reads the latest claim plan: whoever calls
  // last (a worker that moved claims on, the consumer after a Reset) tells
  // the ops the current order.
  MutexLock n(&notify_mu_);
  std::shared_ptr<const EpochPlan> plan;
  uint64_t first = 0;
  {
    MutexLock l(&mu_);
    plan = claim_plan_;
    first = next_claim_;
  }
  if (plan == nullptr) return;
  for (const auto& op : pipeline_.ops) op->OnPlan(plan, first);
}

void LoaderCore::InstallPlan() {
  if (plan_ == nullptr || plan_->epoch != epoch_) {
    // O(N) for a shuffled epoch; runs on the consumer thread while workers
    // have nothing to claim.
    plan_ = std::make_shared<const EpochPlan>(sampler_.Plan(epoch_));
  }
  claim_plan_ = plan_;
  claim_key_ = EpochKey(options_.seed, epoch_);
  next_claim_ = std::min<uint64_t>(deliver_batch_ * plan_->batch_size, plan_->ids.size());
  ++plan_generation_;
  work_cv_.SignalAll();
}

bool LoaderCore::InstallNextPlan(std::shared_ptr<const EpochPlan> plan, uint64_t generation) {
  planning_ = false;
  work_cv_.SignalAll();
  if (generation != plan_generation_ || claim_plan_ == nullptr || claim_plan_->epoch + 1 != plan->epoch ||
      next_claim_ < claim_plan_->ids.size()) {
    return false;
  }
  claim_plan_ = std::move(plan);
  claim_key_ = EpochKey(options_.seed, claim_plan_->epoch);
  next_claim_ = 0;
  return true;
}

LoaderCore::Claim LoaderCore::CheckClaim(size_t worker) const {
  if (cancelled_.load(std::memory_order_relaxed) || !stopped_.ok()) return Claim::kExit;
  if (worker >= active_threads_) return Claim::kParked;
  if (draining_ || claim_plan_ == nullptr) return Claim::kNoInput;
  if (next_claim_ >= claim_plan_->ids.size()) {
    // Every sample of the epoch being delivered is claimed: one epoch ahead
    // at most.
    return !planning_ && claim_plan_->epoch == epoch_ ? Claim::kPlanNext : Claim::kNoInput;
  }
  const uint64_t b = next_claim_ / claim_plan_->batch_size;
  if (!inflight_.empty() && inflight_.back().epoch == claim_plan_->epoch && inflight_.back().batch == b) {
    return Claim::kWork;
  }
  if (!free_buffers_.empty() || buffers_allocated_ < ring_limit_) return Claim::kWork;
  return Claim::kNoBuffer;
}

Slot& LoaderCore::SlotForClaim(const EpochPlan& plan, uint64_t b) {
  if (!inflight_.empty() && inflight_.back().epoch == plan.epoch && inflight_.back().batch == b) {
    return inflight_.back();
  }
  Slot slot;
  slot.epoch = plan.epoch;
  slot.batch = b;
  slot.remaining = plan.BatchEnd(b) - plan.BatchBegin(b);
  if (!free_buffers_.empty()) {
    slot.buffer = std::move(free_buffers_.back());
    free_buffers_.pop_back();
  } else {
    // At most max_buffers_ times in the loader's life. Held under the lock
    // so the buffer count stays exact; pinned allocators are slow but rare.
    Result<std::unique_ptr<Buffer>> buf = options_.allocator->Allocate(layout_->total_bytes);
    if (!buf.ok()) {
      Stop(buf.status().WithContext("allocating a " + Bytes(layout_->total_bytes) +
                                    " batch buffer with the '" +
                                    std::string(options_.allocator->name()) + "' allocator"));
      slot.remaining = 0;  // the caller sees stopped_ and gives the claim back
    } else {
      slot.buffer = std::move(buf).value();
      ++buffers_allocated_;
      peak_bytes_ = std::max<uint64_t>(peak_bytes_, uint64_t{buffers_allocated_} *
                                                        layout_->total_bytes);
    }
  }
  ++batches_started_;
  inflight_.push_back(std::move(slot));
  return inflight_.back();
}

void LoaderCore::WorkerLoop(size_t worker) {
  detail::WorkerCounters* counters = counters_[worker].get();
  detail::SampleRunner runner(&pipeline_, &cancelled_, counters, &scratch_gate_);
  std::vector<void*> outputs(pipeline_.fields.size());

  MutexLock l(&mu_);
  while (true) {
    Claim claim = CheckClaim(worker);
    while (claim == Claim::kNoInput || claim == Claim::kNoBuffer || claim == Claim::kParked) {
      const int64_t t0 = NowNs();
      work_cv_.Wait(&l);
      std::atomic<uint64_t>& idle = claim == Claim::kNoBuffer ? counters->blocked_output_ns
                                    : claim == Claim::kParked ? counters->parked_ns
                                                              : counters->wait_input_ns;
      detail::Bump(idle, static_cast<uint64_t>(NowNs() - t0));
      claim = CheckClaim(worker);
    }
    if (claim == Claim::kExit) break;
    if (claim == Claim::kPlanNext) {
      // O(N) for a shuffled epoch: computed without the lock.
      planning_ = true;
      const uint64_t next_epoch = claim_plan_->epoch + 1, generation = plan_generation_;
      l.Unlock();
      auto next = std::make_shared<const EpochPlan>(sampler_.Plan(next_epoch));
      l.Lock();
      if (InstallNextPlan(std::move(next), generation)) {
        l.Unlock();
        NotifyPlan();  // read-ahead follows the claims into the new epoch
        l.Lock();
      }
      continue;
    }

    const std::shared_ptr<const EpochPlan> plan = claim_plan_;
    const uint64_t pos = next_claim_++;
    const uint64_t b = pos / plan->batch_size;
    Slot& slot = SlotForClaim(*plan, b);
    if (!stopped_.ok()) break;  // the buffer allocation failed
    const uint64_t index = pos - plan->BatchBegin(b);
    char* base = static_cast<char*>(slot.buffer ? slot.buffer->data() : nullptr);
    for (size_t f = 0; f < outputs.size(); ++f) {
      outputs[f] = base + layout_->offsets[f] + index * layout_->sample_bytes[f];
    }
    const uint64_t id = plan->ids[pos];
    const bool padding = pos >= plan->first_padding;
    const uint64_t epoch = plan->epoch, key = claim_key_;
    ++active_samples_;

    // Run the chain without our lock: this is where the time goes.
    l.Unlock();
    detail::SampleRunner::Outcome out = runner.Run(epoch, key, id, padding, outputs);
    l.Lock();

    // The slot is still in inflight_: Reset waits for active samples, and the
    // consumer pops a slot only once its samples are all done.
    Slot* s = nullptr;
    for (Slot& candidate : inflight_) {
      if (candidate.epoch == epoch && candidate.batch == b) {
        s = &candidate;
        break;
      }
    }
    FEEDLINE_CHECK(s != nullptr);
    if (!out.status.ok()) {
      SampleError e;
      e.epoch = epoch;
      e.batch = b;
      e.sample_id = id;
      e.op = std::string(pipeline_.ops[out.failed_op]->name());
      e.location = runner.sample().location();
      e.status = std::move(out.status);
      s->errors.emplace_back(index, std::move(e));
    }
    if (--s->remaining == 0) {
      ++batches_completed_;
      if (epoch == epoch_ && b == deliver_batch_) ready_cv_.Signal();
    }
    if (--active_samples_ == 0 && draining_) drained_cv_.SignalAll();
  }
}

bool LoaderCore::ConsumerHoldsAllBuffers() const {
  return inflight_.empty() && free_buffers_.empty() && buffers_allocated_ == ring_limit_ &&
         buffers_out_ == ring_limit_;
}

Status LoaderCore::ConsumerHoldsAllBuffersError() const {
  return ResourceExhaustedError(
      "the consumer holds all " + std::to_string(ring_limit_) + " batch buffers (" +
      std::to_string(ring_limit_) + " x " + Bytes(layout_->total_bytes) +
      ", within max_bytes=" + std::to_string(options_.max_bytes) + ", ring_depth=" +
      (par_.ring_auto ? "auto" : std::to_string(options_.ring_depth)) +
      "), so no further batch can be produced; release batches or raise the budget");
}

Status LoaderCore::CheckStalls() {
  const int64_t now = NowNs();
  const int64_t limit_ns = static_cast<int64_t>(options_.stall_timeout_ms) * 1'000'000;
  for (const auto& c : counters_) {
    const int64_t started = c->op_start_ns.load(std::memory_order_relaxed);
    if (started == 0 || now - started <= limit_ns) continue;
    const uint32_t op = c->current_op.load(std::memory_order_relaxed);
    const std::string op_name(op < pipeline_.ops.size() ? pipeline_.ops[op]->name() : "?");
    return DeadlineExceededError(
        "op '" + op_name + "' has been running on sample " +
        std::to_string(c->current_sample.load(std::memory_order_relaxed)) + " (epoch " +
        std::to_string(epoch_) + ") for " + std::to_string((now - started) / 1'000'000) +
        " ms, over stall_timeout_ms=" + std::to_string(options_.stall_timeout_ms));
  }
  return Status::OK();
}

void LoaderCore::Stop(Status status) {
  if (stopped_.ok()) stopped_ = std::move(status);
  work_cv_.SignalAll();
  ready_cv_.SignalAll();
}

Status LoaderCore::Next(Batch* batch, bool* end_of_epoch, int64_t deadline_ns, bool* timed_out) {
  *batch = Batch();
  *end_of_epoch = false;
  if (timed_out != nullptr) *timed_out = false;
  MutexLock l(&mu_);
  ++next_calls_;
  // A batch whose every sample was skipped is never delivered: the loop
  // goes on to the next one (docs/reliability.md 38).
  while (true) {
    // A stream error (which may itself have cancelled the workers) wins over
    // the plain Cancelled.
    if (!stopped_.ok()) return stopped_;
    if (cancelled_.load(std::memory_order_relaxed)) return CancelledError("loader was cancelled");
    if (deliver_batch_ >= plan_->num_batches) {
      // End of epoch: say so once, then let the workers start the next one.
      *end_of_epoch = true;
      ++epoch_;
      deliver_batch_ = 0;
      if (claim_plan_ != nullptr && claim_plan_->epoch == epoch_) {
        plan_ = claim_plan_;  // the workers are already on it
        return Status::OK();
      }
      InstallPlan();
      l.Unlock();
      NotifyPlan();
      return Status::OK();
    }

    const int64_t t0 = NowNs();
    while (true) {
      if (!stopped_.ok()) break;
      if (cancelled_.load(std::memory_order_relaxed)) {
        consumer_wait_ns_ += NowNs() - t0;
        return CancelledError("loader was cancelled");
      }
      if (!inflight_.empty() && inflight_.front().remaining == 0) break;
      if (ConsumerHoldsAllBuffers()) {
        if (par_.ring_auto && ring_limit_ < max_buffers_ &&
            ChargedBytes() + layout_->total_bytes <= options_.max_bytes) {
          // An auto ring grows for a consumer that keeps batches, within the budget.
          ++ring_limit_;
          Log("ring " + std::to_string(ring_limit_ - 1) + " -> " + std::to_string(ring_limit_) +
              ": the consumer holds every buffer");
          work_cv_.SignalAll();
          continue;
        }
        consumer_wait_ns_ += NowNs() - t0;
        return ConsumerHoldsAllBuffersError();
      }
      int64_t wait_ns = -1;  // forever
      if (options_.stall_timeout_ms != 0) {
        wait_ns = std::min<int64_t>(kStallPollNs, static_cast<int64_t>(options_.stall_timeout_ms) * 1'000'000);
      }
      if (deadline_ns != 0) {
        const int64_t left = deadline_ns - NowNs();
        if (left <= 0) {
          consumer_wait_ns_ += NowNs() - t0;
          *timed_out = true;
          return Status::OK();
        }
        wait_ns = wait_ns < 0 ? left : std::min(wait_ns, left);
      }
      if (wait_ns < 0) {
        ready_cv_.Wait(&l);
      } else {
        ready_cv_.WaitFor(&l, std::chrono::nanoseconds(wait_ns));
      }
      if (options_.stall_timeout_ms != 0) {
        Status stall = CheckStalls();
        if (!stall.ok()) {
          Stop(std::move(stall));
          cancelled_.store(true);  // ask the stalled op to give up, if it polls
        }
      }
    }
    consumer_wait_ns_ += NowNs() - t0;
    if (!stopped_.ok()) return stopped_;

    Slot slot = std::move(inflight_.front());
    inflight_.pop_front();
    FEEDLINE_CHECK(slot.epoch == epoch_ && slot.batch == deliver_batch_);
    ++deliver_batch_;
    bool empty = false;
    Status st = DeliverSlot(std::move(slot), batch, &empty);
    if (!st.ok() || !empty) return st;
  }
}

Status LoaderCore::DeliverSlot(Slot slot, Batch* batch, bool* empty) {
  const uint64_t begin = plan_->BatchBegin(slot.batch), end = plan_->BatchEnd(slot.batch);
  const uint64_t count = end - begin;
  std::vector<bool> dropped(count, false);

  // Apply the error policy in sample order, so the outcome does not depend on
  // which worker finished first.
  std::sort(slot.errors.begin(), slot.errors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto data = std::make_shared<detail::BatchData>();
  for (auto& [index, error] : slot.errors) {
    Status stop = errors_.Record(error);
    if (!stop.ok()) Stop(std::move(stop));
    if (!stopped_.ok()) {
      if (slot.buffer) free_buffers_.push_back(std::move(slot.buffer));
      work_cv_.SignalAll();
      return stopped_;
    }
    dropped[index] = true;
    data->skipped.push_back(std::move(error));
  }

  // Compact the survivors to the front of each field (only when skipping).
  char* base = static_cast<char*>(slot.buffer ? slot.buffer->data() : nullptr);
  uint64_t kept = 0;
  data->ids.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (dropped[i]) continue;
    if (kept != i) {
      for (size_t f = 0; f < layout_->fields.size(); ++f) {
        const size_t sb = layout_->sample_bytes[f];
        char* field = base + layout_->offsets[f];
        std::memmove(field + kept * sb, field + i * sb, sb);
      }
    }
    data->ids.push_back(plan_->ids[begin + i]);
    if (begin + i >= plan_->first_padding) ++data->num_padding;
    ++kept;
  }
  if (kept == 0 && count > 0) {
    errors_.CountEmptyBatch();
    if (slot.buffer) free_buffers_.push_back(std::move(slot.buffer));
    work_cv_.SignalAll();
    *empty = true;
    return Status::OK();
  }

  data->home = shared_from_this();
  data->buffer = std::move(slot.buffer);
  data->layout = layout_;
  data->epoch = epoch_;
  data->index = slot.batch;
  if (data->buffer) ++buffers_out_;
  ++batches_delivered_;
  *batch = Batch(std::move(data));
  return Status::OK();
}

void LoaderCore::Return(std::unique_ptr<Buffer> buffer) {
  if (::getpid() != creator_pid_) {
    // A batch released in a forked child: the ring's lock may have been
    // held by a parent thread at the fork. The child's copy is never
    // produced into again; let the memory go with the process.
    (void)buffer.release();
    return;
  }
  MutexLock l(&mu_);
  --buffers_out_;
  if (closed_.load(std::memory_order_relaxed)) {
    // Nobody will produce again: give the memory back now.
    --buffers_allocated_;
    l.Unlock();
    buffer.reset();
    return;
  }
  free_buffers_.push_back(std::move(buffer));
  work_cv_.SignalAll();
}

void LoaderCore::DrainAndClear(MutexLock* lock) {
  draining_ = true;
  while (active_samples_ > 0) drained_cv_.Wait(lock);
  draining_ = false;
  for (Slot& s : inflight_) {
    if (s.buffer) free_buffers_.push_back(std::move(s.buffer));
  }
  inflight_.clear();
}

void LoaderCore::Reset(uint64_t epoch, uint64_t batch) {
  {
    MutexLock l(&mu_);
    // Already there (set_epoch(e) at the start of epoch e, the usual
    // DistributedSampler idiom): keep the batches in flight, the same bytes
    // either way.
    if (epoch == epoch_ && batch == deliver_batch_ && plan_ != nullptr && plan_->epoch == epoch) return;
    DrainAndClear(&l);
    epoch_ = epoch;
    deliver_batch_ = batch;
    InstallPlan();
  }
  NotifyPlan();
}

std::string LoaderCore::SaveState() const {
  MutexLock l(&mu_);
  return sampler_.SaveState({epoch_, deliver_batch_});
}

void LoaderCore::Cancel() {
  MutexLock l(&mu_);
  cancelled_.store(true);
  scratch_gate_.Cancel();
  work_cv_.SignalAll();
  ready_cv_.SignalAll();
  drained_cv_.SignalAll();
  tuner_cv_.SignalAll();
}

void LoaderCore::ReleaseAfterJoin() {
  // The threads are gone; drop what only production needed. Delivered
  // batches keep their own buffers (and this object) alive.
  MutexLock l(&mu_);
  free_buffers_.clear();
  inflight_.clear();
  plan_.reset();
  claim_plan_.reset();
  buffers_allocated_ = buffers_out_;
}

MetricsSnapshot LoaderCore::Metrics() const {
  MetricsSnapshot m;
  m.uptime_ns = static_cast<uint64_t>(NowNs() - start_ns_);
  m.ops.resize(pipeline_.ops.size());
  for (size_t i = 0; i < pipeline_.ops.size(); ++i) m.ops[i].name = pipeline_.ops[i]->name();
  for (const auto& c : counters_) {
    WorkerMetrics w;
    w.samples = c->samples.load(std::memory_order_relaxed);
    w.busy_ns = c->busy_ns.load(std::memory_order_relaxed);
    w.wait_input_ns = c->wait_input_ns.load(std::memory_order_relaxed);
    w.blocked_output_ns = c->blocked_output_ns.load(std::memory_order_relaxed);
    w.parked_ns = c->parked_ns.load(std::memory_order_relaxed);
    w.scratch_bytes = c->scratch_bytes.load(std::memory_order_relaxed);
    m.workers.push_back(w);
    for (size_t i = 0; i < c->ops.size(); ++i) {
      m.ops[i].items += c->ops[i].items.load(std::memory_order_relaxed);
      m.ops[i].errors += c->ops[i].errors.load(std::memory_order_relaxed);
      m.ops[i].busy_ns += c->ops[i].busy_ns.load(std::memory_order_relaxed);
    }
  }
  TunerMetrics& t = m.tuner;
  const ReadAheadMetrics ra = ReadAheadSum();
  t.read_ahead_in_flight = ra.in_flight_limit;
  t.read_ahead_bytes = ra.bytes_limit;
  uint64_t per_thread = 0;
  t.scratch_bytes = ScratchBytes(&per_thread);
  MutexLock l(&mu_);
  m.num_threads = active_threads_;
  t.threads_auto = par_.threads_auto;
  t.ring_auto = par_.ring_auto;
  t.read_ahead_auto = par_.read_ahead;
  t.cpu_budget = par_.cpu_budget;
  t.ram_budget = options_.max_bytes;
  t.threads = active_threads_;
  t.max_threads = num_threads_;
  t.ring_depth = ring_limit_;
  t.max_ring_depth = max_buffers_;
  t.reserved_bytes = par_.reserved_bytes - par_.scratch_allowance;
  t.scratch_allowance_bytes = par_.scratch_allowance;
  t.scratch_waits = scratch_gate_.waits();
  t.charged_bytes = ChargedBytes();
  peak_charged_ = std::max(peak_charged_, t.charged_bytes);
  t.peak_charged_bytes = peak_charged_;
  t.windows = tuner_windows_;
  t.changes = tuner_changes_;
  t.log.assign(tuner_log_.begin(), tuner_log_.end());
  RingMetrics& r = m.ring;
  r.batches_started = batches_started_;
  r.batches_completed = batches_completed_;
  r.batches_delivered = batches_delivered_;
  for (const Slot& s : inflight_) (s.remaining == 0 ? r.depth_ready : r.depth_filling) += 1;
  r.buffers_allocated = buffers_allocated_;
  r.buffers_max = max_buffers_;
  r.buffers_held_by_consumer = buffers_out_;
  r.batch_bytes = layout_->total_bytes;
  r.bytes_held = uint64_t{buffers_allocated_} * layout_->total_bytes;
  r.peak_bytes_held = peak_bytes_;
  r.max_bytes = options_.max_bytes;
  m.consumer.next_calls = next_calls_;
  m.consumer.batches = batches_delivered_;
  m.consumer.wait_ns = consumer_wait_ns_;
  m.errors = errors_.metrics();
  return m;
}

// --- The tuner (docs/tuner.md) ---------------------------------------------

// Monotonic counters; a window is the difference of two readings.
struct LoaderCore::Totals {
  int64_t now_ns = 0;
  uint64_t consumer_wait_ns = 0;
  uint64_t batches = 0;
  uint64_t samples = 0;
  uint64_t busy_ns = 0;
  uint64_t blocked_ns = 0;
  uint64_t fetches = 0;
  uint64_t fetch_ns = 0;
  uint64_t fetched_bytes = 0;
};

LoaderCore::Totals LoaderCore::ReadTotals() const {
  Totals t;
  for (const auto& c : counters_) {
    t.samples += c->samples.load(std::memory_order_relaxed);
    t.busy_ns += c->busy_ns.load(std::memory_order_relaxed);
    t.blocked_ns += c->blocked_output_ns.load(std::memory_order_relaxed);
  }
  const ReadAheadMetrics ra = ReadAheadSum();
  t.fetches = ra.fetches;
  t.fetch_ns = ra.fetch_ns;
  t.fetched_bytes = ra.fetched_bytes;
  MutexLock l(&mu_);
  t.now_ns = NowNs();
  t.consumer_wait_ns = consumer_wait_ns_;
  t.batches = batches_delivered_;
  return t;
}

detail::TunerConfig LoaderCore::CurrentConfig() const {
  detail::TunerConfig c;
  const ReadAheadMetrics ra = ReadAheadSum();
  c.read_ahead_in_flight = ra.in_flight_limit;
  c.read_ahead_bytes = ra.bytes_limit;
  MutexLock l(&mu_);
  c.threads = active_threads_;
  c.ring_depth = ring_limit_;
  return c;
}

ReadAheadMetrics LoaderCore::ReadAheadSum() const {
  ReadAheadMetrics sum, ra;
  for (const auto& op : pipeline_.ops) {
    if (!op->GetReadAhead(&ra)) continue;
    sum.in_flight_limit += ra.in_flight_limit;
    sum.max_in_flight += ra.max_in_flight;
    sum.bytes_limit += ra.bytes_limit;
    sum.max_bytes += ra.max_bytes;
    sum.fetches += ra.fetches;
    sum.fetch_ns += ra.fetch_ns;
    sum.fetched_bytes += ra.fetched_bytes;
    sum.peak_bytes += ra.peak_bytes;
  }
  return sum;
}

uint64_t LoaderCore::ScratchBytes(uint64_t* per_thread_max) const {
  uint64_t sum = 0, most = 0;
  for (const auto& c : counters_) {
    const uint64_t b = c->scratch_bytes.load(std::memory_order_relaxed);
    sum += b;
    most = std::max(most, b);
  }
  if (per_thread_max != nullptr) *per_thread_max = most;
  return sum;
}

uint64_t LoaderCore::ChargedBytes() const {
  return uint64_t{buffers_allocated_} * layout_->total_bytes + par_.reserved_bytes + ScratchBytes(nullptr);
}

void LoaderCore::Log(std::string line) {
  char t[32];
  std::snprintf(t, sizeof(t), "t=%.2fs ", static_cast<double>(NowNs() - start_ns_) / 1e9);
  tuner_log_.push_back(t + std::move(line));
  if (tuner_log_.size() > kTunerLogLines) tuner_log_.pop_front();
  ++tuner_changes_;
}

detail::TunerConfig LoaderCore::Apply(const detail::TunerConfig& from, detail::TunerConfig to,
                                      std::vector<std::string> why) {
  // The RAM budget, one rule for every increase: what is charged now, plus
  // the new buffers, plus the scratch of workers that never ran (charged
  // like the largest seen; a parked worker's scratch is already counted).
  uint64_t per_thread = 0;
  const uint64_t scratch_now = ScratchBytes(&per_thread);
  const uint64_t batch = layout_->total_bytes;
  uint32_t allocated = 0;
  {
    MutexLock l(&mu_);
    allocated = buffers_allocated_;
  }
  auto charged = [&](uint32_t threads, uint32_t ring) {
    uint64_t c = uint64_t{std::max(ring, allocated)} * batch + par_.reserved_bytes + scratch_now;
    for (uint32_t w = 0; w < threads && w < num_threads_; ++w) {
      if (counters_[w]->scratch_bytes.load(std::memory_order_relaxed) == 0) c += per_thread;
    }
    return c;
  };
  std::string trimmed;
  while (to.ring_depth > from.ring_depth && charged(to.threads, to.ring_depth) > options_.max_bytes) {
    --to.ring_depth;
    trimmed = "ring";
  }
  while (to.threads > from.threads && charged(to.threads, to.ring_depth) > options_.max_bytes) {
    --to.threads;
    trimmed = "threads";
  }
  if (!trimmed.empty()) {
    // Say what happened, not what was proposed.
    std::erase_if(why, [&](const std::string& line) { return line.rfind(trimmed + " ", 0) == 0; });
    why.push_back(trimmed + " held at " +
                  std::to_string(trimmed == "ring" ? to.ring_depth : to.threads) +
                  ": the RAM budget (" + std::to_string(options_.max_bytes) + " bytes) is reached");
  }
  if (to.read_ahead_in_flight != from.read_ahead_in_flight ||
      to.read_ahead_bytes != from.read_ahead_bytes) {
    for (const auto& op : pipeline_.ops) op->SetReadAhead(to.read_ahead_in_flight, to.read_ahead_bytes);
  }
  MutexLock l(&mu_);
  ++tuner_windows_;
  peak_charged_ = std::max(peak_charged_, ChargedBytes());
  for (std::string& line : why) Log(std::move(line));
  if (par_.threads_auto) active_threads_ = std::clamp<uint32_t>(to.threads, 1, num_threads_);
  if (par_.ring_auto) ring_limit_ = std::clamp(to.ring_depth, ring_limit_, max_buffers_);
  work_cv_.SignalAll();
  to.threads = active_threads_;
  to.ring_depth = ring_limit_;
  return to;
}

void LoaderCore::TunerLoop() {
  detail::TunerLimits lim;
  lim.tune_threads = par_.threads_auto;
  lim.tune_ring = par_.ring_auto;
  lim.max_threads = num_threads_;
  lim.max_ring = max_buffers_;
  lim.batch_size = options_.batch_size;
  if (par_.read_ahead) {  // exactly one: the sum is that one
    const ReadAheadMetrics ra = ReadAheadSum();
    lim.tune_read_ahead = true;
    lim.max_in_flight = ra.max_in_flight;
    lim.max_read_ahead_bytes = ra.max_bytes;
  }
  detail::TunerPolicy policy(lim);
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(1, options_.tune_interval_ms));
  // A window closes after this many batches, or after kMaxWindowNs.
  constexpr uint64_t kMinBatches = 2;
  constexpr int64_t kMaxWindowNs = 500'000'000;
  Totals prev = ReadTotals();
  while (true) {
    {
      MutexLock l(&mu_);
      if (cancelled_.load(std::memory_order_relaxed)) return;
      tuner_cv_.WaitFor(&l, interval);
      if (cancelled_.load(std::memory_order_relaxed)) return;
    }
    const Totals now = ReadTotals();
    if (now.batches - prev.batches < kMinBatches && now.now_ns - prev.now_ns < kMaxWindowNs) continue;
    detail::TunerWindow w;
    w.wall_s = static_cast<double>(now.now_ns - prev.now_ns) / 1e9;
    w.consumer_wait_s = static_cast<double>(now.consumer_wait_ns - prev.consumer_wait_ns) / 1e9;
    w.batches = now.batches - prev.batches;
    w.samples = now.samples - prev.samples;
    w.busy_s = static_cast<double>(now.busy_ns - prev.busy_ns) / 1e9;
    w.blocked_output_s = static_cast<double>(now.blocked_ns - prev.blocked_ns) / 1e9;
    w.fetches = now.fetches - prev.fetches;
    w.fetch_s = static_cast<double>(now.fetch_ns - prev.fetch_ns) / 1e9;
    w.fetched_bytes = now.fetched_bytes - prev.fetched_bytes;
    prev = now;
    const detail::TunerConfig current = CurrentConfig();
    std::vector<std::string> why;
    const detail::TunerConfig next = policy.Step(w, current, &why);
    policy.Applied(Apply(current, next, std::move(why)));
  }
}

// ---------------------------------------------------------------------------

class Loader::Impl {
 public:
  // Rejects a second consumer call while one runs, and any call from a
  // forked child (docs/reliability.md 37). Not a lock: the misuse is an error,
  // never a wait.
  class ConsumerScope {
   public:
    ConsumerScope(Impl* impl, const char* what) : impl_(impl) {
      if (::getpid() != impl->core->creator_pid_) {
        status_ = FailedPreconditionError(
            std::string("Loader::") + what + " in a forked child: this loader belongs to process " +
            std::to_string(impl->core->creator_pid_) +
            " and its worker threads do not exist here; create a new loader in the child");
        return;
      }
      if (impl->consumer_busy.exchange(true, std::memory_order_acquire)) {
        status_ = FailedPreconditionError(
            std::string("Loader::") + what +
            " while another thread is inside Next/SetEpoch/RestoreState of the same loader: a loader "
            "has one consumer; iterate it from one thread, or give each thread its own loader");
        return;
      }
      owns_ = true;
    }
    ~ConsumerScope() {
      if (owns_) impl_->consumer_busy.store(false, std::memory_order_release);
    }
    const Status& status() const { return status_; }

   private:
    Impl* impl_;
    Status status_;
    bool owns_ = false;
  };

  std::shared_ptr<LoaderCore> core;
  std::vector<std::thread> threads;
  std::thread tuner;
  std::atomic<bool> consumer_busy{false};
};

Result<std::unique_ptr<Loader>> Loader::Create(Pipeline pipeline, LoaderOptions options) {
  if (pipeline.ops.empty()) return InvalidArgumentError("pipeline has no ops");
  for (const auto& op : pipeline.ops) {
    if (op == nullptr) return InvalidArgumentError("pipeline has a null op");
  }
  if (pipeline.fields.empty()) return InvalidArgumentError("pipeline has no output fields");
  for (const FieldSpec& f : pipeline.fields) {
    if (f.SampleBytes() == 0) {
      return InvalidArgumentError("field '" + f.name + "' has a non-positive dimension");
    }
  }
  SamplerOptions so;
  so.num_samples = pipeline.num_samples;
  so.batch_size = options.batch_size;
  so.shuffle = options.shuffle;
  so.seed = options.seed;
  so.rank = options.rank;
  so.world_size = options.world_size;
  so.drop_last = options.drop_last;
  {
    core::detail::Fingerprint data, config;
    bool any_data = false, any_config = false;
    for (const auto& op : pipeline.ops) {
      if (const uint64_t d = op->DataFingerprint(); d != 0) {
        data.Add(d);
        any_data = true;
      }
      if (const uint64_t c = op->ConfigFingerprint(); c != 0) {
        config.Add(c);
        any_config = true;
      }
    }
    so.data_fingerprint = any_data ? data.value() : 0;
    so.config_fingerprint = any_config ? config.value() : 0;
  }
  FEEDLINE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(so));

  Parallelism par;
  par.cpu_budget = options.cpu_budget != 0 ? options.cpu_budget : core::DefaultCpuBudget();
  par.threads_auto = options.num_threads == 0;
  const uint32_t threads = par.threads_auto ? par.cpu_budget : options.num_threads;
  if (threads > kMaxThreads) {
    return InvalidArgumentError("num_threads " + std::to_string(threads) + " exceeds " +
                                std::to_string(kMaxThreads));
  }
  par.max_threads = par.initial_threads = threads;  // all of them for the first batch
  par.ring_auto = options.ring_depth == 0;
  if (options.max_bytes == 0) options.max_bytes = core::DefaultRamBudget();
  const detail::BatchLayout layout = detail::BatchLayout::Make(options.batch_size, pipeline.fields);
  // Ops' own buffers (read-ahead) come out of the budget first.
  uint64_t reserved = 0;
  for (const auto& op : pipeline.ops) reserved += op->ReservedBytes();
  if (reserved >= options.max_bytes) {
    return ResourceExhaustedError("max_bytes=" + std::to_string(options.max_bytes) + " is all taken by the ops' " +
                                  std::to_string(reserved) + " reserved bytes (read-ahead); no room for a batch");
  }
  const uint64_t batch_budget = options.max_bytes - reserved;
  if (layout.total_bytes > batch_budget) {
    std::string detail;
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      detail += (i ? ", " : "") + layout.fields[i].name + " " +
                std::string(DTypeName(layout.fields[i].dtype)) + " " +
                std::to_string(layout.sample_bytes[i]) + " bytes/sample";
    }
    return ResourceExhaustedError("max_bytes=" + std::to_string(options.max_bytes) +
                                  (reserved ? " (" + std::to_string(reserved) + " reserved for read-ahead)" : "") +
                                  " cannot hold one batch: " + std::to_string(options.batch_size) +
                                  " samples need " + Bytes(layout.total_bytes) + " (" + detail +
                                  ")");
  }
  // The large-sample allowance for ops that charge decode scratch
  // (detail::ScratchGate): a quarter of the budget, less where that would
  // leave the ring less than its minimum.
  for (const auto& op : pipeline.ops) {
    if (!op->ChargesScratch()) continue;
    const uint64_t min_ring = (par.ring_auto ? 2 : 1) * layout.total_bytes;
    par.scratch_allowance = std::min(options.max_bytes / 4, batch_budget - std::min(batch_budget, min_ring));
    break;
  }
  const uint64_t ring_budget = batch_budget - par.scratch_allowance;
  par.max_buffers = static_cast<uint32_t>(std::min<uint64_t>(
      par.ring_auto ? kMaxAutoRingDepth : options.ring_depth, ring_budget / layout.total_bytes));
  if (par.ring_auto && par.max_buffers < 2) {
    // A loop holds one batch while it asks for the next: an auto ring
    // needs room for two.
    return ResourceExhaustedError("max_bytes=" + std::to_string(options.max_bytes) +
                                  " holds one batch of " + Bytes(layout.total_bytes) +
                                  (reserved ? " (after " + std::to_string(reserved) + " reserved for read-ahead)" : "") +
                                  "; an auto ring needs two (" + std::to_string(2 * layout.total_bytes + reserved) +
                                  " bytes): raise the budget, or set ring_depth = 1 and release each batch "
                                  "before asking for the next");
  }
  // By default three: one batch held by the consumer, one ready, one filling.
  par.initial_ring = par.ring_auto ? std::clamp<uint32_t>(options.auto_ring_start, 2, par.max_buffers)
                                   : par.max_buffers;
  par.reserved_bytes = reserved + par.scratch_allowance;
  ReadAheadMetrics ra;
  // The tuner sizes one read-ahead; a pipeline with several keeps their
  // configured limits (one window's rate and latency cannot be split
  // between them).
  int read_aheads = 0;
  for (const auto& op : pipeline.ops) read_aheads += op->GetReadAhead(&ra) ? 1 : 0;
  par.read_ahead = read_aheads == 1;
  if (options.allocator == nullptr) options.allocator = NewHostAllocator();

  auto impl = std::make_unique<Impl>();
  impl->core = std::make_shared<LoaderCore>(std::move(pipeline), std::move(options),
                                            std::move(sampler), par);
  impl->core->NotifyPlan();  // before the workers start: read-ahead can begin with them
  impl->threads.reserve(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    impl->threads.emplace_back([core = impl->core.get(), i] { core->WorkerLoop(i); });
  }
  if (par.threads_auto || par.ring_auto || par.read_ahead) {
    impl->tuner = std::thread([core = impl->core.get()] { core->TunerLoop(); });
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() {
  if (::getpid() != impl_->core->creator_pid_) {
    // A forked child's copy: the threads to join and whoever held the locks
    // at the fork exist only in the parent. Leak it rather than join
    // threads that are not there or touch a lock that may be held forever.
    (void)impl_.release();
    return;
  }
  impl_->core->Cancel();
  for (std::thread& t : impl_->threads) t.join();
  if (impl_->tuner.joinable()) impl_->tuner.join();
  // Ops' background work (read-ahead) stops now, even if delivered batches
  // keep the core alive.
  for (const auto& op : impl_->core->pipeline_.ops) op->OnPlan(nullptr, 0);
  impl_->core->closed_.store(true);
  impl_->core->ReleaseAfterJoin();
}

Status Loader::Next(Batch* batch, bool* end_of_epoch) {
  Impl::ConsumerScope scope(impl_.get(), "Next");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  return impl_->core->Next(batch, end_of_epoch, 0, nullptr);
}

Status Loader::NextFor(Batch* batch, bool* end_of_epoch, std::chrono::nanoseconds timeout,
                       bool* timed_out) {
  Impl::ConsumerScope scope(impl_.get(), "NextFor");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  // At least 1 ns, so that 0 never means "forever" here.
  const int64_t deadline = NowNs() + std::max<int64_t>(1, timeout.count());
  return impl_->core->Next(batch, end_of_epoch, deadline, timed_out);
}

Status Loader::SetEpoch(uint64_t epoch) {
  Impl::ConsumerScope scope(impl_.get(), "SetEpoch");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  impl_->core->Reset(epoch, 0);
  return Status::OK();
}

std::string Loader::SaveState() const { return impl_->core->SaveState(); }

Status Loader::RestoreState(std::string_view state) {
  Impl::ConsumerScope scope(impl_.get(), "RestoreState");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  FEEDLINE_ASSIGN_OR_RETURN(SamplerPosition pos,
                            impl_->core->sampler_.RestoreState(state, impl_->core->options_.elastic));
  impl_->core->Reset(pos.epoch, pos.batch);
  return Status::OK();
}

void Loader::Cancel() { impl_->core->Cancel(); }
MetricsSnapshot Loader::Metrics() const { return impl_->core->Metrics(); }
const Sampler& Loader::sampler() const { return impl_->core->sampler_; }
uint64_t Loader::num_batches() const { return impl_->core->sampler_.num_batches(); }
uint64_t Loader::epoch() const { return impl_->core->epoch(); }
uint32_t Loader::num_threads() const { return impl_->core->active_threads(); }

}  // namespace feedline
