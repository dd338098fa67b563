#include "feedline/metrics.h"

#include <cstdio>
#include <string>

namespace feedline {
namespace {

std::string Ms(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

WorkerMetrics MetricsSnapshot::WorkerTotals() const {
  WorkerMetrics t;
  for (const WorkerMetrics& w : workers) {
    t.samples += w.samples;
    t.busy_ns += w.busy_ns;
    t.wait_input_ns += w.wait_input_ns;
    t.blocked_output_ns += w.blocked_output_ns;
  }
  return t;
}

std::string MetricsSnapshot::ToString() const {
  std::string s = "uptime " + Ms(uptime_ns) + ", " + std::to_string(num_threads) + " threads\n";
  const WorkerMetrics t = WorkerTotals();
  s += "workers: " + std::to_string(t.samples) + " samples, busy " + Ms(t.busy_ns) +
       ", waiting for input " + Ms(t.wait_input_ns) + ", blocked on output " +
       Ms(t.blocked_output_ns) + "\n";
  for (const OpMetrics& op : ops) {
    const double per_item =
        op.items ? static_cast<double>(op.busy_ns) / static_cast<double>(op.items) : 0.0;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "  op %-20s %10llu items %6llu errors %10.0f ns/item\n",
                  op.name.c_str(), static_cast<unsigned long long>(op.items),
                  static_cast<unsigned long long>(op.errors), per_item);
    s += buf;
  }
  s += "ring: " + std::to_string(ring.batches_delivered) + " delivered, " +
       std::to_string(ring.depth_ready) + " ready, " + std::to_string(ring.depth_filling) +
       " filling; buffers " + std::to_string(ring.buffers_allocated) + "/" +
       std::to_string(ring.buffers_max) + " (" + std::to_string(ring.buffers_held_by_consumer) +
       " held by consumer), " + std::to_string(ring.bytes_held) + " of " +
       std::to_string(ring.max_bytes) + " bytes budget, peak " +
       std::to_string(ring.peak_bytes_held) + "\n";
  s += "consumer: " + std::to_string(consumer.batches) + " batches, waited " +
       Ms(consumer.wait_ns) + "\n";
  if (errors.total > 0) {
    s += "errors: " + std::to_string(errors.total) + " (" + std::to_string(errors.skipped) +
         " skipped)";
    for (const auto& [reason, n] : errors.by_reason) s += ", " + reason + ": " + std::to_string(n);
    s += "\n";
  }
  return s;
}

}  // namespace feedline
