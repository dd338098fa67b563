// The parallelism plan is a pure function of what the pipeline needs and the
// options: every budget rule checked without starting a thread.
#include "src/engine/detail/parallelism.h"

#include "gtest/gtest.h"

namespace feedline::detail {
namespace {

LoaderOptions Resolved(uint64_t max_bytes, uint32_t threads = 0, uint32_t ring_depth = 0) {
  LoaderOptions o;
  o.batch_size = 8;
  o.max_bytes = max_bytes;
  o.cpu_budget = 4;
  o.num_threads = threads;
  o.ring_depth = ring_depth;
  return o;
}

TEST(ParallelismTest, AutoThreadsStartAtTheCpuBudgetAndTheRingAtThree) {
  const PipelineDemand d{.batch_bytes = 1000};
  Result<Parallelism> p = PlanParallelism(d, Resolved(1 << 20));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->threads_auto && p->ring_auto);
  EXPECT_EQ(p->max_threads, 4u);
  EXPECT_EQ(p->initial_ring_depth, 3u);
  EXPECT_EQ(p->max_ring_depth, kMaxAutoRingDepth);
  EXPECT_EQ(p->scratch_allowance, 0u);  // no op charges scratch
}

TEST(ParallelismTest, TheScratchAllowanceIsAQuarterOfTheBudgetButLeavesTheRingItsMinimum) {
  PipelineDemand d{.batch_bytes = 100'000, .charges_scratch = true};
  Result<Parallelism> roomy = PlanParallelism(d, Resolved(4'000'000));
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->scratch_allowance, 1'000'000u);
  EXPECT_EQ(roomy->reserved_bytes, 1'000'000u);
  EXPECT_EQ(roomy->max_ring_depth, 30u);  // (4 MB - 1 MB) / 100 KB
  // 250 KB: an auto ring needs two batches (200 KB), so 50 KB are left.
  Result<Parallelism> tight = PlanParallelism(d, Resolved(250'000));
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->scratch_allowance, 50'000u);
  EXPECT_EQ(tight->max_ring_depth, 2u);
}

TEST(ParallelismTest, BudgetsTooSmallNameTheBytes) {
  PipelineDemand d{
      .batch_bytes = 1000, .batch_detail = "x uint8 125 bytes/sample", .reserved_bytes = 500};
  Result<Parallelism> none = PlanParallelism(d, Resolved(400));
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("all taken by the ops' 500 reserved bytes"),
            std::string::npos);
  Result<Parallelism> one = PlanParallelism(d, Resolved(1200));
  EXPECT_NE(one.status().message().find("cannot hold one batch"), std::string::npos)
      << one.status();
  EXPECT_NE(one.status().message().find("x uint8 125 bytes/sample"), std::string::npos)
      << one.status();
  Result<Parallelism> two = PlanParallelism(d, Resolved(2000));
  EXPECT_NE(two.status().message().find("an auto ring needs two"), std::string::npos)
      << two.status();
  EXPECT_TRUE(PlanParallelism(d, Resolved(2000, 2, 1)).ok());  // a fixed ring of one fits
  EXPECT_EQ(PlanParallelism(d, Resolved(1 << 20, kMaxThreads + 1)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ParallelismTest, OnlyASingleReadAheadIsTuned) {
  PipelineDemand d{.batch_bytes = 1000, .read_aheads = 1};
  EXPECT_TRUE(PlanParallelism(d, Resolved(1 << 20))->read_ahead);
  d.read_aheads = 2;
  EXPECT_FALSE(PlanParallelism(d, Resolved(1 << 20))->read_ahead);
}

}  // namespace
}  // namespace feedline::detail
