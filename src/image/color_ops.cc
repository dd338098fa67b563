// Colour and pixel ops: parameter checks, torchvision's random draws, and
// the fused kernels (color_ops.h).
#include "src/image/color_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "src/image/affine.h"
#include "src/image/color_ops_hwy.h"
#include "src/image/color_ops_pixel.h"
#include "src/image/half.h"

namespace feedline {

namespace {

std::string_view PixelOpName(PixelOpKind k) {
  switch (k) {
    case PixelOpKind::kColorJitter: return "ColorJitter";
    case PixelOpKind::kGrayscale: return "RandomGrayscale";
    case PixelOpKind::kInvert: return "RandomInvert";
    case PixelOpKind::kPosterize: return "RandomPosterize";
    case PixelOpKind::kSolarize: return "RandomSolarize";
    case PixelOpKind::kAutocontrast: return "RandomAutocontrast";
    case PixelOpKind::kEqualize: return "RandomEqualize";
    case PixelOpKind::kAdjustSharpness: return "RandomAdjustSharpness";
    case PixelOpKind::kGaussianBlur: return "GaussianBlur";
    case PixelOpKind::kRotation: return "RandomRotation";
    case PixelOpKind::kAffine: return "RandomAffine";
    case PixelOpKind::kTrivialAugmentWide: return "TrivialAugmentWide";
    case PixelOpKind::kRandAugment: return "RandAugment";
    case PixelOpKind::kAutoAugment: return "AutoAugment";
    case PixelOpKind::kAugMix: return "AugMix";
    case PixelOpKind::kVerticalFlip: return "RandomVerticalFlip";
  }
  return "pixel op";
}

Status Bad(size_t i, PixelOpKind k, const std::string& what) {
  return InvalidArgumentError("pixel op " + std::to_string(i) + " (" + std::string(PixelOpName(k)) +
                              "): " + what);
}

std::string Range(const std::array<double, 2>& r) {
  return "[" + std::to_string(r[0]) + ", " + std::to_string(r[1]) + "]";
}

}  // namespace

Status CheckPixelOps(std::span<const PixelOp> ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const PixelOp& op = ops[i];
    if (!(op.p >= 0 && op.p <= 1)) return Bad(i, op.kind, "p must be in [0, 1]");
    if (image::IsGeometricPixelOp(op.kind)) {
      const Status st = image::CheckGeometricPixelOp(op);
      if (!st.ok()) return Bad(i, op.kind, std::string(st.message()));
      continue;
    }
    switch (op.kind) {
      case PixelOpKind::kColorJitter: {
        const std::pair<bool, const std::array<double, 2>*> factors[] = {
            {op.has_brightness, &op.brightness},
            {op.has_contrast, &op.contrast},
            {op.has_saturation, &op.saturation}};
        for (const auto& [has, r] : factors) {
          if (has && !((*r)[0] >= 0 && (*r)[0] <= (*r)[1] && std::isfinite((*r)[1]))) {
            return Bad(i, op.kind, "factor range " + Range(*r) + " must satisfy 0 <= lo <= hi");
          }
        }
        if (op.has_hue && !(op.hue[0] >= -0.5 && op.hue[0] <= op.hue[1] && op.hue[1] <= 0.5)) {
          return Bad(i, op.kind, "hue range " + Range(op.hue) + " must lie in [-0.5, 0.5]");
        }
        break;
      }
      case PixelOpKind::kPosterize:
        if (op.bits > 8) return Bad(i, op.kind, "bits must be in 0..8");
        break;
      case PixelOpKind::kSolarize:
        if (!(op.threshold >= 0 && op.threshold <= 255)) {
          return Bad(i, op.kind, "threshold must be in [0, 255] for uint8 images");
        }
        break;
      case PixelOpKind::kAdjustSharpness:
        if (!(op.factor >= 0 && std::isfinite(op.factor))) {
          return Bad(i, op.kind, "sharpness_factor must be non-negative");
        }
        break;
      case PixelOpKind::kGaussianBlur:
        if (op.kernel_width % 2 == 0 || op.kernel_height % 2 == 0 || op.kernel_width > 255 ||
            op.kernel_height > 255) {
          return Bad(i, op.kind, "kernel size values must be odd and positive (at most 255)");
        }
        if (!(op.sigma[0] > 0 && op.sigma[0] <= op.sigma[1] && std::isfinite(op.sigma[1]))) {
          return Bad(i, op.kind, "sigma range " + Range(op.sigma) + " must satisfy 0 < lo <= hi");
        }
        break;
      default: break;
    }
  }
  return Status::OK();
}

Status CheckPixelSteps(std::span<const PixelStep> steps) {
  bool mixing = false, in_chain = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PixelStep& s = steps[i];
    auto bad = [i](const std::string& what) {
      return InvalidArgumentError("pixel step " + std::to_string(i) + ": " + what);
    };
    switch (s.kind) {
      case PixelStepKind::kMixBegin:
        if (mixing) return bad("MIX_BEGIN inside a mix (mixes do not nest)");
        if (!std::isfinite(s.value)) return bad("the original's weight must be finite");
        mixing = true, in_chain = false;
        break;
      case PixelStepKind::kMixChain:
        if (!mixing) return bad("MIX_CHAIN outside MIX_BEGIN .. MIX_END");
        if (!std::isfinite(s.value)) return bad("a chain's weight must be finite");
        in_chain = true;
        break;
      case PixelStepKind::kMixEnd:
        if (!mixing) return bad("MIX_END without its MIX_BEGIN");
        mixing = in_chain = false;
        break;
      default:
        if (mixing && !in_chain) return bad("an op between MIX_BEGIN and the first MIX_CHAIN");
        break;
    }
  }
  if (mixing) return InvalidArgumentError("pixel steps: a MIX_BEGIN without its MIX_END");
  return Status::OK();
}

void DrawPixelSteps(std::span<const PixelOp> ops, SampleRng& rng, std::vector<PixelStep>* steps) {
  for (const PixelOp& op : ops) {
    if (image::IsGeometricPixelOp(op.kind)) {
      image::DrawGeometricPixelOp(op, rng, steps);
      continue;
    }
    switch (op.kind) {
      case PixelOpKind::kColorJitter: {
        // torchvision ColorJitter.get_params: fn_idx = randperm(4), then
        // each factor that is not None, uniform in its range.
        std::array<int, 4> order = {0, 1, 2, 3};
        for (int k = 3; k > 0; --k) {
          std::swap(order[k], order[rng.UniformInt(static_cast<uint64_t>(k) + 1)]);
        }
        const bool has[4] = {op.has_brightness, op.has_contrast, op.has_saturation, op.has_hue};
        const std::array<double, 2>* range[4] = {&op.brightness, &op.contrast, &op.saturation,
                                                 &op.hue};
        double factor[4] = {1, 1, 1, 0};
        for (int k = 0; k < 4; ++k) {
          if (has[k]) factor[k] = rng.Uniform((*range[k])[0], (*range[k])[1]);
        }
        constexpr PixelStepKind kinds[4] = {PixelStepKind::kBrightness, PixelStepKind::kContrast,
                                            PixelStepKind::kSaturation, PixelStepKind::kHue};
        for (int k : order) {
          if (has[k]) steps->push_back({kinds[k], factor[k]});
        }
        break;
      }
      case PixelOpKind::kGaussianBlur:
        steps->push_back({PixelStepKind::kGaussianBlur, rng.Uniform(op.sigma[0], op.sigma[1]),
                          op.kernel_width, op.kernel_height});
        break;
      default: {
        // One draw per sample even at p = 0 or 1, so that later ops' draws
        // do not depend on p.
        if (!rng.Bernoulli(op.p)) break;
        switch (op.kind) {
          case PixelOpKind::kGrayscale: steps->push_back({PixelStepKind::kGrayscale}); break;
          case PixelOpKind::kInvert: steps->push_back({PixelStepKind::kInvert}); break;
          case PixelOpKind::kPosterize:
            steps->push_back({PixelStepKind::kPosterize, static_cast<double>(op.bits)});
            break;
          case PixelOpKind::kSolarize:
            steps->push_back({PixelStepKind::kSolarize, op.threshold});
            break;
          case PixelOpKind::kAutocontrast: steps->push_back({PixelStepKind::kAutocontrast}); break;
          case PixelOpKind::kEqualize: steps->push_back({PixelStepKind::kEqualize}); break;
          case PixelOpKind::kAdjustSharpness:
            steps->push_back({PixelStepKind::kSharpness, op.factor});
            break;
          case PixelOpKind::kVerticalFlip: steps->push_back({PixelStepKind::kVerticalFlip}); break;
          default: break;
        }
      }
    }
  }
}

namespace image {
namespace {

using Lut = std::array<std::array<uint8_t, 256>, 3>;

using detail::Blend;
using detail::Gray;
using detail::HuePixel;

// Index `i` in [-n, 2n) reflected into [0, n) without repeating the edge
// (torch's "reflect" padding), for any kernel radius.
inline int32_t Reflect(int32_t i, int32_t n) {
  if (n == 1) return 0;
  const int32_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// torchvision's _get_gaussian_kernel1d in float32.
void GaussianKernel(uint32_t size, double sigma, std::vector<float>* k) {
  k->resize(size);
  const float half = static_cast<float>(size - 1) * 0.5f;
  const auto s = static_cast<float>(sigma);
  float sum = 0;
  for (uint32_t i = 0; i < size; ++i) {
    const float x = static_cast<float>(i) - half;  // linspace(-half, half): integers
    const float r = x / s;
    (*k)[i] = std::exp(-0.5f * (r * r));
    sum += (*k)[i];
  }
  for (float& v : *k) v /= sum;
}

class Pipeline {
 public:
  // reference: the scalar kernels only (tests compare the SIMD ones with them).
  Pipeline(uint32_t width, uint32_t height, uint8_t* chw, PixelScratch* scratch,
           bool reference = false)
      : w_(width),
        h_(height),
        n_(size_t{width} * height),
        px_(chw),
        scratch_(scratch),
        reference_(reference) {
    for (auto& l : lut_) std::iota(l.begin(), l.end(), 0);
  }

  void Run(const PixelStep& s) {
    const auto ratio = static_cast<float>(s.value);
    const auto one_minus = static_cast<float>(1.0 - s.value);
    switch (s.kind) {
      case PixelStepKind::kBrightness:
        MapLut([&](int, uint8_t v) { return Blend(ratio, one_minus, v, 0.0f); });
        break;
      case PixelStepKind::kContrast: {
        const float mean = GrayMean();
        MapLut([&](int, uint8_t v) { return Blend(ratio, one_minus, v, mean); });
        break;
      }
      case PixelStepKind::kInvert:
        MapLut([](int, uint8_t v) { return static_cast<uint8_t>(255 - v); });
        break;
      case PixelStepKind::kPosterize: {
        const auto mask = static_cast<uint8_t>(0xFF00u >> static_cast<int>(s.value));
        MapLut([mask](int, uint8_t v) { return static_cast<uint8_t>(v & mask); });
        break;
      }
      case PixelStepKind::kSolarize: {
        // torch compares a uint8 tensor with a float threshold in float32.
        const auto threshold = static_cast<float>(s.value);
        MapLut([threshold](int, uint8_t v) {
          return static_cast<float>(v) >= threshold ? static_cast<uint8_t>(255 - v) : v;
        });
        break;
      }
      case PixelStepKind::kAutocontrast: Autocontrast(); break;
      case PixelStepKind::kEqualize: Equalize(); break;
      case PixelStepKind::kGrayscale: Grayscale(); break;
      case PixelStepKind::kSaturation: Saturation(ratio, one_minus); break;
      case PixelStepKind::kHue: Hue(static_cast<float>(s.value)); break;
      case PixelStepKind::kSharpness: Sharpness(ratio, one_minus); break;
      case PixelStepKind::kGaussianBlur: Blur(s); break;
      case PixelStepKind::kAffine:
        Flush();
        ApplyAffineStep(s, w_, h_, px_, &scratch_->bytes);
        hist_valid_ = false;
        break;
      case PixelStepKind::kVerticalFlip: VerticalFlip(); break;
      case PixelStepKind::kMixBegin: BeginMix(static_cast<float>(s.value)); break;
      case PixelStepKind::kMixChain: StartChain(static_cast<float>(s.value)); break;
      case PixelStepKind::kMixEnd: EndMix(); break;
    }
  }

  // Ends a mix the steps left open (a list that failed CheckPixelSteps).
  void Finish() {
    if (mixing_) EndMix();
  }

  // Writes the pending table into the pixels.
  void Flush() {
    if (identity_) return;
    const size_t n = n_;
    for (int c = 0; c < 3; ++c) {
      uint8_t* p = px_ + c * n;
      const uint8_t* l = lut_[c].data();
      if (!reference_) {
        PlaneThroughByteTable(p, n, l);
        continue;
      }
      for (size_t i = 0; i < n; ++i) p[i] = l[p[i]];
    }
    Reset();
  }

  // The output conversion with the pending table folded in.
  void Convert(const OutputFormat& f, void* out) const {
    const bool chw = f.layout == Layout::kCHW;
    for (int c = 0; c < 3; ++c) {
      const uint8_t* p = px_ + c * n_;
      const uint8_t* l = lut_[c].data();
      const size_t step = chw ? 1 : 3;
      const size_t base = chw ? c * n_ : c;
      if (!reference_ && identity_ && chw && f.dtype == DType::kFloat32) {
        PlaneToFloat(p, n_, f.mul[c], f.add[c], static_cast<float*>(out) + base);
        continue;
      }
      switch (f.dtype) {
        case DType::kUInt8: {
          uint8_t* o = static_cast<uint8_t*>(out) + base;
          for (size_t i = 0; i < n_; ++i) o[i * step] = l[p[i]];
          break;
        }
        case DType::kFloat32: {
          std::array<float, 256> fl;
          for (int v = 0; v < 256; ++v) fl[v] = static_cast<float>(l[v]) * f.mul[c] + f.add[c];
          float* o = static_cast<float*>(out) + base;
          if (!reference_ && chw) {
            PlaneThroughTable(p, n_, fl.data(), o);
            break;
          }
          for (size_t i = 0; i < n_; ++i) o[i * step] = fl[p[i]];
          break;
        }
        case DType::kFloat16:
        case DType::kBFloat16: {
          std::array<uint16_t, 256> hl;
          for (int v = 0; v < 256; ++v) {
            const float x = static_cast<float>(l[v]) * f.mul[c] + f.add[c];
            hl[v] = f.dtype == DType::kFloat16 ? FloatToHalf(x) : FloatToBFloat16(x);
          }
          uint16_t* o = static_cast<uint16_t*>(out) + base;
          for (size_t i = 0; i < n_; ++i) o[i * step] = hl[p[i]];
          break;
        }
        default: break;  // rejected when the op is made
      }
    }
  }

 private:
  template <typename F>
  void MapLut(F f) {
    for (int c = 0; c < 3; ++c) {
      for (auto& v : lut_[c]) v = f(c, v);
    }
    identity_ = false;
  }

  void Reset() {
    for (auto& l : lut_) std::iota(l.begin(), l.end(), 0);
    identity_ = true;
    hist_valid_ = false;
  }

  // Rows in reverse order. The pending table and the histograms stay valid:
  // moving pixels changes no value.
  void VerticalFlip() {
    for (int c = 0; c < 3; ++c) {
      uint8_t* p = px_ + c * n_;
      for (uint32_t top = 0, bottom = h_ - 1; top < bottom; ++top, --bottom) {
        std::swap_ranges(p + size_t{top} * w_, p + size_t{top + 1} * w_, p + size_t{bottom} * w_);
      }
    }
  }

  // Per-channel histograms of the current image (the pixels through the table).
  std::array<std::array<uint64_t, 256>, 3> Histograms() {
    if (!hist_valid_) {
      for (int c = 0; c < 3; ++c) {
        // Four partial histograms: runs of one value (flat regions) do
        // not wait on the previous increment of the same counter.
        std::array<std::array<uint32_t, 256>, 4> part{};
        const uint8_t* p = px_ + c * n_;
        size_t i = 0;
        for (; i + 4 <= n_; i += 4) {
          ++part[0][p[i]];
          ++part[1][p[i + 1]];
          ++part[2][p[i + 2]];
          ++part[3][p[i + 3]];
        }
        for (; i < n_; ++i) ++part[0][p[i]];
        for (int v = 0; v < 256; ++v) {
          hist_[c][v] = uint64_t{part[0][v]} + part[1][v] + part[2][v] + part[3][v];
        }
      }
      hist_valid_ = true;
    }
    std::array<std::array<uint64_t, 256>, 3> h{};
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) h[c][lut_[c][v]] += hist_[c][v];
    }
    return h;
  }

  // torch.mean(rgb_to_grayscale(img).float()): exact in 64-bit, then float32.
  float GrayMean() const {
    const uint8_t *r = px_, *g = px_ + n_, *b = px_ + 2 * n_;
    const uint8_t *lr = lut_[0].data(), *lg = lut_[1].data(), *lb = lut_[2].data();
    uint64_t sum = 0;
    if (!reference_ && identity_) {
      sum = GraySum(r, g, b, n_);
    } else {
      for (size_t i = 0; i < n_; ++i) sum += Gray(lr[r[i]], lg[g[i]], lb[b[i]]);
    }
    return static_cast<float>(static_cast<double>(sum) / static_cast<double>(n_));
  }

  void Autocontrast() {
    // Each channel's smallest and largest value: a SIMD pass over the plane
    // while the table is the identity, else from the histograms through it.
    std::array<int, 3> los{}, his{};
    if (!reference_ && identity_) {
      for (int c = 0; c < 3; ++c) {
        uint8_t lo = 0, hi = 0;
        PlaneMinMax(px_ + c * n_, n_, &lo, &hi);
        los[c] = lo, his[c] = hi;
      }
    } else {
      const auto h = Histograms();
      for (int c = 0; c < 3; ++c) {
        int lo = 0, hi = 255;
        while (lo < 255 && h[c][lo] == 0) ++lo;
        while (hi > 0 && h[c][hi] == 0) --hi;
        los[c] = lo, his[c] = hi;
      }
    }
    MapLut([&](int c, uint8_t v) {
      const int lo = los[c], hi = his[c];
      auto minimum = static_cast<float>(lo);
      // bound / tensor is reciprocal(tensor) * bound in torch (__rtruediv__).
      float scale = (1.0f / (static_cast<float>(hi) - minimum)) * 255.0f;
      if (!std::isfinite(scale)) minimum = 0, scale = 1;
      return static_cast<uint8_t>(
          std::clamp((static_cast<float>(v) - minimum) * scale, 0.0f, 255.0f));
    });
  }

  // AugMix's blend, as torchvision's forward computes it on a uint8 image:
  // mix = m * orig in float32, then mix += w_i * chain_i per chain in order
  // (each product rounded to float32, then the sum), then .to(uint8):
  // truncation (the weights sum to 1, so the values stay in [0, 255]; the
  // bounds only guard a float32 overshoot). The products come from a
  // 256-entry table per channel, w * value through the pending table: the
  // same float32 numbers as per pixel.
  void BeginMix(float original_weight) {
    if (mixing_) EndMix();  // a nested begin (out of place) ends the open mix
    Flush();
    scratch_->mix_original.assign(px_, px_ + 3 * n_);
    scratch_->mix_sum.resize(3 * n_);
    for (int c = 0; c < 3; ++c) {
      std::array<float, 256> t;
      for (int v = 0; v < 256; ++v) t[v] = original_weight * static_cast<float>(v);
      const uint8_t* p = px_ + c * n_;
      float* sum = scratch_->mix_sum.data() + c * n_;
      for (size_t i = 0; i < n_; ++i) sum[i] = t[p[i]];
    }
    mixing_ = true;
    chain_open_ = false;
  }

  void StartChain(float weight) {
    if (!mixing_) return;  // out of place: no mix to add to
    FinishChain();
    std::memcpy(px_, scratch_->mix_original.data(), 3 * n_);
    Reset();
    chain_weight_ = weight;
    chain_open_ = true;
  }

  void FinishChain() {
    if (!chain_open_) return;
    for (int c = 0; c < 3; ++c) {
      std::array<float, 256> t;
      for (int v = 0; v < 256; ++v) t[v] = chain_weight_ * static_cast<float>(lut_[c][v]);
      const uint8_t* p = px_ + c * n_;
      float* sum = scratch_->mix_sum.data() + c * n_;
      for (size_t i = 0; i < n_; ++i) sum[i] += t[p[i]];
    }
    chain_open_ = false;
  }

  void EndMix() {
    if (!mixing_) return;
    FinishChain();
    const float* sum = scratch_->mix_sum.data();
    for (size_t i = 0; i < 3 * n_; ++i) {
      // Not a number (only from weights CheckPixelSteps refuses) is 0.
      px_[i] = static_cast<uint8_t>(sum[i] > 0.0f ? std::min(sum[i], 255.0f) : 0.0f);
    }
    Reset();
    mixing_ = false;
  }

  // torchvision's _scale_channel per channel: a table from the histogram.
  void Equalize() {
    const auto h = Histograms();
    std::array<std::array<uint8_t, 256>, 3> eq;
    for (int c = 0; c < 3; ++c) {
      std::iota(eq[c].begin(), eq[c].end(), 0);
      int last = 255;
      while (last > 0 && h[c][last] == 0) --last;
      uint64_t total = 0;  // all but the last non-empty bin
      for (int v = 0; v < last; ++v) total += h[c][v];
      const uint64_t step = total / 255;
      if (step == 0) continue;
      uint64_t cum = 0;
      for (int v = 0; v < 256; ++v) {
        eq[c][v] = static_cast<uint8_t>(std::min<uint64_t>((cum + step / 2) / step, 255));
        cum += h[c][v];
      }
    }
    MapLut([&](int c, uint8_t v) { return eq[c][v]; });
  }

  void Grayscale() {
    uint8_t *r = px_, *g = px_ + n_, *b = px_ + 2 * n_;
    if (!reference_) {
      Flush();
      GrayscalePlanes(r, g, b, n_);
      Reset();
      return;
    }
    const uint8_t *lr = lut_[0].data(), *lg = lut_[1].data(), *lb = lut_[2].data();
    for (size_t i = 0; i < n_; ++i) r[i] = g[i] = b[i] = Gray(lr[r[i]], lg[g[i]], lb[b[i]]);
    Reset();
  }

  void Saturation(float ratio, float one_minus) {
    uint8_t *r = px_, *g = px_ + n_, *b = px_ + 2 * n_;
    if (!reference_) {
      Flush();
      SaturatePlanes(r, g, b, n_, ratio, one_minus);
      Reset();
      return;
    }
    const uint8_t *lr = lut_[0].data(), *lg = lut_[1].data(), *lb = lut_[2].data();
    for (size_t i = 0; i < n_; ++i) {
      const uint8_t rv = lr[r[i]], gv = lg[g[i]], bv = lb[b[i]];
      const auto gray = static_cast<float>(Gray(rv, gv, bv));
      r[i] = Blend(ratio, one_minus, rv, gray);
      g[i] = Blend(ratio, one_minus, gv, gray);
      b[i] = Blend(ratio, one_minus, bv, gray);
    }
    Reset();
  }

  void Hue(float shift) {
    uint8_t *r = px_, *g = px_ + n_, *b = px_ + 2 * n_;
    if (!reference_) {
      Flush();
      HuePlanes(r, g, b, n_, shift);
      Reset();
      return;
    }
    const uint8_t *lr = lut_[0].data(), *lg = lut_[1].data(), *lb = lut_[2].data();
    for (size_t i = 0; i < n_; ++i) {
      r[i] = lr[r[i]], g[i] = lg[g[i]], b[i] = lb[b[i]];
      HuePixel(shift, &r[i], &g[i], &b[i]);
    }
    Reset();
  }

  // adjust_sharpness: blend with the 3x3 smoothed image (weights 1, centre
  // 5, over 13; rounded; border pixels kept), images under 3x3 unchanged.
  void Sharpness(float ratio, float one_minus) {
    if (w_ <= 2 || h_ <= 2) return;
    Flush();
    scratch_->bytes.resize(n_);
    for (int c = 0; c < 3; ++c) {
      uint8_t* p = px_ + c * n_;
      uint8_t* src = scratch_->bytes.data();
      std::memcpy(src, p, n_);
      for (uint32_t y = 0; y < h_; ++y) {
        const uint8_t* cur = src + size_t{y} * w_;
        uint8_t* o = p + size_t{y} * w_;
        const bool border_row = y == 0 || y + 1 == h_;
        if (!border_row && !reference_) {
          SharpenRow(cur - w_, cur, cur + w_, w_, ratio, one_minus, o);
          continue;
        }
        for (uint32_t x = 0; x < w_; ++x) {
          uint32_t d = cur[x];
          if (!border_row && x > 0 && x + 1 < w_) {
            const uint8_t* up = cur - w_;
            const uint8_t* down = cur + w_;
            const uint32_t s = up[x - 1] + up[x] + up[x + 1] + cur[x - 1] + 5u * cur[x] +
                               cur[x + 1] + down[x - 1] + down[x] + down[x + 1];
            d = (2 * s + 13) / 26;  // round(s / 13): never a tie (13 is odd)
          }
          o[x] = Blend(ratio, one_minus, cur[x], static_cast<float>(d));
        }
      }
    }
    hist_valid_ = false;
  }

  // gaussian_blur: separable float32 kernels, reflect padding, rounded half
  // to even (torch.round).
  void Blur(const PixelStep& s) {
    Flush();
    std::vector<float>& f = scratch_->floats;
    std::vector<float> kx, ky;
    GaussianKernel(s.kernel_width, s.value, &kx);
    GaussianKernel(s.kernel_height, s.value, &ky);
    const auto rx = static_cast<int32_t>(s.kernel_width / 2),
               ry = static_cast<int32_t>(s.kernel_height / 2);
    const auto w = static_cast<int32_t>(w_), h = static_cast<int32_t>(h_);
    f.resize(n_ + 2 * size_t{w_} + 2 * static_cast<size_t>(rx) + 1);
    float* rowbuf = f.data() + n_;                               // one padded source row
    float* acc = rowbuf + w_ + 2 * static_cast<size_t>(rx) + 1;  // one output row's sums
    std::vector<const float*> rows;  // the SIMD vertical pass: each tap's row
    for (int c = 0; c < 3; ++c) {
      uint8_t* p = px_ + c * n_;
      for (int32_t y = 0; y < h; ++y) {
        const uint8_t* src = p + static_cast<size_t>(y) * w_;
        float* o = f.data() + static_cast<size_t>(y) * w_;
        if (!reference_) {
          // The same sums with the SIMD passes; Reflect only at the edges.
          for (int32_t x = -rx; x < 0; ++x) rowbuf[x + rx] = src[Reflect(x, w)];
          WidenRow(src, w_, rowbuf + rx);
          for (int32_t x = w; x < w + rx; ++x) rowbuf[x + rx] = src[Reflect(x, w)];
          BlurRow(rowbuf, kx.data(), kx.size(), w_, o);
          continue;
        }
        for (int32_t x = -rx; x < w + rx; ++x) {
          rowbuf[x + rx] = static_cast<float>(src[Reflect(x, w)]);
        }
        std::fill(o, o + w_, 0.0f);
        for (int32_t k = 0; k <= 2 * rx; ++k) {
          const float wk = kx[k];
          const float* in = rowbuf + k;
          for (uint32_t x = 0; x < w_; ++x) o[x] += wk * in[x];
        }
      }
      // Vertical: whole rows at a time (contiguous, vectorised by the
      // compiler), summing the taps in the same order as per pixel.
      for (int32_t y = 0; y < h; ++y) {
        uint8_t* o = p + static_cast<size_t>(y) * w_;
        if (!reference_) {
          rows.clear();
          for (int32_t k = 0; k <= 2 * ry; ++k) {
            rows.push_back(f.data() + static_cast<size_t>(Reflect(y + k - ry, h)) * w_);
          }
          BlurColumns(rows.data(), ky.data(), ky.size(), w_, o);
          continue;
        }
        std::fill(acc, acc + w_, 0.0f);
        for (int32_t k = 0; k <= 2 * ry; ++k) {
          const float* row = f.data() + static_cast<size_t>(Reflect(y + k - ry, h)) * w_;
          const float wk = ky[k];
          for (uint32_t x = 0; x < w_; ++x) acc[x] += wk * row[x];
        }
        for (uint32_t x = 0; x < w_; ++x) {
          o[x] = static_cast<uint8_t>(std::clamp(std::nearbyint(acc[x]), 0.0f, 255.0f));
        }
      }
    }
    hist_valid_ = false;
  }

  const uint32_t w_, h_;
  const size_t n_;
  uint8_t* const px_;
  PixelScratch* const scratch_;
  const bool reference_;
  Lut lut_;
  bool identity_ = true;
  bool hist_valid_ = false;  // hist_ describes px_ (not the table)
  // AugMix: between kMixBegin and kMixEnd; a chain's steps are running.
  bool mixing_ = false, chain_open_ = false;
  float chain_weight_ = 0;
  std::array<std::array<uint64_t, 256>, 3> hist_;
};

}  // namespace

void ApplyStepsAndConvert(std::span<const PixelStep> steps, uint32_t width, uint32_t height,
                          uint8_t* chw, const OutputFormat& format, PixelScratch* scratch,
                          void* out, bool reference) {
  Pipeline pipe(width, height, chw, scratch, reference);
  for (const PixelStep& s : steps) pipe.Run(s);
  pipe.Finish();
  pipe.Convert(format, out);
}

}  // namespace image

void ApplyPixelSteps(std::span<const PixelStep> steps, uint32_t width, uint32_t height,
                     uint8_t* chw) {
  image::PixelScratch scratch;
  image::Pipeline pipe(width, height, chw, &scratch);
  for (const PixelStep& s : steps) pipe.Run(s);
  pipe.Finish();
  pipe.Flush();
}

}  // namespace feedline
