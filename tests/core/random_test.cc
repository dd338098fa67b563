#include "feedline/random.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace feedline {
namespace {

// Known-answer vectors of the Random123 distribution (kat_vectors,
// "philox4x32 10" lines): counter, key -> output.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      Philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      Philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Golden values pin the whole derivation (key from seed and epoch, counter
// layout, draw order). If this test fails, every augmentation users have
// seen would change: don't update the numbers, fix the code.
TEST(SampleRngTest, GoldenValuesPinTheDerivation) {
  EXPECT_EQ(EpochKey(0, 0), 0u);  // Mix64(0) == 0
  EXPECT_EQ(EpochKey(42, 3), Mix64(Mix64(42) ^ 3));
  SampleRng a = SampleRng::ForSample(0, 0, 0, 0);
  // Key 0 and counter 0 is the first known-answer vector.
  EXPECT_EQ(a.NextU32(), 0x6627e8d5u);
  EXPECT_EQ(a.NextU32(), 0xe169c58du);
  EXPECT_EQ(a.NextU32(), 0xbc57ac4cu);
  EXPECT_EQ(a.NextU32(), 0x9b00dbd8u);
  // Then block 1: counter {0, 0, 0, 1}.
  EXPECT_EQ(a.NextU32(), Philox4x32_10({0, 0, 0, 1}, {0, 0})[0]);

  const uint64_t key = EpochKey(1234, 7);
  SampleRng b = SampleRng::ForSample(1234, 7, 0x100000005ull, 3);
  const auto block =
      Philox4x32_10({5, 1, 3, 0}, {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  EXPECT_EQ(b.NextU64(), uint64_t{block[0]} | uint64_t{block[1]} << 32);
  EXPECT_EQ(EpochKey(1234, 7), 0x453eec1319592ca0ull);
  EXPECT_EQ(SampleRng::ForSample(1234, 7, 99, 2).NextU64(), 0xc696443282cb0f57ull);
}

TEST(SampleRngTest, SameKeyGivesSameStream) {
  SampleRng a = SampleRng::ForSample(5, 1, 77, 2);
  SampleRng b = SampleRng::ForSample(5, 1, 77, 2);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.NextU64(), b.NextU64());
}

TEST(SampleRngTest, SamplesOpsEpochsAndSeedsDrawDistinctStreams) {
  std::set<uint64_t> first;
  for (uint64_t seed : {0, 1}) {
    for (uint64_t epoch : {0, 1}) {
      for (uint64_t id = 0; id < 50; ++id) {
        for (uint32_t op = 0; op < 3; ++op) {
          first.insert(SampleRng::ForSample(seed, epoch, id, op).NextU64());
        }
      }
    }
  }
  EXPECT_EQ(first.size(), 2u * 2 * 50 * 3);
}

TEST(SampleRngTest, UniformIsInUnitIntervalWithRightMean) {
  SampleRng r = SampleRng::ForSample(9, 0, 1, 0);
  double sum = 0;
  constexpr int kN = 200000;
  for (int i = 0; i < kN; ++i) {
    const double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Standard error of the mean is 1/sqrt(12 kN) ~ 0.00065; allow 5 sigma.
  EXPECT_NEAR(sum / kN, 0.5, 0.0033);
}

TEST(SampleRngTest, UniformIntIsUnbiasedByChiSquare) {
  SampleRng r = SampleRng::ForSample(11, 0, 2, 0);
  constexpr int kBins = 7, kN = 70000;
  std::array<int, kBins> counts{};
  for (int i = 0; i < kN; ++i) {
    const uint64_t v = r.UniformInt(kBins);
    ASSERT_LT(v, uint64_t{kBins});
    ++counts[v];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - kN / kBins) * (c - kN / kBins) / double(kN / kBins);
  // 6 degrees of freedom: P(chi2 > 22.46) = 0.001.
  EXPECT_LT(chi2, 22.46);
  EXPECT_EQ(r.UniformInt(0), 0u);
  EXPECT_EQ(r.UniformInt(1), 0u);
}

TEST(SampleRngTest, BernoulliMatchesProbability) {
  SampleRng r = SampleRng::ForSample(3, 0, 0, 0);
  int heads = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) heads += r.Bernoulli(0.25);
  EXPECT_NEAR(heads / double(kN), 0.25, 0.007);  // 5 sigma
}

}  // namespace
}  // namespace feedline
