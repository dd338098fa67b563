// Concat packing over the engine's Loader: each window's tokens are exactly
// the file's, labels are the inputs shifted by one, position_ids and
// document_ids restart at document boundaries, and a resume state from
// another corpus is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/tokens.h"
#include "tests/tokens/token_rows.h"
#include "tests/tokens/token_test_util.h"

namespace feedline {
namespace {

using ::testing::HasSubstr;
using testing_tokens::MegatronBin;
using testing_tokens::MegatronFixture;
using testing_tokens::MegatronIndex;
using testing_tokens::WriteBytes;
using testing_tokens::WriteFlat;

struct Window {
  std::vector<int64_t> input_ids, labels, position_ids, document_ids;
};

class TokenWindowsTest : public testing_tokens::TempDirTest {
 protected:
  // Every window of epoch 0, in order (no shuffle, one rank).
  static std::vector<Window> AllWindows(std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len,
                                        uint32_t threads = 1) {
    auto pipeline = TokenWindowPipeline(std::move(corpus), seq_len);
    EXPECT_TRUE(pipeline.ok()) << pipeline.status().ToString();
    LoaderOptions o;
    o.batch_size = 2;
    o.num_threads = threads;
    o.ring_depth = 2;
    o.max_bytes = 64 << 20;
    auto loader = Loader::Create(std::move(*pipeline), o);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    std::vector<Window> out;
    while (true) {
      Batch b;
      bool end = false;
      Status st = (*loader)->Next(&b, &end);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok() || end) break;
      for (size_t i = 0; i < b.size(); ++i) {
        Window w;
        std::vector<int64_t>* dst[] = {&w.input_ids, &w.labels, &w.position_ids, &w.document_ids};
        for (size_t f = 0; f < 4; ++f) {
          std::span<int64_t> v = b.field_as<int64_t>(f);
          dst[f]->assign(v.begin() + static_cast<ptrdiff_t>(i * seq_len),
                         v.begin() + static_cast<ptrdiff_t>((i + 1) * seq_len));
        }
        out.push_back(std::move(w));
      }
    }
    return out;
  }
  std::shared_ptr<const TokenCorpus> Corpus(const std::vector<std::string>& paths,
                                            const TokenSourceOptions& o = {}) {
    auto c = TokenCorpus::Open(paths, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
};

TEST_F(TokenWindowsTest, WindowCountAndTail) {
  EXPECT_EQ(NumTokenWindows(10, 3), 3u);  // windows [0,4) [3,7) [6,10)
  EXPECT_EQ(TokenWindowTailTokens(10, 3), 0u);
  EXPECT_EQ(NumTokenWindows(12, 3), 3u);  // tokens 10 and 11 are never a label
  EXPECT_EQ(TokenWindowTailTokens(12, 3), 2u);
  EXPECT_EQ(NumTokenWindows(3, 3), 0u);
  EXPECT_EQ(NumTokenWindows(4, 3), 1u);
  EXPECT_EQ(NumTokenWindows(4, 0), 0u);
}

TEST_F(TokenWindowsTest, FieldsAreInt64OfSeqLen) {
  WriteFlat<uint16_t>(Path("a.bin"), std::vector<int64_t>(100, 1));
  auto p = TokenWindowPipeline(Corpus({Path("a.bin")}), 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_samples, 12u);  // (100 - 1) / 8
  ASSERT_EQ(p->fields.size(), 6u);
  const char* names[] = {"input_ids", "labels", "position_ids", "document_ids"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p->fields[i].name, names[i]);
    EXPECT_EQ(p->fields[i].dtype, DType::kInt64);
    EXPECT_EQ(p->fields[i].shape, (std::vector<int64_t>{8}));
  }
  EXPECT_EQ(p->fields[kTokenDocumentStarts].name, "document_starts");
  EXPECT_EQ(p->fields[kTokenDocumentStarts].dtype, DType::kInt32);
  EXPECT_EQ(p->fields[kTokenDocumentStarts].shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(p->fields[kTokenNumDocuments].name, "num_documents");
  EXPECT_EQ(p->fields[kTokenNumDocuments].dtype, DType::kInt32);
  EXPECT_TRUE(p->fields[kTokenNumDocuments].shape.empty());
}

TEST_F(TokenWindowsTest, DocumentStartsAreTheDocumentIdChanges) {
  // eos = 0, documents of 1..6 tokens, windows of 5 (some cross several).
  std::vector<int64_t> tokens;
  for (int64_t d = 0; d < 40; ++d) {
    for (int64_t k = 0; k < d % 6; ++k) tokens.push_back(1 + (d + k) % 9);
    tokens.push_back(0);
  }
  WriteFlat<uint16_t>(Path("a.bin"), tokens);
  TokenSourceOptions so;
  so.eos_token = 0;
  const uint64_t seq_len = 5;
  LoaderOptions o;
  o.batch_size = 3;
  o.num_threads = 2;
  o.max_bytes = 64 << 20;
  auto rows = testing_tokens::AllRows(*TokenWindowPipeline(Corpus({Path("a.bin")}, so), seq_len), o,
                                      seq_len);
  ASSERT_EQ(rows.size(), (tokens.size() - 1) / seq_len);
  size_t multi = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r.document_starts, testing_tokens::StartsFromDocumentIds(r.document_ids)) << r.id;
    multi += r.document_starts.size() > 1 ? 1 : 0;
  }
  EXPECT_GT(multi, 10u);  // the test exercises boundaries inside windows
}

// CrossDocumentLabels::kIgnore: labels are -100 exactly where the label's
// token starts a document of the corpus (after each eos, and the second
// source's first token, which follows no eos), kKeep's label everywhere
// else, and every other field as kKeep writes it. uint16 windows inside one
// source take the fused pass, those across the source boundary and every
// uint8 window the checked path; with no document field the starts are
// looked up all the same.
TEST_F(TokenWindowsTest, IgnoredCrossDocumentLabelsAreExactlyTheDocumentStarts) {
  std::vector<int64_t> a, b;  // eos = 0
  for (int64_t d = 0; d < 30; ++d) {
    for (int64_t k = 0; k < 1 + d % 7; ++k) a.push_back(1 + (d * 5 + k) % 13);
    a.push_back(0);
  }
  a.pop_back();  // a's last document runs into b: a source start, not an eos
  for (int64_t k = 0; k < 90; ++k) b.push_back(k % 9 == 8 ? 0 : 1 + k % 11);
  std::vector<int64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::vector<bool> starts(all.size(), false);
  starts[0] = starts[a.size()] = true;
  for (size_t i = 0; i + 1 < all.size(); ++i) starts[i + 1] = starts[i + 1] || all[i] == 0;
  TokenSourceOptions so;
  so.eos_token = 0;
  LoaderOptions o;
  o.batch_size = 3;
  o.num_threads = 2;
  o.max_bytes = 64 << 20;
  for (TokenDType dtype : {TokenDType::kUInt16, TokenDType::kUInt8}) {
    if (dtype == TokenDType::kUInt16) {
      WriteFlat<uint16_t>(Path("a.bin"), a);
      WriteFlat<uint16_t>(Path("b.bin"), b);
    } else {
      WriteFlat<uint8_t>(Path("a.bin"), a);
      WriteFlat<uint8_t>(Path("b.bin"), b);
    }
    so.flat_dtype = dtype;
    auto corpus = Corpus({Path("a.bin"), Path("b.bin")}, so);
    for (uint64_t seq_len : {5u, 16u}) {
      for (const TokenFieldSet set : {TokenFieldSet{}, TokenFieldSet{false, false, false}}) {
        const auto keep =
            testing_tokens::AllRows(*TokenWindowPipeline(corpus, seq_len, set), o, seq_len);
        const auto ignore = testing_tokens::AllRows(
            *TokenWindowPipeline(corpus, seq_len, set, CrossDocumentLabels::kIgnore), o, seq_len);
        const std::string at = std::string(TokenDTypeName(dtype)) + " seq_len " +
                               std::to_string(seq_len) +
                               (set.position_ids ? " every field" : " two");
        ASSERT_EQ(keep.size(), (all.size() - 1) / seq_len) << at;
        ASSERT_EQ(ignore.size(), keep.size()) << at;
        size_t masked = 0;
        for (size_t r = 0; r < keep.size(); ++r) {
          const uint64_t begin = keep[r].id * seq_len;
          EXPECT_EQ(ignore[r].input_ids, keep[r].input_ids) << at << " window " << r;
          EXPECT_EQ(ignore[r].position_ids, keep[r].position_ids) << at << " window " << r;
          EXPECT_EQ(ignore[r].document_ids, keep[r].document_ids) << at << " window " << r;
          EXPECT_EQ(ignore[r].document_starts, keep[r].document_starts) << at << " window " << r;
          for (uint64_t j = 0; j < seq_len; ++j) {
            ASSERT_EQ(keep[r].labels[j], all[begin + j + 1]) << at << " window " << r << " j " << j;
            const int64_t want = starts[begin + j + 1] ? -100 : all[begin + j + 1];
            EXPECT_EQ(ignore[r].labels[j], want) << at << " window " << r << " j " << j;
            masked += starts[begin + j + 1] ? 1 : 0;
          }
        }
        // Each start after the first is some window's label once: the
        // source boundary, the eos-started documents, the last label too.
        EXPECT_GT(masked, 30u) << at;
      }
    }
  }
}

// Every TokenFieldSet, concat and best fit: the pipeline's fields are
// input_ids, labels and the chosen ones in order, and each holds what the
// full pipeline's does, row for row.
TEST_F(TokenWindowsTest, AFieldSetWritesItsFieldsAndTheSameValues) {
  std::vector<int64_t> tokens;
  for (int64_t d = 0; d < 30; ++d) {
    for (int64_t k = 0; k < 1 + d % 7; ++k) tokens.push_back(1 + (d * 3 + k) % 11);
    tokens.push_back(0);
  }
  WriteFlat<uint16_t>(Path("a.bin"), tokens);
  TokenSourceOptions so;
  so.eos_token = 0;
  auto corpus = Corpus({Path("a.bin")}, so);
  const uint64_t seq_len = 6;
  auto plan = BestFitPlan::Build(*corpus, seq_len);
  ASSERT_TRUE(plan.ok());
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.max_bytes = 64 << 20;
  for (bool best_fit : {false, true}) {
    auto make = [&](const TokenFieldSet& set) {
      return best_fit ? *TokenBestFitPipeline(corpus, *plan, 99, set)
                      : *TokenWindowPipeline(corpus, seq_len, set);
    };
    const auto full = testing_tokens::AllRows(make({}), o, seq_len);
    ASSERT_FALSE(full.empty());
    for (int mask = 0; mask < 8; ++mask) {
      const TokenFieldSet set{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
      const Pipeline p = make(set);
      std::vector<std::string> names;
      for (const FieldSpec& f : p.fields) names.push_back(f.name);
      std::vector<std::string> want = {"input_ids", "labels"};
      if (set.position_ids) want.push_back("position_ids");
      if (set.document_ids) want.push_back("document_ids");
      if (set.document_starts) {
        want.push_back("document_starts");
        want.push_back("num_documents");
      }
      EXPECT_EQ(names, want) << "mask " << mask;
      const auto rows = testing_tokens::AllRows(p, o, seq_len);
      ASSERT_EQ(rows.size(), full.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        SCOPED_TRACE("best_fit " + std::to_string(best_fit) + " mask " + std::to_string(mask) +
                     " row " + std::to_string(i));
        EXPECT_EQ(rows[i].input_ids, full[i].input_ids);
        EXPECT_EQ(rows[i].labels, full[i].labels);
        EXPECT_EQ(rows[i].position_ids.empty(), !set.position_ids);
        if (set.position_ids) {
          EXPECT_EQ(rows[i].position_ids, full[i].position_ids);
        }
        if (set.document_ids) {
          EXPECT_EQ(rows[i].document_ids, full[i].document_ids);
        }
        if (set.document_starts) {
          EXPECT_EQ(rows[i].document_starts, full[i].document_starts);
        }
      }
    }
  }
}

TEST(TokenCuSeqlensTest, JoinsRowsAndChecksThem) {
  // Two rows of 4: starts {0, 2} and {0}.
  const int32_t starts[] = {0, 2, 0, 0, 0, 0, 0, 0};
  const int32_t counts[] = {2, 1};
  std::vector<int32_t> cu;
  ASSERT_TRUE(TokenCuSeqlens(starts, counts, 2, 4, &cu).ok());
  EXPECT_EQ(cu, (std::vector<int32_t>{0, 2, 4, 8}));
  const int32_t zero[] = {0, 0};
  Status bad = TokenCuSeqlens(starts, zero, 2, 4, &cu);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("row 0"));
  const int32_t unordered[] = {0, 3, 2, 0};
  const int32_t three[] = {3};
  bad = TokenCuSeqlens(unordered, three, 1, 4, &cu);
  EXPECT_THAT(bad.message(), HasSubstr("do not increase"));
}

TEST_F(TokenWindowsTest, TokensAreTheFilesAndLabelsAreShiftedByOne) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 1001; ++i) tokens.push_back((i * 7919) % 50257);
  WriteFlat<uint16_t>(Path("a.bin"), tokens);
  const uint64_t seq_len = 16;
  for (uint32_t threads : {1u, 3u}) {
    std::vector<Window> w = AllWindows(Corpus({Path("a.bin")}), seq_len, threads);
    ASSERT_EQ(w.size(), 62u) << threads;  // (1001 - 1) / 16
    for (size_t i = 0; i < w.size(); ++i) {
      for (uint64_t j = 0; j < seq_len; ++j) {
        ASSERT_EQ(w[i].input_ids[j], tokens[i * seq_len + j]) << i << "," << j;
        ASSERT_EQ(w[i].labels[j], tokens[i * seq_len + j + 1]) << i << "," << j;
        ASSERT_EQ(w[i].position_ids[j], static_cast<int64_t>(j));  // one document
        ASSERT_EQ(w[i].document_ids[j], 0);
      }
    }
  }
}

// Every field of every window against its definition, computed here from
// the token list, for each dtype the fused pass reads (token_window_hwy.h)
// and one it leaves to the checked path (uint8), at seq_lens around the
// vector widths, with documents of every length down to one token.
TEST_F(TokenWindowsTest, EveryWindowMatchesItsDefinitionForEachDtype) {
  std::vector<int64_t> tokens;
  uint64_t state = 12345;
  for (int i = 0; i < 3001; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    const auto r = static_cast<int64_t>(state >> 40);
    tokens.push_back(r % 13 == 0 ? 0 : 1 + r % 250);  // eos 0 about every 13 tokens
  }
  tokens[7] = tokens[8] = tokens[9] = 0;  // one-token documents
  TokenSourceOptions o;
  o.eos_token = 0;
  for (TokenDType dtype :
       {TokenDType::kUInt16, TokenDType::kUInt32, TokenDType::kInt32, TokenDType::kUInt8}) {
    const std::string path = Path(std::string("a_") + std::string(TokenDTypeName(dtype)) + ".bin");
    switch (dtype) {
      case TokenDType::kUInt16: WriteFlat<uint16_t>(path, tokens); break;
      case TokenDType::kUInt32: WriteFlat<uint32_t>(path, tokens); break;
      case TokenDType::kInt32: WriteFlat<int32_t>(path, tokens); break;
      default: WriteFlat<uint8_t>(path, tokens); break;
    }
    o.flat_dtype = dtype;
    for (uint64_t seq_len : {1u, 3u, 8u, 17u, 64u, 129u}) {
      const std::vector<Window> w = AllWindows(Corpus({path}, o), seq_len, 2);
      ASSERT_EQ(w.size(), (tokens.size() - 1) / seq_len);
      for (size_t i = 0; i < w.size(); ++i) {
        const uint64_t begin = i * seq_len;
        int64_t position = 0, document = 0;
        for (uint64_t j = 0; j < seq_len; ++j) {
          if (j > 0 && tokens[begin + j - 1] == 0) {  // the token after an eos starts a document
            position = 0;
            ++document;
          }
          const std::string at = std::string(TokenDTypeName(dtype)) + " seq_len " +
                                 std::to_string(seq_len) + " window " + std::to_string(i) +
                                 " token " + std::to_string(j);
          ASSERT_EQ(w[i].input_ids[j], tokens[begin + j]) << at;
          ASSERT_EQ(w[i].labels[j], tokens[begin + j + 1]) << at;
          ASSERT_EQ(w[i].position_ids[j], position++) << at;
          ASSERT_EQ(w[i].document_ids[j], document) << at;
        }
      }
    }
  }
}

TEST_F(TokenWindowsTest, PositionsAndDocumentsRestartAtEosBoundaries) {
  // eos = 0. Documents: [1 2 0] [3 0] [4 5 6 7 0] [8 9 ...]
  WriteFlat<uint16_t>(Path("a.bin"), {1, 2, 0, 3, 0, 4, 5, 6, 7, 0, 8, 9, 10});
  TokenSourceOptions o;
  o.eos_token = 0;
  std::vector<Window> w = AllWindows(Corpus({Path("a.bin")}, o), 4);
  ASSERT_EQ(w.size(), 3u);
  // Window 0: tokens 0..4 = 1 2 0 3 | 0 ; doc start at 3.
  EXPECT_EQ(w[0].input_ids, (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(w[0].labels, (std::vector<int64_t>{2, 0, 3, 0}));
  EXPECT_EQ(w[0].position_ids, (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(w[0].document_ids, (std::vector<int64_t>{0, 0, 0, 1}));
  // Window 1: tokens 4..8 = 0 4 5 6 | 7; token 4 (eos) ends doc 1, 5 starts doc 2.
  EXPECT_EQ(w[1].input_ids, (std::vector<int64_t>{0, 4, 5, 6}));
  EXPECT_EQ(w[1].position_ids, (std::vector<int64_t>{0, 0, 1, 2}));
  EXPECT_EQ(w[1].document_ids, (std::vector<int64_t>{0, 1, 1, 1}));
  // Window 2: tokens 8..12 = 7 0 8 9 | 10; doc start at 10.
  EXPECT_EQ(w[2].input_ids, (std::vector<int64_t>{7, 0, 8, 9}));
  EXPECT_EQ(w[2].labels, (std::vector<int64_t>{0, 8, 9, 10}));
  EXPECT_EQ(w[2].position_ids, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(w[2].document_ids, (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST_F(TokenWindowsTest, MegatronDocumentsAndSourceBoundariesSplitWindows) {
  // Megatron: documents [10 11 12] [20] [30 31 | 32 33] (two sequences: one document).
  MegatronFixture m{{{{10, 11, 12}}, {{20}}, {{30, 31}, {32, 33}}}};
  WriteBytes(Path("ds.bin"), MegatronBin<uint16_t>(m));
  WriteBytes(Path("ds.idx"), MegatronIndex(m, 8, 2));
  WriteFlat<uint16_t>(Path("tail.bin"), {90, 91, 92});
  // Concatenation: 10 11 12 20 30 31 32 33 90 91 92; doc starts 0 3 4 8.
  std::vector<Window> w = AllWindows(Corpus({Path("ds"), Path("tail.bin")}), 5);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].input_ids, (std::vector<int64_t>{10, 11, 12, 20, 30}));
  EXPECT_EQ(w[0].labels, (std::vector<int64_t>{11, 12, 20, 30, 31}));
  EXPECT_EQ(w[0].position_ids, (std::vector<int64_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(w[0].document_ids, (std::vector<int64_t>{0, 0, 0, 1, 2}));
  // Window 1 (tokens 5..10): 31 32 33 | 90 91 | 92; the sequence boundary at 6 is no document
  // start.
  EXPECT_EQ(w[1].input_ids, (std::vector<int64_t>{31, 32, 33, 90, 91}));
  EXPECT_EQ(w[1].labels, (std::vector<int64_t>{32, 33, 90, 91, 92}));
  EXPECT_EQ(w[1].position_ids, (std::vector<int64_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(w[1].document_ids, (std::vector<int64_t>{0, 0, 0, 1, 1}));
}

TEST_F(TokenWindowsTest, SeqLenZeroAndTooShortCorporaAreRefused) {
  WriteFlat<uint16_t>(Path("a.bin"), {1, 2, 3, 4});
  Status zero = TokenWindowPipeline(Corpus({Path("a.bin")}), 0).status();
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  Status short_corpus = TokenWindowPipeline(Corpus({Path("a.bin")}), 4).status();
  EXPECT_EQ(short_corpus.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(short_corpus.message(), HasSubstr("4 tokens"));
  EXPECT_THAT(short_corpus.message(), HasSubstr("needs 5"));
  EXPECT_TRUE(TokenWindowPipeline(Corpus({Path("a.bin")}), 3).ok());
}

TEST_F(TokenWindowsTest, BadTokenIsASampleErrorNamingFileAndWindow) {
  MegatronFixture m{{{{1, 2, 3, 4, -1, 6, 7, 8, 9}}}};
  WriteBytes(Path("neg.bin"), MegatronBin<int32_t>(m));
  WriteBytes(Path("neg.idx"), MegatronIndex(m, 4, 4));
  auto p = TokenWindowPipeline(Corpus({Path("neg")}), 2);
  ASSERT_TRUE(p.ok());
  LoaderOptions o;
  o.batch_size = 1;
  o.num_threads = 1;
  o.max_bytes = 64 << 20;
  auto loader = Loader::Create(std::move(*p), o);
  ASSERT_TRUE(loader.ok());
  Batch b;
  bool end = false;
  Status st;
  for (int i = 0; i < 4 && st.ok(); ++i) st = (*loader)->Next(&b, &end);
  // Window 1 (tokens 2..4) holds the negative id at token 4.
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("neg.bin"));
  EXPECT_THAT(st.message(), HasSubstr("token 4 is negative"));
  EXPECT_THAT(st.message(), HasSubstr("window 1"));
  EXPECT_THAT(st.message(), HasSubstr("offset 8"));  // window 1 starts at token 2: byte 8 of int32s
}

TEST_F(TokenWindowsTest, StateFromAnotherCorpusOfTheSameSizeIsRefused) {
  WriteFlat<uint16_t>(Path("a.bin"), std::vector<int64_t>(65, 1));
  WriteFlat<uint16_t>(Path("b.bin"), std::vector<int64_t>(65, 2));
  LoaderOptions o;
  o.batch_size = 2;
  o.num_threads = 1;
  o.max_bytes = 64 << 20;
  auto a = Loader::Create(*TokenWindowPipeline(Corpus({Path("a.bin")}), 8), o);
  auto b = Loader::Create(*TokenWindowPipeline(Corpus({Path("b.bin")}), 8), o);
  auto a16 = Loader::Create(*TokenWindowPipeline(Corpus({Path("a.bin")}), 4), o);
  ASSERT_TRUE(a.ok() && b.ok() && a16.ok());
  const std::string state = (*a)->SaveState();
  Status other = (*b)->RestoreState(state);
  EXPECT_FALSE(other.ok());
  EXPECT_THAT(other.message(), HasSubstr("fingerprint"));
  EXPECT_FALSE((*a16)->RestoreState(state).ok());
  EXPECT_TRUE((*a)->RestoreState(state).ok());
}

// A flat file's fingerprint digests slices of its contents: a corpus
// regenerated under the same name and size is refused; the same corpus
// moved to another directory is not. Large enough (1 MiB) that the digest
// reads slices, not the whole file; the files differ in one token of the
// last slice.
TEST_F(TokenWindowsTest, SameNameAndSizeWithOtherTokensIsRefusedAndAMovedCorpusIsNot) {
  std::filesystem::create_directories(Path("x"));
  std::filesystem::create_directories(Path("y"));
  std::filesystem::create_directories(Path("z"));
  std::vector<int64_t> tokens(1 << 19);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i % 50000);
  WriteFlat<uint16_t>(Path("x/train.bin"), tokens);
  WriteFlat<uint16_t>(Path("z/train.bin"), tokens);  // the same corpus elsewhere
  tokens.back() = 7;
  WriteFlat<uint16_t>(Path("y/train.bin"), tokens);
  LoaderOptions o;
  o.batch_size = 2;
  o.num_threads = 1;
  o.max_bytes = 64 << 20;
  auto x = Loader::Create(*TokenWindowPipeline(Corpus({Path("x/train.bin")}), 8), o);
  auto y = Loader::Create(*TokenWindowPipeline(Corpus({Path("y/train.bin")}), 8), o);
  auto z = Loader::Create(*TokenWindowPipeline(Corpus({Path("z/train.bin")}), 8), o);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  const std::string state = (*x)->SaveState();
  const Status other = (*y)->RestoreState(state);
  EXPECT_FALSE(other.ok());
  EXPECT_THAT(other.message(), HasSubstr("fingerprint"));
  EXPECT_TRUE((*z)->RestoreState(state).ok());
}

}  // namespace
}  // namespace feedline
