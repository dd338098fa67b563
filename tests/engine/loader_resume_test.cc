// Loader: exact mid-epoch resume (docs/reliability.md 23, 24, 26, 27).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using testing::BatchCopy;
using testing::DrainEpoch;
using testing::MakeTestPipeline;
using testing::MustCreate;

LoaderOptions Options(uint32_t threads, uint32_t depth, bool shuffle) {
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = shuffle;
  o.seed = 99;
  o.num_threads = threads;
  o.ring_depth = depth;
  return o;
}

// Two epochs in full, as one list.
std::vector<BatchCopy> TwoEpochs(Loader& loader) {
  std::vector<BatchCopy> all = DrainEpoch(loader);
  std::vector<BatchCopy> e1 = DrainEpoch(loader);
  all.insert(all.end(), e1.begin(), e1.end());
  return all;
}

// Save before every batch of an epoch (with batches in flight), restore into
// a fresh loader with other thread and ring settings: exactly the remaining
// batches, byte for byte, augmentations included, then the next epoch.
TEST(LoaderResumeTest, RestoreBeforeEveryBatchYieldsExactlyTheRemainingStream) {
  const testing::TestPipelineOptions tp{.num_samples = 30, .max_jitter_us = 30};
  for (bool shuffle : {false, true}) {
    auto reference_loader = MustCreate(MakeTestPipeline(tp), Options(1, 1, shuffle));
    const std::vector<BatchCopy> reference = TwoEpochs(*reference_loader);
    const size_t per_epoch = reference.size() / 2;
    ASSERT_EQ(per_epoch, 8u);
    for (uint32_t threads : {1u, 2u, 3u}) {
      for (uint32_t depth : {1u, 2u, 4u}) {
        for (size_t k = 0; k <= per_epoch; ++k) {
          SCOPED_TRACE("shuffle=" + std::to_string(shuffle) +
                       " threads=" + std::to_string(threads) + " depth=" + std::to_string(depth) +
                       " k=" + std::to_string(k));
          auto first = MustCreate(MakeTestPipeline(tp), Options(threads, depth, shuffle));
          std::vector<BatchCopy> before = DrainEpoch(*first, k);
          const std::string state = first->SaveState();
          first.reset();

          auto second = MustCreate(MakeTestPipeline(tp), Options(4 - threads, 5 - depth, shuffle));
          ASSERT_TRUE(second->RestoreState(state).ok());
          std::vector<BatchCopy> after = TwoEpochs(*second);
          // The restored stream finishes epoch 0 then runs epoch 1.
          before.insert(before.end(), after.begin(), after.end());
          EXPECT_EQ(before, reference);
        }
      }
    }
  }
}

TEST(LoaderResumeTest, StateAfterTheEndOfEpochResumesIntoTheNextEpoch) {
  const testing::TestPipelineOptions tp{.num_samples = 30};
  auto a = MustCreate(MakeTestPipeline(tp), Options(2, 2, true));
  DrainEpoch(*a);  // includes the end-of-epoch marker
  const std::string state = a->SaveState();
  std::vector<BatchCopy> expected = DrainEpoch(*a);
  auto b = MustCreate(MakeTestPipeline(tp), Options(2, 2, true));
  ASSERT_TRUE(b->RestoreState(state).ok());
  EXPECT_EQ(b->epoch(), 1u);
  EXPECT_EQ(DrainEpoch(*b), expected);
}

TEST(LoaderResumeTest, RestoringInPlaceRewindsALiveLoader) {
  const testing::TestPipelineOptions tp{.num_samples = 30};
  auto loader = MustCreate(MakeTestPipeline(tp), Options(3, 3, true));
  DrainEpoch(*loader, 2);
  const std::string state = loader->SaveState();
  std::vector<BatchCopy> rest = DrainEpoch(*loader);
  ASSERT_TRUE(loader->RestoreState(state).ok());
  EXPECT_EQ(DrainEpoch(*loader), rest);
}

// position() is the next batch to deliver (what a framework checks its own
// step count against on resume), restored positions included.
TEST(LoaderResumeTest, PositionIsTheNextBatchToDeliver) {
  const testing::TestPipelineOptions tp{.num_samples = 30};
  auto loader = MustCreate(MakeTestPipeline(tp), Options(2, 3, true));
  EXPECT_EQ(loader->position(), (SamplerPosition{0, 0}));
  DrainEpoch(*loader, 3);
  EXPECT_EQ(loader->position(), (SamplerPosition{0, 3}));
  const std::string state = loader->SaveState();
  DrainEpoch(*loader);
  EXPECT_EQ(loader->position(), (SamplerPosition{1, 0}));
  auto other = MustCreate(MakeTestPipeline(tp), Options(1, 1, true));
  ASSERT_TRUE(other->RestoreState(state).ok());
  EXPECT_EQ(other->position(), (SamplerPosition{0, 3}));
}

TEST(LoaderResumeTest, MismatchedStateIsRefusedAndThePositionKept) {
  const testing::TestPipelineOptions tp{.num_samples = 30};
  LoaderOptions other_seed = Options(2, 2, true);
  other_seed.seed = 100;
  auto donor = MustCreate(MakeTestPipeline(tp), other_seed);
  auto loader = MustCreate(MakeTestPipeline(tp), Options(2, 2, true));
  DrainEpoch(*loader, 3);
  const std::string position = loader->SaveState();
  Status st = loader->RestoreState(donor->SaveState());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("seed is 100 in the saved state but 99 here"), std::string::npos)
      << st;
  EXPECT_EQ(loader->SaveState(), position);
  EXPECT_EQ(loader->RestoreState("garbage").code(), StatusCode::kDataLoss);
}

// docs/reliability.md 26: 4 -> 2 -> 3 ranks with the same global batch: in
// elastic mode the global batches equal those of an uninterrupted run.
TEST(LoaderResumeTest, ElasticResumeAcrossWorldSizesKeepsTheGlobalBatches) {
  const testing::TestPipelineOptions tp{.num_samples = 100};
  constexpr uint64_t kGlobal = 12;
  auto make = [&](uint32_t rank, uint32_t world) {
    LoaderOptions o = Options(2, 2, true);
    o.batch_size = kGlobal / world;
    o.rank = rank;
    o.world_size = world;
    o.drop_last = true;
    o.elastic = true;
    return MustCreate(MakeTestPipeline(tp), o);
  };
  // global batch -> (sample id -> bytes of that sample's "noise")
  using Global = std::vector<std::set<uint64_t>>;
  auto run = [&](uint32_t world, const std::string& state, size_t max_batches,
                 Global* global) -> std::string {
    std::string saved;
    for (uint32_t r = 0; r < world; ++r) {
      auto loader = make(r, world);
      if (!state.empty()) {
        EXPECT_TRUE(loader->RestoreState(state).ok());
      }
      for (const BatchCopy& b : DrainEpoch(*loader, max_batches)) {
        if (global->size() <= b.index) global->resize(b.index + 1);
        (*global)[b.index].insert(b.ids.begin(), b.ids.end());
      }
      if (r == 0) saved = loader->SaveState();
    }
    return saved;
  };
  Global uninterrupted, elastic;
  run(1, "", SIZE_MAX, &uninterrupted);
  ASSERT_EQ(uninterrupted.size(), 8u);
  std::string s = run(4, "", 3, &elastic);  // global batches 0..2 on 4 ranks
  s = run(2, s, 2, &elastic);               // 3..4 on 2 ranks
  run(3, s, SIZE_MAX, &elastic);            // 5..7 on 3 ranks
  EXPECT_EQ(elastic, uninterrupted);

  // Without elastic, a different world size is refused.
  LoaderOptions strict = Options(2, 2, true);
  strict.batch_size = 6;
  strict.world_size = 2;
  strict.drop_last = true;
  auto loader = MustCreate(MakeTestPipeline(tp), strict);
  auto four = make(0, 4);
  Status st = loader->RestoreState(four->SaveState());
  EXPECT_NE(st.message().find("world_size is 4 in the saved state but 2 here"), std::string::npos)
      << st;
}

}  // namespace
}  // namespace feedline
