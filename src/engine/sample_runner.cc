#include "src/engine/detail/sample_runner.h"

#include "src/core/clock.h"

namespace feedline::detail {

SampleRunner::SampleRunner(const Pipeline* pipeline, const std::atomic<bool>* cancelled,
                           WorkerCounters* counters, ScratchGate* gate)
    : pipeline_(pipeline), counters_(counters), gate_(gate) {
  states_.reserve(pipeline->ops.size());
  for (const auto& op : pipeline->ops) states_.push_back(op->NewState());
  sample_.cancelled_ = cancelled;
  sample_.gate_ = gate;
}

void SampleRunner::SettleScratch() {
  Sample& s = sample_;
  if (s.holds_allowance_) {
    gate_->Release();
    s.holds_allowance_ = false;
  }
  s.charged_scratch_ = 0;
  auto held = [&] {
    uint64_t bytes = s.scratch_.capacity();
    for (const auto& state : states_) {
      if (state != nullptr) bytes += state->ScratchBytes();
    }
    return bytes;
  };
  uint64_t scratch = held();
  // Scratch beyond the mark (a large sample's buffers) goes back now, not at
  // close(): the budget counts a worker for the mark, not for its peak.
  if (gate_ != nullptr && scratch > gate_->retained_bytes()) {
    std::vector<uint8_t>().swap(s.scratch_);
    for (const auto& state : states_) {
      if (state != nullptr) state->TrimScratch();
    }
    scratch = held();
  }
  counters_->scratch_bytes.store(scratch, std::memory_order_relaxed);
}

SampleRunner::Outcome SampleRunner::Run(uint64_t epoch, uint64_t epoch_key, uint64_t id,
                                        bool is_padding, const std::vector<void*>& outputs) {
  Sample& s = sample_;
  s.id_ = id;
  s.epoch_ = epoch;
  s.epoch_key_ = epoch_key;
  s.is_padding_ = is_padding;
  s.data_ = {};
  s.scratch_.clear();  // keeps capacity
  s.num_parts_ = 0;
  s.label = 0;
  s.location_.Clear();
  s.outputs_ = outputs;

  counters_->current_sample.store(id, std::memory_order_relaxed);
  Outcome outcome;
  int64_t t = core::NowNs();
  const int64_t start = t;
  for (size_t i = 0; i < pipeline_->ops.size(); ++i) {
    s.op_index_ = static_cast<uint32_t>(i);
    counters_->current_op.store(static_cast<uint32_t>(i), std::memory_order_relaxed);
    counters_->op_start_ns.store(t, std::memory_order_relaxed);
    Status st = pipeline_->ops[i]->Apply(s, states_[i].get());
    const int64_t t_end = core::NowNs();
    OpCounters& c = counters_->ops[i];
    Bump(c.items, 1);
    Bump(c.busy_ns, static_cast<uint64_t>(t_end - t));
    t = t_end;
    if (!st.ok()) {
      Bump(c.errors, 1);
      outcome.status = std::move(st);
      outcome.failed_op = i;
      break;
    }
  }
  counters_->op_start_ns.store(0, std::memory_order_relaxed);
  SettleScratch();
  Bump(counters_->samples, 1);
  Bump(counters_->busy_ns, static_cast<uint64_t>(t - start));
  return outcome;
}

}  // namespace feedline::detail
