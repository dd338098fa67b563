// TokenLoader, the C++ facade: the same batches as the engine over the
// pipelines it composes, cu_seqlens equal to the document ids' boundaries,
// exact resume (also on another world size), a mixture resumed with new
// weights, and states refused by reason.
#include "feedline/token_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/tokens.h"
#include "tests/tokens/token_rows.h"
#include "tests/tokens/token_test_util.h"

namespace feedline {
namespace {

using ::testing::HasSubstr;
using testing_tokens::AllRows;
using testing_tokens::Row;
using testing_tokens::StartsFromDocumentIds;
using testing_tokens::WriteFlat;

constexpr uint64_t kSeqLen = 8;
constexpr int64_t kEos = 0;

// A row of a TokenBatch, as token_rows.h's Row (document_starts from cu_seqlens).
std::vector<Row> Rows(const TokenBatch& b) {
  std::vector<Row> out;
  size_t cu = 0;
  for (uint64_t r = 0; r < b.rows; ++r) {
    Row row;
    row.id = b.batch.sample_ids()[r];
    auto slice = [&](std::span<const int64_t> f) {
      return f.empty()
                 ? std::vector<int64_t>{}
                 : std::vector<int64_t>(f.begin() + r * kSeqLen, f.begin() + (r + 1) * kSeqLen);
    };
    row.input_ids = slice(b.input_ids);
    row.labels = slice(b.labels);
    row.position_ids = slice(b.position_ids);
    row.document_ids = slice(b.document_ids);
    const auto base = static_cast<int32_t>(r * kSeqLen);
    for (; cu + 1 < b.cu_seqlens.size() && b.cu_seqlens[cu] < base + static_cast<int32_t>(kSeqLen);
         ++cu) {
      row.document_starts.push_back(b.cu_seqlens[cu] - base);
    }
    out.push_back(std::move(row));
  }
  return out;
}

bool SameRow(const Row& a, const Row& b) {
  return a.id == b.id && a.input_ids == b.input_ids && a.labels == b.labels &&
         a.position_ids == b.position_ids && a.document_ids == b.document_ids &&
         a.document_starts == b.document_starts;
}

// Every row of `batches` batches (0: to the end of the epoch).
std::vector<Row> Take(TokenLoader& l, size_t batches = 0) {
  std::vector<Row> out;
  for (size_t n = 0; batches == 0 || n < batches; ++n) {
    TokenBatch b;
    bool end = false;
    Status st = l.Next(&b, &end);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok() || end) break;
    EXPECT_EQ(b.cu_seqlens.empty() ? 0 : b.cu_seqlens.back(),
              b.cu_seqlens.empty() ? 0 : static_cast<int32_t>(b.rows * kSeqLen));
    for (Row& r : Rows(b)) out.push_back(std::move(r));
  }
  return out;
}

class TokenLoaderTest : public testing_tokens::TempDirTest {
 protected:
  // A flat file of `n` tokens, base + t, with an eos after every `doc` tokens.
  std::string Flat(const std::string& name, uint64_t n, int64_t base, uint64_t doc) {
    std::vector<int64_t> t;
    for (uint64_t i = 0; i < n; ++i)
      t.push_back((i + 1) % doc == 0 ? kEos : base + static_cast<int64_t>(i));
    const std::string path = Path(name);
    WriteFlat<uint16_t>(path, t);
    return path;
  }
  static TokenLoaderOptions Options(uint64_t batch, uint32_t world = 1, uint32_t rank = 0) {
    TokenLoaderOptions o;
    o.seq_len = kSeqLen;
    o.source.eos_token = kEos;
    o.loader.batch_size = batch;
    o.loader.world_size = world;
    o.loader.rank = rank;
    o.loader.shuffle = true;
    o.loader.seed = 11;
    o.loader.num_threads = 2;
    return o;
  }
};

TEST_F(TokenLoaderTest, ConcatBatchesAreTheEnginesOverTheWindowsPipeline) {
  const std::string a = Flat("a.bin", 403, 100, 13), b = Flat("b.bin", 150, 900, 5);
  TokenLoaderOptions o = Options(5);
  auto loader = TokenLoader::Open({{a, b}}, o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto corpus = TokenCorpus::Open({a, b}, o.source);
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ((*loader)->num_tokens(), 553u);
  EXPECT_EQ((*loader)->num_sequences(), NumTokenWindows(553, kSeqLen));
  EXPECT_EQ((*loader)->padding_share(), 0.0);
  EXPECT_TRUE((*loader)->weights().empty());
  const std::vector<Row> want = AllRows(*TokenWindowPipeline(*corpus, kSeqLen), o.loader, kSeqLen);
  const std::vector<Row> got = Take(**loader);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(SameRow(got[i], want[i])) << "row " << i;
    // cu_seqlens hold every change of document id: nothing else.
    EXPECT_EQ(got[i].document_starts, StartsFromDocumentIds(got[i].document_ids)) << "row " << i;
  }

  // cross_document_labels reaches the pipeline: the same rows as
  // TokenWindowPipeline's with kIgnore, which differ from kKeep's.
  o.cross_document_labels = CrossDocumentLabels::kIgnore;
  auto ignoring = TokenLoader::Open({{a, b}}, o);
  ASSERT_TRUE(ignoring.ok()) << ignoring.status().ToString();
  const std::vector<Row> want_ignore = AllRows(
      *TokenWindowPipeline(*corpus, kSeqLen, {}, CrossDocumentLabels::kIgnore), o.loader, kSeqLen);
  const std::vector<Row> got_ignore = Take(**ignoring);
  ASSERT_EQ(got_ignore.size(), want_ignore.size());
  size_t differ = 0;
  for (size_t i = 0; i < got_ignore.size(); ++i) {
    EXPECT_TRUE(SameRow(got_ignore[i], want_ignore[i])) << "row " << i;
    differ += got_ignore[i].labels != got[i].labels ? 1 : 0;
  }
  EXPECT_GT(differ, 0u);
}

TEST_F(TokenLoaderTest, BestFitAndAFieldSubset) {
  const std::string a = Flat("a.bin", 300, 100, 6);
  TokenLoaderOptions o = Options(4);
  o.packing = TokenPacking::kBestFit;
  EXPECT_THAT(TokenLoader::Open({{a}}, o).status().message(), HasSubstr("pad_token"));
  o.pad_token = 7;
  auto loader = TokenLoader::Open({{a}}, o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto corpus = TokenCorpus::Open({a}, o.source);
  ASSERT_TRUE(corpus.ok());
  auto plan = BestFitPlan::Build(**corpus, kSeqLen);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*loader)->padding_share(), (*plan)->padding_share());
  EXPECT_GT((*loader)->padding_share(), 0.0);
  const std::vector<Row> want =
      AllRows(*TokenBestFitPipeline(*corpus, *plan, 7), o.loader, kSeqLen);
  const std::vector<Row> got = Take(**loader);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(SameRow(got[i], want[i])) << "row " << i;

  // Only input_ids and labels: the other fields are empty, as is cu_seqlens.
  o.fields = TokenFieldSet{false, false, false};
  auto two = TokenLoader::Open({{a}}, o);
  ASSERT_TRUE(two.ok());
  TokenBatch batch;
  bool end = false;
  ASSERT_TRUE((*two)->Next(&batch, &end).ok());
  ASSERT_FALSE(end);
  EXPECT_EQ(batch.input_ids.size(), batch.rows * kSeqLen);
  EXPECT_TRUE(batch.position_ids.empty());
  EXPECT_TRUE(batch.document_ids.empty());
  EXPECT_TRUE(batch.cu_seqlens.empty());
  for (size_t i = 0; i < batch.input_ids.size(); ++i) {
    EXPECT_EQ(batch.input_ids[i], want[i / kSeqLen].input_ids[i % kSeqLen]) << i;
  }
}

TEST_F(TokenLoaderTest, ResumeIsExactAlsoOnAnotherWorldSize) {
  const std::string a = Flat("a.bin", 2000, 100, 17);
  auto whole = TokenLoader::Open({{a}}, Options(6));
  ASSERT_TRUE(whole.ok());
  const std::vector<Row> reference = Take(**whole);
  auto first = TokenLoader::Open({{a}}, Options(6));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(Take(**first, 4).size(), 24u);
  const std::string state = (*first)->SaveState();
  for (uint32_t world : {1u, 2u, 3u}) {
    std::vector<std::vector<Row>> ranks;
    for (uint32_t r = 0; r < world; ++r) {
      TokenLoaderOptions o = Options(6 / world, world, r);
      o.loader.elastic = true;
      auto l = TokenLoader::Open({{a}}, o);
      ASSERT_TRUE(l.ok());
      ASSERT_TRUE((*l)->RestoreState(state).ok());
      ranks.push_back(Take(**l));
    }
    // Global position p after the resume is rank p % world's.
    for (size_t pos = 24; pos < reference.size(); ++pos) {
      const size_t k = pos - 24;
      ASSERT_LT(k / world, ranks[k % world].size());
      EXPECT_TRUE(SameRow(ranks[k % world][k / world], reference[pos]))
          << "world " << world << " position " << pos;
    }
  }
}

TEST_F(TokenLoaderTest, StatesAreRefusedByReason) {
  const std::string a = Flat("a.bin", 500, 100, 9), b = Flat("b.bin", 500, 3000, 9);
  auto one = TokenLoader::Open({{a}}, Options(4));
  ASSERT_TRUE(one.ok());
  const std::string state = (*one)->SaveState();
  // Another corpus of the same size: the engine's fingerprint check.
  auto other = TokenLoader::Open({{b}}, Options(4));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other.value()->RestoreState(state).code(), StatusCode::kInvalidArgument);
  // Not a state, truncated, corrupt.
  EXPECT_EQ((*one)->RestoreState("not a state").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*one)->RestoreState(state.substr(0, state.size() - 3)).code(), StatusCode::kDataLoss);
  std::string bad = state;
  bad[20] = static_cast<char>(bad[20] ^ 1);
  EXPECT_EQ((*one)->RestoreState(bad).code(), StatusCode::kDataLoss);
  // A mixture's state on a plain loader and the reverse; another mixture.
  TokenLoaderOptions m = Options(4);
  m.weights = {1, 1};
  auto mix = TokenLoader::Open({{a}, {b}}, m);
  ASSERT_TRUE(mix.ok());
  EXPECT_THAT((*one)->RestoreState((*mix)->SaveState()).message(), HasSubstr("no weights"));
  EXPECT_THAT((*mix)->RestoreState(state).message(), HasSubstr("has weights"));
  auto swapped = TokenLoader::Open({{b}, {a}}, m);
  ASSERT_TRUE(swapped.ok());
  EXPECT_THAT((*swapped)->RestoreState((*mix)->SaveState()).message(),
              HasSubstr("other token sources"));
  // Bad options, by name.
  EXPECT_THAT(TokenLoader::Open({{a}, {b}}, Options(4)).status().message(),
              HasSubstr("need one weight each"));
  m.weights = {1};
  EXPECT_THAT(TokenLoader::Open({{a}, {b}}, m).status().message(), HasSubstr("but 1 weights"));
  EXPECT_EQ(TokenLoader::Open({{Path("missing.bin")}}, Options(4)).status().code(),
            StatusCode::kNotFound);
}

TEST_F(TokenLoaderTest, AMixtureResumedWithNewWeightsTakesThemFromItsPosition) {
  // Sources of 40 and 20 windows; each token names its source.
  const std::string a = Flat("a.bin", 40 * kSeqLen + 1, 1000, 1000),
                    b = Flat("b.bin", 20 * kSeqLen + 1, 30000, 1000);
  auto source_of = [](const Row& r) { return r.input_ids[0] >= 30000 ? 1 : 0; };
  TokenLoaderOptions o = Options(10);
  o.weights = {0.5, 0.5};
  auto first = TokenLoader::Open({{a}, {b}}, o);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->num_sequences(), 60u);
  const std::vector<Row> head = Take(**first, 2);
  for (size_t g = 0; g < 2; ++g) {
    int n1 = 0;
    for (size_t i = 0; i < 10; ++i) n1 += source_of(head[g * 10 + i]);
    EXPECT_EQ(n1, 5) << "global batch " << g;
  }
  const std::string state = (*first)->SaveState();
  // The same weights: exact.
  auto same = TokenLoader::Open({{a}, {b}}, o);
  ASSERT_TRUE(same.ok());
  ASSERT_TRUE((*same)->RestoreState(state).ok());
  const std::vector<Row> rest = Take(**first), resumed = Take(**same);
  ASSERT_EQ(rest.size(), resumed.size());
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_TRUE(SameRow(rest[i], resumed[i])) << i;

  // New weights 0.8 / 0.2 from the resumed position on, on two ranks.
  std::vector<std::vector<Row>> ranks;
  for (uint32_t r = 0; r < 2; ++r) {
    TokenLoaderOptions n = Options(5, 2, r);
    n.weights = {0.8, 0.2};
    n.loader.elastic = true;
    auto l = TokenLoader::Open({{a}, {b}}, n);
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE((*l)->RestoreState(state).ok());
    EXPECT_EQ((*l)->weights(), (std::vector<double>{0.8, 0.2}));
    // Its own state carries the new segment and resumes exactly.
    std::vector<Row> rows = Take(**l, 2);
    const std::string mid = (*l)->SaveState();
    const std::vector<Row> tail = Take(**l);
    auto again = TokenLoader::Open({{a}, {b}}, n);
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE((*again)->RestoreState(mid).ok());
    const std::vector<Row> tail_again = Take(**again);
    ASSERT_EQ(tail.size(), tail_again.size());
    for (size_t i = 0; i < tail.size(); ++i) EXPECT_TRUE(SameRow(tail[i], tail_again[i])) << i;
    rows.insert(rows.end(), tail.begin(), tail.end());
    ranks.push_back(std::move(rows));
  }
  ASSERT_EQ(ranks[0].size(), ranks[1].size());
  ASSERT_EQ(ranks[0].size(), 20u);  // 4 global batches of 10 after the first 2
  std::map<int64_t, int> seen;
  for (const Row& r : head) ++seen[r.input_ids[0]];
  for (size_t g = 0; g < 4; ++g) {
    int n1 = 0;
    for (size_t i = 0; i < 10; ++i) {
      const Row& r = ranks[i % 2][g * 5 + i / 2];
      n1 += source_of(r);
      ++seen[r.input_ids[0]];
    }
    EXPECT_EQ(n1, 2) << "global batch " << g << " after the resume";
  }
  // Source 0 drew 10 + 32 = 42 of its 40 windows: its first epoch's 40,
  // each once, then 2 of the next. Source 1 drew 10 + 8 of 20: no repeat.
  int repeats = 0;
  for (const auto& [first_token, n] : seen) {
    EXPECT_LE(n, 2) << first_token;
    repeats += n - 1;
    if (first_token >= 30000) {
      EXPECT_EQ(n, 1) << first_token;
    }
  }
  EXPECT_EQ(repeats, 2);
  EXPECT_EQ(seen.size(), 40u + 18u);
}

}  // namespace
}  // namespace feedline
