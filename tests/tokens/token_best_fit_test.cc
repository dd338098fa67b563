// Best-fit packing: the plan is best-fit decreasing over document lengths,
// no document up to seq_len is split, every token appears once per epoch,
// labels stop at document ends and padding, the padding share is exact,
// and the output does not depend on the thread count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
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
using testing_tokens::MegatronBin;
using testing_tokens::MegatronFixture;
using testing_tokens::MegatronIndex;
using testing_tokens::Row;
using testing_tokens::WriteBytes;

constexpr int64_t kPad = 0;

class TokenBestFitTest : public testing_tokens::TempDirTest {
 protected:
  // A Megatron dataset of documents of the given lengths; token t of the
  // corpus has id t + 1, so every id is unique (0 is the pad).
  std::shared_ptr<const TokenCorpus> Documents(const std::vector<uint64_t>& lengths,
                                               const std::string& name = "d") {
    MegatronFixture m;
    int64_t next = 1;
    for (uint64_t n : lengths) {
      std::vector<int64_t> ids;
      for (uint64_t k = 0; k < n; ++k) ids.push_back(next++);
      m.documents.push_back({ids});
    }
    WriteBytes(Path(name + ".bin"), MegatronBin<int32_t>(m));
    WriteBytes(Path(name + ".idx"), MegatronIndex(m, 4, 4));
    auto c = TokenCorpus::Open({Path(name)}, {});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
  static LoaderOptions Options(uint32_t threads, bool shuffle) {
    LoaderOptions o;
    o.batch_size = 3;
    o.num_threads = threads;
    o.shuffle = shuffle;
    o.seed = 7;
    o.max_bytes = 64 << 20;
    return o;
  }
};

std::vector<uint64_t> Lengths(const BestFitPlan& plan, uint64_t i) {
  std::vector<uint64_t> out;
  for (const auto& p : plan.sequence(i)) out.push_back(p.length);
  return out;
}

TEST_F(TokenBestFitTest, EachPieceGoesIntoTheFullestSequenceItFits) {
  // Longest first: 6 opens s0 (4 free), 5 opens s1 (5 free), 4 fills s0
  // exactly (the fullest it fits, not s1), 3 and 2 fill s1.
  auto corpus = Documents({3, 6, 2, 5, 4});
  auto plan = BestFitPlan::Build(*corpus, 10);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ((*plan)->num_sequences(), 2u);
  EXPECT_EQ(Lengths(**plan, 0), (std::vector<uint64_t>{6, 4}));
  EXPECT_EQ(Lengths(**plan, 1), (std::vector<uint64_t>{5, 3, 2}));
  EXPECT_EQ((*plan)->padding_tokens(), 0u);
  EXPECT_EQ((*plan)->num_documents(), 5u);
}

TEST_F(TokenBestFitTest, LongDocumentsAreCutIntoSeqLenPieces) {
  auto corpus = Documents({23, 4});
  auto plan = BestFitPlan::Build(*corpus, 10);
  ASSERT_TRUE(plan.ok());
  // Pieces 10, 10 (each a sequence), 3 + 4 together.
  ASSERT_EQ((*plan)->num_sequences(), 3u);
  EXPECT_EQ((*plan)->num_pieces(), 4u);
  EXPECT_EQ((*plan)->padding_tokens(), 3u);
  EXPECT_DOUBLE_EQ((*plan)->padding_share(), 3.0 / 30.0);
  const auto first = (*plan)->sequence(0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0].ends_document);
  // A piece that does not end its document keeps its last target (the
  // document's next token); the document's end has none.
  auto p = TokenBestFitPipeline(corpus, *plan, kPad);
  ASSERT_TRUE(p.ok());
  std::vector<Row> rows = AllRows(*p, Options(1, false), 10);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].labels.back(), 11);  // token 10 of the document has id 11
  // The last sequence: the 4-token document, then the long one's 3-token end.
  EXPECT_EQ(rows[2].input_ids,
            (std::vector<int64_t>{24, 25, 26, 27, 21, 22, 23, kPad, kPad, kPad}));
  EXPECT_EQ(rows[2].labels,
            (std::vector<int64_t>{25, 26, 27, -100, 22, 23, -100, -100, -100, -100}));
  EXPECT_EQ(rows[2].position_ids, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(rows[2].document_ids, (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, -1, -1, -1}));
  EXPECT_EQ(rows[2].document_starts, (std::vector<int32_t>{0, 4, 7}));
}

TEST_F(TokenBestFitTest, EveryTokenOnceNoDocumentSplitLabelsMaskedPaddingExact) {
  // Log-normal-ish lengths, some above seq_len.
  std::mt19937_64 rng(12345);
  std::lognormal_distribution<double> dist(2.5, 0.9);
  std::vector<uint64_t> lengths;
  for (int i = 0; i < 300; ++i) lengths.push_back(1 + static_cast<uint64_t>(dist(rng)));
  const uint64_t seq_len = 32;
  auto corpus = Documents(lengths);
  auto plan = BestFitPlan::Build(*corpus, seq_len);
  ASSERT_TRUE(plan.ok());
  // The document of each id (ids are 1 + corpus position).
  std::vector<uint64_t> doc_of{0};
  std::vector<uint64_t> doc_last;  // id of each document's last token
  for (size_t d = 0; d < lengths.size(); ++d) {
    for (uint64_t k = 0; k < lengths[d]; ++k) doc_of.push_back(d);
    doc_last.push_back(doc_of.size() - 1);
  }
  std::vector<Row> reference;
  for (uint32_t threads : {1u, 3u}) {
    std::vector<Row> rows =
        AllRows(*TokenBestFitPipeline(corpus, *plan, kPad), Options(threads, true), seq_len);
    ASSERT_EQ(rows.size(), (*plan)->num_sequences());
    std::vector<int> seen(doc_of.size(), 0);
    std::map<uint64_t, uint64_t> row_of_doc;  // documents <= seq_len: one row, one segment
    uint64_t padding = 0;
    for (const Row& r : rows) {
      EXPECT_EQ(r.document_starts, testing_tokens::StartsFromDocumentIds(r.document_ids));
      for (uint64_t j = 0; j < seq_len; ++j) {
        const int64_t id = r.input_ids[j];
        if (r.document_ids[j] == -1) {
          ++padding;
          EXPECT_EQ(id, kPad);
          EXPECT_EQ(r.labels[j], -100);
          continue;
        }
        ASSERT_GT(id, 0);
        ++seen[static_cast<size_t>(id)];
        const uint64_t d = doc_of[static_cast<size_t>(id)];
        // The target: the next token of the same document, none at its end.
        if (static_cast<uint64_t>(id) == doc_last[d]) {
          EXPECT_EQ(r.labels[j], -100) << id;
        } else {
          EXPECT_EQ(r.labels[j], id + 1) << id;
        }
        if (lengths[d] <= seq_len) {
          auto [it, fresh] = row_of_doc.emplace(d, r.id);
          EXPECT_EQ(it->second, r.id) << "document " << d << " is split";
          // Contiguous in one segment: position = offset in the document.
          const uint64_t first_id = doc_last[d] + 1 - lengths[d];
          EXPECT_EQ(r.position_ids[j], id - static_cast<int64_t>(first_id));
        }
      }
    }
    for (size_t id = 1; id < seen.size(); ++id) ASSERT_EQ(seen[id], 1) << "token id " << id;
    EXPECT_EQ(padding, (*plan)->padding_tokens());
    EXPECT_DOUBLE_EQ((*plan)->padding_share(),
                     static_cast<double>(padding) / static_cast<double>(rows.size() * seq_len));
    if (threads == 1) {
      reference = rows;
    } else {
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i].input_ids, reference[i].input_ids);
        EXPECT_EQ(rows[i].labels, reference[i].labels);
      }
    }
  }
  // Best fit on this distribution pads little.
  EXPECT_LT((*plan)->padding_share(), 0.05);
}

// A negative int32 id is named wherever it falls in a piece: inside it (the
// fused pass reports it) or as a document's last token (no label read).
TEST_F(TokenBestFitTest, ANegativeIdIsADataLossNamingItsToken) {
  for (size_t bad : {size_t{2}, size_t{4}}) {  // inside document 0, then its last token
    MegatronFixture m{{{{1, 2, 3, 4, 5}}, {{6, 7, 8}}}};
    m.documents[0][0][bad] = -9;
    const std::string name = "neg" + std::to_string(bad);
    WriteBytes(Path(name + ".bin"), MegatronBin<int32_t>(m));
    WriteBytes(Path(name + ".idx"), MegatronIndex(m, 4, 4));
    auto corpus = TokenCorpus::Open({Path(name)}, {});
    ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
    auto plan = BestFitPlan::Build(**corpus, 8);
    ASSERT_TRUE(plan.ok());
    LoaderOptions o = Options(1, false);
    o.batch_size = 1;
    auto loader = Loader::Create(*TokenBestFitPipeline(*corpus, *plan, kPad), o);
    ASSERT_TRUE(loader.ok());
    Status st;
    for (int i = 0; i < 4 && st.ok(); ++i) {
      Batch b;
      bool end = false;
      st = (*loader)->Next(&b, &end);
      if (end) break;
    }
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << bad;
    EXPECT_THAT(st.message(), HasSubstr("token " + std::to_string(bad) + " is negative")) << bad;
    EXPECT_THAT(st.message(), HasSubstr(name + ".bin")) << bad;
  }
}

TEST_F(TokenBestFitTest, BadArgumentsAreRefused) {
  auto corpus = Documents({3, 4});
  EXPECT_FALSE(BestFitPlan::Build(*corpus, 0).ok());
  auto plan = BestFitPlan::Build(*corpus, 8);
  ASSERT_TRUE(plan.ok());
  Status neg = TokenBestFitPipeline(corpus, *plan, -1).status();
  EXPECT_THAT(neg.message(), HasSubstr("pad_token"));
  auto other = Documents({3, 4, 5}, "e");
  Status mismatch = TokenBestFitPipeline(other, *plan, kPad).status();
  EXPECT_THAT(mismatch.message(), HasSubstr("plan covers 7 tokens"));
}

}  // namespace
}  // namespace feedline
