#include "feedline/sampler.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace feedline {
namespace {

Sampler Make(uint64_t n, uint64_t batch, uint32_t rank, uint32_t world, bool shuffle,
             bool drop_last, uint64_t seed = 7) {
  SamplerOptions o;
  o.num_samples = n;
  o.batch_size = batch;
  o.rank = rank;
  o.world_size = world;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  Result<Sampler> s = Sampler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

TEST(SamplerTest, RejectsBadOptionsNamingTheField) {
  SamplerOptions o;
  o.num_samples = 0;
  EXPECT_NE(Sampler::Create(o).status().message().find("num_samples"), std::string::npos);
  o.num_samples = 10;
  o.batch_size = 0;
  EXPECT_NE(Sampler::Create(o).status().message().find("batch_size"), std::string::npos);
  o.batch_size = 2;
  o.world_size = 0;
  EXPECT_NE(Sampler::Create(o).status().message().find("world_size"), std::string::npos);
  o.world_size = 2;
  o.rank = 2;
  EXPECT_NE(Sampler::Create(o).status().message().find("rank 2"), std::string::npos);
}

TEST(SamplerTest, SequentialOrderWithoutShuffle) {
  Sampler s = Make(10, 3, 0, 1, false, false);
  EpochPlan p = s.Plan(0);
  EXPECT_EQ(p.ids, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p.num_batches, 4u);
  EXPECT_EQ(p.BatchEnd(3) - p.BatchBegin(3), 1u);
}

TEST(SamplerTest, ShuffleIsAPermutationThatChangesPerEpochAndIsReproducible) {
  Sampler s = Make(1000, 10, 0, 1, true, false);
  std::vector<uint64_t> e0 = s.GlobalOrder(0), e1 = s.GlobalOrder(1);
  std::vector<uint64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, iota);
  EXPECT_EQ(e0, Make(1000, 10, 0, 1, true, false).GlobalOrder(0));
  EXPECT_NE(e0, Make(1000, 10, 0, 1, true, false, /*seed=*/8).GlobalOrder(0));
}

TEST(SamplerTest, ShuffleIsUniformOverPositions) {
  // Where does sample 0 land, over many epochs? Each of 8 positions ~1/8.
  Sampler s = Make(8, 1, 0, 1, true, false);
  std::vector<int> where(8, 0);
  constexpr int kEpochs = 8000;
  for (int e = 0; e < kEpochs; ++e) {
    std::vector<uint64_t> order = s.GlobalOrder(e);
    ++where[std::find(order.begin(), order.end(), 0u) - order.begin()];
  }
  double chi2 = 0;
  for (int c : where) chi2 += (c - kEpochs / 8.0) * (c - kEpochs / 8.0) / (kEpochs / 8.0);
  EXPECT_LT(chi2, 24.32);  // 7 dof, p = 0.001
}

// docs/reliability.md 28: every rank gets the same number of batches; with
// drop_last each sample goes to at most one rank; without it every sample is
// seen and padding duplicates are counted.
class SamplerCoverageTest : public ::testing::TestWithParam<std::tuple<uint32_t, bool, bool>> {};

TEST_P(SamplerCoverageTest, EachSampleOncePerEpochAcrossRanks) {
  const auto [world, drop_last, shuffle] = GetParam();
  for (uint64_t n : {1u, 5u, 23u, 100u, 101u}) {
    for (uint64_t batch : {1u, 3u, 8u}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " batch=" + std::to_string(batch));
      std::map<uint64_t, int> seen;
      uint64_t padding = 0;
      std::set<uint64_t> batches;
      for (uint32_t r = 0; r < world; ++r) {
        Sampler s = Make(n, batch, r, world, shuffle, drop_last);
        EpochPlan p = s.Plan(3);
        batches.insert(p.num_batches);
        EXPECT_EQ(p.ids.size(), s.samples_per_rank());
        for (uint64_t k = 0; k < p.ids.size(); ++k) {
          ASSERT_LT(p.ids[k], n);
          if (k >= p.first_padding)
            ++padding;
          else
            ++seen[p.ids[k]];
        }
        // Every batch is full except possibly the last, same length everywhere.
        for (uint64_t b = 0; b + 1 < p.num_batches; ++b) {
          EXPECT_EQ(p.BatchEnd(b) - p.BatchBegin(b), batch);
        }
        EXPECT_EQ(p.num_batches == 0 ? p.ids.size() : p.BatchEnd(p.num_batches - 1), p.ids.size());
      }
      EXPECT_EQ(batches.size(), 1u) << "ranks disagree on the number of batches";
      for (auto [id, count] : seen) EXPECT_EQ(count, 1) << "sample " << id;
      if (drop_last) {
        EXPECT_EQ(seen.size(), n / (world * batch) * world * batch);
        EXPECT_EQ(padding, 0u);
      } else {
        EXPECT_EQ(seen.size(), n);
        EXPECT_EQ(padding, Make(n, batch, 0, world, shuffle, drop_last).num_padding());
        EXPECT_EQ(padding, (n + world - 1) / world * world - n);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SamplerCoverageTest,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u, 7u),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(SamplerTest, RankTakesPositionsCongruentToItsRank) {
  Sampler s0 = Make(20, 2, 1, 3, true, false);
  std::vector<uint64_t> order = s0.GlobalOrder(2);
  EpochPlan p = s0.Plan(2);
  for (uint64_t k = 0; k < p.first_padding; ++k) EXPECT_EQ(p.ids[k], order[1 + 3 * k]);
}

TEST(SamplerTest, GlobalBatchesDoNotDependOnWorldSize) {
  // Global batch 12 as 1x12, 2x6, 3x4, 4x3, 6x2: the union of the ranks'
  // batch b is the same set of samples.
  const uint64_t n = 100, g = 12;
  std::vector<std::vector<std::set<uint64_t>>> per_world;
  for (uint32_t w : {1u, 2u, 3u, 4u, 6u}) {
    std::vector<std::set<uint64_t>> global(n / g);
    for (uint32_t r = 0; r < w; ++r) {
      EpochPlan p = Make(n, g / w, r, w, true, true).Plan(5);
      for (uint64_t b = 0; b < p.num_batches; ++b) {
        for (uint64_t k = p.BatchBegin(b); k < p.BatchEnd(b); ++k) global[b].insert(p.ids[k]);
      }
    }
    per_world.push_back(global);
  }
  for (size_t i = 1; i < per_world.size(); ++i) EXPECT_EQ(per_world[i], per_world[0]);
}

TEST(SamplerStateTest, RoundTripsThePosition) {
  Sampler s = Make(100, 8, 1, 2, true, false);
  std::string blob = s.SaveState({3, 5});
  EXPECT_EQ(blob.size(), 80u);
  Result<SamplerPosition> pos = s.RestoreState(blob);
  ASSERT_TRUE(pos.ok()) << pos.status();
  EXPECT_EQ(*pos, (SamplerPosition{3, 5}));
  // Another rank of the same job reads the same blob (the position is global).
  EXPECT_TRUE(Make(100, 8, 0, 2, true, false).RestoreState(blob).ok());
}

void ExpectRefused(const Sampler& s, const std::string& blob, const std::string& field,
                   const std::string& saved, const std::string& here) {
  Result<SamplerPosition> r = s.RestoreState(blob);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string m(r.status().message());
  EXPECT_NE(m.find(field), std::string::npos) << m;
  EXPECT_NE(m.find(saved), std::string::npos) << m;
  EXPECT_NE(m.find(here), std::string::npos) << m;
}

// docs/reliability.md 27.
TEST(SamplerStateTest, RefusesMismatchedSeedDatasetOrOptionsNamingFieldAndValues) {
  const std::string blob = Make(100, 8, 0, 2, true, false, 7).SaveState({0, 1});
  ExpectRefused(Make(100, 8, 0, 2, true, false, 9), blob, "seed", "7", "9");
  ExpectRefused(Make(101, 8, 0, 2, true, false, 7), blob, "num_samples", "100", "101");
  ExpectRefused(Make(100, 8, 0, 2, false, false, 7), blob, "shuffle", "true", "false");
  ExpectRefused(Make(100, 8, 0, 2, true, true, 7), blob, "drop_last", "false", "true");
  ExpectRefused(Make(100, 4, 0, 2, true, false, 7), blob, "batch_size", "8", "4");
  ExpectRefused(Make(100, 8, 0, 4, true, false, 7), blob, "world_size", "2", "4");
}

TEST(SamplerStateTest, CorruptTruncatedOrForeignBlobsGiveClearErrors) {
  Sampler s = Make(100, 8, 0, 1, true, false);
  const std::string blob = s.SaveState({2, 3});
  EXPECT_EQ(s.RestoreState("").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.RestoreState(blob.substr(0, 40)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.RestoreState(blob + "x").status().code(), StatusCode::kDataLoss);
  EXPECT_NE(s.RestoreState("not a state blob at all").status().message().find("magic"),
            std::string::npos);
  std::string v9 = blob;
  v9[4] = 9;
  EXPECT_NE(s.RestoreState(v9).status().message().find("version 9 is not supported"),
            std::string::npos);
  // Every single-bit flip is caught.
  for (size_t bit = 0; bit < blob.size() * 8; ++bit) {
    std::string bad = blob;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_FALSE(s.RestoreState(bad).ok()) << "bit " << bit;
  }
}

// docs/reliability.md 27 and issue 12: a state saved on another dataset of the
// same size, or with another transform, is refused.
TEST(SamplerStateTest, RefusesAStateFromAnotherDatasetOrTransformOfTheSameSize) {
  SamplerOptions o;
  o.num_samples = 100;
  o.batch_size = 8;
  o.data_fingerprint = 0x1111;
  o.config_fingerprint = 0x2222;
  const std::string blob = Sampler::Create(o)->SaveState({0, 3});
  EXPECT_TRUE(Sampler::Create(o)->RestoreState(blob).ok());
  SamplerOptions other_data = o;
  other_data.data_fingerprint = 0x3333;
  ExpectRefused(*Sampler::Create(other_data), blob, "dataset fingerprint", "0x0000000000001111",
                "0x0000000000003333");
  SamplerOptions other_config = o;
  other_config.config_fingerprint = 0x4444;
  ExpectRefused(*Sampler::Create(other_config), blob, "transform fingerprint", "0x0000000000002222",
                "0x0000000000004444");
  // 0 means "not known": nothing to compare.
  SamplerOptions unknown = o;
  unknown.data_fingerprint = unknown.config_fingerprint = 0;
  EXPECT_TRUE(Sampler::Create(unknown)->RestoreState(blob).ok());
}

// A version-1 state (64 bytes, no fingerprints) from an earlier release is
// still read.
TEST(SamplerStateTest, ReadsVersionOneStates) {
  std::string v1 = "FLSS";
  auto put = [&v1](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) v1.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(1, 2);  // version
  put(1, 2);  // flags: shuffle
  for (uint64_t v :
       {uint64_t{7}, uint64_t{100}, uint64_t{8}, uint64_t{1}, uint64_t{2}, uint64_t{5}})
    put(v, 8);
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a-64 of the 56 bytes so far
  for (char c : v1) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  put(h, 8);
  ASSERT_EQ(v1.size(), 64u);
  Result<SamplerPosition> pos = Make(100, 8, 0, 1, true, false, 7).RestoreState(v1);
  ASSERT_TRUE(pos.ok()) << pos.status();
  EXPECT_EQ(*pos, (SamplerPosition{2, 5}));
}

TEST(SamplerStateTest, ElasticRestoreKeepsGlobalBatchAcrossWorldSizes) {
  // 4 ranks x 3 = 12 -> 2 ranks x 6 -> 3 ranks x 4.
  const std::string at4 = Make(120, 3, 0, 4, true, true).SaveState({1, 4});
  Sampler two = Make(120, 6, 1, 2, true, true);
  EXPECT_FALSE(two.RestoreState(at4).ok());  // not without elastic
  Result<SamplerPosition> p = two.RestoreState(at4, /*elastic=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (SamplerPosition{1, 4}));
  Result<SamplerPosition> q = Make(120, 4, 2, 3, true, true).RestoreState(two.SaveState(*p), true);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q, (SamplerPosition{1, 4}));
  // A different global batch is refused even when elastic.
  Result<SamplerPosition> bad = Make(120, 5, 0, 2, true, true).RestoreState(at4, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("global batch"), std::string::npos);
}

// Grouped shuffle (SamplerOptions::group_sizes): a permutation whose
// groups each lie inside one window of `group_window` groups.
TEST(SamplerGroupedTest, GroupsStayInsideTheirWindowAndEveryIdComesOnce) {
  SamplerOptions o;
  o.num_samples = 0;
  o.group_sizes = {5, 1, 9, 5, 5, 3, 12, 5, 4};
  for (uint64_t s : o.group_sizes) o.num_samples += s;
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 3;
  std::vector<uint64_t> first(o.group_sizes.size());
  for (size_t g = 1; g < first.size(); ++g) first[g] = first[g - 1] + o.group_sizes[g - 1];
  auto group_of = [&](uint64_t id) {
    return static_cast<size_t>(std::upper_bound(first.begin(), first.end(), id) - first.begin() -
                               1);
  };
  for (uint64_t window : {1u, 2u, 4u, 100u}) {
    o.group_window = window;
    Result<Sampler> s = Sampler::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    const std::vector<uint64_t> order = s->GlobalOrder(5);
    std::vector<uint64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < o.num_samples; ++i) ASSERT_EQ(sorted[i], i);
    // Cut the order into the windows' spans: each span holds whole groups, at most `window` of
    // them.
    std::set<size_t> seen_groups, open;
    size_t pos = 0;
    while (pos < order.size()) {
      std::set<size_t> groups;
      uint64_t rows = 0, span = 0;
      do {
        const size_t g = group_of(order[pos + span]);
        if (groups.insert(g).second) rows += o.group_sizes[g];
        ++span;
      } while (span < rows);
      EXPECT_EQ(span, rows);
      EXPECT_LE(groups.size(), window);
      for (size_t g : groups)
        EXPECT_TRUE(seen_groups.insert(g).second) << "group " << g << " in two windows";
      pos += span;
    }
    EXPECT_EQ(seen_groups.size(), o.group_sizes.size());
    EXPECT_EQ(s->GlobalOrder(5), order);  // a pure function of (seed, epoch)
    EXPECT_NE(s->GlobalOrder(6), order);
  }
  // Window 1 in order of the groups: each group's rows are consecutive.
  o.group_window = 1;
  const std::vector<uint64_t> one = Sampler::Create(o)->GlobalOrder(0);
  for (size_t p = 1; p < one.size(); ++p) {
    if (group_of(one[p]) != group_of(one[p - 1])) {
      for (size_t q = 0; q < p; ++q) EXPECT_NE(group_of(one[q]), group_of(one[p])) << "group split";
    }
  }
}

TEST(SamplerGroupedTest, RefusesGroupsThatDoNotCoverTheDataset) {
  SamplerOptions o;
  o.num_samples = 10;
  o.shuffle = true;
  o.group_sizes = {4, 5};
  Result<Sampler> short_groups = Sampler::Create(o);
  ASSERT_FALSE(short_groups.ok());
  EXPECT_NE(short_groups.status().message().find("add up to 9, num_samples is 10"),
            std::string::npos);
  o.group_sizes = {4, 0, 6};
  Result<Sampler> empty = Sampler::Create(o);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("group_sizes[1] is 0"), std::string::npos);
}

}  // namespace
}  // namespace feedline
