// Loader: stream contents, order and determinism.
#include "feedline/loader.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using testing::BatchCopy;
using testing::DrainEpoch;
using testing::MakeTestPipeline;
using testing::MustCreate;
using testing::TestPipelineOptions;

LoaderOptions Options(uint32_t threads, uint64_t batch = 8, bool shuffle = true) {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.seed = 42;
  o.num_threads = threads;
  return o;
}

TEST(LoaderTest, RejectsBadPipelinesAndOptions) {
  TestPipelineOptions tp;
  Pipeline no_ops = MakeTestPipeline(tp);
  no_ops.ops.clear();
  EXPECT_EQ(Loader::Create(no_ops, Options(1)).status().code(), StatusCode::kInvalidArgument);
  Pipeline no_fields = MakeTestPipeline(tp);
  no_fields.fields.clear();
  EXPECT_EQ(Loader::Create(no_fields, Options(1)).status().code(), StatusCode::kInvalidArgument);
  Pipeline empty = MakeTestPipeline(tp);
  empty.num_samples = 0;
  EXPECT_NE(Loader::Create(empty, Options(1)).status().message().find("num_samples"),
            std::string::npos);
  LoaderOptions bad = Options(1);
  bad.num_threads = 5000;
  EXPECT_NE(Loader::Create(MakeTestPipeline(tp), bad).status().message().find("num_threads"),
            std::string::npos);
}

// docs/reliability.md 20: a budget too small for one batch names the bytes needed.
TEST(LoaderTest, BudgetTooSmallForOneBatchNamesTheBytes) {
  LoaderOptions o = Options(1, 64);
  o.max_bytes = 1000;
  Result<std::unique_ptr<Loader>> r = Loader::Create(MakeTestPipeline({}), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  const std::string m(r.status().message());
  // 64 x (3 x 8) meta = 1536 bytes, 64 x 16 x 4 noise = 4096 bytes.
  EXPECT_NE(m.find("max_bytes=1000"), std::string::npos) << m;
  EXPECT_NE(m.find("5632 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("noise float32 64 bytes/sample"), std::string::npos) << m;
}

TEST(LoaderTest, DeliversBatchesInOrderWithTheSamplersIds) {
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 37}), Options(3, 5));
  ASSERT_NE(loader, nullptr);
  EpochPlan plan = loader->sampler().Plan(0);
  std::vector<BatchCopy> batches = DrainEpoch(*loader);
  ASSERT_EQ(batches.size(), 8u);
  std::vector<uint64_t> ids;
  for (size_t b = 0; b < batches.size(); ++b) {
    EXPECT_EQ(batches[b].index, b);
    EXPECT_EQ(batches[b].epoch, 0u);
    ids.insert(ids.end(), batches[b].ids.begin(), batches[b].ids.end());
  }
  EXPECT_EQ(ids, plan.ids);
  EXPECT_EQ(batches.back().ids.size(), 2u);  // 37 = 7 x 5 + 2
}

TEST(LoaderTest, OutputsLandInTheRightSlots) {
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 50}), Options(2, 7));
  ASSERT_NE(loader, nullptr);
  Batch b;
  bool end = false;
  ASSERT_TRUE(loader->Next(&b, &end).ok());
  ASSERT_EQ(b.size(), 7u);
  ASSERT_EQ(b.num_fields(), 2u);
  EXPECT_EQ(b.field(1).name, "noise");
  std::span<int64_t> meta = b.field_as<int64_t>(0);
  std::span<float> noise = b.field_as<float>(1);
  ASSERT_EQ(meta.size(), 7u * 3);
  ASSERT_EQ(noise.size(), 7u * 16);
  for (size_t i = 0; i < b.size(); ++i) {
    const uint64_t id = b.sample_ids()[i];
    EXPECT_EQ(meta[3 * i], static_cast<int64_t>(id));
    EXPECT_EQ(meta[3 * i + 1], static_cast<int64_t>(3 * id + 1));
    // op index 1 ("augment"), epoch 0, seed 42
    SampleRng rng = SampleRng::ForSample(42, 0, id, 1);
    for (size_t k = 0; k < 16; ++k) EXPECT_EQ(noise[16 * i + k], static_cast<float>(rng.Uniform()));
  }
  for (size_t f = 0; f < b.num_fields(); ++f) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data(f)) % kBufferAlignment, 0u);
  }
}

// docs/reliability.md 25: bit-identical output for any thread count and timing.
TEST(LoaderTest, StreamIsIdenticalForAnyThreadCountAndTiming) {
  std::vector<BatchCopy> reference;
  for (uint32_t threads : {1u, 2u, 3u, 8u}) {
    for (uint32_t depth : {1u, 3u}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " depth=" + std::to_string(depth));
      LoaderOptions o = Options(threads, 6);
      o.ring_depth = depth;
      auto loader = MustCreate(MakeTestPipeline({.num_samples = 61, .max_jitter_us = 200}), o);
      ASSERT_NE(loader, nullptr);
      std::vector<BatchCopy> epochs = DrainEpoch(*loader);
      std::vector<BatchCopy> e1 = DrainEpoch(*loader);
      epochs.insert(epochs.end(), e1.begin(), e1.end());
      ASSERT_EQ(epochs.size(), 2u * 11);
      if (reference.empty()) {
        reference = epochs;
      } else {
        EXPECT_EQ(epochs, reference);
      }
    }
  }
}

TEST(LoaderTest, EpochsDifferAndEndOfEpochIsReportedOnce) {
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 20}), Options(2, 5));
  ASSERT_NE(loader, nullptr);
  std::vector<BatchCopy> e0 = DrainEpoch(*loader);  // consumes the end marker
  EXPECT_EQ(loader->epoch(), 1u);
  std::vector<BatchCopy> e1 = DrainEpoch(*loader);
  ASSERT_EQ(e0.size(), 4u);
  ASSERT_EQ(e1.size(), 4u);
  EXPECT_EQ(e1[0].epoch, 1u);
  EXPECT_NE(e0[0].ids, e1[0].ids);
  EXPECT_NE(e0[0].bytes, e1[0].bytes);
}

TEST(LoaderTest, SetEpochRestartsAtThatEpochsFirstBatch) {
  auto fresh = MustCreate(MakeTestPipeline({.num_samples = 30}), Options(2, 4));
  fresh->SetEpoch(3);
  std::vector<BatchCopy> expected = DrainEpoch(*fresh);

  LoaderOptions o = Options(2, 4);
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 30}), o);
  DrainEpoch(*loader, 3);  // mid-epoch 0, batches in flight
  loader->SetEpoch(3);
  EXPECT_EQ(DrainEpoch(*loader), expected);

  o.start_epoch = 3;
  auto started = MustCreate(MakeTestPipeline({.num_samples = 30}), o);
  EXPECT_EQ(DrainEpoch(*started), expected);
}

TEST(LoaderTest, RanksTogetherSeeEverySampleOncePerEpoch) {
  for (uint32_t world : {2u, 3u, 7u}) {
    std::multiset<uint64_t> seen;
    std::set<size_t> batch_counts;
    for (uint32_t rank = 0; rank < world; ++rank) {
      LoaderOptions o = Options(2, 4);
      o.rank = rank;
      o.world_size = world;
      o.drop_last = false;
      auto loader = MustCreate(MakeTestPipeline({.num_samples = 45}), o);
      std::vector<BatchCopy> batches = DrainEpoch(*loader);
      batch_counts.insert(batches.size());
      for (const BatchCopy& b : batches) {
        for (size_t i = 0; i < b.ids.size(); ++i) {
          // Padding is flagged in the data too (meta[2]).
          int64_t is_padding;
          std::memcpy(&is_padding, b.bytes.data() + (3 * i + 2) * sizeof(int64_t), 8);
          if (!is_padding) seen.insert(b.ids[i]);
        }
      }
    }
    EXPECT_EQ(batch_counts.size(), 1u);
    EXPECT_EQ(seen.size(), 45u);
    EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 45u);
  }
}

TEST(LoaderTest, TheNextEpochIsPreparedBeforeTheBoundaryWithTheSameBytes) {
  for (uint32_t threads : {1u, 2u, 8u}) {
    LoaderOptions o = Options(threads, 4);
    o.ring_depth = 3;
    auto loader = MustCreate(MakeTestPipeline({.num_samples = 20, .max_jitter_us = 200}), o);
    ASSERT_EQ(DrainEpoch(*loader, 5).size(), 5u);  // every batch of epoch 0, not yet the end
    // Without the consumer asking, the workers fill the ring from epoch 1.
    MetricsSnapshot m = loader->Metrics();
    for (int i = 0; i < 6000 && m.ring.batches_completed < 8; ++i) {  // <= 30 s: a hang guard
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      m = loader->Metrics();
    }
    EXPECT_EQ(m.ring.batches_completed, 8u) << threads << " threads";
    EXPECT_TRUE(DrainEpoch(*loader).empty());  // the end of epoch 0
    // set_epoch(1) at the start of epoch 1 (DistributedSampler's idiom) keeps them.
    loader->SetEpoch(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // Discarding would free the ring and the workers would start again.
    EXPECT_EQ(loader->Metrics().ring.batches_started, 8u) << "nothing discarded";
    std::vector<BatchCopy> e1 = DrainEpoch(*loader);
    // The same bytes as a loader that starts at epoch 1, and epoch 2 too.
    LoaderOptions fresh = Options(3, 4);
    fresh.start_epoch = 1;
    auto reference = MustCreate(MakeTestPipeline({.num_samples = 20}), fresh);
    EXPECT_EQ(e1, DrainEpoch(*reference));
    EXPECT_EQ(DrainEpoch(*loader), DrainEpoch(*reference));
  }
}

}  // namespace
}  // namespace feedline
