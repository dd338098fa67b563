// The concat window's fused pass (src/tokens/token_window_hwy.h): on every
// Highway target this CPU runs (forced in turn), each dtype it handles, odd
// segment bounds around every vector width, and each set of outputs, it
// writes what the scalar reference writes and nothing outside [a, b) (at
// two alignments of the outputs); a
// negative int32 id anywhere in the segment (or its last label) is
// reported, wherever it falls relative to the vectors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "src/tokens/token_window_hwy.h"
#include "tests/hwy_targets.h"

namespace feedline::tokens::detail {
namespace {

constexpr int64_t kUntouched = -7777;

using testing_hwy::Targets;

class TokenWindowKernelTest : public testing_hwy::TargetsTest {};

// `n` + 1 random ids of dtype's width, stored little-endian.
std::vector<uint8_t> Ids(TokenDType dtype, uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t item = TokenDTypeSize(dtype);
  std::vector<uint8_t> bytes((n + 1) * item);
  for (uint64_t i = 0; i <= n; ++i) {
    if (dtype == TokenDType::kUInt16) {
      const auto v = static_cast<uint16_t>(rng());
      std::memcpy(&bytes[i * item], &v, item);
    } else if (dtype == TokenDType::kUInt32) {
      const uint32_t v = rng();  // the top bit set too: must not read as negative
      std::memcpy(&bytes[i * item], &v, item);
    } else {
      const auto v = static_cast<int32_t>(rng() & 0x7FFFFFFFu);
      std::memcpy(&bytes[i * item], &v, item);
    }
  }
  return bytes;
}

// The four outputs, each starting `shift` elements into its vector: the
// kernel aligns its stores to the output's address, so the same segment
// takes another path through it at each shift.
struct Outputs {
  explicit Outputs(uint64_t n, uint64_t offset = 0)
      : shift(offset),
        input_ids(n + offset, kUntouched),
        labels(n + offset, kUntouched),
        position_ids(n + offset, kUntouched),
        document_ids(n + offset, kUntouched) {}
  uint64_t shift;
  std::vector<int64_t> input_ids, labels, position_ids, document_ids;
};

bool Segment(bool reference, TokenDType dtype, const std::vector<uint8_t>& ids, uint64_t a,
             uint64_t b, bool positions, bool documents, Outputs* o) {
  auto* fn = reference ? &WindowSegmentReference : &WindowSegment;
  const uint64_t s = o->shift;
  return fn(dtype, ids.data(), a, b, o->input_ids.data() + s, o->labels.data() + s,
            positions ? o->position_ids.data() + s : nullptr,
            documents ? o->document_ids.data() + s : nullptr, 5);
}

TEST_F(TokenWindowKernelTest, EveryTargetWritesWhatTheReferenceWrites) {
  const uint64_t n = 150;
  ASSERT_FALSE(Targets().empty());
  for (TokenDType dtype : {TokenDType::kUInt16, TokenDType::kUInt32, TokenDType::kInt32}) {
    ASSERT_TRUE(WindowKernelHandles(dtype));
    const std::vector<uint8_t> ids = Ids(dtype, n, 3);
    for (int64_t t : Targets()) {
      hwy::SetSupportedTargetsForTest(t);
      for (uint64_t a : {0, 1, 3, 7, 9, 16, 33}) {
        for (uint64_t len : {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100}) {
          const uint64_t b = std::min<uint64_t>(a + len, n);
          for (int set = 0; set < 8; ++set) {
            const bool positions = (set & 1) != 0, documents = (set & 2) != 0;
            const uint64_t shift = (set & 4) != 0 ? 3 : 0;
            Outputs want(n, shift), got(n, shift);
            ASSERT_TRUE(Segment(true, dtype, ids, a, b, positions, documents, &want));
            ASSERT_TRUE(Segment(false, dtype, ids, a, b, positions, documents, &got))
                << hwy::TargetName(t);
            const std::string what = std::string(TokenDTypeName(dtype)) + " [" + std::to_string(a) +
                                     ", " + std::to_string(b) + ") set " + std::to_string(set) +
                                     " on " + hwy::TargetName(t);
            ASSERT_EQ(got.input_ids, want.input_ids) << what;
            ASSERT_EQ(got.labels, want.labels) << what;
            ASSERT_EQ(got.position_ids, want.position_ids) << what;
            ASSERT_EQ(got.document_ids, want.document_ids) << what;
          }
        }
      }
    }
  }
}

TEST_F(TokenWindowKernelTest, TheReferenceIsTheWindowsDefinition) {
  // input_ids = ids, labels = ids shifted by one, positions from a, the
  // document id given; outside [a, b) nothing is written.
  const std::vector<uint16_t> raw = {10, 11, 12, 13, 14, 15, 16};
  std::vector<uint8_t> ids(raw.size() * 2);
  std::memcpy(ids.data(), raw.data(), ids.size());
  Outputs o(6);
  ASSERT_TRUE(Segment(true, TokenDType::kUInt16, ids, 2, 5, true, true, &o));
  const int64_t u = kUntouched;
  EXPECT_EQ(o.input_ids, (std::vector<int64_t>{u, u, 12, 13, 14, u}));
  EXPECT_EQ(o.labels, (std::vector<int64_t>{u, u, 13, 14, 15, u}));
  EXPECT_EQ(o.position_ids, (std::vector<int64_t>{u, u, 0, 1, 2, u}));
  EXPECT_EQ(o.document_ids, (std::vector<int64_t>{u, u, 5, 5, 5, u}));
}

TEST_F(TokenWindowKernelTest, ANegativeInt32IdIsReportedWhereverItLies) {
  const uint64_t n = 70;
  for (int64_t t : Targets()) {
    hwy::SetSupportedTargetsForTest(t);
    for (uint64_t bad = 0; bad <= n; ++bad) {
      std::vector<uint8_t> ids = Ids(TokenDType::kInt32, n, 11);
      const int32_t neg = -3;
      std::memcpy(&ids[bad * 4], &neg, 4);
      Outputs o(n);
      // The segment [0, n) reads ids 0..n: every position is inside it.
      EXPECT_FALSE(Segment(false, TokenDType::kInt32, ids, 0, n, true, true, &o))
          << "id " << bad << " on " << hwy::TargetName(t);
      EXPECT_FALSE(Segment(true, TokenDType::kInt32, ids, 0, n, true, true, &o)) << "id " << bad;
      // A segment that ends before it does not see it.
      if (bad >= 2) {
        EXPECT_TRUE(Segment(false, TokenDType::kInt32, ids, 0, bad - 1, false, false, &o))
            << "id " << bad << " on " << hwy::TargetName(t);
      }
    }
  }
}

TEST_F(TokenWindowKernelTest, OtherDtypesAreLeftToTheCheckedPath) {
  for (TokenDType dtype :
       {TokenDType::kUInt8, TokenDType::kInt8, TokenDType::kInt16, TokenDType::kInt64}) {
    EXPECT_FALSE(WindowKernelHandles(dtype)) << TokenDTypeName(dtype);
  }
}

}  // namespace
}  // namespace feedline::tokens::detail
