#include "src/engine/detail/tuner_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace feedline::detail {
namespace {

std::string Format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace

uint32_t TunerPolicy::TuneThreads(const TunerWindow& w, const TunerConfig& c, double starve,
                                  double demand, double service_s, std::vector<std::string>* why) {
  const uint32_t n = c.threads;
  const double throughput = static_cast<double>(w.samples) / w.wall_s;
  auto say = [&](const std::string& line) {
    if (why != nullptr) why->push_back(line);
  };

  // The saturation ceiling is about the demand it was found under.
  if (ceiling_ != 0 && std::isfinite(demand) && std::isfinite(ceiling_demand_) &&
      std::fabs(demand - ceiling_demand_) > kDemandChange * ceiling_demand_) {
    ceiling_ = 0;
  }
  // Judge the last addition: more threads that add no throughput mean the
  // cores (or a shared resource) are saturated.
  if (last_added_from_ != 0) {
    const uint32_t from = last_added_from_;
    last_added_from_ = 0;
    if (starve > kStarved && throughput < last_throughput_ * (1 + kMinGain)) {
      ceiling_ = from;
      ceiling_demand_ = demand;
      say(Format(
          "threads %u -> %u: the added threads did not raise throughput (%.0f -> %.0f samples/s): "
          "the cores are saturated",
          n, from, last_throughput_, throughput));
      return from;
    }
  }
  if (floor_windows_ > 0 && --floor_windows_ == 0) floor_ = 0;

  const double need = std::isfinite(demand) ? demand * service_s * kHeadroom
                                            : std::numeric_limits<double>::infinity();
  const uint32_t max = limits_.max_threads;
  const uint32_t target =
      std::isfinite(need)
          ? static_cast<uint32_t>(std::clamp(std::ceil(need), 1.0, static_cast<double>(max)))
          : max;
  const uint32_t cap = ceiling_ != 0 ? std::min(ceiling_, max) : max;

  if (starve > kStarved) {
    fed_windows_ = 0;
    if (n >= cap) return n;
    // At most doubling, so that a saturated machine shows before the budget.
    const uint32_t to = std::min(cap, std::max(n + 1, std::min(target, 2 * n)));
    if (last_shed_from_ != 0 && to >= last_shed_from_) {
      // Undoing a shed: hold this count for a while, longer each time.
      floor_ = to;
      floor_windows_ = cooldown_;
      cooldown_ = std::min(cooldown_ * 2, 1024);
    }
    last_shed_from_ = 0;
    last_added_from_ = n;
    last_throughput_ = throughput;
    say(
        Format("threads %u -> %u: the consumer waited %.1f%% of the time; need %.1f threads for "
               "%.0f samples/s "
               "at %.2f ms/sample",
               n, to, 100 * starve, need, demand, 1e3 * service_s));
    return to;
  }
  const uint32_t floor = std::max<uint32_t>(1, floor_);
  if (starve < kFed && n > target && n > floor) {
    if (++fed_windows_ >= kShedAfter) {
      fed_windows_ = 0;
      last_shed_from_ = n;
      say(
          Format("threads %u -> %u: the consumer is the bound (waited %.2f%%; %.0f samples/s need "
                 "%.1f threads)",
                 n, n - 1, 100 * starve, demand, need));
      return n - 1;
    }
  } else {
    fed_windows_ = 0;
  }
  return n;
}

uint32_t TunerPolicy::TuneTrainerCores(const TunerWindow& w, uint32_t reserved,
                                       std::vector<std::string>* why) {
  const double cores = static_cast<double>(std::max<uint32_t>(1, limits_.cores));
  const double out_s = w.wall_s - w.consumer_wait_s;
  const bool steps = out_s > kMinStepShare * w.wall_s;
  const double c = trainer_step_cores_;
  // At least one worker runs while the loop steps.
  const auto most = static_cast<uint32_t>(cores) - 1;
  auto say = [&](uint32_t to, const char* what) {
    if (why == nullptr) return;
    why->push_back(
        Format("cpu budget %u -> %u threads while the loop steps: it used %.2f cores outside Next "
               "(%.0f%% of the time)%s; %u while it waits",
               static_cast<uint32_t>(cores) - reserved, static_cast<uint32_t>(cores) - to, c,
               100 * out_s / w.wall_s, what, static_cast<uint32_t>(cores)));
  };
  // The cores a step using c needs: the smallest k with c <= k - 1 + kTrainerRaise.
  const uint32_t need =
      c > kTrainerRaise ? std::min(most, static_cast<uint32_t>(std::ceil(c - kTrainerRaise))) : 0;
  if (need > reserved) {
    trainer_low_windows_ = 0;
    if (trainer_lowered_) trainer_lower_after_ = std::min(trainer_lower_after_ * 2, 1024);
    trainer_lowered_ = false;
    say(need, "");
    return need;
  }
  if (reserved > 0 && c < static_cast<double>(reserved) - 1 + kTrainerLower) {
    if (++trainer_low_windows_ >= trainer_lower_after_) {
      trainer_low_windows_ = 0;
      trainer_lowered_ = true;
      const uint32_t to = reserved - 1;
      say(to, steps ? "" : ": it barely steps, its core is lent");
      return to;
    }
  } else {
    trainer_low_windows_ = 0;
  }
  return reserved;
}

void TunerPolicy::Applied(const TunerConfig& applied) {
  if (last_added_from_ != 0 && applied.threads <= last_added_from_) {
    ceiling_ = std::max<uint32_t>(1, applied.threads);
    ceiling_demand_ = last_demand_;
    last_added_from_ = 0;
  }
}

TunerConfig TunerPolicy::Step(const TunerWindow& w, const TunerConfig& current,
                              std::vector<std::string>* why) {
  TunerConfig next = current;
  // A window in which the consumer took nothing says nothing about demand.
  if (w.wall_s <= 0 || w.batches == 0) return next;
  const double starve = std::clamp(w.consumer_wait_s / w.wall_s, 0.0, 1.0);
  const double service = w.samples > 0 ? w.busy_s / static_cast<double>(w.samples) : 0;
  const double own_s = w.wall_s - w.consumer_wait_s;
  // Samples/s the consumer would take if never kept waiting; infinite for a
  // consumer that only drains.
  const double demand = own_s > 1e-4 * w.wall_s
                            ? static_cast<double>(w.batches * limits_.batch_size) / own_s
                            : std::numeric_limits<double>::infinity();
  const double throughput = static_cast<double>(w.samples) / w.wall_s;
  last_demand_ = demand;

  if (limits_.tune_threads && service > 0) {
    next.threads = TuneThreads(w, current, starve, demand, service, why);
  }
  {
    // What the training loop used: on average, and while it stepped.
    const double cores = static_cast<double>(std::max<uint32_t>(1, limits_.cores));
    trainer_cores_ = std::clamp(w.trainer_cpu_s / w.wall_s, 0.0, cores);
    const double step_cpu = std::max(0.0, w.trainer_cpu_s - w.trainer_cpu_in_next_s);
    trainer_step_cores_ =
        own_s > kMinStepShare * w.wall_s ? std::clamp(step_cpu / own_s, 0.0, cores) : 0.0;
  }
  if (limits_.lend_trainer_cores)
    next.reserved_cores = TuneTrainerCores(w, current.reserved_cores, why);

  if (limits_.tune_ring && starve > kStarved && current.ring_depth < limits_.max_ring_depth) {
    const double blocked = w.blocked_output_s / std::max(1e-9, w.busy_s + w.blocked_output_s);
    // Enough capacity on average but the consumer still waited: the ring
    // does not absorb the jitter.
    const bool jitter = service > 0 && next.threads == current.threads &&
                        current.threads / service > kHeadroom * demand;
    if (blocked > 0.05 || jitter) {
      next.ring_depth = current.ring_depth + 1;
      if (why != nullptr) {
        why->push_back(
            Format("ring %u -> %u: the consumer waited %.1f%% while workers were blocked on a "
                   "free buffer %.1f%% of their time",
                   current.ring_depth, next.ring_depth, 100 * starve, 100 * blocked));
      }
    }
  }

  if (limits_.tune_read_ahead && w.fetches > 0 && limits_.max_in_flight > 0) {
    const double latency = w.fetch_s / static_cast<double>(w.fetches);
    const double mean_bytes = static_cast<double>(w.fetched_bytes) / static_cast<double>(w.fetches);
    // Aim above the rate seen while starving, to find out whether more
    // fetches in flight would help.
    const double rate = throughput * (starve > kStarved ? 1.5 : kHeadroom);
    const auto in_flight = static_cast<uint32_t>(std::clamp(
        std::ceil(rate * latency * 1.5) + 1, 1.0, static_cast<double>(limits_.max_in_flight)));
    const double max_bytes =
        static_cast<double>(std::max<uint64_t>(1, limits_.max_read_ahead_bytes));
    const auto bytes = static_cast<uint64_t>(
        std::clamp(2.0 * in_flight * mean_bytes, std::min(mean_bytes + 1, max_bytes), max_bytes));
    const bool bytes_moved =
        std::fabs(static_cast<double>(bytes) - static_cast<double>(current.read_ahead_bytes)) >
        0.25 * static_cast<double>(std::max<uint64_t>(1, current.read_ahead_bytes));
    if (in_flight != current.read_ahead_in_flight || bytes_moved) {
      next.read_ahead_in_flight = in_flight;
      next.read_ahead_bytes = bytes;
      if (why != nullptr) {
        why->push_back(Format(
            "read-ahead %u -> %u fetches, %llu -> %llu bytes: %.0f records/s x %.1f ms latency",
            current.read_ahead_in_flight, in_flight,
            static_cast<unsigned long long>(current.read_ahead_bytes),
            static_cast<unsigned long long>(bytes), rate, 1e3 * latency));
      }
    }
  }
  return next;
}

}  // namespace feedline::detail
