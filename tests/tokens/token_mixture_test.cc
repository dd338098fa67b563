// Mixtures: every global batch holds each source's share within one
// sequence, a source that runs out starts a new order, resume is exact,
// another world size sees the same global batches, and new weights take
// effect from a resumed position while each source's draws continue.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/tokens.h"
#include "tests/tokens/token_rows.h"
#include "tests/tokens/token_test_util.h"

namespace feedline {
namespace {

using ::testing::HasSubstr;
using testing_tokens::BatchRows;
using testing_tokens::Row;
using testing_tokens::WriteFlat;

constexpr uint64_t kSeqLen = 4;
constexpr uint64_t kWindow = 10;  // the global batch
// Source k's token at position t is kBase[k] + t: a row names its source
// and window by its first token.
constexpr int64_t kBase[] = {10000, 30000, 50000};

struct Draw {
  size_t source;
  uint64_t window;
  bool operator==(const Draw&) const = default;
};

Draw DrawOf(const Row& r) {
  for (size_t k = 3; k-- > 0;) {
    if (r.input_ids[0] >= kBase[k]) {
      return {k, static_cast<uint64_t>(r.input_ids[0] - kBase[k]) / kSeqLen};
    }
  }
  ADD_FAILURE() << "unknown row";
  return {};
}

class TokenMixtureTest : public testing_tokens::TempDirTest {
 protected:
  // Sources of 10, 5 and 3 windows.
  void SetUp() override {
    TempDirTest::SetUp();
    const uint64_t windows[] = {10, 5, 3};
    for (size_t k = 0; k < 3; ++k) {
      std::vector<int64_t> t;
      for (uint64_t i = 0; i < windows[k] * kSeqLen + 1; ++i) {
        t.push_back(kBase[k] + static_cast<int64_t>(i));
      }
      const std::string path = Path("s" + std::to_string(k) + ".bin");
      WriteFlat<uint16_t>(path, t);
      auto c = TokenCorpus::Open({path}, {});
      ASSERT_TRUE(c.ok());
      sources_.push_back(*TokenWindowPipeline(*c, kSeqLen));
    }
  }
  TokenMixtureOptions Mixture(std::vector<double> weights) const {
    TokenMixtureOptions o;
    o.weights = std::move(weights);
    o.window = kWindow;
    o.num_samples = 20;
    o.shuffle = true;
    o.seed = 3;
    return o;
  }
  static LoaderOptions Options(uint64_t batch, uint32_t world, uint32_t rank) {
    LoaderOptions o;
    o.batch_size = batch;
    o.world_size = world;
    o.rank = rank;
    o.num_threads = 2;
    o.seed = 3;
    o.elastic = true;
    o.max_bytes = 64 << 20;
    return o;
  }
  // The draws of `batches` global batches from the loader's position.
  static std::vector<Draw> Draws(Loader& loader, size_t batches) {
    std::vector<Draw> out;
    while (out.size() < batches * kWindow) {
      Batch b;
      bool end = false;
      Status st = loader.Next(&b, &end);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) break;
      if (end) continue;  // the next epoch follows
      for (const Row& r : BatchRows(b, kSeqLen)) out.push_back(DrawOf(r));
    }
    return out;
  }
  std::vector<Pipeline> sources_;
};

// Each block of n consecutive draws of a source is one of its epochs: a
// permutation of its windows.
void ExpectEpochsArePermutations(const std::vector<Draw>& draws, size_t source, uint64_t n,
                                 bool* orders_differ) {
  std::vector<std::vector<uint64_t>> epochs(1);
  for (const Draw& d : draws) {
    if (d.source != source) continue;
    if (epochs.back().size() == n) epochs.emplace_back();
    epochs.back().push_back(d.window);
  }
  for (size_t e = 0; e < epochs.size(); ++e) {
    std::vector<uint64_t> sorted = epochs[e];
    std::sort(sorted.begin(), sorted.end());
    if (sorted.size() < n) {
      EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "a repeat";
      continue;
    }
    for (uint64_t i = 0; i < n; ++i)
      EXPECT_EQ(sorted[i], i) << "source " << source << " epoch " << e;
    if (e > 0 && epochs[e] != epochs[0]) *orders_differ = true;
  }
}

TEST_F(TokenMixtureTest, EveryGlobalBatchHoldsEachShareWithinOneSequence) {
  const std::vector<double> weights = {0.55, 0.3, 0.15};
  auto p = TokenMixturePipeline(sources_, Mixture(weights));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto loader = Loader::Create(*p, Options(kWindow, 1, 0));
  ASSERT_TRUE(loader.ok());
  std::vector<Draw> draws = Draws(**loader, 12);  // 6 epochs of the mixture
  std::vector<uint64_t> total(3, 0);
  for (size_t b = 0; b < 12; ++b) {
    std::vector<uint64_t> n(3, 0);
    for (size_t i = 0; i < kWindow; ++i) ++n[draws[b * kWindow + i].source];
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_LE(std::abs(static_cast<double>(n[k]) - weights[k] * kWindow), 1.0)
          << "batch " << b << " source " << k << ": " << n[k];
      total[k] += n[k];
    }
  }
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_LE(std::abs(static_cast<double>(total[k]) - weights[k] * 120), 1.0) << k;
  }
  // Source 2 (3 windows) ran out many times, each time in a new order.
  bool differ = false;
  ExpectEpochsArePermutations(draws, 0, 10, &differ);
  ExpectEpochsArePermutations(draws, 1, 5, &differ);
  differ = false;
  ExpectEpochsArePermutations(draws, 2, 3, &differ);
  EXPECT_TRUE(differ) << "source 2's epochs all came in one order";
}

TEST_F(TokenMixtureTest, ResumeIsExactAndAnotherWorldSizeSeesTheSameGlobalBatches) {
  auto p = TokenMixturePipeline(sources_, Mixture({0.7, 0.2, 0.1}));
  ASSERT_TRUE(p.ok());
  auto whole = Loader::Create(*p, Options(kWindow, 1, 0));
  ASSERT_TRUE(whole.ok());
  const std::vector<Draw> reference = Draws(**whole, 7);
  // Stop after 3 global batches (into epoch 1), resume on 2 ranks of 5.
  auto first = Loader::Create(*p, Options(kWindow, 1, 0));
  ASSERT_TRUE(first.ok());
  const std::vector<Draw> head = Draws(**first, 3);
  ASSERT_TRUE(std::equal(head.begin(), head.end(), reference.begin()));
  const std::string state = (*first)->SaveState();
  for (uint32_t world : {1u, 2u}) {
    std::vector<std::vector<Draw>> ranks;
    for (uint32_t r = 0; r < world; ++r) {
      auto l = Loader::Create(*p, Options(kWindow / world, world, r));
      ASSERT_TRUE(l.ok());
      ASSERT_TRUE((*l)->RestoreState(state).ok());
      std::vector<Draw> d;
      while (d.size() < 4 * kWindow / world) {
        Batch b;
        bool end = false;
        ASSERT_TRUE((*l)->Next(&b, &end).ok());
        if (end) continue;
        for (const Row& row : BatchRows(b, kSeqLen)) d.push_back(DrawOf(row));
      }
      ranks.push_back(std::move(d));
    }
    // Global position p of the resumed stream is rank p % world's.
    for (size_t pos = 0; pos < 4 * kWindow; ++pos) {
      EXPECT_EQ(ranks[pos % world][pos / world], reference[3 * kWindow + pos])
          << "world " << world << " position " << pos;
    }
  }
}

TEST_F(TokenMixtureTest, NewWeightsTakeEffectAtTheResumedPositionAndDrawsContinue) {
  TokenMixtureOptions old_mix = Mixture({0.5, 0.5, 0.0});
  auto p = TokenMixturePipeline(sources_, old_mix);
  ASSERT_TRUE(p.ok());
  auto first = Loader::Create(*p, Options(kWindow, 1, 0));
  ASSERT_TRUE(first.ok());
  std::vector<Draw> draws = Draws(**first, 3);
  const uint64_t position = 30;  // the resumed global sample
  auto counts = TokenMixtureCounts({10, 5, 3}, old_mix, position);
  ASSERT_TRUE(counts.ok());
  std::vector<uint64_t> seen(3, 0);
  for (const Draw& d : draws) ++seen[d.source];
  EXPECT_EQ(*counts, seen);
  EXPECT_EQ(seen[2], 0u);

  TokenMixtureOptions new_mix = Mixture({0.2, 0.2, 0.6});
  new_mix.start = position;
  new_mix.counts = *counts;
  auto q = TokenMixturePipeline(sources_, new_mix);
  ASSERT_TRUE(q.ok());
  auto second = Loader::Create(*q, Options(kWindow, 1, 0));
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->RestoreState((*first)->SaveState()).ok());
  const std::vector<Draw> after = Draws(**second, 4);
  for (size_t b = 0; b < 4; ++b) {
    std::vector<uint64_t> n(3, 0);
    for (size_t i = 0; i < kWindow; ++i) ++n[after[b * kWindow + i].source];
    EXPECT_EQ(n, (std::vector<uint64_t>{2, 2, 6})) << "batch " << b;
  }
  // Each source's draws continue its epochs across the change: no repeat,
  // nothing skipped.
  draws.insert(draws.end(), after.begin(), after.end());
  bool differ = false;
  ExpectEpochsArePermutations(draws, 0, 10, &differ);
  ExpectEpochsArePermutations(draws, 1, 5, &differ);
  ExpectEpochsArePermutations(draws, 2, 3, &differ);
  // A sample before the segment (epoch 0 again) is refused, not guessed.
  ASSERT_TRUE((*second)->SetEpoch(0).ok());
  Batch b;
  bool end = false;
  Status st = (*second)->Next(&b, &end);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("before the resumed schedule"));
}

TEST_F(TokenMixtureTest, BadOptionsAreRefusedByName) {
  EXPECT_THAT(TokenMixturePipeline(sources_, Mixture({1, 1})).status().message(),
              HasSubstr("3 sources got 2 weights"));
  EXPECT_THAT(TokenMixturePipeline(sources_, Mixture({1, -1, 1})).status().message(),
              HasSubstr("weight 1"));
  EXPECT_THAT(TokenMixturePipeline(sources_, Mixture({0, 0, 0})).status().message(),
              HasSubstr("all 0"));
  TokenMixtureOptions o = Mixture({1, 1, 1});
  o.num_samples = 15;
  EXPECT_THAT(TokenMixturePipeline(sources_, o).status().message(),
              HasSubstr("not a positive multiple"));
  Pipeline not_tokens;
  not_tokens.num_samples = 3;
  EXPECT_THAT(TokenMixturePipeline({not_tokens}, Mixture({1})).status().message(),
              HasSubstr("not a token pipeline"));
  // Sources that write other fields cannot share one batch layout.
  auto c = TokenCorpus::Open({Path("s1.bin")}, {});
  ASSERT_TRUE(c.ok());
  std::vector<Pipeline> mixed = {
      sources_[0], *TokenWindowPipeline(*c, kSeqLen, TokenFieldSet{false, false, false})};
  EXPECT_THAT(TokenMixturePipeline(mixed, Mixture({1, 1})).status().message(),
              HasSubstr("token mixture source 1 writes other fields than source 0 (input_ids, "
                        "labels vs input_ids, labels, position_ids"));
}

}  // namespace
}  // namespace feedline
