// Geometric pixel ops and policies: checks, draws and the warp (affine.h).
#include "src/image/affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <span>
#include <string>

#include "src/image/affine_hwy.h"

namespace feedline::image {
namespace {

double Radians(double degrees) { return degrees * std::numbers::pi / 180.0; }
double Degrees(double radians) { return radians * 180.0 / std::numbers::pi; }

// The value v2's _apply_grid_transform writes: round half to even of the
// float32 result, clamped to the uint8 range (bilinear stays in it).
inline uint8_t ToUint8(float v) {
  return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f));
}

// Python's angle % 360: in [0, 360).
double ReduceDegrees(double angle) {
  const double a = std::fmod(angle, 360.0);
  return a < 0 ? a + 360.0 : a;
}

// rotate_image's fast paths (center None) for an angle in [0, 360): exact
// copies, no sampling.
bool RotateExactly(double a, uint32_t w, uint32_t h, uint8_t* chw, std::vector<uint8_t>* scratch) {
  const size_t n = size_t{w} * h;
  if (a == 0) return true;
  const bool square = w == h;
  if (a != 180 && !(square && (a == 90 || a == 270))) return false;
  scratch->assign(chw, chw + 3 * n);
  for (int c = 0; c < 3; ++c) {
    const uint8_t* src = scratch->data() + c * n;
    uint8_t* dst = chw + c * n;
    for (uint32_t i = 0; i < h; ++i) {
      for (uint32_t j = 0; j < w; ++j) {
        size_t from;
        if (a == 180) {
          from = size_t{h - 1 - i} * w + (w - 1 - j);  // rot90(k=2)
        } else if (a == 90) {
          from = size_t{j} * w + (w - 1 - i);  // rot90(k=1): flip columns, transpose
        } else {
          from = size_t{h - 1 - j} * w + i;  // rot90(k=3): flip rows, transpose
        }
        dst[size_t{i} * w + j] = src[from];
      }
    }
  }
  return true;
}

int32_t TranslatePixels(const PixelStep& s, double value, uint32_t size) {
  switch (s.translate_unit) {
    case AffineTranslate::kPixels: return static_cast<int32_t>(std::clamp(value, -1e9, 1e9));
    case AffineTranslate::kRoundFraction:
      return static_cast<int32_t>(
          std::clamp(std::nearbyint(value * static_cast<double>(size)), -1e9, 1e9));
    case AffineTranslate::kRandAugment:
    case AffineTranslate::kAugMix: {
      const auto bin = static_cast<uint32_t>(std::fabs(value));
      const double end = s.translate_unit == AffineTranslate::kAugMix
                             ? static_cast<double>(size) / 3.0
                             : 150.0 / 331.0 * size;
      const double m = LinspaceF32(0.0, end, s.magnitude_bins, bin);
      return static_cast<int32_t>(value < 0 ? -m : m);  // int(): toward zero
    }
  }
  return 0;
}

// out(x, y) = src(x + dx, y + dy) per plane, `outside[c]` where that is
// not in the image.
void ShiftPlanes(const uint8_t* src, uint32_t w, uint32_t h, int64_t dx, int64_t dy,
                 const uint8_t outside[3], uint8_t* out) {
  const size_t n = size_t{w} * h;
  const auto iw = static_cast<int64_t>(w), ih = static_cast<int64_t>(h);
  // Columns [x0, x1) of each output row have a source pixel.
  const int64_t x0 = std::clamp<int64_t>(-dx, 0, iw), x1 = std::clamp<int64_t>(iw - dx, 0, iw);
  for (int c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < ih; ++y) {
      uint8_t* row = out + c * n + static_cast<size_t>(y) * w;
      const int64_t sy = y + dy;
      if (sy < 0 || sy >= ih || x0 >= x1) {
        std::memset(row, outside[c], w);
        continue;
      }
      std::memset(row, outside[c], static_cast<size_t>(x0));
      std::memcpy(row + x0, src + c * n + static_cast<size_t>(sy) * w + (x0 + dx),
                  static_cast<size_t>(x1 - x0));
      std::memset(row + x1, outside[c], static_cast<size_t>(iw - x1));
    }
  }
}

}  // namespace

std::array<double, 6> InverseAffineMatrix(double cx, double cy, double angle, double tx, double ty,
                                          double scale, double shear_x, double shear_y) {
  // M = T * C * R(angle) * S(scale) * SHy(shear_y) * SHx(shear_x) * C^-1;
  // its inverse, as torchvision writes it (det of the rotation-shear is 1).
  const double rot = Radians(angle), sx = Radians(shear_x), sy = Radians(shear_y);
  const double cos_sy = std::cos(sy), tan_sx = std::tan(sx);
  const double a = std::cos(rot - sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot - sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  std::array<double, 6> m = {d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0};
  const double cx_tx = cx + tx, cy_ty = cy + ty;
  m[2] += cx - m[0] * cx_tx - m[1] * cy_ty;
  m[5] += cy - m[3] * cx_tx - m[4] * cy_ty;
  return m;
}

float LinspaceF32(double start, double end, uint32_t steps, uint32_t index) {
  // ATen's linspace kernel: the first half counted from start, the second
  // from end, in the tensor's type, each a fused multiply-add as its
  // compiled kernel evaluates it (bit-exact with torch 2.14's CPU linspace
  // on the policies' tables; torch 1.13's differs in the last bit of a few).
  const auto s = static_cast<float>(start), e = static_cast<float>(end);
  if (steps <= 1) return s;
  const float step = (e - s) / static_cast<float>(steps - 1);
  if (index < steps / 2) return std::fma(step, static_cast<float>(index), s);
  return std::fma(-step, static_cast<float>(steps - index - 1), e);
}

void ApplyAffineStep(const PixelStep& s, uint32_t w, uint32_t h, uint8_t* chw,
                     std::vector<uint8_t>* scratch, bool reference) {
  // v2's rotate_image reduces the angle first and builds the matrix from
  // the reduced one (v1's rotate used it as given).
  const double angle = s.rotate ? ReduceDegrees(s.angle) : s.angle;
  if (s.rotate && RotateExactly(angle, w, h, chw, scratch)) return;
  // Centre and translation in pixels relative to the image centre (the
  // tensor path's convention; center=[0, 0] is the top-left corner).
  const double cx = s.corner_center ? -0.5 * w : 0.0, cy = s.corner_center ? -0.5 * h : 0.0;
  const double tx = s.rotate ? 0 : TranslatePixels(s, s.translate_x, w);
  const double ty = s.rotate ? 0 : TranslatePixels(s, s.translate_y, h);
  const std::array<double, 6> m =
      s.rotate ? InverseAffineMatrix(cx, cy, -angle, 0, 0, 1, 0, 0)
               : InverseAffineMatrix(cx, cy, angle, tx, ty, s.scale, s.shear_x, s.shear_y);
  // _affine_grid in float32: theta^T divided by (w/2, h/2), applied to the
  // centred output pixel centres; then grid_sample's unnormalisation.
  const float hw = 0.5f * static_cast<float>(w), hh = 0.5f * static_cast<float>(h);
  const float a0 = static_cast<float>(m[0]) / hw, a1 = static_cast<float>(m[1]) / hw,
              a2 = static_cast<float>(m[2]) / hw;
  const float b0 = static_cast<float>(m[3]) / hh, b1 = static_cast<float>(m[4]) / hh,
              b2 = static_cast<float>(m[5]) / hh;
  const size_t n = size_t{w} * h;
  // The source copy, with 4 bytes either side for the SIMD kernel's
  // 32-bit gathers (affine_hwy.h); NEAREST's SIMD path reads an RGBX copy
  // instead (below).
  const auto copy_planes = [&] {
    scratch->resize(3 * n + 8);
    std::memcpy(scratch->data() + 4, chw, 3 * n);
    return scratch->data() + 4;
  };
  const bool nearest = s.interpolation == WarpInterpolation::kNearest;
  float fill[3];
  uint8_t outside[3];  // the value of a pixel that maps outside the image
  for (int c = 0; c < 3; ++c) {
    fill[c] = static_cast<float>(s.fill[c]);
    outside[c] = s.has_fill ? ToUint8(fill[c]) : 0;
  }
  // A translation by whole pixels (RandAugment's, TrivialAugmentWide's and
  // AugMix's TranslateX/Y, RandomAffine's translate alone): output (x, y) is
  // source (x + m2, y + m5), or outside. The grid's float32 coordinates land
  // within rounding of those integers, far from any half pixel, so both
  // interpolations give the source bytes (tests/image/affine_test.cc checks
  // this path against the grid's reference): row copies, no gathers.
  if (!reference && m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 && m[2] == std::trunc(m[2]) &&
      m[5] == std::trunc(m[5]) && std::fabs(m[2]) < 1e9 && std::fabs(m[5]) < 1e9) {
    ShiftPlanes(copy_planes(), w, h, static_cast<int64_t>(m[2]), static_cast<int64_t>(m[5]),
                outside, chw);
    return;
  }
  // The output pixel centres' x, once per image (linspace per row is the
  // same for every row), and each row's y; col_x padded for the kernel's
  // last vector.
  const size_t lanes = reference ? 0 : WarpLanes();
  std::vector<float> col_x(w + lanes, 0.0f), row_y(h);
  for (uint32_t j = 0; j < w; ++j) col_x[j] = LinspaceF32((1.0 - w) * 0.5, (w - 1.0) * 0.5, w, j);
  for (uint32_t i = 0; i < h; ++i) row_y[i] = LinspaceF32((1.0 - h) * 0.5, (h - 1.0) * 0.5, h, i);
  if (!reference && 3 * n < (size_t{1} << 31) - 16) {
    const WarpGrid g{a0, a1, a2, b0, b1, b2, hw, hh};
    if (nearest) {
      // Whole pixels: one 32-bit gather each from an RGBX copy (the
      // scratch's data is 16-byte aligned), not one per plane.
      scratch->resize(4 * n);
      auto* rgbx = reinterpret_cast<uint32_t*>(scratch->data());
      InterleaveRgbx(chw, n, rgbx);
      WarpPlanes(nullptr, w, h, col_x.data(), row_y.data(), g, true, nullptr, outside, rgbx, chw);
      return;
    }
    WarpPlanes(copy_planes(), w, h, col_x.data(), row_y.data(), g, false,
               s.has_fill ? fill : nullptr, outside, nullptr, chw);
    return;
  }
  const uint8_t* src = copy_planes();
  // The scalar reference, pixel by pixel.
  const auto iw = static_cast<int32_t>(w), ih = static_cast<int32_t>(h);
  for (uint32_t i = 0; i < h; ++i) {
    const float y = row_y[i];
    for (uint32_t j = 0; j < w; ++j) {
      const float x = col_x[j];
      const float gx = x * a0 + y * a1 + a2, gy = x * b0 + y * b1 + b2;
      const float ix = (gx + 1.0f) * hw - 0.5f, iy = (gy + 1.0f) * hh - 0.5f;
      const size_t o = size_t{i} * w + j;
      // Far outside (a shear near 90 degrees, a tiny scale) or not a
      // number: only the fill (and no integer conversion of the coordinate).
      if (!(std::fabs(ix) < 1e9f && std::fabs(iy) < 1e9f)) {
        for (int c = 0; c < 3; ++c) chw[c * n + o] = outside[c];
        continue;
      }
      if (nearest) {
        const auto xn = static_cast<int64_t>(std::nearbyint(ix)),
                   yn = static_cast<int64_t>(std::nearbyint(iy));
        const bool in = xn >= 0 && xn < iw && yn >= 0 && yn < ih;
        for (int c = 0; c < 3; ++c) {
          chw[c * n + o] =
              in ? src[c * n + static_cast<size_t>(yn) * w + static_cast<size_t>(xn)] : outside[c];
        }
        continue;
      }
      const float fx = std::floor(ix), fy = std::floor(iy);
      const float wx1 = ix - fx, wx0 = (fx + 1.0f) - ix;  // weights of columns fx + 1 and fx
      const float wy1 = iy - fy, wy0 = (fy + 1.0f) - iy;
      const float wt[4] = {wx0 * wy0, wx1 * wy0, wx0 * wy1, wx1 * wy1};  // nw, ne, sw, se
      const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      const int64_t xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
      float mask = 0;
      float acc[3] = {0, 0, 0};
      for (int k = 0; k < 4; ++k) {
        if (xs[k] < 0 || xs[k] >= iw || ys[k] < 0 || ys[k] >= ih) continue;
        const size_t at = static_cast<size_t>(ys[k]) * w + static_cast<size_t>(xs[k]);
        mask += wt[k];
        for (int c = 0; c < 3; ++c) acc[c] += static_cast<float>(src[c * n + at]) * wt[k];
      }
      for (int c = 0; c < 3; ++c) {
        const float v = s.has_fill ? (acc[c] - fill[c]) * mask + fill[c] : acc[c];
        chw[c * n + o] = ToUint8(v);
      }
    }
  }
}

// --- Ops, checks, draws ---------------------------------------------------

bool IsGeometricPixelOp(PixelOpKind kind) {
  return kind == PixelOpKind::kRotation || kind == PixelOpKind::kAffine ||
         kind == PixelOpKind::kTrivialAugmentWide || kind == PixelOpKind::kRandAugment ||
         kind == PixelOpKind::kAutoAugment || kind == PixelOpKind::kAugMix;
}

namespace {

// torchvision's _augmentation_space(10, ...) (AugMix: its _PARAMETER_MAX).
constexpr uint32_t kAutoAugmentBins = 10;

bool Ordered(const std::array<double, 2>& r) {
  return std::isfinite(r[0]) && std::isfinite(r[1]) && r[0] <= r[1];
}

}  // namespace

Status CheckGeometricPixelOp(const PixelOp& op) {
  for (double f : op.fill) {
    if (op.has_fill && !(f >= 0 && f <= 255)) {
      return InvalidArgumentError("fill values must be in [0, 255] for uint8 images");
    }
  }
  if (op.kind == PixelOpKind::kRotation || op.kind == PixelOpKind::kAffine) {
    if (!Ordered(op.degrees)) return InvalidArgumentError("degrees must be a range lo <= hi");
  }
  if (op.kind == PixelOpKind::kAffine) {
    if (op.has_translate && !(op.translate[0] >= 0 && op.translate[0] <= 1 &&
                              op.translate[1] >= 0 && op.translate[1] <= 1)) {
      return InvalidArgumentError("translate values should be between 0 and 1");
    }
    if (op.has_scale && !(Ordered(op.scale_range) && op.scale_range[0] > 0)) {
      return InvalidArgumentError("scale values should be positive (0 < lo <= hi)");
    }
    if (op.has_shear && !(Ordered({op.shear[0], op.shear[1]}) &&
                          (!op.has_shear_y || Ordered({op.shear[2], op.shear[3]})))) {
      return InvalidArgumentError("shear must be ranges lo <= hi");
    }
  }
  if (op.kind == PixelOpKind::kTrivialAugmentWide || op.kind == PixelOpKind::kRandAugment) {
    if (op.num_magnitude_bins < 2 || op.num_magnitude_bins > 100000) {
      return InvalidArgumentError("num_magnitude_bins must be in 2..100000");
    }
  }
  if (op.kind == PixelOpKind::kAugMix) {
    if (op.severity < 1 || op.severity > kAutoAugmentBins) {
      return InvalidArgumentError("The severity must be between [1, 10]. Got " +
                                  std::to_string(op.severity) + " instead.");
    }
    if (op.mixture_width < 1 || op.mixture_width > kMaxAugMixWidth) {
      return InvalidArgumentError("mixture_width must be in 1.." + std::to_string(kMaxAugMixWidth) +
                                  ", got " + std::to_string(op.mixture_width));
    }
    if (op.chain_depth > kMaxAugMixDepth) {
      return InvalidArgumentError("chain_depth must be at most " + std::to_string(kMaxAugMixDepth) +
                                  " (<= 0: uniform in 1..3), got " +
                                  std::to_string(op.chain_depth));
    }
    if (!(op.alpha > 0 && std::isfinite(op.alpha))) {
      return InvalidArgumentError(
          "alpha must be positive (the Dirichlet and Beta parameter), got " +
          std::to_string(op.alpha));
    }
  }
  if ((op.kind == PixelOpKind::kAutoAugment || op.kind == PixelOpKind::kAugMix) &&
      op.num_magnitude_bins != kAutoAugmentBins) {
    return InvalidArgumentError(
        std::string(op.kind == PixelOpKind::kAugMix ? "AugMix" : "AutoAugment") +
        "'s magnitudes come in " + std::to_string(kAutoAugmentBins) + " bins, not " +
        std::to_string(op.num_magnitude_bins));
  }
  if (op.kind == PixelOpKind::kRandAugment) {
    if (op.magnitude >= op.num_magnitude_bins) {
      return InvalidArgumentError("magnitude " + std::to_string(op.magnitude) +
                                  " must be below num_magnitude_bins " +
                                  std::to_string(op.num_magnitude_bins));
    }
    if (op.num_ops > 64) return InvalidArgumentError("num_ops must be in 0..64");
  }
  return Status::OK();
}

namespace {

// The ops of TrivialAugmentWide and RandAugment, in torchvision's order;
// then kInvert, which only AutoAugment's sub-policies use. (AugMix's order
// is kAugMixOps'.)
enum class PolicyOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};
constexpr uint32_t kNumPolicyOps = 14;  // the uniform draws: kIdentity .. kEqualize

PixelStep AffineStep(const PixelOp& op) {
  PixelStep s;
  s.kind = PixelStepKind::kAffine;
  s.interpolation = op.interpolation;
  s.has_fill = op.has_fill;
  s.fill = op.fill;
  return s;
}

// Whose magnitude tables a policy op takes. AugMix's are RandAugment's but
// for translations (W / 3 instead of 150 / 331 W) and Posterize (4 - ...
// bits instead of 8 - ...).
enum class Ranges { kWide, kRandAugment, kAugMix };

// One policy op at bin `bin` of `ranges`' tables, signed when `negative`.
void PolicyStep(const PixelOp& op, PolicyOp which, uint32_t bin, bool negative, Ranges ranges,
                std::vector<PixelStep>* steps) {
  const bool wide = ranges == Ranges::kWide;
  const uint32_t bins = op.num_magnitude_bins;
  auto signed_mag = [&](double hi) {
    const double m = LinspaceF32(0.0, hi, bins, bin);
    return negative ? -m : m;
  };
  const double colour_hi = wide ? 0.99 : 0.9;
  PixelStep s = AffineStep(op);
  switch (which) {
    case PolicyOp::kIdentity: return;
    case PolicyOp::kShearX:
    case PolicyOp::kShearY: {
      const double shear = Degrees(std::atan(signed_mag(wide ? 0.99 : 0.3)));
      (which == PolicyOp::kShearX ? s.shear_x : s.shear_y) = shear;
      s.corner_center = true;
      break;
    }
    case PolicyOp::kTranslateX:
    case PolicyOp::kTranslateY: {
      double t;
      if (wide) {
        t = std::trunc(signed_mag(32.0));  // int(magnitude)
      } else {
        // Depends on the image size.
        s.translate_unit =
            ranges == Ranges::kAugMix ? AffineTranslate::kAugMix : AffineTranslate::kRandAugment;
        s.magnitude_bins = bins;
        t = negative ? -static_cast<double>(bin) : bin;
      }
      (which == PolicyOp::kTranslateX ? s.translate_x : s.translate_y) = t;
      break;
    }
    case PolicyOp::kRotate:
      s.rotate = true;
      s.angle = signed_mag(wide ? 135.0 : 30.0);
      break;
    case PolicyOp::kBrightness:
    case PolicyOp::kColor:
    case PolicyOp::kContrast:
    case PolicyOp::kSharpness: {
      // Factor 1 + m of the colour step each stands for (Color: saturation).
      constexpr PixelStepKind kColourStep[] = {PixelStepKind::kBrightness,
                                               PixelStepKind::kSaturation, PixelStepKind::kContrast,
                                               PixelStepKind::kSharpness};
      const auto k = static_cast<size_t>(which) - static_cast<size_t>(PolicyOp::kBrightness);
      steps->push_back({kColourStep[k], 1.0 + signed_mag(colour_hi)});
      return;
    }
    case PolicyOp::kPosterize: {
      // base - (arange(bins) / ((bins - 1) / k)).round().int(), in float32
      // (base 8; AugMix's 4).
      const auto div = static_cast<float>((bins - 1) / (wide ? 6.0 : 4.0));
      const float q = std::nearbyint(static_cast<float>(bin) / div);
      const double base = ranges == Ranges::kAugMix ? 4.0 : 8.0;
      steps->push_back({PixelStepKind::kPosterize, std::clamp(base - q, 0.0, 8.0)});
      return;
    }
    case PolicyOp::kSolarize:
      // v2: bound * linspace(1.0, 0.0, bins)[bin] (v1: linspace(255.0, 0.0)).
      steps->push_back({PixelStepKind::kSolarize, 255.0 * LinspaceF32(1.0, 0.0, bins, bin)});
      return;
    case PolicyOp::kAutoContrast: steps->push_back({PixelStepKind::kAutocontrast}); return;
    case PolicyOp::kEqualize: steps->push_back({PixelStepKind::kEqualize}); return;
    case PolicyOp::kInvert: steps->push_back({PixelStepKind::kInvert}); return;
  }
  steps->push_back(s);
}

bool IsSigned(PolicyOp op) {
  return op != PolicyOp::kIdentity && op != PolicyOp::kPosterize && op != PolicyOp::kSolarize &&
         op != PolicyOp::kAutoContrast && op != PolicyOp::kEqualize && op != PolicyOp::kInvert;
}

// AutoAugment's ImageNet policy (Cubuk et al. 2019, as torchvision holds
// it): 25 sub-policies of two (op, probability, magnitude bin) each; bin
// -1 for the ops without a magnitude. tests/python/test_affine_policies.py
// compares the draws with torchvision's own table.
struct SubPolicyOp {
  PolicyOp op;
  double p;
  int bin;
};
constexpr std::array<std::array<SubPolicyOp, 2>, 25> kImageNetPolicy = {{
    {{{PolicyOp::kPosterize, 0.4, 8}, {PolicyOp::kRotate, 0.6, 9}}},
    {{{PolicyOp::kSolarize, 0.6, 5}, {PolicyOp::kAutoContrast, 0.6, -1}}},
    {{{PolicyOp::kEqualize, 0.8, -1}, {PolicyOp::kEqualize, 0.6, -1}}},
    {{{PolicyOp::kPosterize, 0.6, 7}, {PolicyOp::kPosterize, 0.6, 6}}},
    {{{PolicyOp::kEqualize, 0.4, -1}, {PolicyOp::kSolarize, 0.2, 4}}},
    {{{PolicyOp::kEqualize, 0.4, -1}, {PolicyOp::kRotate, 0.8, 8}}},
    {{{PolicyOp::kSolarize, 0.6, 3}, {PolicyOp::kEqualize, 0.6, -1}}},
    {{{PolicyOp::kPosterize, 0.8, 5}, {PolicyOp::kEqualize, 1.0, -1}}},
    {{{PolicyOp::kRotate, 0.2, 3}, {PolicyOp::kSolarize, 0.6, 8}}},
    {{{PolicyOp::kEqualize, 0.6, -1}, {PolicyOp::kPosterize, 0.4, 6}}},
    {{{PolicyOp::kRotate, 0.8, 8}, {PolicyOp::kColor, 0.4, 0}}},
    {{{PolicyOp::kRotate, 0.4, 9}, {PolicyOp::kEqualize, 0.6, -1}}},
    {{{PolicyOp::kEqualize, 0.0, -1}, {PolicyOp::kEqualize, 0.8, -1}}},
    {{{PolicyOp::kInvert, 0.6, -1}, {PolicyOp::kEqualize, 1.0, -1}}},
    {{{PolicyOp::kColor, 0.6, 4}, {PolicyOp::kContrast, 1.0, 8}}},
    {{{PolicyOp::kRotate, 0.8, 8}, {PolicyOp::kColor, 1.0, 2}}},
    {{{PolicyOp::kColor, 0.8, 8}, {PolicyOp::kSolarize, 0.8, 7}}},
    {{{PolicyOp::kSharpness, 0.4, 7}, {PolicyOp::kInvert, 0.6, -1}}},
    {{{PolicyOp::kShearX, 0.6, 5}, {PolicyOp::kEqualize, 1.0, -1}}},
    {{{PolicyOp::kColor, 0.4, 0}, {PolicyOp::kEqualize, 0.6, -1}}},
    {{{PolicyOp::kEqualize, 0.4, -1}, {PolicyOp::kSolarize, 0.2, 4}}},
    {{{PolicyOp::kSolarize, 0.6, 5}, {PolicyOp::kAutoContrast, 0.6, -1}}},
    {{{PolicyOp::kInvert, 0.6, -1}, {PolicyOp::kEqualize, 1.0, -1}}},
    {{{PolicyOp::kColor, 0.6, 4}, {PolicyOp::kContrast, 1.0, 8}}},
    {{{PolicyOp::kEqualize, 0.8, -1}, {PolicyOp::kEqualize, 0.6, -1}}},
}};

// AugMix's ops in torchvision's order (_PARTIAL_AUGMENTATION_SPACE, then
// with all_ops the colour four).
constexpr std::array<PolicyOp, 13> kAugMixOps = {
    PolicyOp::kShearX,    PolicyOp::kShearY,     PolicyOp::kTranslateX, PolicyOp::kTranslateY,
    PolicyOp::kRotate,    PolicyOp::kPosterize,  PolicyOp::kSolarize,   PolicyOp::kAutoContrast,
    PolicyOp::kEqualize,  PolicyOp::kBrightness, PolicyOp::kColor,      PolicyOp::kContrast,
    PolicyOp::kSharpness,
};
constexpr size_t kAugMixPartialOps = 9;

bool HasMagnitude(PolicyOp op) {
  return op != PolicyOp::kIdentity && op != PolicyOp::kAutoContrast && op != PolicyOp::kEqualize &&
         op != PolicyOp::kInvert;
}

// torchvision's AugMix.forward: the Beta weight of the original (the first
// of a Dirichlet([alpha, alpha])), the chains' Dirichlet weights (scaled by
// the rest), then per chain its depth and per op: the op, its bin in
// [0, severity) when it has magnitudes, its sign when signed.
void DrawAugMix(const PixelOp& op, SampleRng& rng, std::vector<PixelStep>* steps) {
  const double original = SampleBeta(op.alpha, op.alpha, rng);
  std::array<double, kMaxAugMixWidth> weights;
  const std::span<double> w(weights.data(), op.mixture_width);
  SampleDirichlet(op.alpha, w, rng);
  const size_t num_ops = op.all_ops ? kAugMixOps.size() : kAugMixPartialOps;
  steps->push_back({PixelStepKind::kMixBegin, original});
  for (double chain_weight : w) {
    steps->push_back({PixelStepKind::kMixChain, chain_weight * (1.0 - original)});
    const uint64_t depth =
        op.chain_depth > 0 ? static_cast<uint64_t>(op.chain_depth) : 1 + rng.UniformInt(3);
    for (uint64_t d = 0; d < depth; ++d) {
      const PolicyOp which = kAugMixOps[rng.UniformInt(num_ops)];
      const auto bin = HasMagnitude(which) ? static_cast<uint32_t>(rng.UniformInt(op.severity)) : 0;
      const bool negative = IsSigned(which) && rng.Bernoulli(0.5);
      PolicyStep(op, which, bin, negative, Ranges::kAugMix, steps);
    }
  }
  steps->push_back({PixelStepKind::kMixEnd});
}

}  // namespace

void DrawGeometricPixelOp(const PixelOp& op, SampleRng& rng, std::vector<PixelStep>* steps) {
  switch (op.kind) {
    case PixelOpKind::kRotation: {
      PixelStep s = AffineStep(op);
      s.rotate = true;
      s.angle = rng.Uniform(op.degrees[0], op.degrees[1]);
      steps->push_back(s);
      return;
    }
    case PixelOpKind::kAffine: {
      // RandomAffine.get_params / make_params: angle, translate, scale,
      // shear x then y, each drawn only when given.
      PixelStep s = AffineStep(op);
      s.angle = rng.Uniform(op.degrees[0], op.degrees[1]);
      if (op.has_translate) {
        s.translate_unit = AffineTranslate::kRoundFraction;
        s.translate_x = rng.Uniform(-op.translate[0], op.translate[0]);
        s.translate_y = rng.Uniform(-op.translate[1], op.translate[1]);
      }
      if (op.has_scale) s.scale = rng.Uniform(op.scale_range[0], op.scale_range[1]);
      if (op.has_shear) {
        s.shear_x = rng.Uniform(op.shear[0], op.shear[1]);
        if (op.has_shear_y) s.shear_y = rng.Uniform(op.shear[2], op.shear[3]);
      }
      steps->push_back(s);
      return;
    }
    case PixelOpKind::kTrivialAugmentWide: {
      const auto which = static_cast<PolicyOp>(rng.UniformInt(kNumPolicyOps));
      const auto bin = static_cast<uint32_t>(rng.UniformInt(op.num_magnitude_bins));
      const bool negative = IsSigned(which) && rng.Bernoulli(0.5);
      PolicyStep(op, which, bin, negative, Ranges::kWide, steps);
      return;
    }
    case PixelOpKind::kRandAugment:
      for (uint32_t k = 0; k < op.num_ops; ++k) {
        const auto which = static_cast<PolicyOp>(rng.UniformInt(kNumPolicyOps));
        const bool negative = IsSigned(which) && rng.Bernoulli(0.5);
        PolicyStep(op, which, op.magnitude, negative, Ranges::kRandAugment, steps);
      }
      return;
    case PixelOpKind::kAutoAugment: {
      // torchvision's get_params: the sub-policy, then both probabilities
      // and both signs, drawn up front; RandAugment's magnitude ranges.
      const auto& sub = kImageNetPolicy[rng.UniformInt(kImageNetPolicy.size())];
      const double prob[2] = {rng.Uniform(), rng.Uniform()};
      const bool negative[2] = {rng.Bernoulli(0.5), rng.Bernoulli(0.5)};
      for (int i = 0; i < 2; ++i) {
        if (prob[i] > sub[i].p) continue;
        const uint32_t bin = sub[i].bin < 0 ? 0 : static_cast<uint32_t>(sub[i].bin);
        PolicyStep(op, sub[i].op, bin, IsSigned(sub[i].op) && negative[i], Ranges::kRandAugment,
                   steps);
      }
      return;
    }
    case PixelOpKind::kAugMix: DrawAugMix(op, rng, steps); return;
    default: return;
  }
}

}  // namespace feedline::image
