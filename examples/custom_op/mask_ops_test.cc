// The example ops end to end: a WebDataset tar of PNG masks and binary
// blobs, a kFields pipeline that names the ops, a loader on 3 threads, and
// every value checked against a computation from the pixels and bytes the
// test wrote (not from feedline's decoder).
//
// Built twice: with mask_ops.cc linked in (static registration), and with
// FEEDLINE_EXAMPLE_OPS_LIBRARY set, loading the shared library through
// LoadOps first (the path Python's feedline.load_ops takes).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "feedline/loader.h"
#include "feedline/op_registry.h"
#include "feedline/pipeline_builder.h"
#include "feedline/source.h"
#include "gtest/gtest.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

struct Expected {
  float fraction = 0;
  std::array<int64_t, 16> histogram{};
};

class MaskOpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifdef FEEDLINE_EXAMPLE_OPS_LIBRARY
    auto loaded = LoadOps(FEEDLINE_EXAMPLE_OPS_LIBRARY);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(*loaded, (std::vector<std::string>{"byte_histogram", "mask_fraction"}));
    // A second load registers the same names again: refused, named.
    auto again = LoadOps(FEEDLINE_EXAMPLE_OPS_LIBRARY);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
    EXPECT_NE(again.status().message().find("registered already"), std::string::npos);
#endif
  }

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedline_mask_ops_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `n` samples: a gray mask (k.seg.png) of random size with a random share
  // of pixels at or above 128 in some channel, and a random blob (k.bin).
  std::string WriteTar(int n, std::vector<Expected>* expected) {
    std::mt19937 rng(1234);
    testing::TarWriter tar;
    for (int i = 0; i < n; ++i) {
      RgbImage mask;
      mask.width = 5 + rng() % 40;
      mask.height = 3 + rng() % 30;
      mask.pixels.resize(size_t{mask.width} * mask.height * 3);
      size_t foreground = 0;
      for (size_t p = 0; p < size_t{mask.width} * mask.height; ++p) {
        // Values around the threshold, and colour ones (only one channel high).
        for (int c = 0; c < 3; ++c) mask.pixels[3 * p + c] = static_cast<uint8_t>(rng() % 128);
        if (rng() % 3 == 0)
          mask.pixels[3 * p + rng() % 3] = static_cast<uint8_t>(128 + rng() % 128);
        if (*std::max_element(&mask.pixels[3 * p], &mask.pixels[3 * p + 3]) >= 128) ++foreground;
      }
      auto png = EncodePng(mask);
      EXPECT_TRUE(png.ok()) << png.status();
      std::string blob(100 + rng() % 900, '\0');
      Expected e;
      for (char& ch : blob) {
        ch = static_cast<char>(rng() % 256);
        ++e.histogram[static_cast<uint8_t>(ch) / 16];
      }
      e.fraction = static_cast<float>(static_cast<double>(foreground) /
                                      (static_cast<double>(mask.width) * mask.height));
      expected->push_back(e);
      const std::string key = "s" + std::to_string(1000 + i);
      tar.Add(key + ".seg.png", std::string(png->begin(), png->end()));
      tar.Add(key + ".bin", blob);
      tar.Add(key + ".cls", std::to_string(i));
    }
    const std::string path = (dir_ / "masks.tar").string();
    std::ofstream(path, std::ios::binary) << tar.Finish();
    return path;
  }

  static FieldRequest OpField(std::string name, std::string op, std::vector<std::string> parts,
                              OpParams params) {
    FieldRequest r;
    r.name = std::move(name);
    r.kind = FieldRequest::Kind::kOp;
    r.op = std::move(op);
    r.parts = std::move(parts);
    r.params = std::move(params);
    return r;
  }

  fs::path dir_;
};

TEST_F(MaskOpsTest, OpsComputeTheMaskFractionAndHistogramOfEverySample) {
  std::vector<Expected> expected;
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(WriteTar(23, &expected), so);
  ASSERT_TRUE(source.ok()) << source.status();
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  FieldRequest label;
  label.name = "label";
  label.kind = FieldRequest::Kind::kLabel;
  spec.fields = {label, OpField("area", "mask_fraction", {"seg.png"}, {{"threshold", "128"}}),
                 OpField("hist", "byte_histogram", {"bin"}, {{"bins", "16"}})};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_EQ(pipeline->fields.size(), 3u);
  EXPECT_EQ(pipeline->fields[1].dtype, DType::kFloat32);
  EXPECT_EQ(pipeline->fields[2].shape, std::vector<int64_t>{16});
  EXPECT_EQ(pipeline->ops[2]->name(), "mask_fraction:area");

  LoaderOptions o;
  o.batch_size = 5;
  o.num_threads = 3;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  size_t seen = 0;
  while (true) {
    Batch b;
    bool end = false;
    ASSERT_TRUE((*loader)->Next(&b, &end).ok());
    if (end) break;
    for (size_t k = 0; k < b.size(); ++k) {
      const int64_t i = b.field_as<int64_t>(0)[k];
      ASSERT_GE(i, 0);
      ASSERT_LT(i, 23);
      EXPECT_EQ(b.field_as<float>(1)[k], expected[i].fraction) << "sample " << i;
      for (int bin = 0; bin < 16; ++bin) {
        EXPECT_EQ(b.field_as<int64_t>(2)[k * 16 + bin], expected[i].histogram[bin])
            << "sample " << i << " bin " << bin;
      }
      ++seen;
    }
  }
  EXPECT_EQ(seen, 23u);
}

TEST_F(MaskOpsTest, BadParametersAndMissingPartsNameTheOp) {
  std::vector<Expected> expected;
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(WriteTar(2, &expected), so);
  ASSERT_TRUE(source.ok()) << source.status();
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  spec.fields = {OpField("area", "mask_fraction", {"seg.png"}, {{"threshold", "300"}})};
  auto bad = BuildPipeline(*source, spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("op 'mask_fraction' for field 'area'"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("'threshold' is 300, outside [0, 255]"), std::string::npos)
      << bad.status();

  spec.fields = {OpField("area", "mask_fraction", {"seg.png"}, {{"treshold", "1"}})};
  auto typo = BuildPipeline(*source, spec);
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("unknown parameter 'treshold' (it takes 'threshold')"),
            std::string::npos)
      << typo.status();

  // A part no sample has: each sample's error names the op and the parts.
  spec.fields = {OpField("area", "mask_fraction", {"mask.png"}, {})};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  LoaderOptions o;
  o.batch_size = 2;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  Batch b;
  bool end = false;
  const Status st = (*loader)->Next(&b, &end);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("mask_fraction:area"), std::string::npos) << st;
  EXPECT_NE(st.message().find("no 'mask.png' part (it has 'seg.png', 'bin', 'cls')"),
            std::string::npos)
      << st;
}

}  // namespace
}  // namespace feedline
