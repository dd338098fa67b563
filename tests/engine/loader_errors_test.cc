// Loader: sample errors under the raise and skip policies (docs/reliability.md
// 16, 22) and stream errors from the allocator.
#include <set>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using testing::BatchCopy;
using testing::MakeTestPipeline;
using testing::MustCreate;

LoaderOptions Options(uint32_t threads, ErrorPolicy policy, uint64_t max_errors) {
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;  // sample id i is at position i: easy to reason about
  o.num_threads = threads;
  o.error_policy = policy;
  o.max_errors = max_errors;
  return o;
}

TEST(LoaderErrorsTest, RaiseDeliversEarlierBatchesThenTheErrorAtItsBatch) {
  for (uint32_t threads : {1u, 2u, 8u}) {
    const int baseline = testing::ThreadBaseline();
    auto loader =
        MustCreate(MakeTestPipeline({.num_samples = 40, .fail_ids = {13}, .max_jitter_us = 100}),
                   Options(threads, ErrorPolicy::kRaise, 0));
    Batch b;
    bool end = false;
    for (uint64_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(loader->Next(&b, &end).ok());
      EXPECT_EQ(b.index(), i);
    }
    Status st = loader->Next(&b, &end);  // batch 3 holds ids 12..15
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    const std::string m(st.message());
    for (const char* part : {"sample 13", "epoch 0", "batch 3", "op 'read'", "file 'synthetic.fls'",
                             "record 13", "offset 1300", "key 's13'", "checksum mismatch"}) {
      EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
    }
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(loader->Next(&b, &end), st) << "the stream stays stopped";
    MetricsSnapshot metrics = loader->Metrics();
    EXPECT_EQ(metrics.errors.total, 1u);
    ASSERT_EQ(metrics.errors.log.size(), 1u);
    EXPECT_EQ(metrics.errors.log[0].sample_id, 13u);
    loader.reset();
    EXPECT_EQ(testing::CountThreadsSettled(baseline), baseline);
  }
}

TEST(LoaderErrorsTest, SkipDropsBadSamplesCountsThemAndKeepsTheRest) {
  const std::set<uint64_t> bad = {1, 2, 13, 39};
  std::vector<BatchCopy> reference;
  for (uint32_t threads : {1u, 3u}) {
    auto loader =
        MustCreate(MakeTestPipeline({.num_samples = 40, .fail_ids = bad, .max_jitter_us = 50}),
                   Options(threads, ErrorPolicy::kSkip, 4));
    std::vector<BatchCopy> batches;
    std::vector<uint64_t> ids, skipped;
    Batch b;
    bool end = false;
    while (true) {
      ASSERT_TRUE(loader->Next(&b, &end).ok());
      if (end) break;
      batches.push_back(testing::Copy(b));
      ids.insert(ids.end(), b.sample_ids().begin(), b.sample_ids().end());
      for (const SampleError& e : b.skipped()) skipped.push_back(e.sample_id);
      // Survivors are compacted: each slot holds the sample its id says.
      std::span<int64_t> meta = b.field_as<int64_t>(0);
      for (size_t i = 0; i < b.size(); ++i) {
        EXPECT_EQ(meta[3 * i], static_cast<int64_t>(b.sample_ids()[i]));
      }
    }
    EXPECT_EQ(batches.size(), 10u);
    EXPECT_EQ(batches[0].ids, (std::vector<uint64_t>{0, 3}));
    EXPECT_EQ(skipped, (std::vector<uint64_t>{1, 2, 13, 39}));
    EXPECT_EQ(ids.size(), 36u);
    for (uint64_t id : ids) EXPECT_EQ(bad.count(id), 0u);
    MetricsSnapshot m = loader->Metrics();
    EXPECT_EQ(m.errors.total, 4u);
    EXPECT_EQ(m.errors.skipped, 4u);
    EXPECT_EQ(m.errors.by_reason.at("read/DataLoss"), 4u);
    if (reference.empty())
      reference = batches;
    else
      EXPECT_EQ(batches, reference);
  }
}

TEST(LoaderErrorsTest, SkipFailsWithASummaryOnErrorMaxPlusOne) {
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 40, .fail_ids = {5, 6, 30}}),
                           Options(2, ErrorPolicy::kSkip, 2));
  Batch b;
  bool end = false;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(loader->Next(&b, &end).ok()) << i;
  Status st = loader->Next(&b, &end);  // batch 7 holds id 30: error 3 > 2
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  const std::string m(st.message());
  EXPECT_NE(m.find("too many sample errors: 3 > max_errors=2"), std::string::npos) << m;
  EXPECT_NE(m.find("read/DataLoss: 3"), std::string::npos) << m;
  EXPECT_NE(m.find("sample 30"), std::string::npos) << m;
}

TEST(LoaderErrorsTest, SkipWithZeroBudgetFailsOnTheFirstError) {
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 40, .fail_ids = {0}}),
                           Options(2, ErrorPolicy::kSkip, 0));
  Batch b;
  bool end = false;
  Status st = loader->Next(&b, &end);
  EXPECT_NE(st.message().find("too many sample errors: 1 > max_errors=0"), std::string::npos);
}

TEST(LoaderErrorsTest, ErrorLogIsBoundedAndCountsWhatItDropped) {
  std::set<uint64_t> bad;
  for (uint64_t i = 0; i < 100; i += 2) bad.insert(i);
  LoaderOptions o = Options(2, ErrorPolicy::kSkip, 1000);
  o.error_log_capacity = 5;
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 100, .fail_ids = bad}), o);
  testing::DrainEpoch(*loader);
  MetricsSnapshot m = loader->Metrics();
  EXPECT_EQ(m.errors.total, 50u);
  EXPECT_EQ(m.errors.log.size(), 5u);
  EXPECT_EQ(m.errors.log_dropped, 45u);
  EXPECT_EQ(m.errors.log[0].sample_id, 0u);
  // Op counters count when a sample fails, including the next epoch's
  // prefetch; errors.total counts at delivery.
  EXPECT_GE(m.ops[0].errors, 50u);
}

// docs/reliability.md 38: an empty batch would reach the loop as a NaN loss.
TEST(LoaderErrorsTest, ABatchWhoseSamplesAllFailIsNeverDelivered) {
  for (uint32_t threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    // Batches of 4 over 16 samples: the first and the third fail whole.
    auto loader = MustCreate(
        MakeTestPipeline({.num_samples = 16, .fail_ids = {0, 1, 2, 3, 8, 9, 10, 11, 13}}),
        Options(threads, ErrorPolicy::kSkip, 100));
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<BatchCopy> batches = testing::DrainEpoch(*loader);
      ASSERT_EQ(batches.size(), 2u);
      EXPECT_EQ(batches[0].ids, (std::vector<uint64_t>{4, 5, 6, 7}));
      EXPECT_EQ(batches[1].ids, (std::vector<uint64_t>{12, 14, 15}));
    }
    const MetricsSnapshot m = loader->Metrics();
    EXPECT_EQ(m.errors.empty_batches, 4u);
    EXPECT_EQ(m.errors.skipped, 18u);
  }
  // Across ranks, skipping would leave this rank a batch short (a hang at the
  // next collective): the stream stops, naming batch, rank and why.
  LoaderOptions ranked = Options(2, ErrorPolicy::kSkip, 100);
  ranked.rank = 1;
  ranked.world_size = 2;
  // Rank 1 of 2, batches of 4: fail every sample of its batch 0.
  SamplerOptions so;
  so.num_samples = 16;
  so.batch_size = 4;
  so.rank = 1;
  so.world_size = 2;
  const EpochPlan plan = Sampler::Create(so)->Plan(0);
  const std::set<uint64_t> first_batch(plan.ids.begin(), plan.ids.begin() + 4);
  auto rank1 = MustCreate(MakeTestPipeline({.num_samples = 16, .fail_ids = first_batch}), ranked);
  Batch b;
  bool end = false;
  Status st = rank1->Next(&b, &end);
  for (int i = 0; st.ok() && !end && i < 8; ++i) st = rank1->Next(&b, &end);
  ASSERT_EQ(st.code(), StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("on rank 1 of 2"), std::string::npos) << st;
  EXPECT_NE(st.message().find("hang at the next collective"), std::string::npos) << st;
  // A last batch that fails whole: the epoch simply ends.
  auto tail = MustCreate(MakeTestPipeline({.num_samples = 8, .fail_ids = {4, 5, 6, 7}}),
                         Options(2, ErrorPolicy::kSkip, 10));
  EXPECT_EQ(testing::DrainEpoch(*tail).size(), 1u);
}

class FailingAllocator final : public BufferAllocator {
 public:
  Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) override {
    return ResourceExhaustedError("pinned pool exhausted at " + std::to_string(bytes) + " bytes");
  }
  std::string_view name() const override { return "failing"; }
};

TEST(LoaderErrorsTest, AllocatorFailureStopsTheStreamNamingAllocatorAndSize) {
  LoaderOptions o = Options(2, ErrorPolicy::kRaise, 0);
  o.allocator = std::make_shared<FailingAllocator>();
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 40}), o);
  Batch b;
  bool end = false;
  Status st = loader->Next(&b, &end);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("'failing' allocator"), std::string::npos) << st;
  EXPECT_NE(st.message().find("pinned pool exhausted"), std::string::npos) << st;
}

}  // namespace
}  // namespace feedline
