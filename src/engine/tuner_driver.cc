// The tuner driver: measures a window of counters, asks the policy
// (tuner_policy.cc), applies its decision within the RAM budget.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/core/clock.h"
#include "src/core/cpu.h"
#include "src/engine/detail/loader_core.h"

namespace feedline {

using core::NowNs;
using detail::Bytes;
using detail::kStallPollNs;
using detail::kTunerLogLines;

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
  uint64_t process_cpu_ns = 0;
  uint64_t loader_cpu_ns = 0;  // workers (live and exited) and the tuner thread
  uint64_t consumer_next_cpu_ns = 0;
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
  // Called on the tuner thread: its own clock is the tuner's CPU.
  const uint64_t tuner_cpu = core::ThreadCpuNs();
  MutexLock l(&mu_);
  t.now_ns = NowNs();
  t.consumer_wait_ns = consumer_wait_ns_;
  t.batches = batches_delivered_;
  t.consumer_next_cpu_ns = consumer_next_cpu_ns_.load(std::memory_order_relaxed);
  // The process first: a worker's CPU accrued between the two readings
  // counts as the loader's, never as the trainer's.
  t.process_cpu_ns = core::ProcessCpuNs();
  t.loader_cpu_ns = exited_worker_cpu_ns_ + tuner_cpu;
  for (const core::ThreadCpuClock& c : worker_clocks_) t.loader_cpu_ns += c.ReadNs();
  return t;
}

detail::TunerConfig LoaderCore::CurrentConfig() const {
  detail::TunerConfig c;
  const ReadAheadMetrics ra = ReadAheadSum();
  c.read_ahead_in_flight = ra.in_flight_limit;
  c.read_ahead_bytes = ra.bytes_limit;
  MutexLock l(&mu_);
  c.threads = active_threads_;
  c.ring_depth = ring_depth_;
  c.reserved_cores = reserved_cores_;
  return c;
}

ReadAheadMetrics LoaderCore::ReadAheadSum() const {
  ReadAheadMetrics sum;
  for (const auto& op : pipeline_.ops) {
    if (op->background() == nullptr) continue;
    const ReadAheadMetrics ra = op->background()->Metrics();
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

uint64_t LoaderCore::ChargedFor(uint32_t threads, uint32_t ring, uint32_t allocated) const {
  uint64_t per_thread = 0;
  uint64_t c = uint64_t{std::max(ring, allocated)} * layout_->total_bytes + par_.reserved_bytes +
               ScratchBytes(&per_thread);
  for (uint32_t w = 0; w < threads && w < num_threads_; ++w) {
    if (counters_[w]->scratch_bytes.load(std::memory_order_relaxed) == 0) c += per_thread;
  }
  return c;
}

uint64_t LoaderCore::ChargedBytes() const {
  return uint64_t{buffers_allocated_} * layout_->total_bytes + par_.reserved_bytes +
         ScratchBytes(nullptr);
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
  uint32_t allocated = 0;
  {
    MutexLock l(&mu_);
    allocated = buffers_allocated_;
  }
  auto charged = [&](uint32_t threads, uint32_t ring) {
    return ChargedFor(threads, ring, allocated);
  };
  std::string trimmed;
  while (to.ring_depth > from.ring_depth &&
         charged(to.threads, to.ring_depth) > options_.max_bytes) {
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
    for (const auto& op : pipeline_.ops) {
      if (op->background() != nullptr)
        op->background()->SetLimits(to.read_ahead_in_flight, to.read_ahead_bytes);
    }
  }
  MutexLock l(&mu_);
  ++tuner_windows_;
  peak_charged_ = std::max(peak_charged_, ChargedBytes());
  for (std::string& line : why) Log(std::move(line));
  if (par_.threads_auto) active_threads_ = std::clamp<uint32_t>(to.threads, 1, num_threads_);
  if (par_.ring_auto) ring_depth_ = std::clamp(to.ring_depth, ring_depth_, max_ring_depth_);
  if (par_.lend_trainer_cores) {
    reserved_cores_ = std::min(to.reserved_cores, num_threads_ - 1);
    step_threads_ = num_threads_ - reserved_cores_;
  }
  work_cv_.SignalAll();
  to.threads = active_threads_;
  to.ring_depth = ring_depth_;
  to.reserved_cores = reserved_cores_;
  return to;
}

void LoaderCore::TunerLoop() {
  detail::TunerLimits lim;
  lim.tune_threads = par_.threads_auto;
  lim.tune_ring = par_.ring_auto;
  lim.max_threads = num_threads_;
  lim.max_ring_depth = max_ring_depth_;
  lim.batch_size = options_.batch_size;
  lim.lend_trainer_cores = par_.lend_trainer_cores;
  lim.cores = par_.lend_trainer_cores ? num_threads_ : core::AvailableCores();
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
    if (now.batches - prev.batches < kMinBatches && now.now_ns - prev.now_ns < kMaxWindowNs)
      continue;
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
    // Process CPU minus the loader's: the training loop's (its thread, and
    // any it starts, such as torch's intra-op pool).
    const double process_s = static_cast<double>(now.process_cpu_ns - prev.process_cpu_ns) / 1e9;
    const double loader_s =
        static_cast<double>(static_cast<int64_t>(now.loader_cpu_ns - prev.loader_cpu_ns)) / 1e9;
    w.trainer_cpu_s = std::max(0.0, process_s - loader_s);
    w.trainer_cpu_in_next_s =
        static_cast<double>(now.consumer_next_cpu_ns - prev.consumer_next_cpu_ns) / 1e9;
    prev = now;
    const detail::TunerConfig current = CurrentConfig();
    std::vector<std::string> why;
    const detail::TunerConfig next = policy.Step(w, current, &why);
    {
      MutexLock l(&mu_);
      trainer_cores_ = policy.trainer_cores();
      trainer_step_cores_ = policy.trainer_step_cores();
    }
    policy.Applied(Apply(current, next, std::move(why)));
  }
}

}  // namespace feedline
