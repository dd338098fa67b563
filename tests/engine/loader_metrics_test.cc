// Loader: metrics add up.
#include <atomic>
#include <chrono>
#include <thread>

#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using testing::DrainEpoch;
using testing::MakeTestPipeline;
using testing::MustCreate;

TEST(LoaderMetricsTest, CountsAddUpAfterAnEpoch) {
  LoaderOptions o;
  o.batch_size = 8;
  o.num_threads = 3;
  o.ring_depth = 2;
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 100, .max_jitter_us = 100}), o);
  // Stop after the last batch of the epoch. The workers go on into the next
  // epoch (no bubble at the boundary) until the ring's 2 buffers are full:
  // 2 batches of 8. Then nothing is in flight and every count is exact.
  ASSERT_EQ(DrainEpoch(*loader, 13).size(), 13u);
  MetricsSnapshot m = loader->Metrics();
  for (int i = 0; i < 6000 && m.ring.batches_completed < 15; ++i) {  // <= 30 s: a hang guard
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    m = loader->Metrics();
  }
  EXPECT_EQ(m.num_threads, 3u);
  ASSERT_EQ(m.workers.size(), 3u);
  ASSERT_EQ(m.ops.size(), 2u);
  EXPECT_EQ(m.ops[0].name, "read");
  EXPECT_EQ(m.ops[1].name, "augment");
  const WorkerMetrics t = m.WorkerTotals();
  EXPECT_EQ(t.samples, 100u + 16u);
  EXPECT_EQ(m.ops[0].items, t.samples);
  EXPECT_EQ(m.ops[1].items, t.samples);
  EXPECT_EQ(m.ops[0].errors + m.ops[1].errors, 0u);
  EXPECT_EQ(m.ring.batches_delivered, 13u);
  EXPECT_EQ(m.consumer.batches, 13u);
  EXPECT_EQ(m.consumer.next_calls, 13u);
  EXPECT_EQ(m.ring.batches_completed, 15u);
  EXPECT_EQ(m.ring.batches_started, 15u);
  // Op time is part of worker busy time; every worker's accounted time fits
  // in the loader's lifetime. (Which op took longer is scheduling here:
  // read's jitter sleeps may be 0, and a busy machine can preempt augment.
  // That time lands on the op that spent it is shown by the lower bound in
  // ConsumerWaitMeasuresStarvationAndWorkersIdleWhenDone.)
  EXPECT_LE(m.ops[0].busy_ns + m.ops[1].busy_ns, t.busy_ns);
  EXPECT_GT(m.ops[0].busy_ns, 0u);
  EXPECT_GT(m.ops[1].busy_ns, 0u);
  for (const WorkerMetrics& w : m.workers) {
    EXPECT_LE(w.busy_ns + w.wait_input_ns + w.blocked_output_ns, m.uptime_ns);
  }
  EXPECT_EQ(m.ring.bytes_held, uint64_t{m.ring.buffers_allocated} * m.ring.batch_bytes);
  EXPECT_LE(m.ring.peak_bytes_held, m.ring.max_bytes);
  EXPECT_LE(m.ring.buffers_allocated, 2u);
  EXPECT_FALSE(m.ToString().empty());
}

TEST(LoaderMetricsTest, ConsumerWaitMeasuresStarvationAndWorkersIdleWhenDone) {
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.drop_last = true;
  // 20 samples of >= 2 ms each ("slow" sleeps; sleeps never end early), and
  // "read" held until the consumer has waited inside Next() for >= 20 ms:
  // the consumer's wait has that lower bound on any machine (it is counted
  // from inside Next(), so a consumer the machine keeps off the CPU between
  // calls cannot shrink it).
  std::atomic<bool> block{true};
  Pipeline p = MakeTestPipeline({.num_samples = 20, .block = &block});
  p.ops.insert(p.ops.begin(), MakeOp("slow", [](Sample&) {
                 std::this_thread::sleep_for(std::chrono::milliseconds(2));
                 return Status::OK();
               }));
  auto loader = MustCreate(std::move(p), o);
  std::thread release([&] {
    // next_calls counts a call once it is inside Next(), under the lock the
    // consumer gives up only to wait: from here on it is waiting.
    for (int i = 0; i < 6000 && loader->Metrics().consumer.next_calls == 0;
         ++i) {  // <= 30 s: a hang guard
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    block = false;
  });
  DrainEpoch(*loader, 5);
  release.join();
  MetricsSnapshot m = loader->Metrics();
  EXPECT_GE(m.consumer.wait_ns, 20'000'000u);
  EXPECT_EQ(m.ops[0].name, "slow");
  EXPECT_GE(m.ops[0].busy_ns, 20u * 2'000'000u);
  // The workers go on into the next epoch, then idle once the ring is full
  // and the consumer takes nothing (polled: a busy machine may take a while;
  // 30 s only guards a hang).
  WorkerMetrics idle = loader->Metrics().WorkerTotals();
  for (int i = 0; i < 6000 && idle.blocked_output_ns == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    idle = loader->Metrics().WorkerTotals();
  }
  EXPECT_GT(idle.blocked_output_ns, 0u);
  EXPECT_GT(idle.samples, 20u);
}

}  // namespace
}  // namespace feedline
