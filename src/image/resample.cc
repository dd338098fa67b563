#include "src/image/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace feedline::image {
namespace {

// Pillow's filters (Resample.c).
double Bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double Bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

inline float Round8(float v) {
  // Pillow rounds half up in fixed point, then clips to [0, 255].
  v = std::floor(v + 0.5f);
  return v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
}

}  // namespace

void PlanAxis(Interpolation interpolation, uint32_t in_size, double in0, double scale,
              uint32_t out_size, AxisPlan* plan) {
  const bool cubic = interpolation == Interpolation::kBicubic;
  const double filter_scale = std::max(scale, 1.0);
  const double support = (cubic ? 2.0 : 1.0) * filter_scale;
  const auto taps = static_cast<uint32_t>(std::ceil(support)) * 2 + 1;
  plan->out_size = out_size;
  plan->taps = taps;
  plan->start.assign(out_size, 0);
  plan->count.assign(out_size, 0);
  plan->weights.assign(size_t{out_size} * taps, 0.f);
  plan->min_index = static_cast<int32_t>(in_size);
  plan->max_index = 0;
  const double ss = 1.0 / filter_scale;
  std::vector<double> w(taps);
  for (uint32_t i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    // (int) truncation, then clipping, exactly as Pillow.
    int32_t xmin = static_cast<int32_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int32_t xmax = static_cast<int32_t>(center + support + 0.5);
    if (xmax > static_cast<int32_t>(in_size)) xmax = static_cast<int32_t>(in_size);
    xmax -= xmin;
    if (xmax > static_cast<int32_t>(taps)) xmax = static_cast<int32_t>(taps);
    if (xmax < 1) {  // a box past the edge: use the nearest pixel
      xmin = std::clamp<int32_t>(static_cast<int32_t>(center), 0, static_cast<int32_t>(in_size) - 1);
      xmax = 1;
      w[0] = 1.0;
    } else {
      double total = 0;
      for (int32_t x = 0; x < xmax; ++x) {
        w[x] = cubic ? Bicubic((x + xmin - center + 0.5) * ss) : Bilinear((x + xmin - center + 0.5) * ss);
        total += w[x];
      }
      if (total != 0.0) {
        for (int32_t x = 0; x < xmax; ++x) w[x] /= total;
      }
    }
    plan->start[i] = xmin;
    plan->count[i] = xmax;
    for (int32_t x = 0; x < xmax; ++x) plan->weights[size_t{i} * taps + x] = static_cast<float>(w[x]);
    plan->min_index = std::min(plan->min_index, xmin);
    plan->max_index = std::max(plan->max_index, xmin + xmax);
  }
}

OutputFormat MakeOutputFormat(const ImageTransform& t) {
  OutputFormat f;
  f.dtype = t.dtype;
  f.layout = t.layout;
  for (int c = 0; c < 3; ++c) {
    if (t.normalize) {
      f.mul[c] = 1.0f / (255.0f * t.std[c]);
      f.add[c] = -t.mean[c] / t.std[c];
    } else {
      f.mul[c] = 1.0f / 255.0f;
      f.add[c] = 0.0f;
    }
  }
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // a subnormal half, or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    // In units of the smallest subnormal (2^-24): mantissa * 2^(exponent - 126).
    const uint32_t shift = 126 - (abs >> 23);  // 14..24
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

void Resample(const RgbSource& src, const AxisPlan& h, const AxisPlan& v, bool flip,
              const OutputFormat& format, std::vector<float>* scratch, void* out) {
  const uint32_t ow = h.out_size, oh = v.out_size;
  const int32_t row_begin = v.min_index, row_end = v.max_index;
  const size_t rows = static_cast<size_t>(row_end - row_begin);
  const size_t tmp_stride = size_t{ow} * 3;
  if (scratch->size() < rows * tmp_stride) scratch->resize(rows * tmp_stride);
  float* tmp = scratch->data();

  // Horizontal pass over the rows the vertical pass reads; flip here.
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row =
        src.pixels + static_cast<size_t>(row_begin + static_cast<int32_t>(r) - src.row0) * src.stride;
    float* dst = tmp + r * tmp_stride;
    for (uint32_t x = 0; x < ow; ++x) {
      const float* w = &h.weights[size_t{x} * h.taps];
      const uint8_t* p = row + static_cast<size_t>(h.start[x] - src.col0) * 3;
      float a0 = 0, a1 = 0, a2 = 0;
      for (int32_t k = 0; k < h.count[x]; ++k) {
        a0 += p[3 * k] * w[k];
        a1 += p[3 * k + 1] * w[k];
        a2 += p[3 * k + 2] * w[k];
      }
      const uint32_t ox = flip ? ow - 1 - x : x;
      dst[3 * ox] = Round8(a0);
      dst[3 * ox + 1] = Round8(a1);
      dst[3 * ox + 2] = Round8(a2);
    }
  }

  // Vertical pass, converting and writing each value once.
  std::vector<float>& acc_storage = *scratch;  // reuse the tail for one row of sums
  const size_t acc_offset = rows * tmp_stride;
  if (acc_storage.size() < acc_offset + tmp_stride) acc_storage.resize(acc_offset + tmp_stride);
  tmp = acc_storage.data();
  float* acc = tmp + acc_offset;
  const size_t plane = size_t{ow} * oh;
  for (uint32_t y = 0; y < oh; ++y) {
    const float* w = &v.weights[size_t{y} * v.taps];
    std::fill(acc, acc + tmp_stride, 0.f);
    for (int32_t k = 0; k < v.count[y]; ++k) {
      const float* row = tmp + static_cast<size_t>(v.start[y] + k - row_begin) * tmp_stride;
      const float wk = w[k];
      for (size_t i = 0; i < tmp_stride; ++i) acc[i] += row[i] * wk;
    }
    for (uint32_t x = 0; x < ow; ++x) {
      for (int c = 0; c < 3; ++c) {
        const float pixel = Round8(acc[3 * x + c]);
        const size_t index = format.layout == Layout::kCHW ? c * plane + size_t{y} * ow + x
                                                           : (size_t{y} * ow + x) * 3 + c;
        const float value = pixel * format.mul[c] + format.add[c];
        switch (format.dtype) {
          case DType::kUInt8: static_cast<uint8_t*>(out)[index] = static_cast<uint8_t>(pixel); break;
          case DType::kFloat32: static_cast<float*>(out)[index] = value; break;
          case DType::kFloat16: static_cast<uint16_t*>(out)[index] = FloatToHalf(value); break;
          case DType::kBFloat16: static_cast<uint16_t*>(out)[index] = FloatToBFloat16(value); break;
          default: break;  // rejected when the op is made
        }
      }
    }
  }
}

}  // namespace feedline::image
