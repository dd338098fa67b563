// The metrics snapshot (metrics.h): counters read without stopping anyone.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/core/clock.h"
#include "src/engine/detail/loader_core.h"

namespace feedline {

using core::NowNs;
using detail::Bytes;
using detail::kStallPollNs;
using detail::kTunerLogLines;

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
  t.trainer_cpu_cores = trainer_cores_;
  t.trainer_step_cores = trainer_step_cores_;
  t.effective_cpu_budget = par_.lend_trainer_cores ? step_threads_ : par_.cpu_budget;
  t.ram_budget = options_.max_bytes;
  t.threads = active_threads_;
  t.max_threads = num_threads_;
  t.ring_depth = ring_depth_;
  t.max_ring_depth = max_ring_depth_;
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
  r.buffers_max = max_ring_depth_;
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

}  // namespace feedline
