// The flat and Megatron readers: good files read back exactly; every kind
// of corrupt index or wrong-sized file is an error naming the file, the
// field and the value (docs/reliability.md 40).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "feedline/tokens.h"
#include "tests/tokens/token_test_util.h"

namespace feedline {
namespace {

using ::testing::HasSubstr;
using testing_tokens::Append;
using testing_tokens::MegatronBin;
using testing_tokens::MegatronFixture;
using testing_tokens::MegatronIndex;
using testing_tokens::Put;
using testing_tokens::ReadBytes;
using testing_tokens::WriteBytes;
using testing_tokens::WriteFlat;

class TokenReadersTest : public testing_tokens::TempDirTest {
 protected:
  // Documents: [10 11 12] [20] (empty) [30 31 | 32 33] (two sequences) [40].
  static MegatronFixture Fixture() {
    return MegatronFixture{{{{10, 11, 12}}, {{20}}, {}, {{30, 31}, {32, 33}}, {{40}}}};
  }
  std::string WriteMegatron(const std::string& name, const MegatronFixture& m) {
    const std::string prefix = Path(name);
    WriteBytes(prefix + ".bin", MegatronBin<uint16_t>(m));
    WriteBytes(prefix + ".idx", MegatronIndex(m, 8, 2));
    return prefix;
  }
  // The default fixture with `mutate` applied to its index; the open error.
  Status CorruptIndex(const std::function<void(std::string*)>& mutate) {
    const std::string prefix = WriteMegatron("corrupt", Fixture());
    std::string idx = ReadBytes(prefix + ".idx");
    mutate(&idx);
    WriteBytes(prefix + ".idx", idx);
    return OpenMegatronDataset(prefix).status();
  }
  static std::vector<int64_t> ReadAll(const TokenSource& s) {
    std::vector<int64_t> out(s.num_tokens());
    EXPECT_TRUE(s.Read(0, s.num_tokens(), out.data()).ok());
    return out;
  }
  static std::vector<uint64_t> Starts(const TokenSource& s, uint64_t b, uint64_t e) {
    std::vector<uint64_t> out;
    s.DocumentStarts(b, e, &out);
    return out;
  }
};

TEST_F(TokenReadersTest, DTypeNamesRoundTrip) {
  for (const char* name : {"uint8", "int8", "int16", "uint16", "int32", "uint32", "int64"}) {
    Result<TokenDType> d = ParseTokenDType(name);
    ASSERT_TRUE(d.ok()) << name;
    EXPECT_EQ(TokenDTypeName(*d), name);
  }
  EXPECT_THAT(ParseTokenDType("float32").status().message(), HasSubstr("'float32'"));
}

TEST_F(TokenReadersTest, FlatUint16ReadsExactly) {
  const std::vector<int64_t> tokens = {0, 1, 65535, 7, 50256, 3};
  WriteFlat<uint16_t>(Path("a.bin"), tokens);
  auto s = OpenFlatTokenFile(Path("a.bin"), {});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->kind(), TokenSource::Kind::kFlat);
  EXPECT_EQ((*s)->num_tokens(), tokens.size());
  EXPECT_EQ(ReadAll(**s), tokens);
  std::vector<int64_t> mid(2);
  ASSERT_TRUE((*s)->Read(2, 4, mid.data()).ok());
  EXPECT_EQ(mid, (std::vector<int64_t>{65535, 7}));
  EXPECT_EQ((*s)->CountDocuments(), 1u);
  EXPECT_EQ(Starts(**s, 0, 6), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(Starts(**s, 1, 6).empty());
}

TEST_F(TokenReadersTest, FlatUint32ReadsIdsAbove16Bits) {
  const std::vector<int64_t> tokens = {100000, 4294967295LL, 0, 128000};
  WriteFlat<uint32_t>(Path("a.bin"), tokens);
  TokenSourceOptions o;
  o.flat_dtype = TokenDType::kUInt32;
  auto s = OpenFlatTokenFile(Path("a.bin"), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(ReadAll(**s), tokens);
}

TEST_F(TokenReadersTest, FlatSizeNotAMultipleOfTheDTypeNamesFileAndSize) {
  WriteBytes(Path("odd.bin"), std::string(7, '\1'));
  TokenSourceOptions o;
  o.flat_dtype = TokenDType::kUInt32;
  Status st = OpenFlatTokenFile(Path("odd.bin"), o).status();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("odd.bin"));
  EXPECT_THAT(st.message(), HasSubstr("size 7 bytes"));
  EXPECT_THAT(st.message(), HasSubstr("uint32"));
  // uint16: 7 bytes is not a multiple of 2 either.
  EXPECT_EQ(OpenFlatTokenFile(Path("odd.bin"), {}).status().code(), StatusCode::kDataLoss);
}

TEST_F(TokenReadersTest, FlatEmptyAndMissingFilesAreRefused) {
  WriteBytes(Path("empty.bin"), "");
  Status empty = OpenFlatTokenFile(Path("empty.bin"), {}).status();
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("empty.bin"));
  Status missing = OpenFlatTokenFile(Path("nope.bin"), {}).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("nope.bin"));
  Status dir = OpenFlatTokenFile(dir_.string(), {}).status();
  EXPECT_EQ(dir.code(), StatusCode::kInvalidArgument);
}

TEST_F(TokenReadersTest, FlatEosSplitsDocumentsAfterEachEos) {
  // eos = 0: documents [5 6 0] [7 0] [8 9]; a trailing eos starts nothing.
  WriteFlat<uint16_t>(Path("a.bin"), {5, 6, 0, 7, 0, 8, 9});
  WriteFlat<uint16_t>(Path("b.bin"), {5, 0, 6, 0});
  TokenSourceOptions o;
  o.eos_token = 0;
  auto a = OpenFlatTokenFile(Path("a.bin"), o);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->CountDocuments(), 3u);
  EXPECT_EQ(Starts(**a, 0, 7), (std::vector<uint64_t>{0, 3, 5}));
  EXPECT_EQ(Starts(**a, 1, 5), (std::vector<uint64_t>{3}));
  auto b = OpenFlatTokenFile(Path("b.bin"), o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->CountDocuments(), 2u);
}

// The eos scan works in blocks of 64 tokens, skipping blocks without one:
// every dtype (signed ones too), blocks with no eos, a lone eos at either
// edge of a block, a run across an edge and the last token, windows of
// every offset, against a token-by-token reference.
template <typename T>
void ExpectEosScanMatchesTheReference(const std::string& path, TokenDType dtype) {
  std::vector<int64_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = 1 + static_cast<int64_t>(i % 2);  // never the eos
  ids[63] = ids[64] = 3;                       // a run across an edge
  ids[127] = 3;  // a lone eos at a block's last token; block 2 ([128, 192)) has none
  ids[256] = 3;  // a lone eos at a block's first token
  ids[299] = 3;  // the file's last token
  WriteFlat<T>(path, ids);
  TokenSourceOptions o;
  o.flat_dtype = dtype;
  o.eos_token = 3;
  auto src = OpenFlatTokenFile(path, o);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  uint64_t docs = 1;
  for (size_t t = 0; t + 1 < ids.size(); ++t) docs += ids[t] == 3 ? 1 : 0;
  EXPECT_EQ((*src)->CountDocuments(), docs);
  EXPECT_EQ(docs, 5u);
  for (uint64_t begin : {0, 1, 63, 64, 65, 128, 129, 200, 257}) {
    for (uint64_t end : {begin, begin + 1, begin + 64, begin + 70, uint64_t{300}}) {
      if (end < begin || end > ids.size()) continue;
      std::vector<uint64_t> want;
      for (uint64_t s = begin; s < end; ++s) {
        if (s == 0 || ids[s - 1] == 3) want.push_back(s);
      }
      std::vector<uint64_t> got;
      (*src)->DocumentStarts(begin, end, &got);
      EXPECT_EQ(got, want) << TokenDTypeName(dtype) << ", [" << begin << ", " << end << ")";
    }
  }
}

TEST_F(TokenReadersTest, FlatEosScanMatchesATokenByTokenReferenceForEveryWidth) {
  ExpectEosScanMatchesTheReference<uint8_t>(Path("u8.bin"), TokenDType::kUInt8);
  ExpectEosScanMatchesTheReference<int8_t>(Path("i8.bin"), TokenDType::kInt8);
  ExpectEosScanMatchesTheReference<int16_t>(Path("i16.bin"), TokenDType::kInt16);
  ExpectEosScanMatchesTheReference<uint16_t>(Path("u16.bin"), TokenDType::kUInt16);
  ExpectEosScanMatchesTheReference<int32_t>(Path("i32.bin"), TokenDType::kInt32);
  ExpectEosScanMatchesTheReference<uint32_t>(Path("u32.bin"), TokenDType::kUInt32);
  ExpectEosScanMatchesTheReference<int64_t>(Path("i64.bin"), TokenDType::kInt64);
}

// An eos no token of the dtype can hold would make the file one document:
// refused, naming the file, the eos and the dtype, as is a negative one.
TEST_F(TokenReadersTest, FlatEosOutsideTheDTypeAndANegativeOneAreRefused) {
  WriteFlat<uint8_t>(Path("a.bin"), {1, 2, 255, 4});
  TokenSourceOptions o;
  o.flat_dtype = TokenDType::kUInt8;
  o.eos_token = 255;
  EXPECT_TRUE(OpenFlatTokenFile(Path("a.bin"), o).ok());
  o.eos_token = 255 + 256;  // a uint8 token cannot be 511 (nor wrap to 255)
  Status s = OpenFlatTokenFile(Path("a.bin"), o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), testing::HasSubstr("a.bin': eos_token 511 does not fit its dtype uint8 "
                                              "(at most 255)"));
  o.flat_dtype = TokenDType::kInt16;
  o.eos_token = 32768;
  WriteFlat<int16_t>(Path("b.bin"), {1, 2});
  s = OpenFlatTokenFile(Path("b.bin"), o).status();
  EXPECT_THAT(s.message(), testing::HasSubstr("does not fit its dtype int16 (at most 32767)"));
  o.eos_token = -1;
  s = OpenFlatTokenFile(Path("a.bin"), o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), testing::HasSubstr("eos_token -1 is not a token id"));
}

TEST_F(TokenReadersTest, ReadPastTheEndIsOutOfRange) {
  WriteFlat<uint16_t>(Path("a.bin"), {1, 2, 3});
  auto s = OpenFlatTokenFile(Path("a.bin"), {});
  ASSERT_TRUE(s.ok());
  std::vector<int64_t> out(4);
  Status st = (*s)->Read(0, 4, out.data());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(st.message(), HasSubstr("a.bin"));
}

TEST_F(TokenReadersTest, MegatronReadsTokensAndDocumentsExactly) {
  const std::string prefix = WriteMegatron("ds", Fixture());
  auto s = OpenMegatronDataset(prefix);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->kind(), TokenSource::Kind::kMegatron);
  EXPECT_EQ((*s)->dtype(), TokenDType::kUInt16);
  EXPECT_EQ((*s)->path(), prefix + ".bin");
  EXPECT_EQ(ReadAll(**s), (std::vector<int64_t>{10, 11, 12, 20, 30, 31, 32, 33, 40}));
  EXPECT_EQ((*s)->CountDocuments(), 5u);  // the empty one included, as Megatron counts
  // Document starts in tokens: 0, 3, (empty at 4), 4, 8; a sequence boundary (6) is none.
  EXPECT_EQ(Starts(**s, 0, 9), (std::vector<uint64_t>{0, 3, 4, 8}));
  EXPECT_EQ(Starts(**s, 1, 8), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(Starts(**s, 5, 8), (std::vector<uint64_t>{}));
  EXPECT_EQ(Starts(**s, 8, 9), (std::vector<uint64_t>{8}));
}

TEST_F(TokenReadersTest, MegatronInt32DatasetReadsBack) {
  MegatronFixture m{{{{70000, 1}}, {{2, 128255}}}};
  const std::string prefix = Path("i32");
  WriteBytes(prefix + ".bin", MegatronBin<int32_t>(m));
  WriteBytes(prefix + ".idx", MegatronIndex(m, 4, 4));
  auto s = OpenMegatronDataset(prefix);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->dtype(), TokenDType::kInt32);
  EXPECT_EQ(ReadAll(**s), (std::vector<int64_t>{70000, 1, 2, 128255}));
}

TEST_F(TokenReadersTest, MegatronNegativeIdIsDataLossNamingTheToken) {
  MegatronFixture m{{{{1, -5, 3}}}};
  const std::string prefix = Path("neg");
  WriteBytes(prefix + ".bin", MegatronBin<int32_t>(m));
  WriteBytes(prefix + ".idx", MegatronIndex(m, 4, 4));
  auto s = OpenMegatronDataset(prefix);
  ASSERT_TRUE(s.ok());
  std::vector<int64_t> out(3);
  Status st = (*s)->Read(0, 3, out.data());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("neg.bin"));
  EXPECT_THAT(st.message(), HasSubstr("token 1 is negative (-5)"));
}

TEST_F(TokenReadersTest, MegatronBadMagicIsRefused) {
  Status st = CorruptIndex([](std::string* idx) { (*idx)[0] = 'X'; });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("corrupt.idx"));
  EXPECT_THAT(st.message(), HasSubstr("bad magic"));
}

TEST_F(TokenReadersTest, MegatronUnknownVersionNamesItAndTheSupportedOne) {
  Status st =
      CorruptIndex([](std::string* idx) { Put<uint64_t>(idx, testing_tokens::kVersionOffset, 2); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("corrupt.idx"));
  EXPECT_THAT(st.message(), HasSubstr("version 2, this build reads 1"));
}

TEST_F(TokenReadersTest, MegatronFloatAndUnknownDTypeCodesAreRefused) {
  Status f = CorruptIndex([](std::string* idx) { (*idx)[testing_tokens::kDTypeOffset] = 7; });
  EXPECT_EQ(f.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.message(), HasSubstr("dtype code 7 (float32)"));
  Status u = CorruptIndex([](std::string* idx) { (*idx)[testing_tokens::kDTypeOffset] = 9; });
  EXPECT_EQ(u.code(), StatusCode::kDataLoss);
  EXPECT_THAT(u.message(), HasSubstr("unknown dtype code 9"));
}

TEST_F(TokenReadersTest, MegatronDTypeThatDisagreesWithTheBinIsCaught) {
  // int32 (4 bytes) over a uint16 .bin: the lengths then need twice the bytes.
  Status st = CorruptIndex([](std::string* idx) { (*idx)[testing_tokens::kDTypeOffset] = 4; });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("sequence_pointers[1]"));
}

TEST_F(TokenReadersTest, MegatronLengthPastTheBinNamesSequenceAndSize) {
  // The last sequence (index 4, one token) claims 1000 tokens.
  Status st = CorruptIndex(
      [](std::string* idx) { Put<int32_t>(idx, testing_tokens::kLengthsOffset + 4 * 4, 1000); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("sequence_lengths[4] = 1000"));
  EXPECT_THAT(st.message(), HasSubstr("corrupt.bin"));
  EXPECT_THAT(st.message(), HasSubstr("(18 bytes)"));
}

TEST_F(TokenReadersTest, MegatronNegativeLengthIsRefused) {
  Status st = CorruptIndex(
      [](std::string* idx) { Put<int32_t>(idx, testing_tokens::kLengthsOffset + 4, -1); });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("sequence_lengths[1] = -1 is negative"));
}

TEST_F(TokenReadersTest, MegatronPointerNotMatchingTheLengthsNamesIt) {
  // 5 sequences: pointers start after the 5 lengths. Sequence 2 moved by 2 bytes.
  Status st = CorruptIndex([](std::string* idx) {
    Put<int64_t>(idx, testing_tokens::kLengthsOffset + 4 * 5 + 8 * 2, 10);
  });
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("sequence_pointers[2] = 10, expected 8"));
}

TEST_F(TokenReadersTest, MegatronBinLongerThanTheSequencesIsRefused) {
  const std::string prefix = WriteMegatron("long", Fixture());
  WriteBytes(prefix + ".bin", ReadBytes(prefix + ".bin") + std::string(2, '\0'));
  Status st = OpenMegatronDataset(prefix).status();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("the sequences end at byte 18"));
  EXPECT_THAT(st.message(), HasSubstr("has 20 bytes"));
}

TEST_F(TokenReadersTest, MegatronBadDocumentIndicesAreRefused) {
  // 5 sequences, 6 document indices {0, 1, 2, 2, 4, 5} at offset 34 + 12 * 5.
  const size_t docs = testing_tokens::kLengthsOffset + 12 * 5;
  struct Case {
    size_t k;
    int64_t v;
    const char* expect;
  };
  for (const Case& c :
       {Case{0, 1, "document_indices[0] = 1"}, Case{3, 1, "document_indices[3] = 1"},  // decreases
        Case{5, 4, "document_indices[5] = 4"},  // does not end at 5
        Case{2, 99, "document_indices[2] = 99"}}) {
    Status st = CorruptIndex([&](std::string* idx) { Put<int64_t>(idx, docs + 8 * c.k, c.v); });
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << c.expect;
    EXPECT_THAT(st.message(), HasSubstr(c.expect));
  }
}

TEST_F(TokenReadersTest, MegatronCountsThatDisagreeWithTheIndexSizeAreRefused) {
  Status huge = CorruptIndex([](std::string* idx) {
    Put<uint64_t>(idx, testing_tokens::kSequenceCountOffset, uint64_t{1} << 62);
  });
  EXPECT_EQ(huge.code(), StatusCode::kDataLoss);
  EXPECT_THAT(huge.message(), HasSubstr("sequence count 4611686018427387904"));
  Status docs = CorruptIndex(
      [](std::string* idx) { Put<uint64_t>(idx, testing_tokens::kDocumentCountOffset, 5); });
  EXPECT_EQ(docs.code(), StatusCode::kDataLoss);
  EXPECT_THAT(docs.message(), HasSubstr("document count 5"));
  // One mode byte per sequence: Megatron's multimodal index.
  Status modes = CorruptIndex([](std::string* idx) { idx->append(5, '\0'); });
  EXPECT_THAT(modes.message(), HasSubstr("multimodal"));
}

TEST_F(TokenReadersTest, MegatronIndexTruncatedAtEveryByteIsAnError) {
  const std::string prefix = WriteMegatron("cut", Fixture());
  const std::string idx = ReadBytes(prefix + ".idx");
  for (size_t cut = 0; cut < idx.size(); ++cut) {
    WriteBytes(prefix + ".idx", idx.substr(0, cut));
    Status st = OpenMegatronDataset(prefix).status();
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << "cut at " << cut;
    EXPECT_THAT(st.message(), HasSubstr("cut.idx")) << "cut at " << cut;
  }
}

TEST_F(TokenReadersTest, MissingIdxOrBinIsNotFound) {
  const std::string prefix = WriteMegatron("half", Fixture());
  std::filesystem::remove(prefix + ".bin");
  Status st = OpenMegatronDataset(prefix).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("half.bin"));
}

TEST_F(TokenReadersTest, OpenTokenSourceTellsMegatronFromFlat) {
  const std::string prefix = WriteMegatron("ds", Fixture());
  WriteFlat<uint16_t>(Path("flat.bin"), {1, 2, 3});
  for (const std::string& p : {prefix, prefix + ".bin"}) {
    auto s = OpenTokenSource(p, {});
    ASSERT_TRUE(s.ok()) << p;
    EXPECT_EQ((*s)->kind(), TokenSource::Kind::kMegatron) << p;
  }
  auto f = OpenTokenSource(Path("flat.bin"), {});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->kind(), TokenSource::Kind::kFlat);
}

TEST_F(TokenReadersTest, CorpusConcatenatesInOrderAndEachSourceStartsADocument) {
  const std::string prefix = WriteMegatron("ds", Fixture());  // 9 tokens, starts 0 3 4 8
  WriteFlat<uint16_t>(Path("flat.bin"), {1, 2, 3});
  auto c = TokenCorpus::Open({Path("flat.bin"), prefix}, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->num_tokens(), 12u);
  EXPECT_EQ((*c)->CountDocuments(), 6u);
  std::vector<int64_t> all(12);
  ASSERT_TRUE((*c)->Read(0, 12, all.data()).ok());
  EXPECT_EQ(all, (std::vector<int64_t>{1, 2, 3, 10, 11, 12, 20, 30, 31, 32, 33, 40}));
  std::vector<int64_t> across(4);
  ASSERT_TRUE((*c)->Read(1, 5, across.data()).ok());
  EXPECT_EQ(across, (std::vector<int64_t>{2, 3, 10, 11}));
  std::vector<uint64_t> starts;
  (*c)->DocumentStarts(0, 12, &starts);
  EXPECT_EQ(starts, (std::vector<uint64_t>{0, 3, 6, 7, 11}));
  EXPECT_EQ((*c)->SourceOf(2), 0u);
  EXPECT_EQ((*c)->SourceOf(3), 1u);
  EXPECT_EQ((*c)->SourceOf(11), 1u);
  EXPECT_EQ(TokenCorpus::Open({}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TokenReadersTest, FingerprintsDifferForOtherContentOrOptions) {
  WriteFlat<uint16_t>(Path("a.bin"), {1, 2, 3, 4});
  WriteFlat<uint16_t>(Path("b.bin"), {1, 2, 3, 4, 5, 6});
  auto a = OpenFlatTokenFile(Path("a.bin"), {});
  auto b = OpenFlatTokenFile(Path("b.bin"), {});
  TokenSourceOptions eos;
  eos.eos_token = 3;
  auto a_eos = OpenFlatTokenFile(Path("a.bin"), eos);
  ASSERT_TRUE(a.ok() && b.ok() && a_eos.ok());
  EXPECT_NE((*a)->Fingerprint(), (*b)->Fingerprint());
  EXPECT_NE((*a)->Fingerprint(), (*a_eos)->Fingerprint());
  const std::string p1 = WriteMegatron("m1", Fixture());
  MegatronFixture other = Fixture();
  other.documents.push_back({{7}});  // one more document
  const std::string p2 = WriteMegatron("m1b", other);
  auto m1 = OpenMegatronDataset(p1);
  auto m2 = OpenMegatronDataset(p2);
  ASSERT_TRUE(m1.ok() && m2.ok());
  EXPECT_NE((*m1)->Fingerprint(), (*m2)->Fingerprint());
}

}  // namespace
}  // namespace feedline
