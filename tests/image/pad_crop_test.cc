// RandomCrop's geometry (src/image/pad_crop.h, CropMode::kRandomCrop): the
// padding modes against a plain reference, the crop box torchvision's v2
// would choose, the fused op against a crop of the whole decode (PNG, JPEG,
// BMP), the vertical flip step, and the errors that name sizes.
#include "src/image/pad_crop.h"

#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "feedline/image.h"
#include "gtest/gtest.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

using image::kPadFill;
using image::PaddedIndex;

TEST(PaddedIndexTest, EachModeMirrorsOrRepeatsLikeTorchvision) {
  // [0 1 2 3] padded by 3 on each side.
  const std::vector<int32_t> constant = {kPadFill, kPadFill, kPadFill, 0,        1,
                                         2,        3,        kPadFill, kPadFill, kPadFill};
  const std::vector<int32_t> edge = {0, 0, 0, 0, 1, 2, 3, 3, 3, 3};
  const std::vector<int32_t> reflect = {3, 2, 1, 0, 1, 2, 3, 2, 1, 0};
  const std::vector<int32_t> symmetric = {2, 1, 0, 0, 1, 2, 3, 3, 2, 1};
  const std::pair<PaddingMode, const std::vector<int32_t>*> cases[] = {
      {PaddingMode::kConstant, &constant},
      {PaddingMode::kEdge, &edge},
      {PaddingMode::kReflect, &reflect},
      {PaddingMode::kSymmetric, &symmetric}};
  for (const auto& [mode, want] : cases) {
    for (int64_t p = 0; p < 10; ++p) {
      EXPECT_EQ(PaddedIndex(p, 3, 4, mode), (*want)[p]) << "mode " << int(mode) << " p " << p;
    }
  }
  EXPECT_EQ(PaddedIndex(5, 5, 1, PaddingMode::kReflect), 0);  // one pixel: itself
}

ImageTransform Crop(uint32_t h, uint32_t w, std::array<uint32_t, 4> padding, PaddingMode mode,
                    bool pad_if_needed = false) {
  ImageTransform t;
  t.crop = CropMode::kRandomCrop;
  t.height = h;
  t.width = w;
  t.padding = padding;
  t.padding_mode = mode;
  t.pad_if_needed = pad_if_needed;
  t.pad_fill = {7, 8, 9};
  t.dtype = DType::kUInt8;
  t.normalize = false;
  return t;
}

TEST(RandomCropBoxTest, DrawsEveryCornerOfThePaddedImageAndWidensForPadIfNeeded) {
  const ImageTransform t = Crop(4, 5, {1, 2, 0, 1}, PaddingMode::kConstant);
  std::set<std::pair<int, int>> corners;
  for (uint64_t id = 0; id < 2000; ++id) {
    SampleRng rng = SampleRng::ForSample(3, 0, id, 0);
    const CropBox box = ChooseCrop(t, 6, 3, rng);  // padded 6 x 6
    EXPECT_EQ(box.padding, (std::array<uint32_t, 4>{1, 2, 0, 1}));
    corners.insert({static_cast<int>(box.y), static_cast<int>(box.x)});
  }
  EXPECT_EQ(corners.size(), 3u * 3u);  // tops 0..2, lefts 0..2
  // pad_if_needed: a 3 x 2 image (w x h), 1 padding each side, crop 6 x 9
  // (h x w): both sides of a short axis get what the padded image lacks, so
  // the padded image is 8 x 13 (v2's make_params) and the crop moves in it.
  const ImageTransform n = Crop(6, 9, {1, 1, 1, 1}, PaddingMode::kEdge, true);
  for (uint64_t id = 0; id < 50; ++id) {
    SampleRng rng = SampleRng::ForSample(0, 0, id, 0);
    const CropBox box = ChooseCrop(n, 3, 2, rng);
    EXPECT_EQ(box.padding, (std::array<uint32_t, 4>{5, 3, 5, 3}));
    EXPECT_LE(box.x, 13 - 9);
    EXPECT_LE(box.y, 8 - 6);
  }
}

// The reference: pad the whole decoded image, then crop.
std::vector<uint8_t> PadThenCrop(const RgbImage& img, const ImageTransform& t, const CropBox& box) {
  std::vector<uint8_t> chw(size_t{t.width} * t.height * 3);
  for (int c = 0; c < 3; ++c) {
    for (uint32_t r = 0; r < t.height; ++r) {
      for (uint32_t k = 0; k < t.width; ++k) {
        const uint32_t col = box.flip ? t.width - 1 - k : k;
        const int32_t sy = PaddedIndex(static_cast<int64_t>(box.y) + r, box.padding[1], img.height,
                                       t.padding_mode);
        const int32_t sx = PaddedIndex(static_cast<int64_t>(box.x) + col, box.padding[0], img.width,
                                       t.padding_mode);
        chw[(static_cast<size_t>(c) * t.height + r) * t.width + k] =
            sy == kPadFill || sx == kPadFill
                ? t.pad_fill[c]
                : img.pixels[(size_t{uint32_t(sy)} * img.width + sx) * 3 + c];
      }
    }
  }
  return chw;
}

TEST(RandomCropOpTest, EqualsACropOfTheWholeDecodeForEveryFormatModeAndCorner) {
  const RgbImage noise = testing::Noise(45, 37, 11);
  const std::vector<std::pair<const char*, std::vector<uint8_t>>> files = {
      {"png", EncodePng(noise).value()},
      {"jpeg", testing::MustEncodeJpeg(noise, 90)},
      {"jpeg-gray", testing::MustEncodeJpeg(noise, 85, /*gray=*/true)}};
  for (const auto& [name, bytes] : files) {
    const RgbImage whole = testing::MustDecode(bytes);
    for (PaddingMode mode : {PaddingMode::kConstant, PaddingMode::kEdge, PaddingMode::kReflect,
                             PaddingMode::kSymmetric}) {
      for (const auto& [h, w, pad] :
           {std::tuple<uint32_t, uint32_t, std::array<uint32_t, 4>>{30, 32, {4, 4, 4, 4}},
            {41, 17, {0, 3, 9, 2}},
            {5, 50, {3, 0, 3, 0}}}) {
        const ImageTransform t = Crop(h, w, pad, mode);
        std::vector<uint8_t> out(size_t{w} * h * 3);
        for (uint64_t id = 0; id < 12; ++id) {
          SampleRng rng = SampleRng::ForSample(1, 0, id, 0);
          CropBox box = ChooseCrop(t, whole.width, whole.height, rng);
          box.flip = id % 2 == 1;
          ASSERT_TRUE(TransformImage(bytes, t, box, out.data(), &rng).ok()) << name;
          const std::vector<uint8_t> want = PadThenCrop(whole, t, box);
          ASSERT_EQ(out, want) << name << " mode " << int(mode) << " id " << id;
        }
      }
    }
  }
}

TEST(RandomCropOpTest, ACropOfFillOnlyStillDecodesAndIsTheFill) {
  const std::vector<uint8_t> png = EncodePng(testing::Noise(8, 8, 2)).value();
  const ImageTransform t = Crop(4, 4, {20, 0, 0, 0}, PaddingMode::kConstant);
  CropBox box;
  box.padding = t.padding;
  std::vector<uint8_t> out(4 * 4 * 3);
  ASSERT_TRUE(TransformImage(png, t, box, out.data()).ok());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], t.pad_fill[i / 16]);
  std::vector<uint8_t> cut(png.begin(), png.end() - 20);  // a truncated file is still an error
  EXPECT_FALSE(TransformImage(cut, t, box, out.data()).ok());
}

TEST(RandomCropOpTest, TooLargeACropOrTooWideAMirrorIsAnErrorNamingTheSizes) {
  const std::vector<uint8_t> png = EncodePng(testing::Noise(6, 4, 3)).value();
  std::vector<uint8_t> out(64 * 64 * 3);
  SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
  const ImageTransform big = Crop(9, 9, {1, 1, 1, 1}, PaddingMode::kConstant);
  Status st = TransformImage(png, big, ChooseCrop(big, 6, 4, rng), out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("crop 9x9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("padded image 6x8 (image 4x6"), std::string::npos) << st.message();
  const ImageTransform mirror = Crop(4, 4, {0, 0, 6, 0}, PaddingMode::kReflect);
  st = TransformImage(png, mirror, ChooseCrop(mirror, 6, 4, rng), out.data());
  EXPECT_NE(
      st.message().find("reflect padding 6 on the right is not less than the image's width 6"),
      std::string::npos)
      << st.message();
  const ImageTransform symmetric = Crop(4, 4, {0, 0, 6, 0}, PaddingMode::kSymmetric);
  EXPECT_TRUE(TransformImage(png, symmetric, ChooseCrop(symmetric, 6, 4, rng), out.data()).ok());
}

TEST(CenterCropTest, PadsWithZerosAndRoundsTheCornerLikeTorchvision) {
  const RgbImage img = testing::Noise(6, 4, 5);
  const std::vector<uint8_t> png = EncodePng(img).value();
  ImageTransform t = Crop(5, 9, {0, 0, 0, 0}, PaddingMode::kConstant);
  t.crop = CropMode::kCenterCrop;
  t.pad_fill = {0, 0, 0};
  SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
  CropBox box = ChooseCrop(t, 6, 4, rng);
  // 3 columns and 1 row short: F.center_crop's [1, 0, 2, 1], corner (0, 0).
  EXPECT_EQ(box.padding, (std::array<uint32_t, 4>{1, 0, 2, 1}));
  EXPECT_EQ(box.x, 0);
  EXPECT_EQ(box.y, 0);
  std::vector<uint8_t> out(5 * 9 * 3);
  ASSERT_TRUE(TransformImage(png, t, box, out.data()).ok());
  EXPECT_EQ(out, PadThenCrop(img, t, box));
  t.height = 2, t.width = 3;  // round(1.5) is 2 (half to even), round(1.0) is 1
  box = ChooseCrop(t, 6, 4, rng);
  EXPECT_EQ(box.x, 2);
  EXPECT_EQ(box.y, 1);
  t.padding_mode = PaddingMode::kEdge;  // CenterCrop pads with zeros only
  EXPECT_EQ(TransformImage(png, t, box, out.data()).code(), StatusCode::kInvalidArgument);
}

TEST(VerticalFlipStepTest, ReversesTheRowsOfEveryPlaneAfterTheTable) {
  const uint32_t w = 5, h = 3;
  std::vector<uint8_t> chw(w * h * 3);
  for (size_t i = 0; i < chw.size(); ++i) chw[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> got = chw;
  const PixelStep steps[] = {{PixelStepKind::kInvert}, {PixelStepKind::kVerticalFlip}};
  ApplyPixelSteps(steps, w, h, got.data());
  for (uint32_t c = 0; c < 3; ++c) {
    for (uint32_t r = 0; r < h; ++r) {
      for (uint32_t k = 0; k < w; ++k) {
        EXPECT_EQ(got[(c * h + r) * w + k], 255 - chw[(c * h + (h - 1 - r)) * w + k]);
      }
    }
  }
}

}  // namespace
}  // namespace feedline
