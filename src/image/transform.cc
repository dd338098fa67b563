// Crop selection with torchvision's semantics, the recipes, and the fused
// decode -> crop -> resample -> flip -> normalise -> convert op.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "feedline/image.h"
#include "src/core/detail/fingerprint.h"
#include "src/image/color_ops.h"
#include "src/image/decode_internal.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/pad_crop.h"
#include "src/image/png_decoder.h"
#include "src/image/resample.h"
#include "src/image/whole_decoders.h"

namespace feedline {

namespace {

// Python's round(): half to even. std::nearbyint does that in the default
// rounding mode.
int64_t PyRound(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

ImageTransform ImageNetTrain(uint32_t size) {
  ImageTransform t;
  t.crop = CropMode::kRandomResized;
  t.height = t.width = size;
  t.hflip_prob = 0.5;
  return t;
}

ImageTransform ImageNetEval(uint32_t resize, uint32_t size) {
  ImageTransform t;
  t.crop = CropMode::kResizeCenter;
  t.height = t.width = size;
  t.resize_size = resize;
  t.hflip_prob = 0.0;
  return t;
}

FieldSpec ImageField(const ImageTransform& t, std::string name) {
  const auto h = static_cast<int64_t>(t.height), w = static_cast<int64_t>(t.width);
  return {std::move(name), t.dtype,
          t.layout == Layout::kCHW ? std::vector<int64_t>{3, h, w} : std::vector<int64_t>{h, w, 3}};
}

CropBox ChooseCrop(const ImageTransform& t, uint32_t width, uint32_t height, SampleRng& rng) {
  CropBox box;
  const double W = width, H = height;
  switch (t.crop) {
    case CropMode::kRandomResized: {
      // torchvision.transforms.RandomResizedCrop.get_params
      const double area = W * H;
      const double log_r0 = std::log(t.ratio[0]), log_r1 = std::log(t.ratio[1]);
      bool found = false;
      int64_t i = 0, j = 0, w = 0, h = 0;
      for (int attempt = 0; attempt < 10 && !found; ++attempt) {
        const double target_area = area * rng.Uniform(t.scale[0], t.scale[1]);
        const double aspect = std::exp(rng.Uniform(log_r0, log_r1));
        w = PyRound(std::sqrt(target_area * aspect));
        h = PyRound(std::sqrt(target_area / aspect));
        if (0 < w && w <= width && 0 < h && h <= height) {
          i = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(height - h + 1)));
          j = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(width - w + 1)));
          found = true;
        }
      }
      if (!found) {  // central fallback
        const double in_ratio = W / H;
        const double rmin = std::min(t.ratio[0], t.ratio[1]),
                     rmax = std::max(t.ratio[0], t.ratio[1]);
        if (in_ratio < rmin) {
          w = width;
          h = PyRound(w / rmin);
        } else if (in_ratio > rmax) {
          h = height;
          w = PyRound(h * rmax);
        } else {
          w = width;
          h = height;
        }
        i = (static_cast<int64_t>(height) - h) / 2;
        j = (static_cast<int64_t>(width) - w) / 2;
      }
      // torchvision crops first, so the crop is the region the filter sees.
      box.region_x = static_cast<uint32_t>(j);
      box.region_y = static_cast<uint32_t>(i);
      box.region_width = static_cast<uint32_t>(w);
      box.region_height = static_cast<uint32_t>(h);
      box.width = static_cast<double>(w);
      box.height = static_cast<double>(h);
      break;
    }
    case CropMode::kResizeCenter:
    case CropMode::kResizeRandom: {
      // Resize(resize_size): the shorter side becomes resize_size, the
      // longer int(resize_size * long / short); then CenterCrop(size), or
      // RandomCrop(size): top, then left, uniform (v2's make_params).
      double rw, rh;
      if (width <= height) {
        rw = t.resize_size;
        rh = static_cast<double>(static_cast<int64_t>(t.resize_size * H / W));
      } else {
        rh = t.resize_size;
        rw = static_cast<double>(static_cast<int64_t>(t.resize_size * W / H));
      }
      int64_t top, left;
      if (t.crop == CropMode::kResizeRandom) {
        top = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(rh) - t.height + 1));
        left = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(rw) - t.width + 1));
      } else {
        top = PyRound((rh - t.height) / 2.0);
        left = PyRound((rw - t.width) / 2.0);
      }
      const double sx = W / rw, sy = H / rh;
      box.region_width = width;
      box.region_height = height;
      box.x = static_cast<double>(left) * sx;
      box.y = static_cast<double>(top) * sy;
      box.width = t.width * sx;
      box.height = t.height * sy;
      break;
    }
    case CropMode::kResizeFull:
      box.region_width = width;
      box.region_height = height;
      box.width = W;
      box.height = H;
      break;
    case CropMode::kRandomCrop: {
      // v2 RandomCrop.make_params: the user's padding, widened on both
      // sides of an axis by what the padded image lacks (pad_if_needed);
      // then top and left uniform. A crop that does not fit draws nothing
      // and fails in PlanPadCrop, naming the sizes.
      std::array<uint64_t, 4> pad;
      for (int k = 0; k < 4; ++k) pad[k] = t.padding[k];
      uint64_t pw = width + pad[0] + pad[2], ph = height + pad[1] + pad[3];
      if (t.pad_if_needed && ph < t.height) {
        const uint64_t diff = t.height - ph;
        pad[1] += diff, pad[3] += diff, ph += 2 * diff;
      }
      if (t.pad_if_needed && pw < t.width) {
        const uint64_t diff = t.width - pw;
        pad[0] += diff, pad[2] += diff, pw += 2 * diff;
      }
      for (int k = 0; k < 4; ++k) box.padding[k] = static_cast<uint32_t>(pad[k]);
      box.region_width = width;
      box.region_height = height;
      box.width = t.width;
      box.height = t.height;
      if (t.height <= ph && t.width <= pw) {
        box.y = static_cast<double>(rng.UniformInt(ph - t.height + 1));
        box.x = static_cast<double>(rng.UniformInt(pw - t.width + 1));
      }
      break;
    }
    case CropMode::kCenterCrop: {
      // F.center_crop: zeros around an image smaller than the crop (half on
      // each side, the odd pixel right and bottom), then the corner
      // round((padded - crop) / 2), Python's rounding.
      const uint32_t dw = t.width > width ? t.width - width : 0;
      const uint32_t dh = t.height > height ? t.height - height : 0;
      box.padding = {dw / 2, dh / 2, (dw + 1) / 2, (dh + 1) / 2};
      box.region_width = width;
      box.region_height = height;
      box.width = t.width;
      box.height = t.height;
      box.x = static_cast<double>(PyRound((W + dw - t.width) / 2.0));
      box.y = static_cast<double>(PyRound((H + dh - t.height) / 2.0));
      break;
    }
  }
  box.flip = t.hflip_prob > 0 && rng.Bernoulli(t.hflip_prob);
  return box;
}

namespace image {
namespace {

// Per-worker state of the image op: codec handles and scratch, reused.
struct ImageState final : OpState {
  JpegDecoder jpeg;
  PngDecoder png;
  WholeDecoders whole;  // webp, tiff, gif, bmp, pnm: decoded whole, then cropped
  AxisPlan horizontal, vertical;
  std::vector<float> scratch;
  // Pixel ops: the resampled planes, the drawn steps and their scratch.
  std::vector<uint8_t> planes;
  std::vector<PixelStep> steps;
  PixelScratch pixel_scratch;
  std::vector<float> erase_values;  // RandomErasing's values (noise for value="random")

  uint64_t ScratchBytes() const override {
    return jpeg.scratch_bytes() + png.scratch_bytes() + whole.scratch_bytes() +
           scratch.capacity() * sizeof(float) + planes.capacity() + pixel_scratch.capacity_bytes() +
           erase_values.capacity() * sizeof(float);
  }
  void TrimScratch() override {
    jpeg.TrimScratch();
    png.TrimScratch();
    whole.TrimScratch();
    std::vector<float>().swap(scratch);
    std::vector<uint8_t>().swap(planes);
    pixel_scratch = PixelScratch();
    std::vector<float>().swap(erase_values);
  }
};

Status CheckTransform(const ImageTransform& t) {
  if (t.height == 0 || t.width == 0) return InvalidArgumentError("output size must be positive");
  if (t.dtype != DType::kUInt8 && t.dtype != DType::kFloat32 && t.dtype != DType::kFloat16 &&
      t.dtype != DType::kBFloat16) {
    return InvalidArgumentError("image dtype " + std::string(DTypeName(t.dtype)) +
                                " is not one of uint8, float32, float16, bfloat16");
  }
  if (!(t.scale[0] > 0 && t.scale[0] <= t.scale[1])) {
    return InvalidArgumentError("RandomResizedCrop scale must satisfy 0 < min <= max");
  }
  if (!(t.ratio[0] > 0 && t.ratio[1] > 0)) return InvalidArgumentError("ratio must be positive");
  for (uint32_t p : t.padding) {
    if (p > kMaxPadding) {
      return InvalidArgumentError("RandomCrop padding " + std::to_string(p) +
                                  " is over the limit " + std::to_string(kMaxPadding));
    }
  }
  if (t.crop == CropMode::kCenterCrop &&
      (t.padding != std::array<uint32_t, 4>{} || t.pad_if_needed ||
       t.padding_mode != PaddingMode::kConstant || t.pad_fill != std::array<uint8_t, 3>{})) {
    return InvalidArgumentError(
        "CenterCrop pads with zeros only (no padding, pad_if_needed, mode or fill)");
  }
  if ((t.crop == CropMode::kResizeCenter || t.crop == CropMode::kResizeRandom) &&
      t.resize_size < std::max(t.height, t.width)) {
    return InvalidArgumentError("resize_size " + std::to_string(t.resize_size) +
                                " is smaller than the center crop (padding is not supported)");
  }
  for (float s : t.std) {
    if (!(s > 0)) return InvalidArgumentError("normalisation std must be positive");
  }
  FEEDLINE_RETURN_IF_ERROR(CheckPixelOps(t.pixel_ops));
  return CheckEraseOps(t.erase_ops, t.dtype);
}

// RandomErasing on the converted output in the batch slot, after every
// other draw of the sample (so adding an erase keeps the crops and colours).
void EraseOutput(const ImageTransform& t, SampleRng& rng, ImageState& s, void* out) {
  for (const EraseOp& op : t.erase_ops) {
    const EraseRect r = DrawErase(op, t.height, t.width, rng);
    if (!r.erase) continue;
    DrawEraseValues(op, r, 3, rng, &s.erase_values);
    ApplyErase(r, s.erase_values, op.random_value, t.dtype, t.layout, 3, t.height, t.width, out);
  }
}

// The smallest libjpeg scale M/8 whose decode still gives the box at least
// the output's resolution, among the scales libjpeg-turbo has SIMD IDCTs
// for: 1/8, 2/8, 4/8 and 8/8. Its 3/8, 5/8, 6/8 and 7/8 IDCTs are plain C;
// on ImageNet-like data decoding at 8/8 instead of those was 0.045 ms per
// image faster, and the larger resample 0.018 ms slower (docs/image.md).
int ChooseDctScale(const CropBox& box, const ImageTransform& t) {
  for (int m : {1, 2, 4}) {
    if (box.width * m / 8.0 >= t.width && box.height * m / 8.0 >= t.height) return m;
  }
  return 8;
}

// Decodes rows [y0, y1) and columns [x0, x1) of the image at scale m/8
// (PNG: columns [0, x1); the whole-image formats: everything). `sample`, when
// given, is charged the decode scratch before it is allocated.
Status DecodeBox(ImageFormat format, std::span<const uint8_t> bytes, const ImageTransform& t,
                 const ImageInfo& info, int m, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                 Sample* sample, ImageState& s, RgbRegion* region) {
  if (sample != nullptr) {
    const uint64_t need =
        format == ImageFormat::kJpeg  ? s.jpeg.DecodeScratchBytes(m, x0, y0, x1, y1)
        : format == ImageFormat::kPng ? image::PngDecoder::DecodeScratchBytes(info, y0, y1)
                                      : WholeDecoders::ScratchBytesFor(info);
    FEEDLINE_RETURN_IF_ERROR(sample->ChargeScratch(
        need, "decoding this " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                  " " + std::string(ImageFormatName(format)) +
                  (info.progressive ? " (progressive)" : "")));
  }
  if (format == ImageFormat::kJpeg) return s.jpeg.Decode(m, x0, y0, x1, y1, region);
  if (format == ImageFormat::kPng) return s.png.Decode(bytes, t.limits, x1, y0, y1, region);
  return s.whole.DecodeRegion(format, bytes, t.limits, region);
}

// The pixel ops on s.planes (t.width x t.height, CHW), the conversion into
// `out` and RandomErasing.
void FinishPlanes(const ImageTransform& t, SampleRng* rng, ImageState& s, void* out) {
  s.steps.clear();
  if (!t.pixel_ops.empty()) DrawPixelSteps(t.pixel_ops, *rng, &s.steps);
  ApplyStepsAndConvert(s.steps, t.width, t.height, s.planes.data(), MakeOutputFormat(t),
                       &s.pixel_scratch, out);
  if (!t.erase_ops.empty()) EraseOutput(t, *rng, s, out);
}

// RandomCrop and CenterCrop: the source pixels the crop reads, gathered with
// the padding.
Status RunPadCrop(ImageFormat format, std::span<const uint8_t> bytes, const ImageTransform& t,
                  const ImageInfo& info, const CropBox& box, SampleRng* rng, Sample* sample,
                  ImageState& s, void* out) {
  PadCropPlan plan;
  FEEDLINE_RETURN_IF_ERROR(PlanPadCrop(t, box, info.width, info.height, &plan));
  // A crop of fill only still decodes one pixel: the file is read and
  // checked as for any other crop.
  const bool fill_only = plan.x0 == plan.x1;
  RgbRegion region;
  FEEDLINE_RETURN_IF_ERROR(DecodeBox(format, bytes, t, info, 8, plan.x0, plan.y0,
                                     fill_only ? 1 : plan.x1, fill_only ? 1 : plan.y1, sample, s,
                                     &region));
  s.planes.resize(size_t{t.width} * t.height * 3);
  GatherPadCrop(plan, region.pixels, region.x, region.y, 3, size_t{region.width} * 3, 1, t.pad_fill,
                s.planes.data());
  FinishPlanes(t, rng, s, out);
  return Status::OK();
}

Status Run(std::span<const uint8_t> bytes, const ImageTransform& t, const CropBox* given,
           SampleRng* rng, Sample* sample, ImageState& s, void* out) {
  // Before any decoding: a missing generator is the caller's configuration.
  if (rng == nullptr && !t.erase_ops.empty()) {
    return InvalidArgumentError("RandomErasing needs a random generator");
  }
  if (rng == nullptr && !t.pixel_ops.empty()) {
    return InvalidArgumentError("pixel ops need a random generator");
  }
  const ImageFormat format = SniffImageFormat(bytes);
  ImageInfo info;
  if (format == ImageFormat::kJpeg) {
    FEEDLINE_RETURN_IF_ERROR(s.jpeg.ReadHeader(bytes, t.limits, &info));
  } else if (format == ImageFormat::kPng) {
    FEEDLINE_RETURN_IF_ERROR(s.png.ReadHeader(bytes, t.limits, &info));
  } else if (IsWholeDecodeFormat(format)) {
    FEEDLINE_RETURN_IF_ERROR(s.whole.ReadHeader(format, bytes, t.limits, &info));
  } else {
    return UnsupportedFormat(bytes);
  }
  const CropBox box = given ? *given : ChooseCrop(t, info.width, info.height, *rng);
  if (t.crop == CropMode::kRandomCrop || t.crop == CropMode::kCenterCrop) {
    return RunPadCrop(format, bytes, t, info, box, rng, sample, s, out);
  }

  // Geometry at the decode scale.
  const int m = format == ImageFormat::kJpeg && t.dct_scaling ? ChooseDctScale(box, t) : 8;
  const double f = m / 8.0;
  uint32_t sw = info.width, sh = info.height;
  if (format == ImageFormat::kJpeg) s.jpeg.ScaledSize(m, &sw, &sh);
  auto scaled = [f](double v, uint32_t limit) {
    return static_cast<uint32_t>(std::clamp<double>(std::nearbyint(v * f), 0.0, limit));
  };
  const uint32_t rx0 = scaled(box.region_x, sw), ry0 = scaled(box.region_y, sh);
  const uint32_t rx1 =
      std::max(rx0 + 1, scaled(static_cast<double>(box.region_x) + box.region_width, sw));
  const uint32_t ry1 =
      std::max(ry0 + 1, scaled(static_cast<double>(box.region_y) + box.region_height, sh));
  // The box relative to the (scaled) region.
  const double bx = (box.region_x + box.x) * f - rx0, by = (box.region_y + box.y) * f - ry0;
  PlanAxis(t.interpolation, rx1 - rx0, bx, box.width * f / t.width, t.width, &s.horizontal);
  PlanAxis(t.interpolation, ry1 - ry0, by, box.height * f / t.height, t.height, &s.vertical);

  RgbRegion region;
  FEEDLINE_RETURN_IF_ERROR(DecodeBox(format, bytes, t, info, m, rx0 + s.horizontal.min_index,
                                     ry0 + s.vertical.min_index, rx0 + s.horizontal.max_index,
                                     ry0 + s.vertical.max_index, sample, s, &region));
  RgbSource src;
  src.pixels = region.pixels;
  src.stride = size_t{region.width} * 3;
  src.col0 = static_cast<int32_t>(region.x) - static_cast<int32_t>(rx0);
  src.row0 = static_cast<int32_t>(region.y) - static_cast<int32_t>(ry0);
  if (t.pixel_ops.empty()) {
    Resample(src, s.horizontal, s.vertical, box.flip, MakeOutputFormat(t), &s.scratch, out);
    if (!t.erase_ops.empty()) EraseOutput(t, *rng, s, out);
    return Status::OK();
  }
  // Pixel ops: resample to 8-bit planes, run the ops, and let their last
  // pass write the output (normalise, dtype, layout) (color_ops.h).
  OutputFormat planar;
  planar.dtype = DType::kUInt8;
  planar.layout = Layout::kCHW;
  s.planes.resize(size_t{t.width} * t.height * 3);
  Resample(src, s.horizontal, s.vertical, box.flip, planar, &s.scratch, s.planes.data());
  FinishPlanes(t, rng, s, out);
  return Status::OK();
}

class ImageOp final : public SampleOp {
 public:
  ImageOp(ImageTransform t, size_t field) : t_(std::move(t)), field_(field) {}
  std::string_view name() const override { return "decode_transform"; }
  std::unique_ptr<OpState> NewState() const override { return std::make_unique<ImageState>(); }
  bool ChargesScratch() const override { return true; }
  // Every parameter that changes a sample's pixels or random choices.
  uint64_t ConfigFingerprint() const override {
    core::detail::Fingerprint fp;
    fp.Add(std::string_view("image"))
        .Add(uint64_t(t_.crop))
        .Add(uint64_t{t_.height})
        .Add(uint64_t{t_.width});
    fp.Add(t_.scale[0])
        .Add(t_.scale[1])
        .Add(t_.ratio[0])
        .Add(t_.ratio[1])
        .Add(uint64_t{t_.resize_size});
    fp.Add(t_.hflip_prob).Add(uint64_t(t_.interpolation)).Add(uint64_t{t_.normalize});
    AddPaddingFingerprint(t_, fp);
    for (int c = 0; c < 3; ++c) fp.Add(double{t_.mean[c]}).Add(double{t_.std[c]});
    fp.Add(uint64_t(t_.dtype)).Add(uint64_t(t_.layout)).Add(uint64_t{t_.dct_scaling});
    for (const PixelOp& op : t_.pixel_ops) {
      fp.Add(uint64_t(op.kind)).Add(op.p);
      fp.Add(uint64_t{op.has_brightness}).Add(op.brightness[0]).Add(op.brightness[1]);
      fp.Add(uint64_t{op.has_contrast}).Add(op.contrast[0]).Add(op.contrast[1]);
      fp.Add(uint64_t{op.has_saturation}).Add(op.saturation[0]).Add(op.saturation[1]);
      fp.Add(uint64_t{op.has_hue}).Add(op.hue[0]).Add(op.hue[1]);
      fp.Add(uint64_t{op.bits}).Add(op.threshold).Add(op.factor);
      fp.Add(uint64_t{op.kernel_width}).Add(uint64_t{op.kernel_height});
      fp.Add(op.sigma[0]).Add(op.sigma[1]);
      fp.Add(op.degrees[0]).Add(op.degrees[1]).Add(uint64_t{op.has_translate});
      fp.Add(op.translate[0]).Add(op.translate[1]).Add(uint64_t{op.has_scale});
      fp.Add(op.scale_range[0]).Add(op.scale_range[1]).Add(uint64_t{op.has_shear});
      fp.Add(uint64_t{op.has_shear_y});
      for (double v : op.shear) fp.Add(v);
      fp.Add(uint64_t(op.interpolation)).Add(uint64_t{op.has_fill});
      for (double v : op.fill) fp.Add(v);
      fp.Add(uint64_t{op.num_ops}).Add(uint64_t{op.magnitude}).Add(uint64_t{op.num_magnitude_bins});
      if (op.kind == PixelOpKind::kAugMix) {  // only here: the other ops' fingerprints stay
        fp.Add(uint64_t{op.severity}).Add(uint64_t{op.mixture_width});
        fp.Add(static_cast<uint64_t>(static_cast<int64_t>(op.chain_depth)));
        fp.Add(op.alpha).Add(uint64_t{op.all_ops});
      }
    }
    for (const EraseOp& op : t_.erase_ops) {
      fp.Add(std::string_view("erase")).Add(op.p).Add(op.scale[0]).Add(op.scale[1]);
      fp.Add(op.ratio[0]).Add(op.ratio[1]).Add(uint64_t{op.random_value});
      for (float v : op.value) fp.Add(double{v});
    }
    return fp.value();
  }
  Status Apply(Sample& sample, OpState* state) const override {
    if (field_ >= sample.num_outputs()) {
      return InvalidArgumentError("image op writes field " + std::to_string(field_) +
                                  " but the pipeline has " + std::to_string(sample.num_outputs()));
    }
    SampleRng rng = sample.rng();
    return Run(sample.data(), t_, nullptr, &rng, &sample, *static_cast<ImageState*>(state),
               sample.output(field_));
  }

 private:
  const ImageTransform t_;
  const size_t field_;
};

}  // namespace
}  // namespace image

std::shared_ptr<const SampleOp> MakeImageOp(ImageTransform t, size_t output_field) {
  // Invalid transforms are a programming error at pipeline construction;
  // the op reports them on every sample rather than crashing.
  const Status valid = image::CheckTransform(t);
  if (!valid.ok()) {
    return MakeOp("decode_transform",
                  [valid](Sample&) { return Status(valid); });  // a copy per call
  }
  return std::make_shared<image::ImageOp>(std::move(t), output_field);
}

Result<RgbImage> ResizedCrop(const RgbImage& img, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                             uint32_t out_width, uint32_t out_height, Interpolation interpolation) {
  if (w == 0 || h == 0 || out_width == 0 || out_height == 0 || x + w > img.width ||
      y + h > img.height || img.pixels.size() != size_t{img.width} * img.height * 3) {
    return InvalidArgumentError("ResizedCrop: box " + std::to_string(x) + "," + std::to_string(y) +
                                "," + std::to_string(w) + "," + std::to_string(h) +
                                " is empty or outside the " + std::to_string(img.width) + "x" +
                                std::to_string(img.height) + " image");
  }
  image::AxisPlan ph, pv;
  image::PlanAxis(interpolation, w, 0.0, double(w) / out_width, out_width, &ph);
  image::PlanAxis(interpolation, h, 0.0, double(h) / out_height, out_height, &pv);
  image::RgbSource src;
  src.pixels = img.pixels.data() + (size_t{y} * img.width + x) * 3;
  src.stride = size_t{img.width} * 3;
  image::OutputFormat format;
  format.dtype = DType::kUInt8;
  format.layout = Layout::kHWC;
  RgbImage out{out_width, out_height, std::vector<uint8_t>(size_t{out_width} * out_height * 3)};
  std::vector<float> scratch;
  image::Resample(src, ph, pv, false, format, &scratch, out.pixels.data());
  return out;
}

Status TransformImage(std::span<const uint8_t> bytes, const ImageTransform& t, const CropBox& box,
                      void* out, SampleRng* rng) {
  FEEDLINE_RETURN_IF_ERROR(image::CheckTransform(t));
  image::ImageState state;
  return image::Run(bytes, t, &box, rng, nullptr, state, out);
}

}  // namespace feedline
