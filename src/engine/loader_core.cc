// The claim/ring state machine: plans, claims, the worker loop, delivery
// in order, the consumer's Next, resets and cancellation.
#include "src/engine/detail/loader_core.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/core/clock.h"

namespace feedline {

using core::NowNs;
using detail::Bytes;
using detail::kGroupMaxIntervalNs;
using detail::kGroupWaitNs;
using detail::kStallPollNs;
using detail::kTunerLogLines;
using detail::kWakeGroupMax;

LoaderCore::LoaderCore(Pipeline pipeline, LoaderOptions options, Sampler sampler, Parallelism par)
    : pipeline_(std::move(pipeline)),
      options_(std::move(options)),
      sampler_(std::move(sampler)),
      layout_(std::make_shared<detail::BatchLayout>(
          detail::BatchLayout::Make(options_.batch_size, pipeline_.fields))),
      par_(par),
      num_threads_(par.max_threads),
      max_ring_depth_(par.max_ring_depth),
      start_ns_(NowNs()),
      scratch_gate_(kRetainedScratchBytes, par.scratch_allowance, options_.max_bytes),
      errors_(options_.error_policy, options_.max_errors, options_.error_log_capacity) {
  for (uint32_t i = 0; i < num_threads_; ++i) {
    counters_.push_back(std::make_unique<detail::WorkerCounters>(pipeline_.ops.size()));
  }
  MutexLock l(&mu_);
  active_threads_ = par_.initial_threads;
  step_threads_ = num_threads_;
  worker_clocks_.resize(num_threads_);
  ring_depth_ = par_.initial_ring_depth;
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
  for (const auto& op : pipeline_.ops) {
    if (op->background() != nullptr) op->background()->OnPlan(plan, first);
  }
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
  if (generation != plan_generation_ || claim_plan_ == nullptr ||
      claim_plan_->epoch + 1 != plan->epoch || next_claim_ < claim_plan_->ids.size()) {
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
  // A core lent while the consumer waits goes back when it steps.
  if (worker >= step_threads_ && !consumer_waiting_) return Claim::kParked;
  if (draining_ || claim_plan_ == nullptr) return Claim::kNoInput;
  if (next_claim_ >= claim_plan_->ids.size()) {
    // Every sample of the epoch being delivered is claimed: one epoch ahead
    // at most.
    return !planning_ && claim_plan_->epoch == epoch_ ? Claim::kPlanNext : Claim::kNoInput;
  }
  const uint64_t b = next_claim_ / claim_plan_->batch_size;
  if (!inflight_.empty() && inflight_.back().epoch == claim_plan_->epoch &&
      inflight_.back().batch == b) {
    return Claim::kWork;
  }
  if (!free_buffers_.empty() || buffers_allocated_ < ring_depth_) return Claim::kWork;
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
  if (layout_->num_bytes_fields > 0) {
    slot.bytes = std::make_unique<detail::BytesFields>();
    slot.bytes->values.assign(layout_->num_bytes_fields,
                              std::vector<std::vector<uint8_t>>(slot.remaining));
  }
  if (!free_buffers_.empty()) {
    slot.buffer = std::move(free_buffers_.back());
    free_buffers_.pop_back();
  } else {
    // At most max_ring_depth_ times in the loader's life. Held under the lock
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
      peak_bytes_ =
          std::max<uint64_t>(peak_bytes_, uint64_t{buffers_allocated_} * layout_->total_bytes);
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
  worker_clocks_[worker] = core::ThreadCpuClock::Current();
  while (true) {
    Claim claim = CheckClaim(worker);
    while (claim == Claim::kNoInput || claim == Claim::kNoBuffer || claim == Claim::kParked) {
      // A consumer waiting for a group gets the batch that is complete: this
      // worker makes no other before it wakes.
      if (wake_group_ > 1 && FrontComplete(1)) ready_cv_.Signal();
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
      const int j = layout_->bytes_index[f];
      // A kBytes field's slot is its std::vector (Sample::bytes_output).
      outputs[f] = j >= 0 ? static_cast<void*>(&slot.bytes->values[static_cast<size_t>(j)][index])
                          : base + layout_->offsets[f] + index * layout_->sample_bytes[f];
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
    const bool completed = --s->remaining == 0;
    if (completed) ++batches_completed_;
    if (epoch == epoch_ && wake_group_ > 1) {
      // The group, or a front complete for kGroupWaitNs: checked as each
      // sample finishes (and before a worker sleeps, above).
      if (completed && b == deliver_batch_ && !FrontComplete(wake_group_)) {
        front_complete_ns_ = NowNs();  // the front alone: the rest of its group is still coming
      } else if (FrontComplete(wake_group_) ||
                 (FrontComplete(1) && NowNs() - front_complete_ns_ >= kGroupWaitNs)) {
        ready_cv_.Signal();
      }
    } else if (completed && epoch == epoch_ && b == deliver_batch_) {
      ready_cv_.Signal();
    }
    if (--active_samples_ == 0 && draining_) drained_cv_.SignalAll();
  }
  if (FrontComplete(1)) ready_cv_.Signal();  // as before a sleep
  // The tuner reads live clocks only (under mu_): this one is gone from now.
  worker_clocks_[worker] = core::ThreadCpuClock();
  exited_worker_cpu_ns_ += core::ThreadCpuNs();
}

bool LoaderCore::FrontComplete(uint32_t group) const {
  if (inflight_.empty()) return false;
  const Slot& front = inflight_.front();
  if (front.remaining != 0 || front.epoch != epoch_ || front.batch != deliver_batch_) return false;
  // Slots are made in claim order: inflight_[k] is batch front.batch + k.
  for (uint32_t k = 1; k < group; ++k) {
    if (plan_ == nullptr || front.batch + k >= plan_->num_batches) return true;  // the epoch ends
    if (inflight_.size() <= k || inflight_[k].remaining != 0) return false;
  }
  return true;
}

bool LoaderCore::ConsumerHoldsAllBuffers() const {
  return inflight_.empty() && free_buffers_.empty() && buffers_allocated_ == ring_depth_ &&
         buffers_out_ == ring_depth_;
}

Status LoaderCore::ConsumerHoldsAllBuffersError() const {
  return ResourceExhaustedError(
      "the consumer holds all " + std::to_string(ring_depth_) + " batch buffers (" +
      std::to_string(ring_depth_) + " x " + Bytes(layout_->total_bytes) +
      ", within max_bytes=" + std::to_string(options_.max_bytes) +
      ", ring_depth=" + (par_.ring_auto ? "auto" : std::to_string(options_.ring_depth)) +
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
  // The consumer thread's CPU inside Next: the tuner counts the rest of the
  // training loop's CPU as its step (docs/tuner.md, "The trainer's cores").
  // Its time in Next less the time it slept on ready_cv_: the thread CPU
  // clock is a system call (about 1 us here), the monotonic clock is not.
  struct CpuInNext {
    std::atomic<uint64_t>* sum;
    int64_t start = NowNs();
    int64_t slept = 0;
    ~CpuInNext() {
      const int64_t cpu = NowNs() - start - slept;
      if (cpu > 0) sum->fetch_add(static_cast<uint64_t>(cpu), std::memory_order_relaxed);
    }
  } cpu_in_next{&consumer_next_cpu_ns_};
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
    bool waited = false;
    const bool grouped = consumer_starved_ && delivery_interval_ns_ < kGroupMaxIntervalNs;
    while (true) {
      if (!stopped_.ok()) break;
      if (cancelled_.load(std::memory_order_relaxed)) {
        consumer_wait_ns_ += NowNs() - t0;
        return CancelledError("loader was cancelled");
      }
      if (!inflight_.empty() && inflight_.front().remaining == 0) break;
      if (ConsumerHoldsAllBuffers()) {
        if (par_.ring_auto && ring_depth_ < max_ring_depth_ &&
            ChargedBytes() + layout_->total_bytes <= options_.max_bytes) {
          // An auto ring grows for a consumer that keeps batches, within the budget.
          ++ring_depth_;
          Log("ring " + std::to_string(ring_depth_ - 1) + " -> " + std::to_string(ring_depth_) +
              ": the consumer holds every buffer");
          work_cv_.SignalAll();
          continue;
        }
        consumer_wait_ns_ += NowNs() - t0;
        consumer_waiting_ = false;
        return ConsumerHoldsAllBuffersError();
      }
      if (!consumer_waiting_) {
        // The consumer idles: lend its cores (a timed-out NextFor keeps them
        // lent; the caller is still waiting for this batch).
        consumer_waiting_ = true;
        if (step_threads_ < active_threads_) work_cv_.SignalAll();
      }
      int64_t wait_ns = -1;  // forever
      if (options_.stall_timeout_ms != 0) {
        wait_ns = std::min<int64_t>(kStallPollNs,
                                    static_cast<int64_t>(options_.stall_timeout_ms) * 1'000'000);
      }
      if (deadline_ns != 0) {
        const int64_t left = deadline_ns - NowNs();
        if (left <= 0) {
          consumer_wait_ns_ += NowNs() - t0;
          wake_group_ = 0;
          *timed_out = true;
          return Status::OK();
        }
        wait_ns = wait_ns < 0 ? left : std::min(wait_ns, left);
      }
      // An auto ring grows, a buffer per wait and within the budget (by the
      // tuner's rule: buffers allowed count as allocated), until a starved
      // consumer's wake-ups can come in full groups: its default of 3 leaves
      // a loop that holds its last batch no group at all.
      if (grouped && par_.ring_auto && ring_depth_ < buffers_out_ + 1 + kWakeGroupMax &&
          ring_depth_ < max_ring_depth_ &&
          ChargedFor(active_threads_, ring_depth_ + 1, buffers_allocated_) <= options_.max_bytes) {
        ++ring_depth_;
        Log("ring " + std::to_string(ring_depth_ - 1) + " -> " + std::to_string(ring_depth_) +
            ": room for wake-ups in groups");
        work_cv_.SignalAll();
      }
      // A group when the last batch, too, came after a wait and the ring
      // has room for its complete batches, one more in production and those
      // the consumer holds: no worker waits for a buffer because of it.
      wake_group_ = grouped && buffers_out_ + 3 <= ring_depth_
                        ? std::min(kWakeGroupMax, ring_depth_ - buffers_out_ - 1)
                        : 0;
      waited = true;
      const int64_t sleep0 = NowNs();
      if (wait_ns < 0) {
        ready_cv_.Wait(&l);
      } else {
        ready_cv_.WaitFor(&l, std::chrono::nanoseconds(wait_ns));
      }
      cpu_in_next.slept += NowNs() - sleep0;
      if (options_.stall_timeout_ms != 0) {
        Status stall = CheckStalls();
        if (!stall.ok()) {
          Stop(std::move(stall));
          cancelled_.store(true);  // ask the stalled op to give up, if it polls
        }
      }
    }
    consumer_wait_ns_ += NowNs() - t0;
    consumer_waiting_ = false;
    const int64_t now = NowNs();
    if (last_delivery_ns_ != 0) {
      const int64_t interval = now - last_delivery_ns_;
      delivery_interval_ns_ =
          delivery_interval_ns_ == INT64_MAX
              ? interval
              : delivery_interval_ns_ - delivery_interval_ns_ / 4 + interval / 4;
    }
    last_delivery_ns_ = now;
    if (waited) {
      // The complete batches of the group behind this one: taken without a
      // wait, they still count as a starved consumer's.
      group_credit_ = 0;
      while (group_credit_ + 1 < wake_group_ && inflight_.size() > group_credit_ + 1 &&
             inflight_[group_credit_ + 1].remaining == 0) {
        ++group_credit_;
      }
      consumer_starved_ = true;
    } else if (group_credit_ > 0) {
      --group_credit_;  // a later batch of a group: still starved
    } else {
      consumer_starved_ = false;
    }
    wake_group_ = 0;
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
        const int j = layout_->bytes_index[f];
        if (j >= 0) {
          auto& values = slot.bytes->values[static_cast<size_t>(j)];
          values[kept].swap(values[i]);
          continue;
        }
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
    if (options_.world_size > 1) {
      // Skipping it would give this rank one batch fewer than the others,
      // and the job would hang at its next collective: fail loudly instead.
      Stop(DataLossError(
          "every sample of batch " + std::to_string(slot.batch) + " of epoch " +
          std::to_string(slot.epoch) + " on rank " + std::to_string(options_.rank) + " of " +
          std::to_string(options_.world_size) + " failed (" + std::to_string(count) +
          " skipped); an empty batch cannot be delivered, and skipping it would leave this rank "
          "with fewer "
          "batches than the others (a hang at the next collective). Last error: " +
          (data->skipped.empty() ? std::string("?") : data->skipped.back().ToString())));
      return stopped_;
    }
    *empty = true;
    return Status::OK();
  }

  data->home = shared_from_this();
  data->buffer = std::move(slot.buffer);
  data->layout = layout_;
  if (slot.bytes) {
    for (auto& values : slot.bytes->values) values.resize(kept);
    data->bytes = std::move(slot.bytes);
  }
  data->epoch = epoch_;
  data->index = slot.batch;
  if (data->buffer) ++buffers_out_;
  ++batches_delivered_;
  *batch = Batch(std::move(data));
  return Status::OK();
}

void LoaderCore::Return(std::unique_ptr<Buffer> buffer) {
  if (core::CurrentPid() != creator_pid_) {
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
    if (epoch == epoch_ && batch == deliver_batch_ && plan_ != nullptr && plan_->epoch == epoch)
      return;
    DrainAndClear(&l);
    epoch_ = epoch;
    deliver_batch_ = batch;
    consumer_starved_ = false;
    group_credit_ = 0;  // the first batch from here comes at once
    last_delivery_ns_ = 0;
    delivery_interval_ns_ = INT64_MAX;
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

}  // namespace feedline
