// Samples with several fields (docs/fields.md): the engine's kBytes fields
// (per-sample byte strings beside the buffer, compacted with the tensors
// under the skip policy), the tar parts, the field ops' checks, and the
// .npy header parser.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "feedline/source.h"
#include "gtest/gtest.h"
#include "src/pipelines/npy.h"
#include "tests/image/test_images.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

std::string AsString(std::span<const uint8_t> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// A .npy (version 1.0) of `count` little-endian float32 zeros, shape (count,).
std::string Npy(int count, std::string descr = "<f4", int item = 4) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(count) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out += std::string(static_cast<size_t>(count * item), '\0');
  return out;
}

TEST(NpyTest, ReadsPlainHeadersAndChecksTheSize) {
  const std::string good = Npy(6);
  auto h = pipelines::ParseNpy({reinterpret_cast<const uint8_t*>(good.data()), good.size()});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->descr, "<f4");
  EXPECT_EQ(h->shape, std::vector<int64_t>{6});
  EXPECT_EQ(h->data_bytes, 24u);

  const std::string short_data = good.substr(0, good.size() - 1);
  auto bad =
      pipelines::ParseNpy({reinterpret_cast<const uint8_t*>(short_data.data()), short_data.size()});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("header says 24 bytes"), std::string::npos) << bad.status();

  for (const std::string& s : {std::string("not numpy at all"), Npy(2, "|O8", 8),
                               Npy(2, "[('a', '<f4')]", 4), std::string("\x93NUMPY\x09\x00", 8)}) {
    auto r = pipelines::ParseNpy({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
    EXPECT_FALSE(r.ok()) << s;
  }
}

class FieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_fields_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteTar(
      const std::vector<std::vector<std::pair<std::string, std::string>>>& samples) {
    testing::TarWriter tar;
    for (size_t i = 0; i < samples.size(); ++i) {
      for (const auto& [ext, data] : samples[i]) tar.Add("k" + std::to_string(i) + "." + ext, data);
    }
    const std::string path = (dir_ / "data.tar").string();
    std::ofstream(path, std::ios::binary) << tar.Finish();
    return path;
  }

  static FieldRequest Request(std::string name, FieldRequest::Kind kind) {
    FieldRequest r;
    r.name = std::move(name);
    r.kind = kind;
    return r;
  }

  fs::path dir_;
};

TEST_F(FieldsTest, BytesFieldsTravelBesideTheTensorsAndCompactUnderSkip) {
  std::vector<std::vector<std::pair<std::string, std::string>>> samples;
  for (int i = 0; i < 7; ++i) {
    samples.push_back({{"cls", std::to_string(10 + i)},
                       {"txt", i == 3 ? std::string("bad \xff") : "text " + std::string(i, 'x')},
                       {"json", "{\"i\": " + std::to_string(i) + "}"}});
  }
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(WriteTar(samples), so);
  ASSERT_TRUE(source.ok()) << source.status();
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  spec.fields = {Request("label", FieldRequest::Kind::kLabel),
                 Request("caption", FieldRequest::Kind::kText),
                 Request("meta", FieldRequest::Kind::kJson)};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_EQ(pipeline->fields.size(), 3u);
  EXPECT_EQ(pipeline->fields[1].kind, FieldKind::kBytes);

  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 3;
  o.error_policy = ErrorPolicy::kSkip;
  o.max_errors = 1;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::vector<int64_t> labels;
  std::vector<std::string> captions, metas;
  size_t skipped = 0;
  while (true) {
    Batch b;
    bool end = false;
    ASSERT_TRUE((*loader)->Next(&b, &end).ok());
    if (end) break;
    skipped += b.skipped().size();
    for (size_t k = 0; k < b.size(); ++k) {
      labels.push_back(b.field_as<int64_t>(0)[k]);
      captions.push_back(AsString(b.bytes(1, k)));
      metas.push_back(AsString(b.bytes(2, k)));
    }
  }
  // Sample 3 (invalid UTF-8) is skipped; the others keep their own bytes,
  // in order, next to their own labels.
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(labels, (std::vector<int64_t>{10, 11, 12, 14, 15, 16}));
  EXPECT_EQ(captions, (std::vector<std::string>{"text ", "text x", "text xx", "text xxxx",
                                                "text xxxxx", "text xxxxxx"}));
  EXPECT_EQ(metas[3], "{\"i\": 4}");
}

TEST_F(FieldsTest, ImagesFromPartsDecodeLikeTheImageRecipe) {
  const std::vector<uint8_t> jpeg = testing::MustEncodeJpeg(testing::Noise(40, 32, 3), 90);
  const std::string bytes(jpeg.begin(), jpeg.end());
  SourceOptions so;
  so.parts = true;
  auto source =
      OpenSource(WriteTar({{{"png.txt", "not an image"}, {"jpg", bytes}, {"cls", "2"}}}), so);
  ASSERT_TRUE(source.ok()) << source.status();
  ImageTransform t;
  t.crop = CropMode::kResizeFull;
  t.height = t.width = 16;
  FieldRequest image = Request("image", FieldRequest::Kind::kImage);
  image.transform = t;
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  spec.fields = {image, Request("label", FieldRequest::Kind::kLabel)};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  LoaderOptions o;
  o.batch_size = 1;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  Batch b;
  bool end = false;
  ASSERT_TRUE((*loader)->Next(&b, &end).ok());
  ASSERT_FALSE(end);
  std::vector<uint8_t> expect(ImageField(t).SampleBytes());
  auto info = ReadImageInfo(jpeg);
  ASSERT_TRUE(info.ok());
  SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
  const CropBox box = ChooseCrop(t, info->width, info->height, rng);
  ASSERT_TRUE(TransformImage(jpeg, t, box, expect.data()).ok());
  ASSERT_EQ(b.field_bytes(0), expect.size());
  EXPECT_EQ(std::memcmp(b.data(0), expect.data(), expect.size()), 0);
  EXPECT_EQ(b.field_as<int64_t>(1)[0], 2);
}

TEST_F(FieldsTest, MisuseAndMissingPartsAreNamed) {
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(WriteTar({{{"txt", "a"}}, {{"json", "{}"}}}), so);
  ASSERT_TRUE(source.ok()) << source.status();
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  EXPECT_FALSE(BuildPipeline(*source, spec).ok());  // no field
  spec.fields = {Request("x", FieldRequest::Kind::kText), Request("x", FieldRequest::Kind::kJson)};
  auto twice = BuildPipeline(*source, spec);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("two fields are named 'x'"), std::string::npos);
  spec.fields = {Request("raw", FieldRequest::Kind::kBytes)};
  EXPECT_FALSE(BuildPipeline(*source, spec).ok());  // bytes need parts

  spec.fields = {Request("caption", FieldRequest::Kind::kText)};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  LoaderOptions o;
  o.batch_size = 2;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok());
  Batch b;
  bool end = false;
  const Status st = (*loader)->Next(&b, &end);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key 'k1'"), std::string::npos) << st;
  EXPECT_NE(
      st.message().find("field 'caption' (text): the sample has no 'txt' part (it has 'json')"),
      std::string::npos)
      << st;
}

// What an image field decodes (the native op and the Python chain of
// fields= share it): the first of its parts the sample has, the sample's own
// image for sources with labels, else the missing-part error.
// A field's ops carry its name, kind and parts into the resume fingerprint
// (a state from a loader reading other parts is refused); the default parts
// are the kind's, so naming them changes nothing.
TEST(FieldFingerprintTest, NameKindAndPartsEachChangeIt) {
  FieldRequest r;
  r.name = "caption";
  r.kind = FieldRequest::Kind::kText;
  const uint64_t base = FieldRequestFingerprint(r);
  FieldRequest named = r;
  named.parts = DefaultParts(FieldRequest::Kind::kText);
  EXPECT_EQ(FieldRequestFingerprint(named), base);
  FieldRequest other_name = r, other_kind = r, other_parts = r;
  other_name.name = "title";
  other_kind.kind = FieldRequest::Kind::kBytes;
  other_parts.parts = {"caption.txt"};
  EXPECT_NE(FieldRequestFingerprint(other_name), base);
  EXPECT_NE(FieldRequestFingerprint(other_kind), base);
  EXPECT_NE(FieldRequestFingerprint(other_parts), base);
  // The ops report it: a text field's op, and an image field's on top of its
  // transform's.
  EXPECT_EQ(MakeFieldOp(r, 0, false)->ConfigFingerprint(), base);
  FieldRequest jpg, png;
  jpg.name = png.name = "image";
  jpg.kind = png.kind = FieldRequest::Kind::kImage;
  jpg.parts = {"jpg"};
  png.parts = {"png"};
  EXPECT_NE(MakeFieldOp(jpg, 0, false)->ConfigFingerprint(),
            MakeFieldOp(png, 0, false)->ConfigFingerprint());
}

TEST(SelectImagePartTest, PicksTheFirstPartTheSampleHasOrFallsBack) {
  const std::string own = "own", png = "png bytes", jpg = "jpg bytes";
  auto span = [](const std::string& b) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  Sample s;
  s.set_data(span(own));
  s.AddPart("png", span(png));
  s.AddPart("jpg", span(jpg));
  FieldRequest r;
  r.name = "mask";
  r.kind = FieldRequest::Kind::kImage;
  r.parts = {"seg.png", "png", "jpg"};
  ASSERT_TRUE(SelectImagePart(s, r, false).ok());
  EXPECT_EQ(AsString(s.data()), png);
  r.parts = {};  // DefaultParts(kImage): jpg before png
  ASSERT_TRUE(SelectImagePart(s, r, false).ok());
  EXPECT_EQ(AsString(s.data()), jpg);

  r.parts = {"seg.png"};
  s.set_data(span(own));
  ASSERT_TRUE(SelectImagePart(s, r, true).ok());  // a folder's or shard's own image
  EXPECT_EQ(AsString(s.data()), own);
  const Status st = SelectImagePart(s, r, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("field 'mask' (image): the sample has no 'seg.png' part (it has "
                              "'png', 'jpg')"),
            std::string::npos)
      << st;
}

TEST_F(FieldsTest, TwoMembersWithOneExtensionAreRefusedAtOpen) {
  testing::TarWriter tar;
  tar.Add("k0.txt", "a");
  tar.Add("k0.txt", "b");
  const std::string path = (dir_ / "dup.tar").string();
  std::ofstream(path, std::ios::binary) << tar.Finish();
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(path, so);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("sample 'k0' has two 'txt' members"), std::string::npos)
      << source.status();
}

}  // namespace
}  // namespace feedline
