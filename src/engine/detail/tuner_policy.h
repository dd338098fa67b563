// TunerPolicy: the autotuner's decisions, as a pure function of measured
// windows (docs/tuner.md). The loader's tuner thread feeds it one window of
// counter deltas at a time and applies what it returns; tests feed it
// synthetic windows.
//
// Model: a worker thread serves a sample in `s` seconds (measured busy time
// per sample); the consumer takes a batch every `t` seconds of its own time
// (wall time minus its time waiting in Next). Threads needed to keep up:
// n* = ceil(batch_size / t * s * headroom). Starving (the consumer waited)
// adds threads up to the CPU budget, unless the last addition did not raise
// throughput (the cores are saturated: the ceiling holds until demand
// changes). A fed consumer sheds threads one at a time, after two windows
// agree, never below n*: idle cores are left to the trainer. The ring grows
// (never shrinks: its buffers may be pinned) when workers sat blocked on a
// buffer while the consumer waited. Read-ahead keeps rate x latency fetches
// in flight (Little's law) with 50% slack.
//
// The trainer's cores (auto CPU budget only): the training loop's measured
// CPU while it steps (outside Next) decides how many cores stay reserved for
// it while it steps; the engine lends them to workers while the loop waits
// in Next. Raised at once, lowered only after several windows agree, with a
// hysteresis gap and a cooldown that doubles each time a lowering is undone.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_TUNER_POLICY_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_TUNER_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace feedline::detail {

// Counter deltas over one window.
struct TunerWindow {
  double wall_s = 0;
  double consumer_wait_s = 0;   // inside Next(), waiting
  uint64_t batches = 0;         // delivered
  uint64_t samples = 0;         // finished by the workers
  double busy_s = 0;            // workers running samples
  double blocked_output_s = 0;  // workers with work but no free buffer
  // Read-ahead (when the pipeline has one).
  uint64_t fetches = 0;
  double fetch_s = 0;  // summed latency of those fetches
  uint64_t fetched_bytes = 0;
  // The training loop's CPU: the process's CPU time minus the loader's own
  // threads' (workers and tuner), and of that what the consumer thread spent
  // inside Next(). The rest ran while the loop stepped.
  double trainer_cpu_s = 0;
  double trainer_cpu_in_next_s = 0;
};

struct TunerConfig {
  uint32_t threads = 1;
  uint32_t ring_depth = 2;
  uint32_t read_ahead_in_flight = 0;  // 0: no read-ahead to tune
  uint64_t read_ahead_bytes = 0;
  // Cores kept for the training loop while it steps (outside Next); lent to
  // workers while it waits. Only with TunerLimits::lend_trainer_cores.
  uint32_t reserved_cores = 0;

  bool operator==(const TunerConfig&) const = default;
};

struct TunerLimits {
  bool tune_threads = true;
  bool tune_ring = true;
  bool tune_read_ahead = false;
  uint32_t max_threads = 1;     // the CPU budget
  uint32_t max_ring_depth = 2;  // what the RAM budget allows
  uint32_t max_in_flight = 0;
  uint64_t max_read_ahead_bytes = 0;
  uint64_t batch_size = 1;
  // An auto CPU budget: the workers and the training loop share `cores`
  // (AvailableCores()); the policy sets reserved_cores from the trainer's
  // measured CPU. Off (an explicit cpu_budget): reserved_cores stays as is.
  bool lend_trainer_cores = false;
  uint32_t cores = 1;
};

class TunerPolicy {
 public:
  explicit TunerPolicy(TunerLimits limits) : limits_(limits) {}

  // The configuration for the next window. `why` (if not null) gets one
  // line per change.
  TunerConfig Step(const TunerWindow& w, const TunerConfig& current, std::vector<std::string>* why);
  // What was applied after Step (the RAM budget may hold an increase back):
  // an addition that did not happen is not judged, and the count it stopped
  // at becomes the ceiling until demand changes.
  void Applied(const TunerConfig& applied);

  static constexpr double kHeadroom = 1.2;      // threads beyond the measured need
  static constexpr double kStarved = 0.02;      // consumer wait share that adds threads
  static constexpr double kFed = 0.005;         // below this the consumer is fed
  static constexpr double kMinGain = 0.05;      // an added thread must raise throughput this much
  static constexpr double kDemandChange = 0.3;  // demand moved: forget the saturation ceiling
  static constexpr int kShedAfter = 2;          // fed windows before shedding a thread
  static constexpr int kCooldown = 8;  // windows a thread count re-added after a shed holds
  // The trainer's cores. Reserve k cores once the step uses more than
  // k - 1 + kTrainerRaise; give one back once it uses less than
  // k - 1 + kTrainerLower, for kTrainerLowerAfter windows in a row (doubling
  // each time a lowering is undone). A window whose loop spent under
  // kMinStepShare outside Next counts as a step using nothing: a core lent
  // then costs the step at most that share of the time.
  static constexpr double kTrainerRaise = 0.25;
  static constexpr double kTrainerLower = 0.05;
  static constexpr int kTrainerLowerAfter = 4;
  static constexpr double kMinStepShare = 0.05;

  // Last window's measurement (cores; 0 before the first): what the
  // training loop used on average, and while it stepped (the input of
  // reserved_cores; 0 for a loop that barely steps).
  double trainer_cores() const { return trainer_cores_; }
  double trainer_step_cores() const { return trainer_step_cores_; }

 private:
  uint32_t TuneThreads(const TunerWindow& w, const TunerConfig& c, double starve, double demand,
                       double service_s, std::vector<std::string>* why);
  uint32_t TuneTrainerCores(const TunerWindow& w, uint32_t reserved, std::vector<std::string>* why);

  const TunerLimits limits_;
  uint32_t ceiling_ = 0;       // threads that saturated the cores (0: none known)
  double ceiling_demand_ = 0;  // the demand when the ceiling was found
  double last_demand_ = 0;
  uint32_t last_added_from_ = 0;
  double last_throughput_ = 0;
  int fed_windows_ = 0;
  uint32_t last_shed_from_ = 0;
  uint32_t floor_ = 0;  // after a shed starved the consumer: hold this many
  int floor_windows_ = 0;
  int cooldown_ = kCooldown;  // doubles each time a shed is undone: bounded oscillation
  double trainer_cores_ = 0;
  double trainer_step_cores_ = 0;
  int trainer_low_windows_ = 0;
  int trainer_lower_after_ = kTrainerLowerAfter;
  bool trainer_lowered_ = false;  // the last change of reserved_cores was a lowering
};

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_TUNER_POLICY_H_
