#include "src/image/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "src/image/half.h"
#include "src/image/resample_hwy.h"

// Function multi-versioning resolves through an ifunc that runs before a
// sanitizer runtime is initialised (it crashes at start-up under TSan), so
// sanitizer builds get the baseline version only.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define FEEDLINE_NO_TARGET_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FEEDLINE_NO_TARGET_CLONES 1
#endif
#if defined(__x86_64__) && !defined(FEEDLINE_NO_TARGET_CLONES)
#define FEEDLINE_TARGET_CLONES __attribute__((target_clones("avx2,fma", "default")))
#else
#define FEEDLINE_TARGET_CLONES
#endif

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

// Pillow rounds half up in fixed point, then clips to [0, 255]. Clamping
// first makes truncation of v + 0.5 a floor, with no libm call (the baseline
// x86-64 ISA has no SSE4.1 round): the loops below vectorise.
inline float Round8(float v) {
  v = std::min(std::max(v, 0.f), 255.f);
  return static_cast<float>(static_cast<int32_t>(v + 0.5f));
}

// One RGB pixel in a 4-lane vector (the 4th lane unused): a filter tap is
// one vector multiply-add for all three channels.
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t V4i __attribute__((vector_size(16)));
typedef uint8_t V4u8 __attribute__((vector_size(4)));

inline V4 Round8(V4 v) {
  const V4 zero = {0, 0, 0, 0}, top = {255, 255, 255, 255}, half = {0.5f, 0.5f, 0.5f, 0.5f};
  v = v < zero ? zero : v;
  v = v > top ? top : v;
  return __builtin_convertvector(__builtin_convertvector(v + half, V4i), V4);
}

// Sum of taps: a fixed trip count (zero-padded weights) when the plan's tap
// count is one of the common small ones, so the loop unrolls without
// per-pixel branches.
template <int kTaps>
inline V4 Taps(const V4* p, const float* w, int32_t /*count*/) {
  V4 a = p[0] * w[0];
  for (int k = 1; k < kTaps; ++k) a += p[k] * w[k];
  return a;
}
template <>
inline V4 Taps<0>(const V4* p, const float* w, int32_t count) {
  V4 a = {0, 0, 0, 0};
  for (int32_t k = 0; k < count; ++k) a += p[k] * w[k];
  return a;
}

template <int kTaps>
void HorizontalRow(const V4* rowf, const AxisPlan& h, int32_t col_begin, bool flip,
                   uint8_t* r_plane, uint8_t* g_plane, uint8_t* b_plane) {
  const uint32_t ow = h.out_size;
  for (uint32_t x = 0; x < ow; ++x) {
    const V4 a = Round8(
        Taps<kTaps>(rowf + (h.start[x] - col_begin), &h.weights[size_t{x} * h.taps], h.count[x]));
    const uint32_t ox = flip ? ow - 1 - x : x;
    r_plane[ox] = static_cast<uint8_t>(a[0]);
    g_plane[ox] = static_cast<uint8_t>(a[1]);
    b_plane[ox] = static_cast<uint8_t>(a[2]);
  }
}

// The reference horizontal pass for one source row (float, 4 lanes).
void HorizontalFloat(const uint8_t* row, size_t cols, const AxisPlan& h, int32_t col_begin,
                     bool flip, V4* rowf, uint8_t* r, uint8_t* g, uint8_t* b) {
  const V4 rgb_mask = {1, 1, 1, 0};
  // 4-byte loads for all but the last pixel (whose 4th byte may be past the row).
  for (size_t k = 0; k + 1 < cols; ++k) {
    V4u8 px;
    std::memcpy(&px, row + 3 * k, 4);
    rowf[k] = __builtin_convertvector(px, V4) * rgb_mask;
  }
  const uint8_t* last = row + 3 * (cols - 1);
  rowf[cols - 1] = V4{float(last[0]), float(last[1]), float(last[2]), 0.f};
  switch (h.taps) {
    case 3: HorizontalRow<3>(rowf, h, col_begin, flip, r, g, b); break;
    case 5: HorizontalRow<5>(rowf, h, col_begin, flip, r, g, b); break;
    case 7: HorizontalRow<7>(rowf, h, col_begin, flip, r, g, b); break;
    default: HorizontalRow<0>(rowf, h, col_begin, flip, r, g, b); break;
  }
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
      xmin =
          std::clamp<int32_t>(static_cast<int32_t>(center), 0, static_cast<int32_t>(in_size) - 1);
      xmax = 1;
      w[0] = 1.0;
    } else {
      double total = 0;
      for (int32_t x = 0; x < xmax; ++x) {
        w[x] = cubic ? Bicubic((x + xmin - center + 0.5) * ss)
                     : Bilinear((x + xmin - center + 0.5) * ss);
        total += w[x];
      }
      if (total != 0.0) {
        for (int32_t x = 0; x < xmax; ++x) w[x] /= total;
      }
    }
    plan->start[i] = xmin;
    plan->count[i] = xmax;
    for (int32_t x = 0; x < xmax; ++x)
      plan->weights[size_t{i} * taps + x] = static_cast<float>(w[x]);
    plan->min_index = std::min(plan->min_index, xmin);
    plan->max_index = std::max(plan->max_index, xmin + xmax);
  }
  // 14 fractional bits: bicubic's largest weight (1.0) and its negative lobes
  // fit int16, and 255 * sum(|w|) * 2^14 fits the int32 accumulator. Pairs
  // cover the most taps any output uses, not the bound `taps`: the SIMD
  // kernels run every output for pair_count pairs, and an upscale's outputs
  // use 2 of the 3 taps (1 pair, not 2), a downscale by 1..1.5 uses 3 of 5.
  const int32_t most =
      out_size == 0 ? 0 : *std::max_element(plan->count.begin(), plan->count.end());
  plan->pair_count = static_cast<uint32_t>(most + 1) / 2;
  plan->pairs.resize(size_t{out_size} * plan->pair_count);
  // std::lround's rounding (half away from zero), inline: in double, where
  // adding 0.5 to a float is exact.
  auto q = [](float weight) {
    const double x = double{weight} * 16384.0;
    return static_cast<uint16_t>(static_cast<int16_t>(x < 0 ? x - 0.5 : x + 0.5));
  };
  for (uint32_t i = 0; i < out_size; ++i) {
    const float* wi = &plan->weights[size_t{i} * taps];
    for (size_t j = 0; j < plan->pair_count; ++j) {
      const uint16_t lo = q(wi[2 * j]), hi = 2 * j + 1 < taps ? q(wi[2 * j + 1]) : 0;
      plan->pairs[size_t{i} * plan->pair_count + j] =
          static_cast<int32_t>(uint32_t{lo} | uint32_t{hi} << 16);
    }
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

// Both passes. The horizontal one writes 8-bit planes (rows x ow per
// channel), as Pillow keeps an 8-bit intermediate image; the vertical pass
// and the output conversion then run over contiguous rows and vectorise.
// Built for AVX2+FMA and for the baseline, picked at load time by the CPU
// (GCC function multi-versioning): one binary, no -march needed.
FEEDLINE_TARGET_CLONES
void ResampleImpl(const RgbSource& src, const AxisPlan& h, const AxisPlan& v, bool flip,
                  const OutputFormat& format, bool fixed_point, std::vector<float>* scratch,
                  void* out) {
  const uint32_t ow = h.out_size, oh = v.out_size;
  const int32_t row_begin = v.min_index, row_end = v.max_index;
  const size_t rows = static_cast<size_t>(row_end - row_begin);
  const int32_t col_begin = h.min_index;
  const size_t cols = static_cast<size_t>(h.max_index - col_begin);
  // Scratch layout (in floats): 3 uint8 planes of rows x ow, 3 rows of ow
  // float sums, and one source row as 16-byte vectors (cols + 2 * taps of
  // them, padded for fixed-length tap loops; this piece 64-byte aligned).
  const size_t plane = rows * ow;
  // +64 bytes: the SIMD vertical pass loads a vector of pixels at a time and
  // may read up to 63 past the last plane's end (resample_hwy.h).
  const size_t plane_floats = (3 * plane + 3) / 4 + 16;
  const size_t sums_stride = (size_t{ow} + 7) / 8 * 8;  // whole 8-float vectors per channel
  const size_t vec_count = cols + 2 * size_t{h.taps} + 2;
  // The SIMD horizontal pass takes `group` rows at a time (resample_hwy.h).
  const size_t group = fixed_point ? HorizontalRowsPerCall() : 1;
  const size_t need = plane_floats + 3 * sums_stride + 4 * vec_count * group + 16;
  if (scratch->size() < need) scratch->resize(need);
  auto* planes = reinterpret_cast<uint8_t*>(scratch->data());
  float* sums = scratch->data() + plane_floats;
  float* vec_base = sums + 3 * sums_stride;
  // 64-byte aligned: the pair vectors' 64-byte stores (AVX-512) split no
  // cache line (16-byte alignment cost the horizontal pass ~20%).
  vec_base += (16 - (reinterpret_cast<uintptr_t>(vec_base) / 4) % 16) % 16;
  auto* rowf = reinterpret_cast<V4*>(vec_base);
  for (size_t k = cols; k < vec_count; ++k) rowf[k] = V4{0, 0, 0, 0};

  // Horizontal pass over the rows the vertical pass reads; flip here.
  if (fixed_point) {
    for (size_t r = 0; r < rows; r += group) {
      const uint8_t* row =
          src.pixels +
          static_cast<size_t>(row_begin + static_cast<int32_t>(r) - src.row0) * src.stride +
          static_cast<size_t>(col_begin - src.col0) * 3;
      uint8_t* pr = planes + r * ow;
      HorizontalRows(row, src.stride, std::min(group, rows - r), cols, h, col_begin, flip, rowf, pr,
                     pr + plane, pr + 2 * plane, ow);
    }
  }
  for (size_t r = 0; r < rows && !fixed_point; ++r) {
    const uint8_t* row =
        src.pixels +
        static_cast<size_t>(row_begin + static_cast<int32_t>(r) - src.row0) * src.stride +
        static_cast<size_t>(col_begin - src.col0) * 3;
    uint8_t* pr = planes + r * ow;
    HorizontalFloat(row, cols, h, col_begin, flip, rowf, pr, pr + plane, pr + 2 * plane);
  }

  // Vertical pass per channel over contiguous rows, then one conversion and
  // write per output value: fused, wide SIMD (resample_hwy.h), or the
  // reference below.
  if (fixed_point) {
    for (uint32_t y = 0; y < oh; ++y) {
      const uint8_t* first = planes + static_cast<size_t>(v.start[y] - row_begin) * ow;
      VerticalConvertRow(first, plane, ow, oh, y, v.count[y], &v.pairs[size_t{y} * v.pair_count],
                         v.pair_count, format, out);
    }
    FlushStreamingStores();
    return;
  }
  const size_t out_plane = size_t{ow} * oh;
  for (uint32_t y = 0; y < oh; ++y) {
    const float* w = &v.weights[size_t{y} * v.taps];
    for (int c = 0; c < 3; ++c) {
      float* acc = sums + c * sums_stride;
      const uint8_t* first = planes + c * plane + static_cast<size_t>(v.start[y] - row_begin) * ow;
      const float w0 = w[0];
      for (uint32_t x = 0; x < ow; ++x) acc[x] = static_cast<float>(first[x]) * w0;
      for (int32_t k = 1; k < v.count[y]; ++k) {
        const uint8_t* row = first + static_cast<size_t>(k) * ow;
        const float wk = w[k];
        for (uint32_t x = 0; x < ow; ++x) acc[x] += static_cast<float>(row[x]) * wk;
      }
      // Explicit 4-lane rounding: GCC leaves the scalar form unvectorised.
      uint32_t x = 0;
      for (; x + 4 <= ow; x += 4) {
        V4 a;
        std::memcpy(&a, acc + x, sizeof(a));
        a = Round8(a);
        std::memcpy(acc + x, &a, sizeof(a));
      }
      for (; x < ow; ++x) acc[x] = Round8(acc[x]);
    }
    const bool chw = format.layout == Layout::kCHW;
    for (int c = 0; c < 3; ++c) {
      const float* acc = sums + c * sums_stride;
      const float mul = format.mul[c], add = format.add[c];
      // Element x of channel c goes to index base + x * step.
      const size_t base_index = chw ? c * out_plane + size_t{y} * ow : size_t{y} * ow * 3 + c;
      const size_t step = chw ? 1 : 3;
      switch (format.dtype) {
        case DType::kUInt8: {
          uint8_t* o = static_cast<uint8_t*>(out) + base_index;
          for (uint32_t x = 0; x < ow; ++x) o[x * step] = static_cast<uint8_t>(acc[x]);
          break;
        }
        case DType::kFloat32: {
          float* o = static_cast<float*>(out) + base_index;
          if (chw) {
            size_t x = 0;
            for (; x < ow; ++x) o[x] = acc[x] * mul + add;
          } else {
            for (size_t x = 0; x < ow; ++x) o[x * 3] = acc[x] * mul + add;
          }
          break;
        }
        case DType::kFloat16: {
          uint16_t* o = static_cast<uint16_t*>(out) + base_index;
          for (uint32_t x = 0; x < ow; ++x) o[x * step] = FloatToHalf(acc[x] * mul + add);
          break;
        }
        case DType::kBFloat16: {
          uint16_t* o = static_cast<uint16_t*>(out) + base_index;
          for (uint32_t x = 0; x < ow; ++x) o[x * step] = FloatToBFloat16(acc[x] * mul + add);
          break;
        }
        default: break;  // rejected when the op is made
      }
    }
  }
}

void Resample(const RgbSource& src, const AxisPlan& h, const AxisPlan& v, bool flip,
              const OutputFormat& format, std::vector<float>* scratch, void* out) {
  ResampleImpl(src, h, v, flip, format, /*fixed_point=*/true, scratch, out);
}

void ResampleReference(const RgbSource& src, const AxisPlan& h, const AxisPlan& v, bool flip,
                       const OutputFormat& format, std::vector<float>* scratch, void* out) {
  ResampleImpl(src, h, v, flip, format, /*fixed_point=*/false, scratch, out);
}

}  // namespace feedline::image
