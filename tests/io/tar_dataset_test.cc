// WebDataset tars (src/io/tar_dataset.cc) under injected file faults
// (tests/io/fault_file.h). Tars carry no checksums, so a short read is the
// fault that could slip through as data: it must be an error, and under
// skip-and-count cost exactly that sample. EIO names the tar, the sample
// (or the member header being indexed) and the offset; latency changes no
// byte.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "feedline/webdataset.h"
#include "gtest/gtest.h"
#include "tests/io/fault_file.h"
#include "tests/io/raw_epoch.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSamples = 8, kMaxBytes = 4096;

class TarDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_tar_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    testing::TarWriter w;
    for (uint64_t i = 0; i < kSamples; ++i) {
      const std::string key = "train/s000" + std::to_string(i);
      std::string image(700 + (i * 613) % 2500, '\0');
      for (size_t b = 0; b < image.size(); ++b) image[b] = static_cast<char>(i * 13 + b * 5);
      image_offset_.push_back(w.Add(key + ".png", image));
      header_offset_.push_back(image_offset_.back() - 512);
      w.Add(key + ".cls", std::to_string(i % 3) + "\n");
    }
    path_ = (dir_ / "shard-000.tar").string();
    const std::string tar = w.Finish();
    std::ofstream(path_, std::ios::binary)
        .write(tar.data(), static_cast<std::streamsize>(tar.size()));
    auto ds = TarDataset::Open({path_});
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_EQ((*ds)->num_samples(), kSamples);
    clean_ = testing::RunRawEpoch(MakeTarReadOp(*ds), kSamples, kMaxBytes, 1);
    ASSERT_TRUE(clean_.status.ok()) << clean_.status;
    ASSERT_EQ(clean_.samples.size(), kSamples);
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing::RawEpoch RunWithFaults(const testing::Faults& faults, uint32_t threads,
                                  ErrorPolicy policy, uint64_t max_errors) {
    testing::FaultInjector injector(faults);
    auto ds = TarDataset::Open({path_});
    EXPECT_TRUE(ds.ok()) << ds.status();
    if (!ds.ok()) return {ds.status(), {}, {}};
    return testing::RunRawEpoch(MakeTarReadOp(*ds), kSamples, kMaxBytes, threads, policy,
                                max_errors);
  }
  void ExpectAllBut(const testing::RawEpoch& e, uint64_t lost) const {
    EXPECT_EQ(e.samples.count(lost), 0u);
    EXPECT_EQ(e.samples.size(), kSamples - 1);
    for (const auto& [id, sample] : clean_.samples) {
      if (id == lost) continue;
      auto it = e.samples.find(id);
      ASSERT_NE(it, e.samples.end()) << "sample " << id << " was lost too";
      EXPECT_EQ(it->second, sample) << "sample " << id << " differs";
    }
  }
  static void ExpectParts(const Status& st, const std::vector<std::string>& parts) {
    const std::string m(st.message());
    for (const std::string& part : parts) {
      EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
    }
  }

  fs::path dir_;
  std::string path_;
  std::vector<size_t> image_offset_, header_offset_;
  testing::RawEpoch clean_;
};

// The fuzzer's seeds (tests/fuzz/make_tar_seeds.py, written by Python's
// tarfile) index as they should: one per header dialect.
std::vector<std::string> Expand(const std::string& p) {
  Result<std::vector<std::string>> r = ExpandBraces(p);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(ExpandBracesTest, RangesListsAndNestingExpandAsBraceexpand) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Expand("s3://b/train-{000..003}.tar"),
            (V{"s3://b/train-000.tar", "s3://b/train-001.tar", "s3://b/train-002.tar",
               "s3://b/train-003.tar"}));
  EXPECT_EQ(Expand("x{8..11}"), (V{"x8", "x9", "x10", "x11"}));  // no zero: no padding
  EXPECT_EQ(Expand("x{9..011}"), (V{"x009", "x010", "x011"}));   // either end pads
  EXPECT_EQ(Expand("x{3..1}"), (V{"x3", "x2", "x1"}));           // counting down
  EXPECT_EQ(Expand("x{0..6..3}"), (V{"x0", "x3", "x6"}));        // a step
  EXPECT_EQ(Expand("{a..c}"), (V{"a", "b", "c"}));
  EXPECT_EQ(Expand("a{1,2}b{3,4}"), (V{"a1b3", "a1b4", "a2b3", "a2b4"}));
  EXPECT_EQ(Expand("{x,y{1..2}}z"), (V{"xz", "y1z", "y2z"}));
  EXPECT_EQ(Expand("{x}{}"), (V{"{x}{}"}));  // not groups: literal
  EXPECT_EQ(Expand("a\\{1,2\\}"), (V{"a{1,2}"}));
  EXPECT_EQ(Expand("plain.tar"), (V{"plain.tar"}));
}

TEST(ExpandBracesTest, UnbalancedAndHugePatternsAreErrors) {
  EXPECT_EQ(ExpandBraces("a{1,2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ExpandBraces("a}b").status().message().find("closes no '{'"), std::string::npos);
  const Status huge = ExpandBraces("{0..9999}{0..999}").status();
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument) << huge;
  EXPECT_NE(huge.message().find("more than 1000000"), std::string::npos) << huge;
}

TEST(TarDialectTest, EveryHeaderDialectIndexes) {
  const std::string dir = FEEDLINE_TAR_SEEDS_DIR;
  const std::string long_dir = "n01440764/" + std::string(120, 'd');
  const std::map<std::string, std::vector<std::pair<std::string, int64_t>>> want = {
      {"ustar.tar", {{"train/a0", 0}, {"train/a1", 1}}},
      {"base256_size.tar", {{"train/a0", 0}, {"train/a1", 1}}},
      {"ustar_prefix.tar", {{long_dir.substr(0, 90) + "/s0", 0}}},
      {"gnu_longname.tar", {{long_dir + "/s0", 0}, {long_dir + "/s1", 1}}},
      {"pax_path.tar", {{long_dir + "/p0", 0}, {"short/p1", 1}}},
      {"no_label.tar", {{"k/x", -1}}},
  };
  for (const auto& [name, samples] : want) {
    auto ds = TarDataset::Open({dir + "/" + name});
    ASSERT_TRUE(ds.ok()) << name << ": " << ds.status();
    ASSERT_EQ((*ds)->num_samples(), samples.size()) << name;
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ((*ds)->sample(i).key, samples[i].first) << name;
      EXPECT_EQ((*ds)->sample(i).label, samples[i].second) << name;
      std::vector<uint8_t> bytes;
      ASSERT_TRUE((*ds)->Read(i, &bytes).ok()) << name;
      EXPECT_EQ(bytes.size() >= 8 ? std::string(bytes.begin() + 1, bytes.begin() + 4) : "", "PNG")
          << name;
    }
  }
}

// A PAX extended header is a run of "<len> <key>=<value>\n" records. A
// record that breaks that form is an error naming the tar, the header and
// the record, found in time linear in the header: a length that points
// backwards ("-1") once looped forever (a fuzzer find).
TEST_F(TarDatasetTest, AMalformedPaxHeaderIsAnErrorNamingTheRecord) {
  const std::map<std::string, std::string> want = {
      {"1-1 x", "byte 0 of the extended header: no space after the length"},
      {"-1 path=x\n", "byte 0 of the extended header: no decimal length"},
      {"18 path=a/b/c.png\n99 path=x\n", "byte 18 of the extended header: length 99 is outside"},
      {"18 path=a/b/c.png\n12", "byte 18 of the extended header: no space after the length"},
      {"2 path=x\n", "byte 0 of the extended header: length 2 is too short"},
      {"17 path=a/b.png\nX", "byte 0 of the extended header: the record does not end in a"},
      {"13 pathxxxxx\n", "byte 0 of the extended header: no '=' in the record"},
      {"999999999 path=x\n", "byte 0 of the extended header: no space after the length"},
  };
  for (const auto& [text, reason] : want) {
    testing::TarWriter w;
    const size_t header = w.Add("PaxHeader", text, 'x') - 512;
    w.Add("k/s0.png", "not really a png");
    const std::string path = (dir_ / "pax.tar").string();
    const std::string tar = w.Finish();
    std::ofstream(path, std::ios::binary)
        .write(tar.data(), static_cast<std::streamsize>(tar.size()));
    auto ds = TarDataset::Open({path});
    ASSERT_FALSE(ds.ok()) << text;
    EXPECT_EQ(ds.status().code(), StatusCode::kDataLoss) << ds.status();
    ExpectParts(ds.status(),
                {"tar '" + path + "'", "member header at offset " + std::to_string(header),
                 "malformed PAX record at " + reason});
  }
  // Well-formed: the last path record wins; other keys and a value with
  // spaces and '=' in it are kept whole.
  testing::TarWriter w;
  w.Add("PaxHeader", "12 path=x/y\n21 mtime=1.5 a=b c=d\n20 path=k/s 1=2.png\n", 'x');
  w.Add("ignored.png", "bytes");
  const std::string path = (dir_ / "pax_ok.tar").string();
  const std::string tar = w.Finish();
  std::ofstream(path, std::ios::binary).write(tar.data(), static_cast<std::streamsize>(tar.size()));
  auto ds = TarDataset::Open({path}, TarOptions{});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->num_samples(), 1u);
  EXPECT_EQ((*ds)->sample(0).key, "k/s 1=2");
}

TEST_F(TarDatasetTest, EioInAnImageMemberNamesTheTarSampleKeyAndOffset) {
  testing::Faults faults;
  faults.eio_at_offset = image_offset_[3] + 200;
  const testing::RawEpoch e = RunWithFaults(faults, 2, ErrorPolicy::kRaise, 0);
  EXPECT_EQ(e.status.code(), StatusCode::kUnavailable) << e.status;
  ExpectParts(e.status,
              {"sample 3", path_, "record 3", "offset " + std::to_string(image_offset_[3]),
               "key 'train/s0003'", "Input/output error"});
}

TEST_F(TarDatasetTest, AFailedReadOfASampleNamesItWithoutTheLoader) {
  testing::Faults faults;
  faults.eio_at_offset = image_offset_[5];
  testing::FaultInjector injector(faults);
  auto ds = TarDataset::Open({path_});
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<uint8_t> bytes;
  const Status st = (*ds)->Read(5, &bytes);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  ExpectParts(st, {"tar '" + path_ + "'", "sample 5 'train/s0005'",
                   "at offset " + std::to_string(image_offset_[5]), "Input/output error"});
}

TEST_F(TarDatasetTest, EioWhileIndexingNamesTheTarAndTheMemberHeader) {
  testing::Faults faults;
  faults.eio_at_offset = header_offset_[2] + 100;
  testing::FaultInjector injector(faults);
  auto ds = TarDataset::Open({path_});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kUnavailable);
  ExpectParts(ds.status(), {"tar '" + path_ + "'",
                            "member header at offset " + std::to_string(header_offset_[2]),
                            "Input/output error"});
}

TEST_F(TarDatasetTest, EioReadingALabelNamesTheLabelMember) {
  testing::Faults faults;
  faults.eio_at_offset =
      image_offset_[1] + ((clean_.samples.at(1).second.size() + 511) / 512) * 512 + 512;
  testing::FaultInjector injector(faults);
  auto ds = TarDataset::Open({path_});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kUnavailable);
  ExpectParts(ds.status(), {"tar '" + path_ + "'", "'train/s0001.cls'", "Input/output error"});
  EXPECT_EQ(injector.injected(), 1u);
}

TEST_F(TarDatasetTest, UnderSkipAnEioLosesExactlyThatSample) {
  for (uint32_t threads : {1u, 3u}) {
    testing::Faults faults;
    faults.eio_at_offset = image_offset_[6] + 10;
    const testing::RawEpoch e = RunWithFaults(faults, threads, ErrorPolicy::kSkip, 1);
    ASSERT_TRUE(e.status.ok()) << e.status;
    ASSERT_EQ(e.skipped.size(), 1u);
    EXPECT_EQ(e.skipped[0].sample_id, 6u);
    EXPECT_EQ(e.skipped[0].location.key, "train/s0006");
    ExpectAllBut(e, 6);
  }
}

TEST_F(TarDatasetTest, AShortReadOfAnImageIsAnErrorNeverShortData) {
  testing::Faults faults;
  faults.short_at_offset = image_offset_[4] + 300;
  const testing::RawEpoch raise = RunWithFaults(faults, 2, ErrorPolicy::kRaise, 0);
  EXPECT_EQ(raise.status.code(), StatusCode::kDataLoss) << raise.status;
  ExpectParts(raise.status,
              {"sample 4", "key 'train/s0004'",
               "truncated: no data at offset " + std::to_string(faults.short_at_offset)});
  EXPECT_EQ(raise.samples.count(4), 0u);
  const testing::RawEpoch skip = RunWithFaults(faults, 2, ErrorPolicy::kSkip, 1);
  ASSERT_TRUE(skip.status.ok()) << skip.status;
  ASSERT_EQ(skip.skipped.size(), 1u);
  EXPECT_EQ(skip.skipped[0].sample_id, 4u);
  ExpectAllBut(skip, 4);
}

TEST_F(TarDatasetTest, EioOnTheNthReadAfterIndexingLosesOneSample) {
  // Indexing reads each of the 16 member headers, each .cls member, and
  // the end marker: 8 * 3 + 1 reads; the loader's reads come after.
  testing::Faults faults;
  faults.eio_on_read = kSamples * 3 + 1 + 5;
  testing::FaultInjector injector(faults);
  auto ds = TarDataset::Open({path_});
  ASSERT_TRUE(ds.ok()) << ds.status();
  const testing::RawEpoch e =
      testing::RunRawEpoch(MakeTarReadOp(*ds), kSamples, kMaxBytes, 1, ErrorPolicy::kSkip, 1);
  ASSERT_TRUE(e.status.ok()) << e.status;
  ASSERT_EQ(e.skipped.size(), 1u);
  EXPECT_EQ(e.skipped[0].sample_id, 4u);  // one thread, unshuffled: the fifth read is sample 4
  ExpectAllBut(e, 4);
}

TEST_F(TarDatasetTest, LatencyNeverChangesTheBytes) {
  testing::Faults faults;
  faults.latency = std::chrono::microseconds(400);
  const testing::RawEpoch e = RunWithFaults(faults, 4, ErrorPolicy::kRaise, 0);
  ASSERT_TRUE(e.status.ok()) << e.status;
  EXPECT_EQ(e.samples, clean_.samples);
}

}  // namespace
}  // namespace feedline
