// Binds the colour and pixel ops (PixelOp, PixelStep), RandomErasing
// (EraseOp) and the batch mixes (BatchMixOp: MixUp, CutMix), and runs them
// outside a loader, for feedline.transforms' callable ops, the loader's
// batch_transform (python/feedline/_batch.py) and tests.
// Conversion only: the kernels are color_ops.cc's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "feedline/status.h"
#include "python/bindings/errors.h"
#include "src/image/pad_crop.h"

namespace py = pybind11;

namespace feedline::python {
namespace {

using Image = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

// A (3, H, W) uint8 copy of `image` to run kernels on in place.
Image CopyChw(const Image& image) {
  if (image.ndim() != 3 || image.shape(0) != 3 || image.shape(1) < 1 || image.shape(2) < 1) {
    std::string shape;
    for (py::ssize_t i = 0; i < image.ndim(); ++i) {
      shape += (i ? ", " : "") + std::to_string(image.shape(i));
    }
    ThrowIfError(InvalidArgumentError("pixel ops take a uint8 image of shape (3, H, W), got (" +
                                      shape + ")"));
  }
  Image out({image.shape(0), image.shape(1), image.shape(2)});
  std::memcpy(out.mutable_data(), image.data(), static_cast<size_t>(image.size()));
  return out;
}

Image Apply(const std::vector<PixelStep>& steps, const Image& image) {
  ThrowIfError(CheckPixelSteps(steps));
  Image out = CopyChw(image);
  const auto h = static_cast<uint32_t>(out.shape(1)), w = static_cast<uint32_t>(out.shape(2));
  uint8_t* px = out.mutable_data();
  {
    py::gil_scoped_release release;
    ApplyPixelSteps(steps, w, h, px);
  }
  return out;
}

std::vector<PixelStep> Draw(const std::vector<PixelOp>& ops, uint64_t seed, uint64_t epoch,
                            uint64_t sample_id) {
  ThrowIfError(CheckPixelOps(ops));
  SampleRng rng = SampleRng::ForSample(seed, epoch, sample_id, 0);
  std::vector<PixelStep> steps;
  DrawPixelSteps(ops, rng, &steps);
  return steps;
}

// The batch mixes' stream: SampleRng(seed, epoch, stream id, this op
// index). Distinct from every sample op's index (they count from 0), so a
// batch's draws never coincide with a sample's.
constexpr uint32_t kBatchMixOpIndex = 0xB47C0000u;

// The dtypes images come in (DTypeSize gives their item sizes).
bool IsImageDType(DType dtype) {
  return dtype == DType::kUInt8 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat32;
}

// A writable C-contiguous array of images (..., C, H, W) or (..., H, W, C)
// holding `dtype` (bfloat16 travels as int16): (images, C, H, W).
struct Images {
  void* data = nullptr;
  uint32_t count = 1, channels = 0, height = 0, width = 0;
};
Images ViewImages(py::array& a, DType dtype, Layout layout, py::ssize_t min_ndim, const char* who) {
  if (!(a.flags() & py::array::c_style) || !a.writeable()) {
    ThrowIfError(
        InvalidArgumentError(std::string(who) + ": images must be a writable C-contiguous array"));
  }
  if (!IsImageDType(dtype) || static_cast<size_t>(a.itemsize()) != DTypeSize(dtype)) {
    ThrowIfError(InvalidArgumentError(std::string(who) + ": images of dtype " +
                                      std::string(DTypeName(dtype)) + " are not supported"));
  }
  if (a.ndim() < min_ndim) {
    ThrowIfError(InvalidArgumentError(std::string(who) + ": expected images with at least " +
                                      std::to_string(min_ndim) + " dimensions, got " +
                                      std::to_string(a.ndim())));
  }
  Images v;
  const py::ssize_t d = a.ndim();
  const bool chw = layout == Layout::kCHW;
  v.channels = static_cast<uint32_t>(a.shape(chw ? d - 3 : d - 1));
  v.height = static_cast<uint32_t>(a.shape(chw ? d - 2 : d - 3));
  v.width = static_cast<uint32_t>(a.shape(chw ? d - 1 : d - 2));
  for (py::ssize_t i = 0; i + 3 < d; ++i) v.count *= static_cast<uint32_t>(a.shape(i));
  v.data = a.mutable_data();
  return v;
}

void RegisterAugmentOps(py::module_& m) {
  py::class_<EraseOp>(m, "EraseOp")
      .def(py::init<>())
      .def_readwrite("p", &EraseOp::p)
      .def_readwrite("scale", &EraseOp::scale)
      .def_readwrite("ratio", &EraseOp::ratio)
      .def_readwrite("random_value", &EraseOp::random_value)
      .def_readwrite("value", &EraseOp::value);
  py::class_<EraseRect>(m, "EraseRect")
      .def_readonly("erase", &EraseRect::erase)
      .def_readonly("top", &EraseRect::top)
      .def_readonly("left", &EraseRect::left)
      .def_readonly("height", &EraseRect::height)
      .def_readonly("width", &EraseRect::width);
  m.def(
      "check_erase_ops",
      [](const std::vector<EraseOp>& ops, DType dtype, uint32_t channels) {
        ThrowIfError(CheckEraseOps(ops, dtype, channels));
      },
      py::arg("ops"), py::arg("dtype"), py::arg("channels") = 3);
  // The rectangle `op` draws for stream (seed, epoch, sample_id), for statistical tests.
  m.def(
      "draw_erase",
      [](const EraseOp& op, uint32_t height, uint32_t width, uint64_t seed, uint64_t epoch,
         uint64_t sample_id) {
        SampleRng rng = SampleRng::ForSample(seed, epoch, sample_id, 0);
        return DrawErase(op, height, width, rng);
      },
      py::arg("op"), py::arg("height"), py::arg("width"), py::arg("seed"), py::arg("epoch") = 0,
      py::arg("sample_id") = 0);
  // Erases `images` ((..., C, H, W) or channels last) in place with one
  // draw for all of them (torchvision draws once per call); the rectangle.
  m.def(
      "apply_erase",
      [](const EraseOp& op, py::array images, DType dtype, Layout layout, uint64_t seed) {
        Images v = ViewImages(images, dtype, layout, 3, "RandomErasing");
        ThrowIfError(CheckEraseOps({&op, 1}, dtype, v.channels));
        SampleRng rng = SampleRng::ForSample(seed, 0, 0, 0);
        const EraseRect r = DrawErase(op, v.height, v.width, rng);
        if (!r.erase) return r;
        std::vector<float> values;
        DrawEraseValues(op, r, v.channels, rng, &values);
        const size_t bytes = size_t{v.channels} * v.height * v.width * DTypeSize(dtype);
        py::gil_scoped_release release;
        for (uint32_t i = 0; i < v.count; ++i) {
          ApplyErase(r, values, op.random_value, dtype, layout, v.channels, v.height, v.width,
                     static_cast<uint8_t*>(v.data) + i * bytes);
        }
        return r;
      },
      py::arg("op"), py::arg("images"), py::arg("dtype"), py::arg("layout"), py::arg("seed"));
  // One rectangle with given values, for the exact comparison with F.erase.
  m.def(
      "erase_rect",
      [](py::array images, DType dtype, Layout layout, uint32_t top, uint32_t left, uint32_t height,
         uint32_t width, const std::vector<float>& values, bool per_pixel) {
        Images v = ViewImages(images, dtype, layout, 3, "erase");
        if (top + height > v.height || left + width > v.width ||
            values.size() != (per_pixel ? size_t{v.channels} * height * width : v.channels)) {
          ThrowIfError(InvalidArgumentError("erase: rectangle outside the image or wrong values"));
        }
        EraseRect r{true, top, left, height, width};
        const size_t bytes = size_t{v.channels} * v.height * v.width * DTypeSize(dtype);
        for (uint32_t i = 0; i < v.count; ++i) {
          ApplyErase(r, values, per_pixel, dtype, layout, v.channels, v.height, v.width,
                     static_cast<uint8_t*>(v.data) + i * bytes);
        }
      },
      py::arg("images"), py::arg("dtype"), py::arg("layout"), py::arg("top"), py::arg("left"),
      py::arg("height"), py::arg("width"), py::arg("values"), py::arg("per_pixel") = false);

  py::enum_<BatchMixKind>(m, "BatchMixKind")
      .value("MIXUP", BatchMixKind::kMixUp)
      .value("CUTMIX", BatchMixKind::kCutMix);
  py::class_<BatchMixOp>(m, "BatchMixOp")
      .def(py::init<>())
      .def_readwrite("kind", &BatchMixOp::kind)
      .def_readwrite("alpha", &BatchMixOp::alpha)
      .def_readwrite("num_classes", &BatchMixOp::num_classes)
      .def_readwrite("weight", &BatchMixOp::weight);
  py::class_<BatchMixParams>(m, "BatchMixParams")
      .def(py::init<>())
      .def_readwrite("kind", &BatchMixParams::kind)
      .def_readwrite("lam", &BatchMixParams::lam)
      .def_readwrite("label_lam", &BatchMixParams::label_lam)
      .def_readwrite("x1", &BatchMixParams::x1)
      .def_readwrite("y1", &BatchMixParams::y1)
      .def_readwrite("x2", &BatchMixParams::x2)
      .def_readwrite("y2", &BatchMixParams::y2);
  m.def(
      "check_batch_mix",
      [](const std::vector<BatchMixOp>& ops) { ThrowIfError(CheckBatchMix(ops)); },
      py::arg("choices"));
  // The parameters of batch `stream_id` (the loader: index * world_size + rank).
  m.def(
      "draw_batch_mix",
      [](const std::vector<BatchMixOp>& ops, uint32_t height, uint32_t width, uint64_t seed,
         uint64_t epoch, uint64_t stream_id) {
        ThrowIfError(CheckBatchMix(ops));
        SampleRng rng = SampleRng::ForSample(seed, epoch, stream_id, kBatchMixOpIndex);
        return DrawBatchMix(ops, height, width, rng);
      },
      py::arg("choices"), py::arg("height"), py::arg("width"), py::arg("seed"),
      py::arg("epoch") = 0, py::arg("stream_id") = 0);
  m.def(
      "sample_beta",
      [](double a, double b, uint64_t seed, uint64_t count) {
        py::array_t<double> out(static_cast<py::ssize_t>(count));
        SampleRng rng = SampleRng::ForSample(seed, 0, 0, kBatchMixOpIndex);
        for (uint64_t i = 0; i < count; ++i) out.mutable_data()[i] = SampleBeta(a, b, rng);
        return out;
      },
      py::arg("a"), py::arg("b"), py::arg("seed"), py::arg("count"));
  // Mixes `images` (N, C, H, W) or (N, H, W, C) in place; returns the
  // (N, num_classes) float32 soft labels.
  m.def(
      "apply_batch_mix",
      [](const BatchMixParams& p, py::array images, DType dtype, Layout layout,
         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& labels,
         uint32_t num_classes, const std::vector<uint64_t>& sample_ids) {
        const char* who = p.kind == BatchMixKind::kMixUp ? "MixUp" : "CutMix";
        Images v = ViewImages(images, dtype, layout, 4, who);
        if (images.ndim() != 4) {
          ThrowIfError(InvalidArgumentError(std::string(who) +
                                            ": expected a batch of 4 "
                                            "dimensions, got " +
                                            std::to_string(images.ndim())));
        }
        if (labels.ndim() != 1) {
          ThrowIfError(InvalidArgumentError(std::string(who) +
                                            ": labels should be of shape (batch_size,), got " +
                                            std::to_string(labels.ndim()) + " dimensions"));
        }
        if (num_classes < 1) {
          ThrowIfError(InvalidArgumentError(std::string(who) + ": num_classes must be >= 1"));
        }
        py::array_t<float> soft(
            {static_cast<py::ssize_t>(v.count), static_cast<py::ssize_t>(num_classes)});
        std::span<const int64_t> l(labels.data(), static_cast<size_t>(labels.size()));
        float* out = soft.mutable_data();
        Status st;
        {
          py::gil_scoped_release release;
          st = ApplyBatchMix(p, dtype, layout, v.count, v.channels, v.height, v.width, v.data, l,
                             num_classes, sample_ids, out);
        }
        ThrowIfError(st);
        return soft;
      },
      py::arg("params"), py::arg("images"), py::arg("dtype"), py::arg("layout"), py::arg("labels"),
      py::arg("num_classes"), py::arg("sample_ids") = std::vector<uint64_t>{});
}

}  // namespace

void RegisterPixelOps(py::module_& m) {
  RegisterAugmentOps(m);
  py::enum_<PixelOpKind>(m, "PixelOpKind")
      .value("COLOR_JITTER", PixelOpKind::kColorJitter)
      .value("GRAYSCALE", PixelOpKind::kGrayscale)
      .value("INVERT", PixelOpKind::kInvert)
      .value("POSTERIZE", PixelOpKind::kPosterize)
      .value("SOLARIZE", PixelOpKind::kSolarize)
      .value("AUTOCONTRAST", PixelOpKind::kAutocontrast)
      .value("EQUALIZE", PixelOpKind::kEqualize)
      .value("ADJUST_SHARPNESS", PixelOpKind::kAdjustSharpness)
      .value("GAUSSIAN_BLUR", PixelOpKind::kGaussianBlur)
      .value("ROTATION", PixelOpKind::kRotation)
      .value("AFFINE", PixelOpKind::kAffine)
      .value("TRIVIAL_AUGMENT_WIDE", PixelOpKind::kTrivialAugmentWide)
      .value("RAND_AUGMENT", PixelOpKind::kRandAugment)
      .value("AUTO_AUGMENT", PixelOpKind::kAutoAugment)
      .value("AUG_MIX", PixelOpKind::kAugMix)
      .value("VERTICAL_FLIP", PixelOpKind::kVerticalFlip);
  py::enum_<WarpInterpolation>(m, "WarpInterpolation")
      .value("NEAREST", WarpInterpolation::kNearest)
      .value("BILINEAR", WarpInterpolation::kBilinear);
  py::enum_<AffineTranslate>(m, "AffineTranslate")
      .value("PIXELS", AffineTranslate::kPixels)
      .value("ROUND_FRACTION", AffineTranslate::kRoundFraction)
      .value("RAND_AUGMENT", AffineTranslate::kRandAugment)
      .value("AUG_MIX", AffineTranslate::kAugMix);
  py::class_<PixelOp>(m, "PixelOp")
      .def(py::init<>())
      .def_readwrite("kind", &PixelOp::kind)
      .def_readwrite("p", &PixelOp::p)
      .def_readwrite("has_brightness", &PixelOp::has_brightness)
      .def_readwrite("has_contrast", &PixelOp::has_contrast)
      .def_readwrite("has_saturation", &PixelOp::has_saturation)
      .def_readwrite("has_hue", &PixelOp::has_hue)
      .def_readwrite("brightness", &PixelOp::brightness)
      .def_readwrite("contrast", &PixelOp::contrast)
      .def_readwrite("saturation", &PixelOp::saturation)
      .def_readwrite("hue", &PixelOp::hue)
      .def_readwrite("bits", &PixelOp::bits)
      .def_readwrite("threshold", &PixelOp::threshold)
      .def_readwrite("factor", &PixelOp::factor)
      .def_readwrite("kernel_width", &PixelOp::kernel_width)
      .def_readwrite("kernel_height", &PixelOp::kernel_height)
      .def_readwrite("sigma", &PixelOp::sigma)
      .def_readwrite("degrees", &PixelOp::degrees)
      .def_readwrite("has_translate", &PixelOp::has_translate)
      .def_readwrite("has_scale", &PixelOp::has_scale)
      .def_readwrite("has_shear", &PixelOp::has_shear)
      .def_readwrite("has_shear_y", &PixelOp::has_shear_y)
      .def_readwrite("translate", &PixelOp::translate)
      .def_readwrite("scale_range", &PixelOp::scale_range)
      .def_readwrite("shear", &PixelOp::shear)
      .def_readwrite("interpolation", &PixelOp::interpolation)
      .def_readwrite("has_fill", &PixelOp::has_fill)
      .def_readwrite("fill", &PixelOp::fill)
      .def_readwrite("num_ops", &PixelOp::num_ops)
      .def_readwrite("magnitude", &PixelOp::magnitude)
      .def_readwrite("num_magnitude_bins", &PixelOp::num_magnitude_bins)
      .def_readwrite("severity", &PixelOp::severity)
      .def_readwrite("mixture_width", &PixelOp::mixture_width)
      .def_readwrite("chain_depth", &PixelOp::chain_depth)
      .def_readwrite("alpha", &PixelOp::alpha)
      .def_readwrite("all_ops", &PixelOp::all_ops);
  py::enum_<PixelStepKind>(m, "PixelStepKind")
      .value("BRIGHTNESS", PixelStepKind::kBrightness)
      .value("CONTRAST", PixelStepKind::kContrast)
      .value("SATURATION", PixelStepKind::kSaturation)
      .value("HUE", PixelStepKind::kHue)
      .value("GRAYSCALE", PixelStepKind::kGrayscale)
      .value("INVERT", PixelStepKind::kInvert)
      .value("POSTERIZE", PixelStepKind::kPosterize)
      .value("SOLARIZE", PixelStepKind::kSolarize)
      .value("AUTOCONTRAST", PixelStepKind::kAutocontrast)
      .value("EQUALIZE", PixelStepKind::kEqualize)
      .value("SHARPNESS", PixelStepKind::kSharpness)
      .value("GAUSSIAN_BLUR", PixelStepKind::kGaussianBlur)
      .value("AFFINE", PixelStepKind::kAffine)
      .value("MIX_BEGIN", PixelStepKind::kMixBegin)
      .value("MIX_CHAIN", PixelStepKind::kMixChain)
      .value("MIX_END", PixelStepKind::kMixEnd)
      .value("VERTICAL_FLIP", PixelStepKind::kVerticalFlip);
  py::class_<PixelStep>(m, "PixelStep")
      .def(py::init<>())
      .def(py::init([](PixelStepKind kind, double value, uint32_t kw, uint32_t kh) {
             return PixelStep{kind, value, kw, kh};
           }),
           py::arg("kind"), py::arg("value") = 0.0, py::arg("kernel_width") = 0,
           py::arg("kernel_height") = 0)
      .def_readwrite("kind", &PixelStep::kind)
      .def_readwrite("value", &PixelStep::value)
      .def_readwrite("kernel_width", &PixelStep::kernel_width)
      .def_readwrite("kernel_height", &PixelStep::kernel_height)
      .def_readwrite("angle", &PixelStep::angle)
      .def_readwrite("scale", &PixelStep::scale)
      .def_readwrite("shear_x", &PixelStep::shear_x)
      .def_readwrite("shear_y", &PixelStep::shear_y)
      .def_readwrite("translate_x", &PixelStep::translate_x)
      .def_readwrite("translate_y", &PixelStep::translate_y)
      .def_readwrite("translate_unit", &PixelStep::translate_unit)
      .def_readwrite("magnitude_bins", &PixelStep::magnitude_bins)
      .def_readwrite("rotate", &PixelStep::rotate)
      .def_readwrite("corner_center", &PixelStep::corner_center)
      .def_readwrite("interpolation", &PixelStep::interpolation)
      .def_readwrite("has_fill", &PixelStep::has_fill)
      .def_readwrite("fill", &PixelStep::fill);
  // The steps `ops` become for sample `sample_id` of `epoch` under `seed`
  // (the loader's draws for an op's stream), for statistical tests.
  m.def(
      "check_pixel_ops", [](const std::vector<PixelOp>& ops) { ThrowIfError(CheckPixelOps(ops)); },
      py::arg("ops"));
  m.def("draw_pixel_steps", &Draw, py::arg("ops"), py::arg("seed"), py::arg("epoch") = 0,
        py::arg("sample_id") = 0);
  // A new (3, H, W) uint8 array: `image` through the steps (ValueError for
  // a list CheckPixelSteps refuses, e.g. AugMix's markers out of place).
  m.def("apply_pixel_steps", &Apply, py::arg("steps"), py::arg("image"));
  // `ops` with parameters drawn from `seed`: one image, outside a loader.
  m.def(
      "apply_pixel_ops",
      [](const std::vector<PixelOp>& ops, const Image& image, uint64_t seed) {
        return Apply(Draw(ops, seed, 0, 0), image);
      },
      py::arg("ops"), py::arg("image"), py::arg("seed"));
  // RandomCrop (t.crop RANDOM_CROP: size, padding, pad_if_needed, fill,
  // padding_mode) or CenterCrop (CENTER_CROP) on one (3, H, W) uint8 image,
  // the crop drawn from `seed` as in a loader (ChooseCrop). Returns (image,
  // top, left): the crop's corner in the padded image.
  m.def(
      "pad_crop",
      [](const Image& image, const ImageTransform& t, uint64_t seed) {
        const Image in = CopyChw(image);
        if (t.crop != CropMode::kRandomCrop && t.crop != CropMode::kCenterCrop) {
          ThrowIfError(
              InvalidArgumentError("pad_crop takes a RANDOM_CROP or CENTER_CROP transform"));
        }
        const auto h = static_cast<uint32_t>(in.shape(1)), w = static_cast<uint32_t>(in.shape(2));
        SampleRng rng = SampleRng::ForSample(seed, 0, 0, 0);
        const CropBox box = ChooseCrop(t, w, h, rng);
        image::PadCropPlan plan;
        ThrowIfError(image::PlanPadCrop(t, box, w, h, &plan));
        Image out({py::ssize_t{3}, py::ssize_t{t.height}, py::ssize_t{t.width}});
        {
          py::gil_scoped_release release;
          image::GatherPadCrop(plan, in.data(), 0, 0, 1, w, size_t{w} * h, t.pad_fill,
                               out.mutable_data());
        }
        return py::make_tuple(out, static_cast<int64_t>(box.y), static_cast<int64_t>(box.x));
      },
      py::arg("image"), py::arg("transform"), py::arg("seed"));
  // torchvision's resized_crop on one (3, H, W) uint8 image: `box` (x, y, w,
  // h) resized to out_height x out_width with Pillow's antialiased filters,
  // the loader's resample (ResizedCrop).
  m.def(
      "resized_crop",
      [](const Image& image, std::array<uint32_t, 4> box, uint32_t out_height, uint32_t out_width,
         Interpolation interpolation) {
        const Image in = CopyChw(image);
        const auto h = static_cast<uint32_t>(in.shape(1)), w = static_cast<uint32_t>(in.shape(2));
        Image out({py::ssize_t{3}, py::ssize_t{out_height}, py::ssize_t{out_width}});
        Status st;
        {
          py::gil_scoped_release release;
          RgbImage hwc{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
          const uint8_t* p = in.data();
          for (size_t i = 0, n = size_t{w} * h; i < n; ++i) {
            for (size_t c = 0; c < 3; ++c) hwc.pixels[i * 3 + c] = p[c * n + i];
          }
          Result<RgbImage> r = ResizedCrop(hwc, box[0], box[1], box[2], box[3], out_width,
                                           out_height, interpolation);
          st = r.status();
          if (r.ok()) {
            uint8_t* o = out.mutable_data();
            for (size_t i = 0, n = size_t{out_width} * out_height; i < n; ++i) {
              for (size_t c = 0; c < 3; ++c) o[c * n + i] = r->pixels[i * 3 + c];
            }
          }
        }
        ThrowIfError(st);
        return out;
      },
      py::arg("image"), py::arg("box"), py::arg("out_height"), py::arg("out_width"),
      py::arg("interpolation"));
  // The crop box ChooseCrop draws for a width x height image from `seed`:
  // (x, y, w, h) of RandomResizedCrop's box, torchvision's get_params.
  m.def(
      "choose_crop",
      [](const ImageTransform& t, uint32_t width, uint32_t height, uint64_t seed) {
        SampleRng rng = SampleRng::ForSample(seed, 0, 0, 0);
        const CropBox box = ChooseCrop(t, width, height, rng);
        return py::make_tuple(box.region_x, box.region_y, box.region_width, box.region_height);
      },
      py::arg("transform"), py::arg("width"), py::arg("height"), py::arg("seed"));
}

}  // namespace feedline::python
