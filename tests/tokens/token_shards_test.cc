// feedline token shards (docs/token_shards.md): what TokenShardWriter
// writes reads back exactly through OpenTokenSource; every corrupt header
// field, index, checksum block and manifest entry is an error naming the
// file, the field and the value; truncation at every byte is refused.
#include "src/tokens/token_shards.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "feedline/tokens.h"
#include "src/core/crc32c.h"
#include "src/tokens/token_shard_format.h"
#include "tests/tokens/token_rows.h"
#include "tests/tokens/token_test_util.h"

namespace feedline {
namespace {

namespace fmt = tokens::detail;
using ::testing::HasSubstr;
using testing_tokens::Put;
using testing_tokens::ReadBytes;
using testing_tokens::WriteBytes;
using Json = nlohmann::json;

using Documents = std::vector<std::vector<int64_t>>;

class TokenShardsTest : public testing_tokens::TempDirTest {
 protected:
  // Writes `docs` into Path(name) and returns the directory.
  std::string Pack(const std::string& name, const Documents& docs, uint64_t vocab_size = 1000,
                   uint64_t shard_tokens = uint64_t{1} << 28) {
    const std::string dir = Path(name);
    TokenShardWriterOptions o;
    o.vocab_size = vocab_size;
    o.shard_tokens = shard_tokens;
    o.tokenizer_json = R"({"name": "test"})";
    auto w = TokenShardWriter::Create(dir, o);
    if (!w.ok()) {
      ADD_FAILURE() << w.status().ToString();
      return dir;
    }
    for (const auto& d : docs) {
      const Status s = (*w)->AddDocument(d.data(), d.size());
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    const Status s = (*w)->Finish();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return dir;
  }

  static std::vector<int64_t> ReadAll(const TokenSource& s) {
    std::vector<int64_t> out(s.num_tokens());
    const Status st = s.Read(0, s.num_tokens(), out.data());
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // Documents [1 2 3] [4] [5 6] [7 8 9 10] [11]: one shard.
  static Documents Small() { return {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}}; }

  // Rewrites the shard's header field at `at` and, unless `keep_crc`, its
  // header CRC, then opens the dataset: the error.
  template <typename T>
  Status CorruptHeader(size_t at, T value, bool fix_crc = true) {
    const std::string dir = Pack("ds" + std::to_string(++packs_), Small());
    const std::string shard = dir + "/tokens-00000.flt";
    std::string b = ReadBytes(shard);
    Put<T>(&b, at, value);
    if (fix_crc) FixHeaderCrc(&b);
    WriteBytes(shard, b);
    return OpenTokenShards(dir).status();
  }

  static void FixHeaderCrc(std::string* b) {
    Put<uint32_t>(b, fmt::kHeaderCrcAt,
                  fmt::MaskTokenCrc(core::Crc32c(b->data(), fmt::kHeaderCrcAt)));
  }

  int packs_ = 0;
};

TEST_F(TokenShardsTest, WrittenDocumentsReadBackExactly) {
  const std::string dir = Pack("ds", Small());
  for (const std::string& path : {dir, dir + "/", dir + "/manifest.json"}) {
    auto src = OpenTokenSource(path, TokenSourceOptions{});
    ASSERT_TRUE(src.ok()) << path << ": " << src.status().ToString();
    const TokenSource& s = **src;
    EXPECT_EQ(s.kind(), TokenSource::Kind::kTokenShards);
    EXPECT_EQ(s.dtype(), TokenDType::kUInt16);
    EXPECT_EQ(s.num_tokens(), 11u);
    EXPECT_EQ(s.CountDocuments(), 5u);
    EXPECT_EQ(ReadAll(s), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    std::vector<uint64_t> starts;
    s.DocumentStarts(0, 11, &starts);
    EXPECT_EQ(starts, (std::vector<uint64_t>{0, 3, 4, 6, 10}));
    starts.clear();
    s.DocumentStarts(4, 10, &starts);  // [begin, end)
    EXPECT_EQ(starts, (std::vector<uint64_t>{4, 6}));
  }
}

TEST_F(TokenShardsTest, ManyShardsConcatenateAndEachStartsADocument) {
  Documents docs;
  std::vector<int64_t> all;
  std::vector<uint64_t> expected_starts;
  for (int d = 0; d < 40; ++d) {
    expected_starts.push_back(all.size());
    std::vector<int64_t> doc;
    for (int j = 0; j <= d % 7; ++j) doc.push_back(d * 10 + j);
    all.insert(all.end(), doc.begin(), doc.end());
    docs.push_back(doc);
  }
  const std::string dir = Pack("ds", docs, 1000, /*shard_tokens=*/9);
  const Json m = Json::parse(ReadBytes(dir + "/manifest.json"));
  EXPECT_GT(m["shards"].size(), 3u);
  EXPECT_EQ(m["tokens"], all.size());
  EXPECT_EQ(m["documents"], 40u);
  EXPECT_EQ(m["tokenizer"]["name"], "test");
  EXPECT_EQ(m["tokenizer"]["vocab_size"], 1000u);
  auto src = OpenTokenShards(dir);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(ReadAll(**src), all);
  std::vector<uint64_t> starts;
  (*src)->DocumentStarts(0, all.size(), &starts);
  EXPECT_EQ(starts, expected_starts);
  // A read across shard boundaries, at every offset.
  for (uint64_t a = 0; a + 5 <= all.size(); ++a) {
    std::vector<int64_t> out(5);
    ASSERT_TRUE((*src)->Read(a, a + 5, out.data()).ok());
    EXPECT_EQ(out, std::vector<int64_t>(all.begin() + a, all.begin() + a + 5)) << a;
  }
  std::vector<int64_t> out(2);
  EXPECT_EQ((*src)->Read(all.size() - 1, all.size() + 1, out.data()).code(),
            StatusCode::kOutOfRange);
}

TEST_F(TokenShardsTest, LargeVocabulariesAreUint32) {
  const std::string dir = Pack("ds", {{70000, 0, 69999}, {5}}, 70001);
  auto src = OpenTokenShards(dir);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->dtype(), TokenDType::kUInt32);
  EXPECT_EQ(ReadAll(**src), (std::vector<int64_t>{70000, 0, 69999, 5}));
}

TEST_F(TokenShardsTest, AFlippedTokenByteIsCaughtByItsBlockOnRead) {
  // Three checksum blocks of 2^16 tokens; corrupt one token of block 1.
  std::vector<int64_t> doc(3 << 16);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int64_t>(i % 1000);
  const std::string dir = Pack("ds", {doc});
  const std::string shard = dir + "/tokens-00000.flt";
  std::string b = ReadBytes(shard);
  b[fmt::kTokenShardHeaderSize + 2 * ((1 << 16) + 5)] ^= 0x01;
  WriteBytes(shard, b);
  auto src = OpenTokenShards(dir);  // open reads the indices only
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  std::vector<int64_t> out(100);
  EXPECT_TRUE((*src)->Read(0, 100, out.data()).ok());
  EXPECT_TRUE((*src)->Read(2 << 16, (2 << 16) + 100, out.data()).ok());
  for (int attempt = 0; attempt < 2; ++attempt) {  // never cached as good
    const Status s = (*src)->Read((1 << 16) - 50, (1 << 16) + 50, out.data());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr(shard));
    EXPECT_THAT(s.message(), HasSubstr("block_crcs[1] (tokens [65536, 131072)) checksum mismatch"));
  }
}

TEST_F(TokenShardsTest, VerifyListsEveryBadBlockAndCountsWhatItChecked) {
  // Four blocks of 2^16 tokens (the last one short); corrupt blocks 1 and 3.
  std::vector<int64_t> doc((3 << 16) + 7);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int64_t>(i % 1000);
  const std::string dir = Pack("ds", {doc});
  auto good = VerifyTokenShards(dir);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->shards, 1u);
  EXPECT_EQ(good->blocks, 4u);
  EXPECT_EQ(good->tokens, doc.size());
  EXPECT_TRUE(good->problems.empty());

  const std::string shard = dir + "/tokens-00000.flt";
  std::string b = ReadBytes(shard);
  b[fmt::kTokenShardHeaderSize + 2 * ((1 << 16) + 5)] ^= 0x01;
  b[fmt::kTokenShardHeaderSize + 2 * ((3 << 16) + 6)] ^= 0x01;
  WriteBytes(shard, b);
  auto bad = VerifyTokenShards(dir);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(bad->blocks, 4u);
  ASSERT_EQ(bad->problems.size(), 2u);
  EXPECT_THAT(bad->problems[0], HasSubstr(shard));
  EXPECT_THAT(bad->problems[0],
              HasSubstr("block_crcs[1] (tokens [65536, 131072)) checksum mismatch"));
  EXPECT_THAT(bad->problems[1],
              HasSubstr("block_crcs[3] (tokens [196608, 196615)) checksum mismatch"));

  // A dataset that does not open: OpenTokenShards' error as it is.
  WriteBytes(dir + "/manifest.json", "{}");
  const Status s = VerifyTokenShards(dir).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("\"format\" is missing"));
}

TEST_F(TokenShardsTest, EveryHeaderFieldIsCheckedAndNamed) {
  struct Case {
    const char* field;
    std::function<Status()> corrupt;
  };
  const std::vector<Case> cases = {
      {"bad magic", [&] { return CorruptHeader<uint8_t>(0, 'X'); }},
      {"version 2, this build reads 1",
       [&] { return CorruptHeader<uint32_t>(fmt::kVersionAt, 2); }},
      {"header_crc32c", [&] { return CorruptHeader<uint32_t>(fmt::kFlagsAt, 1, false); }},
      {"flags = 1", [&] { return CorruptHeader<uint32_t>(fmt::kFlagsAt, 1); }},
      {"dtype = 3", [&] { return CorruptHeader<uint32_t>(fmt::kDTypeAt, 3); }},
      {"block_log2 = 9", [&] { return CorruptHeader<uint32_t>(fmt::kBlockLog2At, 9); }},
      {"block_log2 = 25", [&] { return CorruptHeader<uint32_t>(fmt::kBlockLog2At, 25); }},
      {"token_count = 0", [&] { return CorruptHeader<uint64_t>(fmt::kTokenCountAt, 0); }},
      {"token_count = 18446744073709551615",
       [&] { return CorruptHeader<uint64_t>(fmt::kTokenCountAt, ~uint64_t{0}); }},
      {"size 140 bytes, expected 148",
       [&] { return CorruptHeader<uint64_t>(fmt::kTokenCountAt, 13); }},
      {"padding byte 0 is not 0", [&] { return CorruptHeader<uint64_t>(fmt::kTokenCountAt, 10); }},
      {"document_count = 0", [&] { return CorruptHeader<uint64_t>(fmt::kDocCountAt, 0); }},
      {"document_count = 12", [&] { return CorruptHeader<uint64_t>(fmt::kDocCountAt, 12); }},
      {"vocab_size = 0", [&] { return CorruptHeader<uint64_t>(fmt::kVocabSizeAt, 0); }},
      {"vocab_size = 65537", [&] { return CorruptHeader<uint64_t>(fmt::kVocabSizeAt, 65537); }},
      {"vocab_size 999 in the header, 1000 in the manifest",
       [&] { return CorruptHeader<uint64_t>(fmt::kVocabSizeAt, 999); }},
      {"reserved = 7", [&] { return CorruptHeader<uint32_t>(fmt::kReservedAt, 7); }},
      {"document_index_crc32c", [&] { return CorruptHeader<uint32_t>(fmt::kDocIndexCrcAt, 1); }},
      {"block_crcs_crc32c", [&] { return CorruptHeader<uint32_t>(fmt::kBlockCrcsCrcAt, 1); }},
  };
  for (const Case& c : cases) {
    const Status s = c.corrupt();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.field << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.field));
    EXPECT_THAT(s.message(), HasSubstr("tokens-00000.flt"));
  }
}

TEST_F(TokenShardsTest, ACorruptDocumentIndexNamesTheEntry) {
  const std::string dir = Pack("ds", Small());
  const std::string shard = dir + "/tokens-00000.flt";
  const std::string good = ReadBytes(shard);
  auto layout =
      fmt::ParseTokenShard(reinterpret_cast<const uint8_t*>(good.data()), good.size(), shard);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  struct Case {
    uint64_t k, value;
    const char* what;
  };
  for (const Case& c : {Case{0, 1, "document_index[0] = 1"}, Case{2, 3, "document_index[2] = 3"},
                        Case{3, 2, "document_index[3] = 2"}, Case{5, 10, "document_index[5] = 10"},
                        Case{4, 12, "document_index[4] = 12"}}) {
    std::string b = good;
    Put<uint64_t>(&b, layout->doc_index_at + 8 * c.k, c.value);
    // With the index CRC left alone the CRC catches it; recomputed, the entry does.
    auto r = fmt::ParseTokenShard(reinterpret_cast<const uint8_t*>(b.data()), b.size(), shard);
    EXPECT_THAT(r.status().message(), HasSubstr("document_index_crc32c"));
    Put<uint32_t>(&b, fmt::kDocIndexCrcAt,
                  fmt::MaskTokenCrc(core::Crc32c(b.data() + layout->doc_index_at,
                                                 8 * (layout->num_documents + 1))));
    FixHeaderCrc(&b);
    r = fmt::ParseTokenShard(reinterpret_cast<const uint8_t*>(b.data()), b.size(), shard);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_THAT(r.status().message(), HasSubstr(c.what));
  }
}

TEST_F(TokenShardsTest, TruncationAtEveryByteIsRefused) {
  const std::string dir = Pack("ds", Small());
  const std::string shard = dir + "/tokens-00000.flt";
  const std::string good = ReadBytes(shard);
  for (size_t cut = 0; cut < good.size(); ++cut) {
    // A copy of exactly `cut` bytes on the heap: ASan catches any read past it.
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    auto r = fmt::ParseTokenShard(b.data(), b.size(), shard);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << cut;
    EXPECT_THAT(r.status().message(), HasSubstr(shard));
  }
  WriteBytes(shard, good.substr(0, good.size() - 1));
  const Status s = OpenTokenShards(dir).status();
  EXPECT_THAT(s.message(), HasSubstr("size 139 bytes, the manifest says 140"));
  WriteBytes(shard, good + std::string(1, '\0'));
  EXPECT_THAT(OpenTokenShards(dir).status().message(), HasSubstr("the manifest says 140"));
}

TEST_F(TokenShardsTest, IsTokenShardsManifestReadsOnlyTheFormat) {
  EXPECT_TRUE(IsTokenShardsManifest(R"({"format": "feedline-tokens", "version": 99})"));
  EXPECT_FALSE(IsTokenShardsManifest(R"({"format": "feedline-shards"})"));
  EXPECT_FALSE(IsTokenShardsManifest(R"({"format": ["feedline-tokens"]})"));
  EXPECT_FALSE(IsTokenShardsManifest(R"(["feedline-tokens"])"));
  EXPECT_FALSE(IsTokenShardsManifest("{not json"));
  EXPECT_FALSE(IsTokenShardsManifest(""));
}

TEST_F(TokenShardsTest, ManifestErrorsNameTheField) {
  const std::string dir = Pack("ds", Small());
  const std::string path = dir + "/manifest.json";
  const Json good = Json::parse(ReadBytes(path));
  struct Case {
    std::function<void(Json*)> mutate;
    const char* what;
  };
  const std::vector<Case> cases = {
      {[](Json* j) { (*j)["format"] = "feedline-dataset"; }, "\"format\" is \"feedline-dataset\""},
      {[](Json* j) { (*j)["version"] = 2; }, "\"version\" = 2"},
      {[](Json* j) { (*j)["dtype"] = "int64"; }, "\"dtype\" = \"int64\""},
      {[](Json* j) { (*j)["tokens"] = 12; }, "\"tokens\" = 12, but its shards hold 11"},
      {[](Json* j) { (*j)["documents"] = -1; }, "\"documents\" = -1 is not an integer"},
      {[](Json* j) { j->erase("tokenizer"); }, "\"tokenizer\" is missing"},
      {[](Json* j) { (*j)["tokenizer"].erase("vocab_size"); }, "\"vocab_size\" is missing"},
      {[](Json* j) { (*j)["shards"] = Json::array(); },
       "\"shards\" is missing, not an array, or empty"},
      {[](Json* j) { (*j)["shards"][0]["name"] = "../x.flt"; },
       "shards[0] \"name\" = \"../x.flt\""},
      {[](Json* j) { (*j)["shards"][0]["tokens"] = 10; },
       "token_count 11 in the header, 10 in the manifest"},
      {[](Json* j) { (*j)["shards"][0]["documents"] = 4; }, "document_count 5 in the header, 4"},
      {[](Json* j) { (*j)["dtype"] = "uint32"; }, "dtype uint16 in the header, uint32"},
      {[](Json* j) { (*j)["shards"][0]["header_crc32c"] = "00000000"; }, "header_crc32c"},
      {[](Json* j) { (*j)["shards"][0].erase("bytes"); }, "shards[0] \"bytes\" is missing"},
      // Fields of the wrong JSON type are refused, never thrown (token_shard_fuzzer).
      {[](Json* j) { (*j)["format"] = Json::array(); }, "\"format\" is []"},
      {[](Json* j) { (*j)["version"] = "1"; }, "\"version\" = \"1\" is not an integer"},
      {[](Json* j) { (*j)["dtype"] = 16; }, "\"dtype\" = 16"},
      {[](Json* j) { (*j)["tokenizer"] = "gpt2"; }, "\"tokenizer\" is missing or not an object"},
      {[](Json* j) { (*j)["shards"][0]["name"] = 7; }, "\"name\" is missing or not a string"},
      {[](Json* j) { (*j)["shards"][0]["header_crc32c"] = 7; },
       "\"header_crc32c\" is missing or not a string"},
  };
  for (const Case& c : cases) {
    Json j = good;
    c.mutate(&j);
    WriteBytes(path, j.dump());
    const Status s = OpenTokenShards(dir).status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.what << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.what));
  }
  WriteBytes(path, "{not json");
  EXPECT_THAT(OpenTokenShards(dir).status().message(), HasSubstr("not a JSON object"));
  WriteBytes(path, good.dump());
  std::filesystem::remove(dir + "/tokens-00000.flt");
  const Status missing = OpenTokenShards(dir).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("tokens-00000.flt"));
}

TEST_F(TokenShardsTest, AnUnfinishedDirectoryIsNotADataset) {
  const std::string dir = Path("unfinished");
  TokenShardWriterOptions o;
  o.vocab_size = 100;
  {
    auto w = TokenShardWriter::Create(dir, o);
    ASSERT_TRUE(w.ok());
    const std::vector<int64_t> doc = {1, 2, 3};
    ASSERT_TRUE((*w)->AddDocument(doc.data(), doc.size()).ok());
    // Destroyed without Finish: the .partial shard is removed.
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/tokens-00000.flt.partial"));
  const Status s = OpenTokenSource(dir, TokenSourceOptions{}).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(dir + "/manifest.json"));
}

TEST_F(TokenShardsTest, TheWriterRefusesBadDocumentsAndAFinishedDataset) {
  TokenShardWriterOptions o;
  o.vocab_size = 10;
  auto w = TokenShardWriter::Create(Path("ds"), o);
  ASSERT_TRUE(w.ok());
  EXPECT_THAT((*w)->Finish().message(), HasSubstr("no documents"));
  const std::vector<int64_t> bad = {1, 10};
  const Status s = (*w)->AddDocument(bad.data(), bad.size());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("document 0 token 1 = 10 is outside the vocabulary [0, 10)"));
  EXPECT_THAT((*w)->AddDocument(bad.data(), 0).message(), HasSubstr("document 0 is empty"));
  ASSERT_TRUE((*w)->AddDocument(bad.data(), 1).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ((*w)->Finish().code(), StatusCode::kFailedPrecondition);
  const auto again = TokenShardWriter::Create(Path("ds"), o);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("already packed"));
  o.tokenizer_json = "[1]";
  EXPECT_THAT(TokenShardWriter::Create(Path("other"), o).status().message(),
              HasSubstr("tokenizer description is not a JSON object"));
}

TEST_F(TokenShardsTest, TheFingerprintFollowsTheContents) {
  const uint64_t a = (*OpenTokenShards(Pack("a", Small())))->Fingerprint();
  const uint64_t b = (*OpenTokenShards(Pack("b", Small())))->Fingerprint();
  Documents other = Small();
  other[1][0] = 5;
  const uint64_t c = (*OpenTokenShards(Pack("c", other)))->Fingerprint();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(TokenShardsTest, WindowsOverTokenShardsRestartPositionsAtDocuments) {
  auto corpus = TokenCorpus::Open({Pack("ds", Small(), 1000, 4)}, TokenSourceOptions{});
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ((*corpus)->num_tokens(), 11u);
  std::vector<uint64_t> starts;
  (*corpus)->DocumentStarts(0, 11, &starts);
  EXPECT_EQ(starts, (std::vector<uint64_t>{0, 3, 4, 6, 10}));
  EXPECT_TRUE(TokenWindowPipeline(*corpus, 4).ok());
}

TEST_F(TokenShardsTest, DocumentStartsOfARangeStopAtItsEndAcrossShards) {
  // Shards of about 4 tokens (whole documents). Each range's starts lie
  // inside it, whichever shards follow (a later shard's starts once leaked
  // into a range that ended before it, and windows wrote them past their
  // buffer).
  const Documents docs = {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}, {12, 13}, {14}};
  const std::string dir = Pack("ds", docs, 1000, 4);
  auto src = OpenTokenShards(dir);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::vector<uint64_t> all = {0, 3, 4, 6, 10, 11, 13};
  for (uint64_t b = 0; b <= 14; ++b) {
    for (uint64_t e = b; e <= 14; ++e) {
      std::vector<uint64_t> want, got;
      for (uint64_t s : all) {
        if (s >= b && s < e) want.push_back(s);
      }
      (*src)->DocumentStarts(b, e, &got);
      EXPECT_EQ(got, want) << "[" << b << ", " << e << ")";
    }
  }
  // Windows of 2 over them: every row's segments are the documents'.
  LoaderOptions o;
  o.batch_size = 3;
  o.num_threads = 2;
  o.max_bytes = 64 << 20;
  auto corpus = TokenCorpus::Open({dir}, TokenSourceOptions{});
  ASSERT_TRUE(corpus.ok());
  const auto rows = testing_tokens::AllRows(*TokenWindowPipeline(*corpus, 2), o, 2);
  ASSERT_EQ(rows.size(), 6u);  // (14 - 1) / 2
  for (const auto& r : rows) {
    EXPECT_EQ(r.document_starts, testing_tokens::StartsFromDocumentIds(r.document_ids)) << r.id;
  }
}

}  // namespace
}  // namespace feedline
