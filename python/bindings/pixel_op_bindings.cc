// Binds the colour and pixel ops (PixelOp, PixelStep) and runs them on one
// image outside a loader, for feedline.transforms' callable ops and tests.
// Conversion only: the kernels are color_ops.cc's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "python/bindings/errors.h"

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

}  // namespace

void RegisterPixelOps(py::module_& m) {
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
      .value("RAND_AUGMENT", PixelOpKind::kRandAugment);
  py::enum_<WarpInterpolation>(m, "WarpInterpolation")
      .value("NEAREST", WarpInterpolation::kNearest)
      .value("BILINEAR", WarpInterpolation::kBilinear);
  py::enum_<AffineTranslate>(m, "AffineTranslate")
      .value("PIXELS", AffineTranslate::kPixels)
      .value("ROUND_FRACTION", AffineTranslate::kRoundFraction)
      .value("RAND_AUGMENT", AffineTranslate::kRandAugment);
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
      .def_readwrite("num_magnitude_bins", &PixelOp::num_magnitude_bins);
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
      .value("AFFINE", PixelStepKind::kAffine);
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
  // A new (3, H, W) uint8 array: `image` through the steps.
  m.def("apply_pixel_steps", &Apply, py::arg("steps"), py::arg("image"));
  // `ops` with parameters drawn from `seed`: one image, outside a loader.
  m.def(
      "apply_pixel_ops",
      [](const std::vector<PixelOp>& ops, const Image& image, uint64_t seed) {
        return Apply(Draw(ops, seed, 0, 0), image);
      },
      py::arg("ops"), py::arg("image"), py::arg("seed"));
}

}  // namespace feedline::python
