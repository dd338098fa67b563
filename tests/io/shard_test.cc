// Shard writer and reader (docs/shard_format.md) and the faults of
// docs/reliability.md 1-7: empty, truncated at every byte, every bit flipped,
// lying lengths, corrupt index, records inside payloads, foreign files and
// versions; plus write failures and the .partial discipline.
#include "feedline/shard.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "feedline/shard_format.h"
#include "gtest/gtest.h"
#include "src/core/crc32c.h"
#include "tests/io/fault_file.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

TEST(Crc32cTest, MatchesRfc3720VectorsInHardwareAndTable) {
  const std::string digits = "123456789";
  EXPECT_EQ(core::Crc32c(digits.data(), digits.size()), 0xE3069283u);
  EXPECT_EQ(core::Crc32cExtendPortable(0, digits.data(), digits.size()), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(core::Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(core::Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(core::Crc32c(inc.data(), 32), 0x46DD794Eu);
  std::mt19937 gen(1);
  std::vector<uint8_t> noise(1001);
  for (auto& b : noise) b = static_cast<uint8_t>(gen());
  for (size_t n : {0, 1, 7, 8, 9, 63, 1001}) {
    EXPECT_EQ(core::Crc32c(noise.data(), n), core::Crc32cExtendPortable(0, noise.data(), n)) << n;
  }
  EXPECT_EQ(core::Crc32cExtend(core::Crc32c(noise.data(), 500), noise.data() + 500, 501),
            core::Crc32c(noise.data(), 1001));
  EXPECT_EQ(shard::UnmaskCrc(shard::MaskCrc(0x12345678u)), 0x12345678u);
  EXPECT_NE(shard::MaskCrc(0x12345678u), 0x12345678u);
}

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_shard_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Owned {
    int64_t label;
    std::string key, metadata;
    std::vector<uint8_t> data;
  };

  static std::vector<Owned> MakeRecords(int n, size_t max_data) {
    std::vector<Owned> out;
    std::mt19937 gen(7);
    for (int i = 0; i < n; ++i) {
      Owned r{i % 3 == 0 ? -1 : i * 10,
              "class_" + std::to_string(i % 4) + "/img_" + std::to_string(i) + ".jpg",
              i % 2 ? "{\"w\": " + std::to_string(100 + i) + "}" : "",
              {}};
      r.data.resize(i == 1 ? 0 : gen() % (max_data + 1));
      for (auto& b : r.data) b = static_cast<uint8_t>(gen());
      out.push_back(std::move(r));
    }
    return out;
  }

  std::string Write(const std::string& name, const std::vector<Owned>& records) {
    const std::string path = (dir_ / name).string();
    auto w = ShardWriter::Create(path);
    EXPECT_TRUE(w.ok()) << w.status();
    for (const Owned& r : records) {
      EXPECT_TRUE((*w)->Add({r.label, r.key, r.metadata, r.data}).ok());
    }
    EXPECT_TRUE((*w)->Finish().ok());
    return path;
  }

  static std::vector<char> Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }
  std::string Put(const std::string& name, const std::vector<char>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  static void ExpectRecord(const ShardReader& r, uint64_t i, const Owned& want) {
    std::vector<uint8_t> scratch;
    ShardRecord got;
    Status st = r.Read(i, &scratch, &got);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(got.label, want.label);
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.metadata, want.metadata);
    EXPECT_EQ(std::vector<uint8_t>(got.data.begin(), got.data.end()), want.data);
  }

  fs::path dir_;
};

TEST_F(ShardTest, RoundTripsRecordsInAnyOrder) {
  const auto records = MakeRecords(60, 5000);
  const std::string path = Write("a.fls", records);
  EXPECT_FALSE(fs::exists(path + ".partial"));
  auto r = ShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)->num_records(), 60u);
  for (uint64_t i : {59, 0, 31, 1, 2, 58}) ExpectRecord(**r, i, records[i]);
  for (uint64_t i = 0; i < 60; ++i) ExpectRecord(**r, i, records[i]);
  std::vector<uint8_t> scratch;
  ShardRecord rec;
  EXPECT_EQ((*r)->Read(60, &scratch, &rec).code(), StatusCode::kOutOfRange);
}

TEST_F(ShardTest, AnEmptyShardIsValidButEmptyOrHeaderlessFilesAreRefused) {
  auto empty = ShardReader::Open(Write("empty.fls", {}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)->num_records(), 0u);
  // docs/reliability.md 1: zero bytes, or a header only, is never "0 records".
  Result<std::unique_ptr<ShardReader>> zero = ShardReader::Open(Put("zero.fls", {}));
  EXPECT_EQ(zero.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(zero.status().message().find("too small to be a shard"), std::string::npos);
  std::vector<char> header_only = Bytes((dir_ / "empty.fls").string());
  header_only.resize(shard::kHeaderSize);
  EXPECT_FALSE(ShardReader::Open(Put("header.fls", header_only)).ok());
  EXPECT_EQ(ShardReader::Open((dir_ / "missing.fls").string()).status().code(),
            StatusCode::kNotFound);
}

TEST_F(ShardTest, AnUnfinishedWriterLeavesNothingThatLooksComplete) {
  const std::string path = (dir_ / "b.fls").string();
  {
    auto w = ShardWriter::Create(path);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> data(100, 1);
    ASSERT_TRUE((*w)->Add({1, "k", "", data}).ok());
    EXPECT_TRUE(fs::exists(path + ".partial"));
  }  // destroyed without Finish
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

// docs/reliability.md 2: every cut is an error naming where the data stops.
TEST_F(ShardTest, TruncationAtEveryByteIsAnErrorNamingTheRecord) {
  const std::vector<char> full = Bytes(Write("c.fls", MakeRecords(5, 60)));
  for (size_t cut = 0; cut < full.size(); ++cut) {
    std::vector<char> part(full.begin(), full.begin() + static_cast<long>(cut));
    Result<std::unique_ptr<ShardReader>> r = ShardReader::Open(Put("cut.fls", part));
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status();
    if (cut >= shard::kHeaderSize + shard::kFooterSize) {
      const std::string m(r.status().message());
      ASSERT_TRUE(m.find("record") != std::string::npos) << "cut at " << cut << ": " << m;
    }
  }
}

// docs/reliability.md 3: every flipped bit in the records is caught at its
// record; the other records stay byte-identical.
TEST_F(ShardTest, EveryBitFlipInTheRecordsIsCaughtAtItsRecordAlone) {
  const auto records = MakeRecords(4, 40);
  const std::string good = Write("d.fls", records);
  const std::vector<char> full = Bytes(good);
  auto clean = ShardReader::Open(good);
  ASSERT_TRUE(clean.ok());
  const uint64_t index_offset = full.size() - shard::kFooterSize - 4 * shard::kIndexEntrySize;
  for (size_t bit = shard::kHeaderSize * 8; bit < index_offset * 8; ++bit) {
    std::vector<char> bad = full;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    auto r = ShardReader::Open(Put("flip.fls", bad));
    ASSERT_TRUE(r.ok()) << r.status();  // header, index, footer intact
    uint64_t hit = 0;
    while (hit + 1 < 4 && (*clean)->record_offset(hit + 1) <= bit / 8) ++hit;
    for (uint64_t i = 0; i < 4; ++i) {
      std::vector<uint8_t> scratch;
      ShardRecord rec;
      Status st = (*r)->Read(i, &scratch, &rec);
      if (i == hit) {
        ASSERT_EQ(st.code(), StatusCode::kDataLoss) << "bit " << bit;
        ASSERT_NE(st.message().find("record " + std::to_string(i)), std::string::npos) << st;
      } else {
        ASSERT_TRUE(st.ok()) << "bit " << bit << " damaged record " << i << ": " << st;
        ExpectRecord(**r, i, records[i]);
      }
    }
  }
}

void PutU32(std::vector<char>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
void PutU64(std::vector<char>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
void Reseal(std::vector<char>& b, size_t at, size_t n) {  // fix the CRC that follows n bytes
  PutU32(b, at + n, shard::MaskCrc(core::Crc32c(b.data() + at, n)));
}

// docs/reliability.md 4: lengths that lie, even under valid checksums, are
// refused before any allocation larger than the bytes left.
TEST_F(ShardTest, LyingLengthsAreRefusedBeforeAllocation) {
  const std::vector<char> full = Bytes(Write("e.fls", MakeRecords(3, 50)));
  // Record 0's payload length -> 2^31 with a valid header CRC.
  std::vector<char> huge = full;
  PutU32(huge, shard::kHeaderSize + 4, 0x7FFFFFF0u);
  Reseal(huge, shard::kHeaderSize, 20);
  auto r = ShardReader::Open(Put("huge.fls", huge));
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> scratch;
  ShardRecord rec;
  Status st = (*r)->Read(0, &scratch, &rec);
  EXPECT_NE(st.message().find("disagrees with the index"), std::string::npos) << st;
  EXPECT_LT(scratch.capacity(), 1u << 20);
  // The footer's record count -> 2^40 with a valid footer CRC.
  std::vector<char> count = full;
  const size_t footer = full.size() - shard::kFooterSize;
  PutU64(count, footer + 8, uint64_t{1} << 40);
  Reseal(count, footer, 24);
  Result<std::unique_ptr<ShardReader>> c = ShardReader::Open(Put("count.fls", count));
  EXPECT_NE(c.status().message().find("inconsistent with the file size"), std::string::npos)
      << c.status();
}

// docs/reliability.md 5: a corrupt index refuses to open; an index that points at
// the wrong record (valid CRC) never returns it.
TEST_F(ShardTest, CorruptOrLyingIndexNeverReturnsTheWrongRecord) {
  std::vector<Owned> records;
  for (int i = 0; i < 3; ++i)
    records.push_back({i, "k" + std::to_string(i), "", std::vector<uint8_t>(200, uint8_t(i))});
  const std::vector<char> full = Bytes(Write("f.fls", records));
  const size_t footer = full.size() - shard::kFooterSize;
  const size_t index = footer - 3 * shard::kIndexEntrySize;
  auto offset_of = [&](int i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<uint8_t>(full[index + 8 * i + b]);
    return v;
  };
  auto with_index = [&](uint64_t e1, uint64_t e2) {  // entries 1 and 2 replaced, CRCs recomputed
    std::vector<char> b = full;
    PutU64(b, index + 8, e1);
    PutU64(b, index + 16, e2);
    PutU32(b, footer + 16,
           shard::MaskCrc(core::Crc32c(b.data() + index, 3 * shard::kIndexEntrySize)));
    Reseal(b, footer, 24);
    return b;
  };
  std::vector<char> flipped = full;
  flipped[index + 9] ^= 0x10;
  Result<std::unique_ptr<ShardReader>> f = ShardReader::Open(Put("flip.fls", flipped));
  EXPECT_NE(f.status().message().find("index checksum mismatch"), std::string::npos) << f.status();
  // A duplicated entry (valid CRC) is refused at open: offsets must increase.
  Result<std::unique_ptr<ShardReader>> dup =
      ShardReader::Open(Put("dup.fls", with_index(offset_of(2), offset_of(2))));
  EXPECT_NE(dup.status().message().find("out of order"), std::string::npos) << dup.status();
  // Increasing but wrong: record 1 -> record 2's start, record 2 -> inside it.
  auto l = ShardReader::Open(Put("lying.fls", with_index(offset_of(2), offset_of(2) + 60)));
  ASSERT_TRUE(l.ok()) << l.status();
  std::vector<uint8_t> scratch;
  ShardRecord rec;
  Status st1 = (*l)->Read(1, &scratch, &rec);
  EXPECT_NE(st1.message().find("index points at record 2"), std::string::npos) << st1;
  Status st2 = (*l)->Read(2, &scratch, &rec);
  EXPECT_NE(st2.message().find("record 2 at offset"), std::string::npos) << st2;
  EXPECT_NE(st2.message().find("bad record magic"), std::string::npos) << st2;
  // Records are contiguous, so record 0 no longer fills its space either.
  Status st0 = (*l)->Read(0, &scratch, &rec);
  EXPECT_NE(st0.message().find("disagrees with the index"), std::string::npos) << st0;
}

// docs/reliability.md 6: a payload holding a whole well-formed shard is just data.
TEST_F(ShardTest, ARecordInsideAPayloadIsNeverReadAsARecord) {
  const std::vector<char> inner = Bytes(Write("inner.fls", MakeRecords(3, 20)));
  Owned outer{5, "outer", "", std::vector<uint8_t>(inner.begin(), inner.end())};
  auto r = ShardReader::Open(Write("outer.fls", {outer}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->num_records(), 1u);
  ExpectRecord(**r, 0, outer);
}

// docs/reliability.md 7: foreign files and unknown versions name what was found.
TEST_F(ShardTest, ForeignFilesAndUnknownVersionsAreNamed) {
  std::vector<char> png(100, 'x');
  std::string magic = "\x89PNG\r\n\x1a\n";
  std::copy(magic.begin(), magic.end(), png.begin());
  Result<std::unique_ptr<ShardReader>> foreign = ShardReader::Open(Put("x.png", png));
  EXPECT_EQ(foreign.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(foreign.status().message().find("not a feedline shard"), std::string::npos);
  std::vector<char> v3 = Bytes(Write("g.fls", MakeRecords(2, 10)));
  PutU32(v3, 8, 3);
  Reseal(v3, 0, 20);
  Result<std::unique_ptr<ShardReader>> r = ShardReader::Open(Put("v3.fls", v3));
  EXPECT_NE(r.status().message().find("format version 3; this build reads versions 1 to 2"),
            std::string::npos)
      << r.status();
  // A version-1 shard relabelled 2 in its header alone: the footer disagrees.
  std::vector<char> relabelled = Bytes(Write("h.fls", MakeRecords(2, 10)));
  PutU32(relabelled, 8, 2);
  Reseal(relabelled, 0, 20);
  r = ShardReader::Open(Put("h2.fls", relabelled));
  EXPECT_NE(r.status().message().find("footer version disagrees"), std::string::npos) << r.status();
}

// Version 2: records of named fields (docs/shard_format.md).
std::string WriteV2(const fs::path& dir, const std::string& name,
                    const std::vector<std::vector<std::pair<std::string, std::string>>>& records) {
  const std::string path = (dir / name).string();
  auto w = ShardWriter::Create(path, shard::kShardVersion2);
  EXPECT_TRUE(w.ok()) << w.status();
  for (size_t i = 0; i < records.size(); ++i) {
    ShardRecord rec;
    rec.label = static_cast<int64_t>(i);
    const std::string key = "k" + std::to_string(i);
    rec.key = key;
    for (const auto& [n, d] : records[i]) {
      rec.fields.push_back({n, {reinterpret_cast<const uint8_t*>(d.data()), d.size()}});
    }
    const Status st = (*w)->Add(rec);
    EXPECT_TRUE(st.ok()) << st;
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

std::vector<std::vector<std::pair<std::string, std::string>>> FieldRecords() {
  return {{{"jpg", std::string(300, 'j')}, {"cls", "3"}, {"txt", "a caption"}},
          {},  // a record with no fields
          {{"json", "{\"a\": 1}"}, {"npy", std::string(17, '\0')}},
          {{"seg.png", ""}}};
}

TEST_F(ShardTest, Version2RoundTripsNamedFields) {
  const auto records = FieldRecords();
  auto r = ShardReader::Open(WriteV2(dir_, "f.fls", records));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->version(), shard::kShardVersion2);
  for (uint64_t i : {3, 0, 2, 1}) {
    std::vector<uint8_t> scratch;
    ShardRecord got;
    ASSERT_TRUE((*r)->Read(i, &scratch, &got).ok());
    EXPECT_EQ(got.label, static_cast<int64_t>(i));
    EXPECT_EQ(got.key, "k" + std::to_string(i));
    ASSERT_EQ(got.fields.size(), records[i].size());
    for (size_t f = 0; f < got.fields.size(); ++f) {
      EXPECT_EQ(got.fields[f].name, records[i][f].first);
      EXPECT_EQ(std::string(got.fields[f].data.begin(), got.fields[f].data.end()),
                records[i][f].second);
    }
    // data() is the first field's bytes.
    EXPECT_EQ(got.data.size(), records[i].empty() ? 0u : records[i][0].second.size());
  }
}

TEST_F(ShardTest, WritersRefuseRecordsTheirVersionCannotHold) {
  const std::string text = "x";
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(text.data()), 1);
  auto v1 = ShardWriter::Create((dir_ / "v1.fls").string());
  ShardRecord with_fields;
  with_fields.key = "a";
  with_fields.fields = {{"txt", bytes}};
  EXPECT_NE((*v1)->Add(with_fields).message().find("need a version 2 shard"), std::string::npos);
  auto v2 = ShardWriter::Create((dir_ / "v2.fls").string(), shard::kShardVersion2);
  ShardRecord with_data;
  with_data.key = "b";
  with_data.data = bytes;
  EXPECT_NE((*v2)->Add(with_data).message().find("carries its bytes in named fields"),
            std::string::npos);
  ShardRecord twice;
  twice.key = "c";
  twice.fields = {{"txt", bytes}, {"txt", bytes}};
  EXPECT_NE((*v2)->Add(twice).message().find("two fields named 'txt'"), std::string::npos);
  ShardRecord unnamed;
  unnamed.key = "d";
  unnamed.fields = {{"", bytes}};
  EXPECT_FALSE((*v2)->Add(unnamed).ok());
  EXPECT_EQ(ShardWriter::Create((dir_ / "v9.fls").string(), 9).status().code(),
            StatusCode::kInvalidArgument);
}

// Every bit flip in a version-2 record is caught at that record, and lying
// field lengths under a valid checksum are refused, naming the record.
TEST_F(ShardTest, Version2FieldsThatLieAreRefused) {
  const auto records = FieldRecords();
  const std::vector<char> full = Bytes(WriteV2(dir_, "g.fls", records));
  auto clean = ShardReader::Open(Put("clean.fls", full));
  ASSERT_TRUE(clean.ok());
  const uint64_t index_offset =
      full.size() - shard::kFooterSize - records.size() * shard::kIndexEntrySize;
  for (size_t byte = shard::kHeaderSize; byte < index_offset; ++byte) {
    std::vector<char> bad = full;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x5A);
    auto r = ShardReader::Open(Put("flip.fls", bad));
    ASSERT_TRUE(r.ok()) << r.status();
    uint64_t hit = 0;
    while (hit + 1 < records.size() && (*clean)->record_offset(hit + 1) <= byte) ++hit;
    std::vector<uint8_t> scratch;
    ShardRecord rec;
    const Status st = (*r)->Read(hit, &scratch, &rec);
    ASSERT_EQ(st.code(), StatusCode::kDataLoss) << "byte " << byte;
  }
  // Record 0's first field claims more bytes than the record has, resealed.
  const size_t rec0 = (*clean)->record_offset(0);
  const size_t payload = rec0 + shard::kRecordHeaderSize;
  const size_t first_field = payload + shard::kPayloadFixedSize + 2;  // key "k0", no metadata
  for (const auto& [at, value, reason] : std::vector<std::tuple<size_t, uint32_t, std::string>>{
           {first_field + 4, 1000000, "field 0 (3 + 1000000 bytes) runs past the record"},
           {first_field, 0, "field 0 name length 0"},
           {payload + 16, 999999, "field count 999999 cannot fit"}}) {
    std::vector<char> bad = full;
    PutU32(bad, at, value);
    const uint32_t p = static_cast<uint32_t>((*clean)->record_extent(0) - shard::kRecordHeaderSize);
    PutU32(bad, rec0 + 16, shard::MaskCrc(core::Crc32c(bad.data() + payload, p)));
    Reseal(bad, rec0, 20);
    auto r = ShardReader::Open(Put("lie.fls", bad));
    ASSERT_TRUE(r.ok());
    std::vector<uint8_t> scratch;
    ShardRecord rec;
    const Status st = (*r)->Read(0, &scratch, &rec);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    EXPECT_NE(st.message().find(reason), std::string::npos) << st;
    EXPECT_NE(st.message().find("record 0"), std::string::npos) << st;
  }
}

// docs/reliability.md 29 (in part): a write failure names the file, and nothing
// appears at the final path.
TEST_F(ShardTest, AWriteFailureNamesTheFileAndLeavesNoShard) {
  const std::string path = (dir_ / "big.fls").string();
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &old);
  rlimit saved;
  getrlimit(RLIMIT_FSIZE, &saved);
  rlimit small = saved;
  small.rlim_cur = 1 << 20;  // 1 MiB files at most
  setrlimit(RLIMIT_FSIZE, &small);
  Status st;
  {
    auto w = ShardWriter::Create(path);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> data(256 << 10, 7);
    for (int i = 0; i < 16 && st.ok(); ++i) st = (*w)->Add({i, "k", "", data});
    if (st.ok()) st = (*w)->Finish();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  sigaction(SIGXFSZ, &old, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("big.fls.partial"), std::string::npos) << st;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

// Opens `path` up to n times, keeping the readers, until one open fails.
Status OpenMany(const std::string& path, int n, std::vector<std::unique_ptr<ShardReader>>* open) {
  for (int i = 0; i < n; ++i) {
    auto r = ShardReader::Open(path);
    if (!r.ok()) return r.status();
    open->push_back(std::move(r).value());
  }
  return Status::OK();
}

// docs/reliability.md 20: running out of descriptors names the resource and
// limit. Lowering the hard limit cannot be undone, so it runs in a child.
TEST_F(ShardTest, TooManyOpenFilesNamesTheLimit) {
  const std::string path = Write("h.fls", MakeRecords(1, 10));
  const std::string report = (dir_ / "report.txt").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit low{16, 16};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(2);
    std::vector<std::unique_ptr<ShardReader>> open;
    const Status st = OpenMany(path, 32, &open);
    open.clear();
    std::ofstream(report) << st.ToString();
    _exit(st.code() == StatusCode::kResourceExhausted ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream in(report);
  const std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << message;
  EXPECT_NE(message.find("RLIMIT_NOFILE is 16, hard limit 16"), std::string::npos) << message;
}

// A soft limit below the hard one is raised on demand: a dataset with more
// shards than the soft limit opens.
TEST_F(ShardTest, TheSoftDescriptorLimitIsRaisedToTheHardOne) {
  const std::string path = Write("h.fls", MakeRecords(1, 10));
  rlimit saved;
  getrlimit(RLIMIT_NOFILE, &saved);
  if (saved.rlim_max < 128) GTEST_SKIP() << "hard limit " << saved.rlim_max;
  rlimit low = saved;
  low.rlim_cur = 16;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<std::unique_ptr<ShardReader>> open;
  const Status st = OpenMany(path, 32, &open);
  rlimit now;
  getrlimit(RLIMIT_NOFILE, &now);
  const size_t opened = open.size();
  open.clear();
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(opened, 32u);
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
}

// Fault injection through the file interface (tests/io/fault_file.h):
// every fault is an error naming the shard, the record, the offset and the
// reason, and touches that record alone.

// Opens `path` through `faults`.
Result<std::unique_ptr<ShardReader>> OpenWithFaults(const std::string& path,
                                                    const testing::Faults& faults) {
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(path));
  return ShardReader::Open(testing::WithFaults(std::move(file), faults));
}

TEST_F(ShardTest, EioAtRecordOffsetNamesTheRecord) {
  const auto records = MakeRecords(10, 300);
  const std::string path = Write("eio.fls", records);
  auto clean = ShardReader::Open(path);
  ASSERT_TRUE(clean.ok());
  testing::Faults faults;
  faults.eio_at_offset = (*clean)->record_offset(4) + 30;
  auto r = OpenWithFaults(path, faults);
  ASSERT_TRUE(r.ok()) << r.status();
  for (uint64_t i = 0; i < 10; ++i) {
    if (i != 4) {
      ExpectRecord(**r, i, records[i]);
      continue;
    }
    std::vector<uint8_t> scratch;
    ShardRecord rec;
    const Status st = (*r)->Read(4, &scratch, &rec);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable);
    const std::string m(st.message());
    for (const std::string& part :
         {"shard '" + path + "'", std::string("record 4 "),
          "offset " + std::to_string(faults.eio_at_offset), std::string("Input/output error")}) {
      EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
    }
  }
}

TEST_F(ShardTest, EioWhileOpeningNamesTheShardAndTheOffset) {
  const std::string path = Write("open.fls", MakeRecords(3, 50));
  // Open reads the header, the footer and the index: fail each in turn.
  for (uint64_t nth : {1, 2, 3}) {
    testing::Faults faults;
    faults.eio_on_read = nth;
    auto r = OpenWithFaults(path, faults);
    ASSERT_FALSE(r.ok()) << "read " << nth;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("read at offset"), std::string::npos) << r.status();
  }
}

TEST_F(ShardTest, EioOnTheNthReadFailsThatReadAloneAndARetryGetsTheRecord) {
  const auto records = MakeRecords(8, 200);
  const std::string path = Write("nth.fls", records);
  testing::Faults faults;
  faults.eio_on_read = 3 + 6;  // Open's three reads, then records 0..5
  auto r = OpenWithFaults(path, faults);
  ASSERT_TRUE(r.ok()) << r.status();
  for (uint64_t i = 0; i < 8; ++i) {
    std::vector<uint8_t> scratch;
    ShardRecord rec;
    const Status st = (*r)->Read(i, &scratch, &rec);
    if (i == 5) {
      EXPECT_EQ(st.code(), StatusCode::kUnavailable);
      EXPECT_NE(st.message().find("record 5 at offset " + std::to_string((*r)->record_offset(5))),
                std::string::npos)
          << st;
    } else {
      ASSERT_TRUE(st.ok()) << "record " << i << ": " << st;
    }
  }
  ExpectRecord(**r, 5, records[5]);  // the fault was one read: the next one is whole
}

TEST_F(ShardTest, AShortReadIsReportedNeverReturnedAsData) {
  const auto records = MakeRecords(6, 400);
  const std::string path = Write("short.fls", records);
  auto clean = ShardReader::Open(path);
  ASSERT_TRUE(clean.ok());
  testing::Faults faults;
  faults.short_at_offset = (*clean)->record_offset(2) + (*clean)->record_extent(2) / 2;
  faults.short_reads_left = 1;
  auto r = OpenWithFaults(path, faults);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<uint8_t> scratch;
  ShardRecord rec;
  const Status st = (*r)->Read(2, &scratch, &rec);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("record 2 at offset"), std::string::npos) << st;
  EXPECT_NE(
      st.message().find("truncated: no data at offset " + std::to_string(faults.short_at_offset)),
      std::string::npos)
      << st;
  EXPECT_TRUE(rec.data.empty() && rec.key.empty()) << "a failed read filled in the record";
  for (uint64_t i = 0; i < 6; ++i)
    ExpectRecord(**r, i, records[i]);  // record 2 included: the file healed
}

TEST_F(ShardTest, LatencyNeverChangesTheBytesUnderConcurrentReads) {
  const auto records = MakeRecords(12, 2000);
  const std::string path = Write("slow.fls", records);
  testing::Faults faults;
  faults.latency = std::chrono::microseconds(300);
  auto r = OpenWithFaults(path, faults);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (uint64_t k = 0; k < 12; ++k)
        ExpectRecord(**r, (k * 5 + t) % 12, records[(k * 5 + t) % 12]);
    });
  }
  for (std::thread& t : readers) t.join();
}

}  // namespace
}  // namespace feedline
