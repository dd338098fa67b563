// The id scan (src/tokens/token_scan_hwy.h): on every Highway target this
// CPU runs (forced in turn), for each dtype width, sparse and dense hits,
// hits on the first and last token of a range and at every vector edge,
// and odd bounds, FindToken appends what the scalar reference appends and
// CountToken counts as many; a value whose low bytes match but whose high
// bytes differ is no hit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "src/tokens/token_scan_hwy.h"
#include "tests/hwy_targets.h"

namespace feedline::tokens::detail {
namespace {

using testing_hwy::Targets;

class TokenScanTest : public testing_hwy::TargetsTest {};

constexpr TokenDType kDTypes[] = {TokenDType::kUInt8,  TokenDType::kInt8,  TokenDType::kInt16,
                                  TokenDType::kUInt16, TokenDType::kInt32, TokenDType::kUInt32,
                                  TokenDType::kInt64};

// `n` ids of dtype's width, little-endian: random values that avoid
// `value`'s low bytes but share the lowest one (so a scan comparing
// fewer bytes than the width would find false hits), and `value` where
// `hit(t)`.
template <typename Hit>
std::vector<uint8_t> Ids(TokenDType dtype, uint64_t n, int64_t value, uint32_t seed, Hit&& hit) {
  std::mt19937_64 rng(seed);
  const size_t item = TokenDTypeSize(dtype);
  std::vector<uint8_t> bytes(n * item);
  for (uint64_t t = 0; t < n; ++t) {
    uint64_t v = static_cast<uint64_t>(value);
    if (!hit(t)) {
      do {
        v = (rng() & ~uint64_t{0xFF}) | (static_cast<uint64_t>(value) & 0xFF);
        if (item == 1) v = rng();
      } while (std::memcmp(&v, &value, item) == 0);
    }
    std::memcpy(&bytes[t * item], &v, item);  // little-endian host: the low bytes first
  }
  return bytes;
}

TEST_F(TokenScanTest, EveryTargetFindsWhatTheReferenceFinds) {
  ASSERT_FALSE(Targets().empty());
  const uint64_t n = 700;
  const int64_t value = 0x41;  // fits every dtype, as an eos must
  for (TokenDType dtype : kDTypes) {
    // Sparse (one id in 97), dense (every third), none, every token, and
    // the edges of 16, 32 and 64-lane blocks.
    const std::vector<std::vector<uint8_t>> corpora = {
        Ids(dtype, n, value, 1, [](uint64_t t) { return t % 97 == 5; }),
        Ids(dtype, n, value, 2, [](uint64_t t) { return t % 3 == 0; }),
        Ids(dtype, n, value, 3, [](uint64_t) { return false; }),
        Ids(dtype, n, value, 4, [](uint64_t) { return true; }),
        Ids(dtype, n, value, 5,
            [](uint64_t t) { return t % 16 == 0 || t % 32 == 31 || t % 64 == 63; }),
    };
    for (size_t c = 0; c < corpora.size(); ++c) {
      for (const auto& [first, last] : std::vector<std::pair<uint64_t, uint64_t>>{
               {0, n}, {0, 0}, {1, 2}, {3, 200}, {5, 6}, {63, 129}, {1, n - 1}, {96, 97}}) {
        std::vector<uint64_t> want;
        FindTokenReference(dtype, corpora[c].data(), first, last, value, 1, &want);
        for (int64_t target : Targets()) {
          hwy::SetSupportedTargetsForTest(target);
          SCOPED_TRACE(testing::Message()
                       << hwy::TargetName(target) << " dtype size " << TokenDTypeSize(dtype)
                       << " corpus " << c << " [" << first << ", " << last << ")");
          std::vector<uint64_t> got = {42};  // appended to, never cleared
          FindToken(dtype, corpora[c].data(), first, last, value, 1, &got);
          ASSERT_EQ(got.front(), 42u);
          got.erase(got.begin());
          EXPECT_EQ(got, want);
          EXPECT_EQ(CountToken(dtype, corpora[c].data(), first, last, value), want.size());
        }
      }
    }
  }
}

TEST(TokenScanReferenceTest, FindsTheIdsItWasGiven) {
  const uint16_t ids[] = {7, 0, 9, 0, 0, 3};
  std::vector<uint64_t> got;
  FindTokenReference(TokenDType::kUInt16, reinterpret_cast<const uint8_t*>(ids), 0, 6, 0, 10, &got);
  EXPECT_EQ(got, (std::vector<uint64_t>{11, 13, 14}));
}

}  // namespace
}  // namespace feedline::tokens::detail
