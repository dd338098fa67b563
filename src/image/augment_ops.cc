// The ops after normalisation (RandomErasing) and on batches (MixUp,
// CutMix), with torchvision.transforms.v2's semantics (feedline/image.h).
//
// Random parameters come from a SampleRng: the sample's own stream for the
// erase (drawn after the crop, flip and pixel ops), a batch's stream for the
// mixes (python/feedline/_batch.py derives it from seed, epoch, rank and
// batch index), so the bytes do not depend on threads or resumes.
//
// The blends mirror torch's CPU arithmetic on float tensors with a Python
// scalar: the scalar is cast to float, each product is rounded to the
// tensor's dtype, then the sum; for float32 that is plain float arithmetic
// (no FMA: the library is built for baseline x86-64, which has none).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "feedline/image.h"
#include "src/image/half.h"

namespace feedline {

namespace {

using image::BFloat16ToFloat;
using image::FloatToBFloat16;
using image::FloatToHalf;
using image::HalfToFloat;

// One element type's load, round and store.
template <DType D>
struct Elem;
template <>
struct Elem<DType::kFloat32> {
  using T = float;
  static float Load(T v) { return v; }
  static T Store(float f) { return f; }
  static float Round(float f) { return f; }
};
template <>
struct Elem<DType::kFloat16> {
  using T = uint16_t;
  static float Load(T v) { return HalfToFloat(v); }
  static T Store(float f) { return FloatToHalf(f); }
  static float Round(float f) { return HalfToFloat(FloatToHalf(f)); }
};
template <>
struct Elem<DType::kBFloat16> {
  using T = uint16_t;
  static float Load(T v) { return BFloat16ToFloat(v); }
  static T Store(float f) { return FloatToBFloat16(f); }
  static float Round(float f) { return BFloat16ToFloat(FloatToBFloat16(f)); }
};
template <>
struct Elem<DType::kUInt8> {
  using T = uint8_t;
  static float Load(T v) { return v; }
  // torch's float -> uint8 copy truncates; values were checked to [0, 255].
  static T Store(float f) { return static_cast<uint8_t>(f); }
  static float Round(float f) { return f; }
};

// Two independent standard normal draws from two uniforms (Box-Muller;
// 1 - Uniform() is in (0, 1], so the log is finite).
std::pair<double, double> NormalPair(SampleRng& rng) {
  const double radius = std::sqrt(-2.0 * std::log(1.0 - rng.Uniform()));
  const double angle = 2.0 * std::numbers::pi * rng.Uniform();
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

double Normal(SampleRng& rng) { return NormalPair(rng).first; }

// log of a Gamma(a, 1) draw. Marsaglia and Tsang (2000) for a >= 1; for a < 1
// Gamma(a) = Gamma(a + 1) * U^(1/a), kept in logs (U^(1/a) underflows for
// small a).
double LogGamma(double a, SampleRng& rng) {
  if (a < 1.0) {
    const double u = 1.0 - rng.Uniform();
    return LogGamma(a + 1.0, rng) + std::log(u) / a;
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = Normal(rng);
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = 1.0 - rng.Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
  }
}

Status BadErase(size_t i, const std::string& what) {
  return InvalidArgumentError("RandomErasing " + std::to_string(i) + ": " + what);
}

std::string_view MixName(BatchMixKind k) { return k == BatchMixKind::kMixUp ? "MixUp" : "CutMix"; }

// Image i's element (c, y, x) offset, for both layouts.
struct Geometry {
  Layout layout;
  uint32_t channels, height, width;
  size_t ImageSize() const { return size_t{channels} * height * width; }
  size_t At(uint32_t c, uint32_t y, uint32_t x) const {
    return layout == Layout::kCHW ? (size_t{c} * height + y) * width + x
                                  : (size_t{y} * width + x) * channels + c;
  }
};

template <DType D>
void EraseTyped(const EraseRect& r, std::span<const float> values, bool per_pixel,
                const Geometry& g, void* image) {
  using E = Elem<D>;
  auto* px = static_cast<typename E::T*>(image);
  for (uint32_t c = 0; c < g.channels; ++c) {
    const typename E::T constant = E::Store(per_pixel ? 0.0f : values[c]);
    for (uint32_t y = 0; y < r.height; ++y) {
      for (uint32_t x = 0; x < r.width; ++x) {
        px[g.At(c, r.top + y, r.left + x)] =
            per_pixel ? E::Store(values[(size_t{c} * r.height + y) * r.width + x]) : constant;
      }
    }
  }
}

// out = round(round(partner * (1 - lam)) + round(self * lam)), images from
// the last down so that each partner (the previous image) is still the
// original; the last image is saved first for image 0.
template <DType D>
void MixUpTyped(double lam, uint32_t n, size_t image_size, void* images) {
  using E = Elem<D>;
  using T = typename E::T;
  auto* px = static_cast<T*>(images);
  const auto l = static_cast<float>(lam), m = static_cast<float>(1.0 - lam);
  std::vector<T> last(px + (n - 1) * image_size, px + n * image_size);
  for (uint32_t i = n; i-- > 0;) {
    T* self = px + i * image_size;
    const T* partner = i > 0 ? px + (i - 1) * image_size : last.data();
    for (size_t k = 0; k < image_size; ++k) {
      const float a = E::Round(E::Load(partner[k]) * m), b = E::Round(E::Load(self[k]) * l);
      self[k] = E::Store(a + b);
    }
  }
}

template <typename T>
void CutMixTyped(const BatchMixParams& p, uint32_t n, const Geometry& g, void* images) {
  auto* px = static_cast<T*>(images);
  const size_t size = g.ImageSize();
  std::vector<T> last(px + (n - 1) * size, px + n * size);
  for (uint32_t i = n; i-- > 0;) {
    T* self = px + i * size;
    const T* partner = i > 0 ? px + (i - 1) * size : last.data();
    for (uint32_t c = 0; c < g.channels; ++c) {
      for (uint32_t y = p.y1; y < p.y2; ++y) {
        for (uint32_t x = p.x1; x < p.x2; ++x) self[g.At(c, y, x)] = partner[g.At(c, y, x)];
      }
    }
  }
}

}  // namespace

Status CheckEraseOps(std::span<const EraseOp> ops, DType dtype, uint32_t channels) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const EraseOp& op = ops[i];
    if (!(op.p >= 0 && op.p <= 1)) return BadErase(i, "p must be in [0, 1]");
    if (!(op.scale[0] >= 0 && op.scale[0] <= op.scale[1] && op.scale[1] <= 1)) {
      return BadErase(i, "scale (" + std::to_string(op.scale[0]) + ", " +
                             std::to_string(op.scale[1]) + ") must satisfy 0 <= min <= max <= 1");
    }
    if (!(op.ratio[0] > 0 && op.ratio[0] <= op.ratio[1] && std::isfinite(op.ratio[1]))) {
      return BadErase(i, "ratio (" + std::to_string(op.ratio[0]) + ", " +
                             std::to_string(op.ratio[1]) + ") must satisfy 0 < min <= max");
    }
    if (!op.random_value && op.value.size() != 1 && op.value.size() != channels) {
      return BadErase(i, "value has " + std::to_string(op.value.size()) +
                             " entries; it should have either a single value or " +
                             std::to_string(channels) + " (number of image channels)");
    }
    if (dtype == DType::kUInt8) {
      if (op.random_value) {
        return BadErase(i,
                        "value='random' on a uint8 output: torchvision would cast standard "
                        "normal noise to uint8; not supported (erase a float output)");
      }
      for (float v : op.value) {
        if (!(v >= 0 && v <= 255)) {
          return BadErase(i, "value " + std::to_string(v) +
                                 " on a uint8 output must be in [0, 255] (torchvision casts it)");
        }
      }
    } else if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
      return BadErase(i, "dtype " + std::string(DTypeName(dtype)) + " is not an image dtype");
    }
  }
  return Status::OK();
}

EraseRect DrawErase(const EraseOp& op, uint32_t height, uint32_t width, SampleRng& rng) {
  EraseRect r;
  if (!rng.Bernoulli(op.p)) return r;  // _RandomApplyTransform: rand(1) >= p returns the input
  const double area = static_cast<double>(height) * width;
  const double log_r0 = std::log(op.ratio[0]), log_r1 = std::log(op.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.Uniform(op.scale[0], op.scale[1]);
    const double aspect = std::exp(rng.Uniform(log_r0, log_r1));
    // int(round(...)): Python rounds half to even, as nearbyint does.
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    r.erase = true;
    r.height = static_cast<uint32_t>(h);
    r.width = static_cast<uint32_t>(w);
    r.top = static_cast<uint32_t>(rng.UniformInt(uint64_t{height} - r.height + 1));
    r.left = static_cast<uint32_t>(rng.UniformInt(uint64_t{width} - r.width + 1));
    return r;
  }
  return r;  // every attempt failed: torchvision returns the image unchanged
}

void DrawEraseValues(const EraseOp& op, const EraseRect& r, uint32_t channels, SampleRng& rng,
                     std::vector<float>* values) {
  values->clear();
  if (op.random_value) {
    // Box-Muller's two outputs per pair of uniforms (the noise is the
    // erase's cost: ~20 ns per erased value for one log, sqrt and cos each).
    values->resize(size_t{channels} * r.height * r.width);
    for (size_t k = 0; k < values->size(); k += 2) {
      const auto [a, b] = NormalPair(rng);
      (*values)[k] = static_cast<float>(a);
      if (k + 1 < values->size()) (*values)[k + 1] = static_cast<float>(b);
    }
    return;
  }
  for (uint32_t c = 0; c < channels; ++c) {
    values->push_back(op.value.size() == 1 ? op.value[0] : op.value[c]);
  }
}

void ApplyErase(const EraseRect& r, std::span<const float> values, bool per_pixel, DType dtype,
                Layout layout, uint32_t channels, uint32_t height, uint32_t width, void* image) {
  if (!r.erase) return;
  const Geometry g{layout, channels, height, width};
  switch (dtype) {
    case DType::kFloat32: EraseTyped<DType::kFloat32>(r, values, per_pixel, g, image); break;
    case DType::kFloat16: EraseTyped<DType::kFloat16>(r, values, per_pixel, g, image); break;
    case DType::kBFloat16: EraseTyped<DType::kBFloat16>(r, values, per_pixel, g, image); break;
    case DType::kUInt8: EraseTyped<DType::kUInt8>(r, values, per_pixel, g, image); break;
    default: break;  // refused by CheckEraseOps
  }
}

Status CheckBatchMix(std::span<const BatchMixOp> choices) {
  if (choices.empty()) return InvalidArgumentError("batch mix: no MixUp or CutMix to choose from");
  for (size_t i = 0; i < choices.size(); ++i) {
    const BatchMixOp& op = choices[i];
    const std::string name = std::string(MixName(op.kind)) + " (choice " + std::to_string(i) + ")";
    if (!(op.alpha > 0 && std::isfinite(op.alpha))) {
      return InvalidArgumentError(name + ": alpha must be > 0, got " + std::to_string(op.alpha));
    }
    if (op.num_classes < 1) {
      return InvalidArgumentError(name +
                                  ": num_classes must be >= 1 (labels become one-hot "
                                  "rows of that length), got " +
                                  std::to_string(op.num_classes));
    }
    if (op.num_classes != choices[0].num_classes) {
      return InvalidArgumentError(name + ": num_classes " + std::to_string(op.num_classes) +
                                  " differs from choice 0's " +
                                  std::to_string(choices[0].num_classes));
    }
    if (!(op.weight > 0 && std::isfinite(op.weight))) {
      return InvalidArgumentError(name + ": its probability must be > 0");
    }
  }
  return Status::OK();
}

double SampleBeta(double a, double b, SampleRng& rng) {
  const double lx = LogGamma(a, rng), ly = LogGamma(b, rng);
  // x / (x + y) = 1 / (1 + exp(ly - lx)), without overflow.
  return 1.0 / (1.0 + std::exp(ly - lx));
}

void SampleDirichlet(double alpha, std::span<double> weights, SampleRng& rng) {
  // g_i / sum(g) = exp(l_i - max) / sum(exp(l_j - max)): small alphas'
  // gammas underflow as numbers, not as logs.
  double top = -std::numeric_limits<double>::infinity();
  for (double& w : weights) {
    w = LogGamma(alpha, rng);
    top = std::max(top, w);
  }
  double sum = 0;
  for (double& w : weights) sum += (w = std::exp(w - top));
  for (double& w : weights) w /= sum;
}

BatchMixParams DrawBatchMix(std::span<const BatchMixOp> choices, uint32_t height, uint32_t width,
                            SampleRng& rng) {
  size_t pick = 0;
  if (choices.size() > 1) {  // torch.multinomial(p, 1) over the weights
    double total = 0;
    for (const BatchMixOp& op : choices) total += op.weight;
    double u = rng.Uniform() * total;
    for (pick = 0; pick + 1 < choices.size(); ++pick) {
      if (u < choices[pick].weight) break;
      u -= choices[pick].weight;
    }
  }
  const BatchMixOp& op = choices[pick];
  BatchMixParams p;
  p.kind = op.kind;
  p.lam = SampleBeta(op.alpha, op.alpha, rng);
  if (op.kind == BatchMixKind::kMixUp) {
    p.label_lam = p.lam;
    return p;
  }
  // CutMix._get_params.
  const auto W = static_cast<int64_t>(width), H = static_cast<int64_t>(height);
  const auto r_x = static_cast<int64_t>(rng.UniformInt(width));
  const auto r_y = static_cast<int64_t>(rng.UniformInt(height));
  const double r = 0.5 * std::sqrt(1.0 - p.lam);
  const auto r_w_half = static_cast<int64_t>(r * static_cast<double>(W));
  const auto r_h_half = static_cast<int64_t>(r * static_cast<double>(H));
  p.x1 = static_cast<uint32_t>(std::max<int64_t>(r_x - r_w_half, 0));
  p.y1 = static_cast<uint32_t>(std::max<int64_t>(r_y - r_h_half, 0));
  p.x2 = static_cast<uint32_t>(std::min<int64_t>(r_x + r_w_half, W));
  p.y2 = static_cast<uint32_t>(std::min<int64_t>(r_y + r_h_half, H));
  p.label_lam =
      1.0 - static_cast<double>(int64_t{p.x2 - p.x1} * (p.y2 - p.y1)) / static_cast<double>(W * H);
  return p;
}

Status ApplyBatchMix(const BatchMixParams& p, DType dtype, Layout layout, uint32_t n,
                     uint32_t channels, uint32_t height, uint32_t width, void* images,
                     std::span<const int64_t> labels, uint32_t num_classes,
                     std::span<const uint64_t> sample_ids, float* soft_labels) {
  const std::string name(MixName(p.kind));
  if (labels.size() != n) {
    return InvalidArgumentError(name + ": " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(n) + " images");
  }
  if (p.kind == BatchMixKind::kCutMix && (p.x2 > width || p.y2 > height)) {
    return InvalidArgumentError("CutMix: box outside the " + std::to_string(width) + "x" +
                                std::to_string(height) + " images");
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= int64_t{num_classes}) {
      std::string who = "sample " + std::to_string(i) + " of the batch";
      if (i < sample_ids.size()) who += " (sample id " + std::to_string(sample_ids[i]) + ")";
      return InvalidArgumentError(name + ": label " + std::to_string(labels[i]) + " of " + who +
                                  " is outside [0, num_classes = " + std::to_string(num_classes) +
                                  ")");
    }
  }
  const bool floats =
      dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
  if (!floats && !(dtype == DType::kUInt8 && p.kind == BatchMixKind::kCutMix)) {
    return InvalidArgumentError(
        name + ": images of dtype " + std::string(DTypeName(dtype)) +
        " are not supported (float32, float16, bfloat16" +
        (p.kind == BatchMixKind::kCutMix ? ", uint8)" : ")") +
        (dtype == DType::kUInt8 ? "; torch cannot blend uint8 in place" : ""));
  }
  if (n == 0) return Status::OK();
  const Geometry g{layout, channels, height, width};
  if (p.kind == BatchMixKind::kMixUp) {
    switch (dtype) {
      case DType::kFloat32: MixUpTyped<DType::kFloat32>(p.lam, n, g.ImageSize(), images); break;
      case DType::kFloat16: MixUpTyped<DType::kFloat16>(p.lam, n, g.ImageSize(), images); break;
      default: MixUpTyped<DType::kBFloat16>(p.lam, n, g.ImageSize(), images); break;
    }
  } else if (dtype == DType::kUInt8) {
    CutMixTyped<uint8_t>(p, n, g, images);
  } else if (dtype == DType::kFloat32) {
    CutMixTyped<float>(p, n, g, images);
  } else {
    CutMixTyped<uint16_t>(p, n, g, images);
  }
  // _mixup_label: one_hot(label).float(), then roll(1, 0) * (1 - lam) + label * lam.
  const auto l = static_cast<float>(p.label_lam), m = static_cast<float>(1.0 - p.label_lam);
  std::fill(soft_labels, soft_labels + size_t{n} * num_classes, 0.0f);
  for (uint32_t i = 0; i < n; ++i) {
    float* row = soft_labels + size_t{i} * num_classes;
    const int64_t self = labels[i], partner = labels[i > 0 ? i - 1 : n - 1];
    row[partner] = m;
    row[self] = (self == partner ? m : 0.0f) + l;
  }
  return Status::OK();
}

}  // namespace feedline
