// The trainer's cores (docs/tuner.md): with an auto CPU budget the tuner
// measures the training loop's CPU while it steps and keeps that many cores
// for it while it steps, lending them to workers while it waits in Next.
// The policy on constructed measurements (exact), then a live loader whose
// consumer burns CPU between Next calls (coarse, load-independent checks:
// CPU time, not wall-clock rates).
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "src/core/cpu.h"
#include "src/engine/detail/tuner_policy.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using detail::TunerConfig;
using detail::TunerLimits;
using detail::TunerPolicy;
using detail::TunerWindow;

// One second of a loop that spends `wait_share` of it waiting in Next and
// the rest stepping, using `step_cores` while it steps.
TunerWindow TrainerWindow(double wait_share, double step_cores) {
  TunerWindow w;
  w.wall_s = 1.0;
  w.batches = 8;
  w.samples = 8 * 32;
  w.busy_s = 2.0;
  w.consumer_wait_s = wait_share;
  w.trainer_cpu_in_next_s = 0.001;  // what Next itself costs the consumer
  w.trainer_cpu_s = w.trainer_cpu_in_next_s + step_cores * (1.0 - wait_share);
  return w;
}

TunerLimits LendingLimits(uint32_t cores) {
  TunerLimits l;
  l.tune_threads = false;  // the trainer's cores alone
  l.tune_ring = false;
  l.max_threads = cores;
  l.batch_size = 32;
  l.lend_trainer_cores = true;
  l.cores = cores;
  return l;
}

TEST(TrainerCoresPolicyTest, ADrainingLoopLendsEveryCore) {
  TunerPolicy p(LendingLimits(2));
  TunerConfig c{.threads = 2, .ring_depth = 3, .reserved_cores = 1};
  std::vector<std::string> why;
  // 99.9% of the time in Next: whatever the loop does between batches runs
  // for a moment at full speed, which is no reason to keep a core from it.
  for (int i = 0; i < TunerPolicy::kTrainerLowerAfter; ++i) {
    c = p.Step(TrainerWindow(0.999, 1.0), c, &why);
  }
  EXPECT_EQ(c.reserved_cores, 0u);  // the budget is every core
  EXPECT_EQ(p.trainer_step_cores(), 0.0);
  EXPECT_LT(p.trainer_cores(), 0.01);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("cpu budget 1 -> 2 threads while the loop steps"), std::string::npos)
      << why[0];
  EXPECT_NE(why[0].find("its core is lent"), std::string::npos) << why[0];
}

TEST(TrainerCoresPolicyTest, AStepThatBurnsACoreKeepsItAtOnce) {
  TunerPolicy p(LendingLimits(2));
  TunerConfig c{.threads = 2, .ring_depth = 3, .reserved_cores = 0};
  std::vector<std::string> why;
  c = p.Step(TrainerWindow(0.5, 1.0), c, &why);
  EXPECT_EQ(c.reserved_cores, 1u);  // 2 cores - 1 for the step
  EXPECT_NEAR(p.trainer_step_cores(), 1.0, 1e-9);
  EXPECT_NEAR(p.trainer_cores(), 0.501, 1e-9);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(
      why[0].find(
          "cpu budget 2 -> 1 threads while the loop steps: it used 1.00 cores outside Next (50%"),
      std::string::npos)
      << why[0];
  // A step on a torch-like pool of two threads keeps two of 4 cores.
  TunerPolicy q(LendingLimits(4));
  TunerConfig d{.threads = 4, .ring_depth = 3};
  d = q.Step(TrainerWindow(0.3, 1.9), d, nullptr);
  EXPECT_EQ(d.reserved_cores, 2u);
}

TEST(TrainerCoresPolicyTest, TheCoreComesBackInOneWindowWhenTheStepStartsBurning) {
  TunerPolicy p(LendingLimits(2));
  TunerConfig c{.threads = 2, .ring_depth = 3};
  for (int i = 0; i < 20; ++i) c = p.Step(TrainerWindow(0.999, 0.5), c, nullptr);
  EXPECT_EQ(c.reserved_cores, 0u);
  c = p.Step(TrainerWindow(0.4, 0.95), c, nullptr);
  EXPECT_EQ(c.reserved_cores, 1u);
  // And goes back to the workers once the loop drains again, after
  // kTrainerLowerAfter windows agree (not on the first).
  c = p.Step(TrainerWindow(0.999, 0.5), c, nullptr);
  EXPECT_EQ(c.reserved_cores, 1u);
  for (int i = 1; i < TunerPolicy::kTrainerLowerAfter; ++i)
    c = p.Step(TrainerWindow(0.999, 0.5), c, nullptr);
  EXPECT_EQ(c.reserved_cores, 0u);
}

TEST(TrainerCoresPolicyTest, NoisyMeasurementsDoNotFlap) {
  std::mt19937 rng(11);
  // Noise around the raise threshold only: one change, then it holds.
  {
    TunerPolicy p(LendingLimits(4));
    TunerConfig c{.threads = 4, .ring_depth = 3};
    int changes = 0;
    for (int i = 0; i < 2000; ++i) {
      const uint32_t before = c.reserved_cores;
      c = p.Step(TrainerWindow(0.5, std::uniform_real_distribution<>(0.15, 0.35)(rng)), c, nullptr);
      changes += c.reserved_cores != before;
    }
    EXPECT_EQ(changes, 1);
    EXPECT_EQ(c.reserved_cores, 1u);
  }
  // A step using one core, +-20%: one core, never two, never none.
  {
    TunerPolicy p(LendingLimits(4));
    TunerConfig c{.threads = 4, .ring_depth = 3};
    for (int i = 0; i < 2000; ++i) {
      c = p.Step(TrainerWindow(0.5, std::uniform_real_distribution<>(0.8, 1.2)(rng)), c, nullptr);
      if (i > 0) {
        ASSERT_EQ(c.reserved_cores, 1u) << "window " << i;
      }
    }
  }
  // The worst case, noise spanning both thresholds: a lowering that is
  // undone doubles the windows the next one needs, so changes die out.
  {
    TunerPolicy p(LendingLimits(4));
    TunerConfig c{.threads = 4, .ring_depth = 3};
    int changes_late = 0;
    for (int i = 0; i < 4000; ++i) {
      const uint32_t before = c.reserved_cores;
      c = p.Step(TrainerWindow(0.5, std::uniform_real_distribution<>(0.0, 0.4)(rng)), c, nullptr);
      if (i >= 2000) changes_late += c.reserved_cores != before;
    }
    EXPECT_LE(changes_late, 4);
  }
}

TEST(TrainerCoresPolicyTest, AnExplicitBudgetIsAHardCap) {
  // cpu_budget = 2 on a 4-core machine: no lending, whatever the loop uses.
  TunerLimits l = LendingLimits(4);
  l.lend_trainer_cores = false;
  l.tune_threads = true;
  l.max_threads = 2;
  TunerPolicy p(l);
  TunerConfig c{.threads = 1, .ring_depth = 3};
  for (int i = 0; i < 50; ++i) {
    TunerWindow w = TrainerWindow(0.999, 0.0);  // starving: more threads wanted
    w.samples = 16 * c.threads;
    c = p.Step(w, c, nullptr);
    ASSERT_LE(c.threads, 2u);
    ASSERT_EQ(c.reserved_cores, 0u);
  }
  EXPECT_EQ(c.threads, 2u);
  // With lending, the loop never takes the last core from the workers, even
  // when it measures more than the machine has.
  TunerPolicy q(LendingLimits(2));
  TunerConfig d{.threads = 2, .ring_depth = 3};
  d = q.Step(TrainerWindow(0.2, 8.0), d, nullptr);
  EXPECT_EQ(d.reserved_cores, 1u);
  EXPECT_LE(q.trainer_step_cores(), 2.0);
}

// --- A live loader -------------------------------------------------------------

Pipeline SleepPipeline(std::chrono::microseconds service) {
  Pipeline p;
  p.num_samples = 1'000'000;
  p.fields = {{"x", DType::kFloat32, {256}}};
  p.ops.push_back(MakeOp("work", [service](Sample& s) {
    std::this_thread::sleep_for(service);  // no CPU: the loader's own CPU stays small
    *s.output_as<float>(0) = static_cast<float>(s.id());
    return Status::OK();
  }));
  return p;
}

// Burns `cpu` of this thread's CPU time (not wall time: a busy machine
// stretches the wall, never the CPU).
void Burn(std::chrono::microseconds cpu) {
  const uint64_t until = core::ThreadCpuNs() + static_cast<uint64_t>(cpu.count()) * 1000;
  volatile uint64_t x = 0;
  while (core::ThreadCpuNs() < until) {
    for (int i = 0; i < 1000; ++i) x = x + static_cast<uint64_t>(i);
  }
}

TunerMetrics RunLoop(bool burn, int batches) {
  LoaderOptions o;
  o.batch_size = 4;
  o.tune_interval_ms = 10;
  o.max_bytes = 16 << 20;  // cpu_budget = 0, num_threads = 0: auto
  auto loader = testing::MustCreate(SleepPipeline(std::chrono::microseconds(500)), o);
  Batch b;
  bool end = false;
  for (int i = 0; i < batches; ++i) {
    EXPECT_TRUE(loader->Next(&b, &end).ok());
    b = Batch();
    if (burn) {
      Burn(std::chrono::microseconds(3000));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(3000));
    }
  }
  return loader->Metrics().tuner;
}

TEST(TrainerCoresLoaderTest, TheCpuTheLoopBurnsBetweenBatchesIsMeasured) {
  const uint32_t cores = AvailableCores();
  const TunerMetrics burning = RunLoop(true, 120);
  const TunerMetrics sleeping = RunLoop(false, 120);
  std::printf(
      "burning step: %.2f cores while stepping, %.2f on average, %u threads while it steps\n",
      burning.trainer_step_cores, burning.trainer_cpu_cores, burning.effective_cpu_budget);
  std::printf(
      "sleeping step: %.2f cores while stepping, %.2f on average, %u threads while it steps\n",
      sleeping.trainer_step_cores, sleeping.trainer_cpu_cores, sleeping.effective_cpu_budget);
  // Both tuner logs: a failure below is then diagnosable from the test's output.
  for (const std::string& line : burning.log) std::printf("  burning: %s\n", line.c_str());
  for (const std::string& line : sleeping.log) std::printf("  sleeping: %s\n", line.c_str());
  ASSERT_GT(burning.windows, 0u);
  ASSERT_GT(sleeping.windows, 0u);
  // An auto budget is every core; the workers get at least one while the
  // loop steps.
  EXPECT_EQ(burning.cpu_budget, cores);
  EXPECT_EQ(burning.max_threads, cores);
  EXPECT_GE(burning.effective_cpu_budget, 1u);
  EXPECT_LE(burning.effective_cpu_budget, cores);
  EXPECT_GT(burning.trainer_step_cores, 0.0);
  EXPECT_LE(burning.trainer_step_cores, cores);
  EXPECT_GT(burning.trainer_cpu_cores, 0.0);
  // A loop that sleeps between batches uses (almost) no CPU: less than one
  // that burns it, and no core is kept from the workers.
  EXPECT_LT(sleeping.trainer_step_cores, burning.trainer_step_cores);
  EXPECT_LT(sleeping.trainer_step_cores, TunerPolicy::kTrainerRaise);
  EXPECT_EQ(sleeping.effective_cpu_budget, cores);
}

}  // namespace
}  // namespace feedline
