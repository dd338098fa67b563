// Images: decoding with limits, torchvision-compatible transforms, and the
// fused per-sample op that turns encoded bytes into a normalised tensor slot.
//
// The op does, for each sample, in one pass over only the pixels it needs:
//   read the header -> choose the crop box (torchvision's RandomResizedCrop or
//   Resize + CenterCrop, with the sample's counter-based rng) -> decode just
//   that region, at the smallest JPEG DCT scale (1/8 .. 8/8) that still
//   leaves at least the output resolution -> antialiased resample with PIL's
//   filters -> horizontal flip -> colour and pixel ops -> normalise ->
//   convert (uint8, float32, float16, bfloat16; CHW or HWC), written
//   straight into the batch slot -> RandomErasing on that slot.
// MixUp and CutMix (ApplyBatchMix) act on collated batches.
//
// Semantics follow torchvision 0.14 on PIL images (what ImageFolder +
// transforms users run today): crop boxes, resize sizes and rounding are
// the same; resampling reproduces PIL's (docs/image.md gives the measured
// differences).
//
// Thread safety: ImageTransform is a value. The op from MakeImageOp is a
// SampleOp: shared, with per-worker decoder state.
#ifndef FEEDLINE_IMAGE_H_
#define FEEDLINE_IMAGE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "feedline/buffer.h"
#include "feedline/export.h"
#include "feedline/random.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

// kPnm: Netpbm P1..P6 (PBM, PGM, PPM). kPdf is sniffed only to name it in
// the error.
enum class ImageFormat { kUnknown, kJpeg, kPng, kGif, kBmp, kTiff, kWebp, kPdf, kPnm };
FEEDLINE_EXPORT std::string_view ImageFormatName(ImageFormat format);
// From the first bytes; kUnknown if nothing matches.
FEEDLINE_EXPORT ImageFormat SniffImageFormat(std::span<const uint8_t> bytes);

// Checked from the header, before any pixel memory is allocated
// (docs/reliability.md "default limits").
struct FEEDLINE_EXPORT DecodeLimits {
  // Pillow's decompression-bomb limit: it refuses images over twice its
  // MAX_IMAGE_PIXELS (1024^3 / 4 / 3 = 89478485), so this refuses what a
  // torchvision pipeline on Pillow would.
  uint64_t max_pixels = 2 * uint64_t{89478485};
  uint32_t max_dimension = 65535;
  uint32_t max_jpeg_scans = 256;  // progressive JPEGs: SOS markers
  uint64_t max_png_chunk_bytes = 8u << 20;
  bool jpeg_warnings_fatal = true;  // a truncated JPEG is an error, not grey pixels
};

struct FEEDLINE_EXPORT ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t channels = 0;  // as stored: 1 gray, 3 RGB/YCbCr, 4 CMYK/RGBA, 2 gray+alpha
  bool progressive = false;
};

// Reads only the header (for GIF: the records up to the first frame; the
// size is the canvas). Errors: Unimplemented for formats outside {jpeg,
// png, webp, tiff, gif, bmp, pnm} and for variants we do not decode
// (animated WebP, RLE BMP, ...; docs/image.md lists them); InvalidArgument
// for limits; DataLoss for corrupt headers.
FEEDLINE_EXPORT Result<ImageInfo> ReadImageInfo(std::span<const uint8_t> bytes,
                                                const DecodeLimits& limits = {});

// A decoded 8-bit RGB image, rows packed.
struct FEEDLINE_EXPORT RgbImage {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3
};

// Full-size decode to RGB (gray, palette, CMYK/YCCK, 16-bit and alpha are
// converted; alpha is dropped, like PIL's convert("RGB")). GIF: the first
// frame on its canvas; TIFF: the first page, in stored row order.
FEEDLINE_EXPORT Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes,
                                             const DecodeLimits& limits = {});

// Encoders, for the dataset generator and tests. `grayscale` stores one
// luma channel; `progressive` writes a multi-scan JPEG.
FEEDLINE_EXPORT Result<std::vector<uint8_t>> EncodeJpeg(const RgbImage& image, int quality,
                                                        bool grayscale = false,
                                                        bool progressive = false);
FEEDLINE_EXPORT Result<std::vector<uint8_t>> EncodePng(const RgbImage& image);

enum class Interpolation { kBilinear, kBicubic };
enum class Layout { kCHW, kHWC };

// How the crop box is chosen.
enum class CropMode {
  kRandomResized,  // torchvision RandomResizedCrop(size, scale, ratio)
  kResizeCenter,   // torchvision Resize(resize_size) then CenterCrop(size)
  kResizeFull,     // torchvision Resize((height, width)): the whole image
  // torchvision RandomCrop(size, padding, pad_if_needed, fill, padding_mode)
  // on the decoded image, no resize: the padding fields below (v2's
  // semantics: the user's padding and pad_if_needed's in one pad).
  kRandomCrop,
  kResizeRandom,  // torchvision Resize(resize_size) then RandomCrop(size), no padding
  // torchvision CenterCrop(size) on the decoded image, no resize: zero
  // padding where the image is smaller (F.center_crop), no random draw.
  kCenterCrop,
};

// How RandomCrop and Pad fill the pixels outside the image (torchvision's
// padding_mode): kConstant writes `pad_fill`; kEdge repeats the last pixel;
// kReflect mirrors without repeating it (1 2 3 | 2 1), kSymmetric with it
// (1 2 3 | 3 2). A mirror wider than the image is a sample error, as in
// torchvision's tensor path (reflect: padding >= the axis; symmetric: >).
enum class PaddingMode { kConstant, kEdge, kReflect, kSymmetric };

// Colour and pixel ops on the 8-bit pixels, with torchvision's semantics on
// uint8 tensors (torchvision.transforms.functional's tensor path; docs/
// augmentations.md gives the measured differences). They run after the
// resample and before normalisation, in one fused pass where the ops allow
// (src/image/color_ops.h). Random parameters are drawn from the sample's rng
// after the crop and flip.
enum class PixelOpKind {
  kColorJitter,      // brightness, contrast, saturation, hue in a random order
  kGrayscale,        // RandomGrayscale(p); Grayscale(3) is p = 1
  kInvert,           // RandomInvert(p)
  kPosterize,        // RandomPosterize(bits, p)
  kSolarize,         // RandomSolarize(threshold, p)
  kAutocontrast,     // RandomAutocontrast(p)
  kEqualize,         // RandomEqualize(p)
  kAdjustSharpness,  // RandomAdjustSharpness(sharpness_factor, p)
  kGaussianBlur,     // GaussianBlur(kernel_size, sigma)
  // Geometry on the 8-bit pixels, same size out (expand=False), with
  // torchvision's tensor-path sampling (src/image/affine.h).
  kRotation,  // RandomRotation(degrees, interpolation, fill)
  kAffine,    // RandomAffine(degrees, translate, scale, shear, interpolation, fill)
  // Policies: torchvision v2's op sets, magnitude bins and signs.
  kTrivialAugmentWide,  // TrivialAugmentWide(num_magnitude_bins, interpolation, fill)
  kRandAugment,         // RandAugment(num_ops, magnitude, num_magnitude_bins, interpolation, fill)
  kAutoAugment,         // AutoAugment(IMAGENET policy, interpolation, fill)
  // AugMix(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill):
  // mixture_width chains of policy ops, each on the original image, blended
  // in float32 with Dirichlet weights, then with the original by a Beta weight.
  kAugMix,
  kVerticalFlip,  // RandomVerticalFlip(p)
};

// Sampling of the geometric ops (torchvision's grid_sample modes).
enum class WarpInterpolation { kNearest, kBilinear };

// A transform as the user wrote it (random parameters still to draw).
struct FEEDLINE_EXPORT PixelOp {
  PixelOpKind kind = PixelOpKind::kColorJitter;
  double p = 1.0;  // probability of applying it (all kinds but kColorJitter, kGaussianBlur)
  // kColorJitter: factor ranges [lo, hi], torchvision's after its parsing
  // (brightness=0.4 is {0.6, 1.4}; hue in [-0.5, 0.5]); `has_*` false means
  // the factor is None (not applied, no draw).
  bool has_brightness = false, has_contrast = false, has_saturation = false, has_hue = false;
  std::array<double, 2> brightness = {1, 1}, contrast = {1, 1}, saturation = {1, 1}, hue = {0, 0};
  uint32_t bits = 8;                             // kPosterize: 0..8
  double threshold = 128;                        // kSolarize: pixels >= threshold are inverted
  double factor = 1.0;                           // kAdjustSharpness: sharpness_factor >= 0
  uint32_t kernel_width = 3, kernel_height = 3;  // kGaussianBlur: odd, positive
  std::array<double, 2> sigma = {0.1, 2.0};      // kGaussianBlur: uniform draw, 0 < lo <= hi
  // kRotation, kAffine: ranges as torchvision holds them after parsing
  // (degrees=30 is {-30, 30}; shear=10 is x in {-10, 10}, no y shear).
  // translate: maximal fractions of the width and height.
  std::array<double, 2> degrees = {0, 0};
  bool has_translate = false, has_scale = false, has_shear = false, has_shear_y = false;
  std::array<double, 2> translate = {0, 0};
  std::array<double, 2> scale_range = {1, 1};
  std::array<double, 4> shear = {0, 0, 0, 0};  // x lo, x hi, y lo, y hi
  // kRotation, kAffine and the policies: sampling, and the value of pixels
  // from outside the image (per channel; has_fill false is torchvision's
  // fill=None: zero padding without the mask blend).
  WarpInterpolation interpolation = WarpInterpolation::kNearest;
  bool has_fill = false;
  std::array<double, 3> fill = {0, 0, 0};
  // The policies.
  uint32_t num_ops = 2;              // kRandAugment
  uint32_t magnitude = 9;            // kRandAugment: a bin index < num_magnitude_bins
  uint32_t num_magnitude_bins = 31;  // kRandAugment, kTrivialAugmentWide: >= 2; kAutoAugment,
                                     // kAugMix: 10
  // kAugMix (torchvision's names): the magnitude bin is drawn in [0, severity)
  // of 10; chain_depth > 0 is every chain's length, otherwise each chain's is
  // uniform in 1..3; alpha is the Dirichlet and Beta parameter; all_ops adds
  // Brightness, Color, Contrast and Sharpness to the 9 other ops.
  uint32_t severity = 3;       // 1..10
  uint32_t mixture_width = 3;  // 1..kMaxAugMixWidth
  int32_t chain_depth = -1;    // at most kMaxAugMixDepth
  double alpha = 1.0;          // > 0
  bool all_ops = true;
};

// feedline's bounds on AugMix's sizes (torchvision has none; a larger value
// is refused naming the bound, and a Compose then runs AugMix in Python).
inline constexpr uint32_t kMaxAugMixWidth = 64;
inline constexpr int32_t kMaxAugMixDepth = 64;

// One concrete step with its drawn parameter.
enum class PixelStepKind {
  kBrightness,
  kContrast,
  kSaturation,
  kHue,
  kGrayscale,
  kInvert,
  kPosterize,
  kSolarize,
  kAutocontrast,
  kEqualize,
  kSharpness,
  kGaussianBlur,
  kAffine,  // torchvision's affine() or rotate() with the fields below
  // AugMix's blend, around its chains: kMixBegin (value: the original's
  // weight) keeps the image as the original and starts a float32 sum at
  // value * original; each kMixChain (value: the chain's weight) restarts
  // from the original, and the steps after it, up to the next kMixChain or
  // kMixEnd, are the chain, added to the sum times its weight; kMixEnd
  // writes the sum back, truncated to uint8 (torch's .to(uint8)).
  kMixBegin,
  kMixChain,
  kMixEnd,
  kVerticalFlip,  // rows in reverse order
};
// How a kAffine step's translate_x / translate_y become whole pixels of the
// image it is applied to (W x H).
enum class AffineTranslate {
  kPixels,         // as given (whole pixels)
  kRoundFraction,  // round_half_even(t * W): RandomAffine's draw
  kRandAugment,    // +-bin: int(linspace_f32(0, 150 / 331 * W, bins)[bin])
  kAugMix,         // +-bin: int(linspace_f32(0, W / 3, bins)[bin])
};
struct FEEDLINE_EXPORT PixelStep {
  PixelStepKind kind = PixelStepKind::kBrightness;
  double value = 0;                              // the factor, hue shift, threshold, bits or sigma
  uint32_t kernel_width = 0, kernel_height = 0;  // kGaussianBlur
  // kAffine: F.affine(angle, translate, scale, shear) in degrees, or with
  // `rotate` F.rotate(angle) (counter-clockwise, its exact fast paths for
  // multiples of 90). corner_center: center=[0, 0] (the policies' shears)
  // instead of the image centre. magnitude_bins: for kRandAugment.
  double angle = 0, scale = 1, shear_x = 0, shear_y = 0;
  double translate_x = 0, translate_y = 0;
  AffineTranslate translate_unit = AffineTranslate::kPixels;
  uint32_t magnitude_bins = 0;
  bool rotate = false, corner_center = false;
  WarpInterpolation interpolation = WarpInterpolation::kNearest;
  bool has_fill = false;
  std::array<double, 3> fill = {0, 0, 0};
};

// InvalidArgument naming the op and parameter for parameters torchvision
// refuses (negative factors, hue outside [-0.5, 0.5], even kernel sizes...).
FEEDLINE_EXPORT Status CheckPixelOps(std::span<const PixelOp> ops);

// The steps `ops` become for one sample, drawing from `rng` as torchvision
// draws (ColorJitter: a random permutation of its four factors, each factor
// uniform in its range; Random*: applied with probability p; GaussianBlur:
// sigma uniform; RandomRotation / RandomAffine: get_params' parameters;
// the policies: their ops, bins and signs, one kAffine or colour step per
// op, none for Identity; AugMix: kMixBegin, then per chain kMixChain and its
// ops, then kMixEnd). Appends to `steps`.
FEEDLINE_EXPORT void DrawPixelSteps(std::span<const PixelOp> ops, SampleRng& rng,
                                    std::vector<PixelStep>* steps);

// InvalidArgument naming the step's position for a list ApplyPixelSteps
// would not run as written: a kMixChain or kMixEnd outside kMixBegin ..
// kMixEnd, a kMixBegin inside one or never ended, an op between kMixBegin
// and its first kMixChain, or a weight that is not finite. DrawPixelSteps'
// lists pass.
FEEDLINE_EXPORT Status CheckPixelSteps(std::span<const PixelStep> steps);

// Applies `steps` in order to a planar 8-bit RGB image (3 planes of
// width * height bytes, CHW), in place. Steps come from DrawPixelSteps on
// ops that passed CheckPixelOps (or have parameters in those ranges, and
// pass CheckPixelSteps; the marker steps of a list that does not are
// skipped where out of place, never read out of bounds).
FEEDLINE_EXPORT void ApplyPixelSteps(std::span<const PixelStep> steps, uint32_t width,
                                     uint32_t height, uint8_t* chw);

// RandomErasing with torchvision v2's semantics (transforms.v2.RandomErasing,
// the same as v1's): applied with probability p after the output
// conversion, on the values the batch holds (after Normalize), in order.
// The rectangle follows get_params: up to 10 attempts, each an area
// uniform in scale * H * W and a log-uniform aspect ratio, h =
// round(sqrt(area * ratio)), w = round(sqrt(area / ratio)), kept when h < H
// and w < W, then top and left uniform; no erase when every attempt fails.
struct FEEDLINE_EXPORT EraseOp {
  double p = 0.5;
  std::array<double, 2> scale = {0.02, 0.33};  // 0 <= lo <= hi <= 1
  std::array<double, 2> ratio = {0.3, 3.3};    // 0 < lo <= hi
  // value="random": a standard normal draw per erased value (per channel
  // and pixel); otherwise `value` holds 1 value (all channels) or 3.
  bool random_value = false;
  std::vector<float> value = {0.0f};
};

// A drawn erase: rows [top, top + height), columns [left, left + width).
struct FEEDLINE_EXPORT EraseRect {
  bool erase = false;
  uint32_t top = 0, left = 0, height = 0, width = 0;
};

// InvalidArgument naming the op for what torchvision refuses (p outside
// [0, 1], scale outside [0, 1], ratio not positive, a value list of another
// length than 1 or `channels`) and, for a uint8 output (where torchvision
// casts the value to uint8), value="random" or values outside [0, 255].
FEEDLINE_EXPORT Status CheckEraseOps(std::span<const EraseOp> ops, DType dtype,
                                     uint32_t channels = 3);

// Draws p, then the rectangle (get_params), from `rng`.
FEEDLINE_EXPORT EraseRect DrawErase(const EraseOp& op, uint32_t height, uint32_t width,
                                    SampleRng& rng);

// The values written into the rectangle: `channels` values for a constant,
// channels * r.height * r.width (CHW order) standard normal draws from `rng`
// for value="random". Replaces `*values`.
FEEDLINE_EXPORT void DrawEraseValues(const EraseOp& op, const EraseRect& r, uint32_t channels,
                                     SampleRng& rng, std::vector<float>* values);

// Writes `values` (from DrawEraseValues; per_pixel for value="random") into
// rectangle `r` of one image of channels x height x width in `layout`
// (kHWC: channels innermost) and `dtype` (floats rounded to nearest even
// for float16/bfloat16, truncated for uint8, as torch's assignment).
FEEDLINE_EXPORT void ApplyErase(const EraseRect& r, std::span<const float> values, bool per_pixel,
                                DType dtype, Layout layout, uint32_t channels, uint32_t height,
                                uint32_t width, void* image);

struct FEEDLINE_EXPORT ImageTransform {
  CropMode crop = CropMode::kRandomResized;
  uint32_t height = 224;  // output size
  uint32_t width = 224;
  std::array<double, 2> scale = {0.08, 1.0};             // kRandomResized
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};  // kRandomResized
  uint32_t resize_size = 256;                            // kResizeCenter, kResizeRandom
  // kRandomCrop: padding left, top, right, bottom; pad_if_needed pads both
  // sides of an axis by what the padded image lacks of the output size;
  // pad_fill is kConstant's value per channel.
  std::array<uint32_t, 4> padding = {0, 0, 0, 0};
  bool pad_if_needed = false;
  PaddingMode padding_mode = PaddingMode::kConstant;
  std::array<uint8_t, 3> pad_fill = {0, 0, 0};
  double hflip_prob = 0.0;  // RandomHorizontalFlip(p)
  Interpolation interpolation = Interpolation::kBilinear;
  // Colour and pixel ops, in order, on the resampled 8-bit pixels.
  std::vector<PixelOp> pixel_ops;
  // RandomErasing ops, in order, on the converted output (after normalise).
  std::vector<EraseOp> erase_ops;

  // Output values. With normalize: (v / 255 - mean) / std; without: v / 255
  // for float types. uint8 output is the resampled pixel itself.
  bool normalize = true;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kCHW;

  // Decode JPEGs at a reduced DCT scale when the crop allows it. Off gives
  // full-size decodes (PIL's exact input) at a higher cost.
  bool dct_scaling = true;
  DecodeLimits limits;
};

// ImageNet training recipe: RandomResizedCrop(size) + RandomHorizontalFlip()
// + Normalize(ImageNet mean/std), float32 CHW.
FEEDLINE_EXPORT ImageTransform ImageNetTrain(uint32_t size = 224);
// ImageNet evaluation recipe: Resize(resize) + CenterCrop(size) + Normalize.
FEEDLINE_EXPORT ImageTransform ImageNetEval(uint32_t resize = 256, uint32_t size = 224);

// The batch field the transform writes: "image", dtype, {3, H, W} or {H, W, 3}.
FEEDLINE_EXPORT FieldSpec ImageField(const ImageTransform& t, std::string name = "image");

// A crop box in source pixels (fractional for Resize + CenterCrop) and the
// region whose edges bound the resampling filter.
struct FEEDLINE_EXPORT CropBox {
  // The region treated as the image by the resampler: for RandomResizedCrop
  // the crop itself (torchvision crops, then resizes); for Resize +
  // CenterCrop the whole image.
  uint32_t region_x = 0, region_y = 0, region_width = 0, region_height = 0;
  // The part of the region mapped onto the output, relative to the region.
  double x = 0, y = 0, width = 0, height = 0;
  bool flip = false;
  // kRandomCrop: x, y are the crop's top-left corner in the padded image,
  // width x height the output size, and this the padding in effect (left,
  // top, right, bottom; the transform's, widened by pad_if_needed).
  std::array<uint32_t, 4> padding = {0, 0, 0, 0};
};

// The box torchvision would choose for an image of width x height, drawing
// random numbers from `rng` (RandomResizedCrop.get_params: 10 tries, then the
// central fallback; Python's round-half-to-even).
FEEDLINE_EXPORT CropBox ChooseCrop(const ImageTransform& t, uint32_t width, uint32_t height,
                                   SampleRng& rng);

// Crops (x, y, w, h) of `image` and resizes it to out_width x out_height
// with antialiasing: torchvision's resized_crop on a PIL image.
FEEDLINE_EXPORT Result<RgbImage> ResizedCrop(
    const RgbImage& image, uint32_t x, uint32_t y, uint32_t w, uint32_t h, uint32_t out_width,
    uint32_t out_height, Interpolation interpolation = Interpolation::kBilinear);

// The fused op: decodes sample.data() and writes output field
// `output_field` (which must be ImageField(t)). Random choices use the
// sample's rng for this op, so they are reproducible.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeImageOp(ImageTransform t,
                                                            size_t output_field = 0);

// The same work on one image, outside the engine: for tools and tests.
// `out` must hold ImageField(t).SampleBytes() bytes. `rng` draws the pixel
// ops' parameters; InvalidArgument without it when t.pixel_ops is not empty.
FEEDLINE_EXPORT Status TransformImage(std::span<const uint8_t> bytes, const ImageTransform& t,
                                      const CropBox& box, void* out, SampleRng* rng = nullptr);

// MixUp and CutMix on collated batches, with torchvision.transforms.v2's
// semantics: lam ~ Beta(alpha, alpha) per batch, the partner of sample i is
// sample i - 1 (batch.roll(1, 0)), labels become one-hot float rows mixed
// by lam. MixUp blends the images by lam; CutMix pastes the partner's box
// (centre uniform over W x H, half sides int(0.5 * sqrt(1 - lam) * W) and
// ... * H, clamped to the image) and mixes the labels by 1 - box area /
// image area. The arithmetic is torch's in float32 (half types round after
// each product and after the sum), so outputs equal v2's to the bit.
enum class BatchMixKind { kMixUp, kCutMix };
struct FEEDLINE_EXPORT BatchMixOp {
  BatchMixKind kind = BatchMixKind::kMixUp;
  double alpha = 1.0;        // > 0
  uint32_t num_classes = 0;  // >= 1
  double weight = 1.0;       // RandomChoice's p for this op (relative; > 0)
};

// What DrawBatchMix chose for one batch.
struct FEEDLINE_EXPORT BatchMixParams {
  BatchMixKind kind = BatchMixKind::kMixUp;
  double lam = 1.0;                         // the Beta draw
  double label_lam = 1.0;                   // MixUp: lam; CutMix: 1 - box area / image area
  uint32_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // CutMix box, [x1, x2) x [y1, y2)
};

// InvalidArgument naming the op: no ops, alpha <= 0 (or not finite),
// num_classes < 1, ops with different num_classes, weight <= 0.
FEEDLINE_EXPORT Status CheckBatchMix(std::span<const BatchMixOp> choices);

// One op of `choices` (torchvision RandomChoice: by weight), then its
// parameters for images of height x width, from `rng`.
FEEDLINE_EXPORT BatchMixParams DrawBatchMix(std::span<const BatchMixOp> choices, uint32_t height,
                                            uint32_t width, SampleRng& rng);

// A Beta(a, b) draw (two Marsaglia-Tsang gammas, in logs so that small
// shapes keep their precision), for DrawBatchMix and its tests.
FEEDLINE_EXPORT double SampleBeta(double a, double b, SampleRng& rng);

// A Dirichlet(alpha, ..., alpha) draw into `weights` (one normalised
// Marsaglia-Tsang gamma per entry, in logs), for AugMix and its tests.
FEEDLINE_EXPORT void SampleDirichlet(double alpha, std::span<double> weights, SampleRng& rng);

// Applies `p` in place to `n` images of channels x height x width in
// `layout` and `dtype` (float32, float16, bfloat16; uint8 for CutMix only,
// as torch cannot blend uint8 in place) at `images`, and writes the soft
// labels (n x num_classes float32) to `soft_labels`. InvalidArgument for a
// label outside [0, num_classes), naming its position in the batch and, when
// `sample_ids` is not empty, the sample id; nothing is written then.
FEEDLINE_EXPORT Status ApplyBatchMix(const BatchMixParams& p, DType dtype, Layout layout,
                                     uint32_t n, uint32_t channels, uint32_t height, uint32_t width,
                                     void* images, std::span<const int64_t> labels,
                                     uint32_t num_classes, std::span<const uint64_t> sample_ids,
                                     float* soft_labels);

// Lossless JPEG rewrite for packing (`feedline pack --restart-interval`):
// the DCT coefficients are kept, a restart marker is written every
// `interval_mcus` MCUs (snapped per image so the intervals tile the MCU
// rows; 0 removes them) and the Huffman tables are optimised, so a crop
// later decodes only the intervals it needs (docs/restart_intervals.md).
// Decoding the result gives the same pixels as decoding the input. Every
// marker segment (EXIF, ICC, comments) is kept. Unimplemented for what it
// does not rewrite (not a JPEG, CMYK/YCCK/RGB colour, arithmetic coding,
// lossless, 12-bit); DataLoss for a corrupt input (never turned into a
// valid-looking file). `out` is written only on success.
FEEDLINE_EXPORT Status AddJpegRestartMarkers(std::span<const uint8_t> jpeg, uint32_t interval_mcus,
                                             std::vector<uint8_t>* out);

}  // namespace feedline

#endif  // FEEDLINE_IMAGE_H_
