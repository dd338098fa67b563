// The recipes layer: BuildPipeline over each kind of source OpenSource
// opens (an ImageFolder tree, WebDataset tars, packed shards), for both
// outputs, gives the same fields and the same images and labels; misuse is
// an error naming the problem.
#include "feedline/pipeline_builder.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/shard.h"
#include "gtest/gtest.h"
#include "tests/image/test_images.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

// Four JPEGs in two classes, laid out three ways: a folder, one tar and a
// packed dataset. Sample i is the same image with the same label in each.
class PipelineBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_pipelines_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    const char* names[] = {"a/0.jpg", "a/1.jpg", "b/2.jpg", "b/3.jpg"};
    testing::TarWriter tar;
    DatasetManifest m;
    m.classes = {"a", "b"};
    fs::create_directories(dir_ / "packed");
    auto w = ShardWriter::Create((dir_ / "packed" / "shard-00000.fls").string());
    ASSERT_TRUE(w.ok()) << w.status();
    for (int i = 0; i < 4; ++i) {
      jpegs_.push_back(testing::MustEncodeJpeg(testing::Noise(48 + 8 * i, 40, i + 1), 90));
      const std::string bytes(jpegs_.back().begin(), jpegs_.back().end());
      fs::create_directories((dir_ / "folder" / names[i]).parent_path());
      std::ofstream(dir_ / "folder" / names[i], std::ios::binary) << bytes;
      tar.Add("s" + std::to_string(i) + ".jpg", bytes);
      tar.Add("s" + std::to_string(i) + ".cls", std::to_string(i / 2));
      ASSERT_TRUE((*w)->Add({i / 2, "s" + std::to_string(i), "", jpegs_.back()}).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    m.shards.push_back({"shard-00000.fls", 4, (*w)->bytes(), (*w)->file_crc32c()});
    m.records = 4;
    std::ofstream(dir_ / "packed" / kManifestName) << m.ToJson();
    std::ofstream(dir_ / "data.tar", std::ios::binary) << tar.Finish();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One epoch in sample order: field f of every sample, as bytes.
  static std::vector<std::vector<uint8_t>> Epoch(Pipeline p, size_t field) {
    LoaderOptions o;
    o.batch_size = 4;
    o.num_threads = 2;
    auto loader = Loader::Create(std::move(p), o);
    EXPECT_TRUE(loader.ok()) << loader.status();
    if (!loader.ok()) return {};
    std::vector<std::vector<uint8_t>> out(4);
    Batch b;
    bool end = false;
    while ((*loader)->Next(&b, &end).ok() && !end) {
      const size_t n = b.field(field).SampleBytes();
      for (size_t i = 0; i < b.size(); ++i) {
        const auto* p0 = static_cast<const uint8_t*>(b.data(field)) + i * n;
        out[b.sample_ids()[i]].assign(p0, p0 + n);
      }
    }
    return out;
  }

  fs::path dir_;
  std::vector<std::vector<uint8_t>> jpegs_;
};

TEST_F(PipelineBuilderTest, EverySourceKindGivesTheSameImagesAndLabels) {
  SampleSpec spec;
  spec.transform = ImageNetEval(40, 32);
  std::vector<std::vector<uint8_t>> images, labels;
  for (const fs::path& path : {dir_ / "folder", dir_ / "data.tar", dir_ / "packed"}) {
    SCOPED_TRACE(path.string());
    auto source = OpenSource(path.string());
    ASSERT_TRUE(source.ok()) << source.status();
    auto p = BuildPipeline(*source, spec);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->fields.size(), 2u);
    EXPECT_EQ(p->fields[0].name, "image");
    EXPECT_EQ(p->fields[0].shape, (std::vector<int64_t>{3, 32, 32}));
    EXPECT_EQ(p->fields[1].name, "label");
    EXPECT_EQ(p->num_samples, 4u);
    auto img = Epoch(*p, 0), lab = Epoch(*p, 1);
    if (images.empty()) {
      images = img;
      labels = lab;
      for (int i = 0; i < 4; ++i) {
        int64_t l;
        std::memcpy(&l, lab[i].data(), sizeof(l));
        EXPECT_EQ(l, i / 2);
      }
    } else {
      EXPECT_EQ(img, images);
      EXPECT_EQ(lab, labels);
    }
  }
}

TEST_F(PipelineBuilderTest, RawBytesDeliverEachRecordAsStoredWithItsLength) {
  SampleSpec spec;
  spec.output = SampleSpec::Output::kRawBytes;
  spec.max_record_bytes = 0;
  for (const auto& j : jpegs_)
    spec.max_record_bytes = std::max<uint64_t>(spec.max_record_bytes, j.size());
  for (const fs::path& path : {dir_ / "folder", dir_ / "data.tar", dir_ / "packed"}) {
    SCOPED_TRACE(path.string());
    auto source = OpenSource(path.string());
    ASSERT_TRUE(source.ok()) << source.status();
    auto p = BuildPipeline(*source, spec);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->fields.size(), 3u);
    EXPECT_EQ(p->fields[0].name, "bytes");
    EXPECT_EQ(p->fields[1].name, "length");
    auto bytes = Epoch(*p, 0), lengths = Epoch(*p, 1);
    for (int i = 0; i < 4; ++i) {
      int64_t n;
      std::memcpy(&n, lengths[i].data(), sizeof(n));
      ASSERT_EQ(static_cast<size_t>(n), jpegs_[i].size());
      EXPECT_TRUE(std::equal(jpegs_[i].begin(), jpegs_[i].end(), bytes[i].begin()));
      EXPECT_TRUE(
          std::all_of(bytes[i].begin() + n, bytes[i].end(), [](uint8_t b) { return b == 0; }));
    }
  }
}

TEST_F(PipelineBuilderTest, RawBytesWithoutACapacityAndASourceWithoutAReadOpAreRefused) {
  auto source = OpenSource((dir_ / "folder").string());
  ASSERT_TRUE(source.ok());
  SampleSpec spec;
  spec.output = SampleSpec::Output::kRawBytes;
  auto p = BuildPipeline(*source, spec);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("max_record_bytes"), std::string::npos) << p.status();
  EXPECT_EQ(BuildPipeline(Source{}, SampleSpec{}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PipelineBuilderTest, ARecordOverTheRawCapacityIsASampleErrorNamingBothSizes) {
  auto source = OpenSource((dir_ / "folder").string());
  ASSERT_TRUE(source.ok());
  SampleSpec spec;
  spec.output = SampleSpec::Output::kRawBytes;
  spec.max_record_bytes = 16;
  auto p = BuildPipeline(*source, spec);
  ASSERT_TRUE(p.ok());
  LoaderOptions o;
  o.batch_size = 4;
  auto loader = Loader::Create(std::move(p).value(), o);
  ASSERT_TRUE(loader.ok());
  Batch b;
  bool end = false;
  Status st = (*loader)->Next(&b, &end);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("over max_record_bytes=16"), std::string::npos) << st;
}

}  // namespace
}  // namespace feedline
