#include "src/image/pad_crop.h"

#include <algorithm>
#include <string>

namespace feedline::image {

int32_t PaddedIndex(int64_t p, uint32_t before, uint32_t length, PaddingMode mode) {
  const int64_t n = length;
  const int64_t i = p - before;
  if (i >= 0 && i < n) return static_cast<int32_t>(i);
  switch (mode) {
    case PaddingMode::kConstant: return kPadFill;
    case PaddingMode::kEdge: return i < 0 ? 0 : static_cast<int32_t>(n - 1);
    case PaddingMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);  // 0 1 .. n-1 n-2 .. 1, repeated
      const int64_t m = ((i % period) + period) % period;
      return static_cast<int32_t>(m < n ? m : period - m);
    }
    case PaddingMode::kSymmetric: {
      const int64_t period = 2 * n;  // 0 1 .. n-1 n-1 .. 0, repeated
      const int64_t m = ((i % period) + period) % period;
      return static_cast<int32_t>(m < n ? m : period - 1 - m);
    }
  }
  return kPadFill;
}

namespace {

// One axis' map; [lo, hi) gathers the source indices it reads.
void MapAxis(uint32_t out_len, int64_t start, bool reverse, uint32_t before, uint32_t length,
             PaddingMode mode, std::vector<int32_t>* map, int64_t* lo, int64_t* hi) {
  map->resize(out_len);
  for (uint32_t k = 0; k < out_len; ++k) {
    const int64_t p = start + (reverse ? out_len - 1 - k : k);
    const int32_t i = PaddedIndex(p, before, length, mode);
    (*map)[k] = i;
    if (i != kPadFill) {
      *lo = std::min<int64_t>(*lo, i);
      *hi = std::max<int64_t>(*hi, int64_t{i} + 1);
    }
  }
}

}  // namespace

Status PlanPadCrop(const ImageTransform& t, const CropBox& box, uint32_t width, uint32_t height,
                   PadCropPlan* plan) {
  const auto& pad = box.padding;
  const uint64_t pw = uint64_t{width} + pad[0] + pad[2], ph = uint64_t{height} + pad[1] + pad[3];
  if (t.width > pw || t.height > ph || box.x < 0 || box.y < 0 || box.x + t.width > pw ||
      box.y + t.height > ph) {
    return InvalidArgumentError(
        "RandomCrop: the crop " + std::to_string(t.height) + "x" + std::to_string(t.width) +
        " at (" + std::to_string(static_cast<int64_t>(box.y)) + ", " +
        std::to_string(static_cast<int64_t>(box.x)) + ") does not fit in the padded image " +
        std::to_string(ph) + "x" + std::to_string(pw) + " (image " + std::to_string(height) + "x" +
        std::to_string(width) + ", padding left " + std::to_string(pad[0]) + " top " +
        std::to_string(pad[1]) + " right " + std::to_string(pad[2]) + " bottom " +
        std::to_string(pad[3]) + "); pad_if_needed=True pads small images");
  }
  // torchvision's tensor path mirrors once: reflect needs padding < the
  // axis, symmetric padding <= it (numpy, under its PIL path, mirrors wider
  // padding in chunks that depend on the other side's padding: a result no
  // other library reproduces, so neither do we).
  if (t.padding_mode == PaddingMode::kReflect || t.padding_mode == PaddingMode::kSymmetric) {
    const bool reflect = t.padding_mode == PaddingMode::kReflect;
    static constexpr const char* kSides[4] = {"left", "top", "right", "bottom"};
    for (int k = 0; k < 4; ++k) {
      const uint32_t n = k % 2 == 0 ? width : height;
      if (reflect ? pad[k] >= n : pad[k] > n) {
        return InvalidArgumentError(
            std::string("RandomCrop: ") + (reflect ? "reflect" : "symmetric") + " padding " +
            std::to_string(pad[k]) + " on the " + kSides[k] + " is " +
            (reflect ? "not less than" : "more than") + " the image's " +
            (k % 2 == 0 ? "width " : "height ") + std::to_string(n) +
            " (torchvision refuses it too; constant or edge padding has no such limit)");
      }
    }
  }
  int64_t x_lo = width, x_hi = 0, y_lo = height, y_hi = 0;
  MapAxis(t.width, static_cast<int64_t>(box.x), box.flip, pad[0], width, t.padding_mode,
          &plan->cols, &x_lo, &x_hi);
  MapAxis(t.height, static_cast<int64_t>(box.y), false, pad[1], height, t.padding_mode, &plan->rows,
          &y_lo, &y_hi);
  if (x_lo >= x_hi || y_lo >= y_hi) {  // fill only
    plan->x0 = plan->x1 = plan->y0 = plan->y1 = 0;
  } else {
    plan->x0 = static_cast<uint32_t>(x_lo);
    plan->x1 = static_cast<uint32_t>(x_hi);
    plan->y0 = static_cast<uint32_t>(y_lo);
    plan->y1 = static_cast<uint32_t>(y_hi);
  }
  return Status::OK();
}

void GatherPadCrop(const PadCropPlan& plan, const uint8_t* src, uint32_t src_x, uint32_t src_y,
                   size_t pixel_stride, size_t row_stride, size_t channel_stride,
                   const std::array<uint8_t, 3>& fill, uint8_t* chw) {
  const size_t w = plan.cols.size(), h = plan.rows.size(), n = w * h;
  for (int c = 0; c < 3; ++c) {
    uint8_t* plane = chw + c * n;
    const uint8_t* base = src + c * channel_stride;
    for (size_t r = 0; r < h; ++r) {
      uint8_t* o = plane + r * w;
      const int32_t sr = plan.rows[r];
      if (sr == kPadFill) {
        std::fill(o, o + w, fill[c]);
        continue;
      }
      const uint8_t* row = base + (static_cast<size_t>(sr) - src_y) * row_stride;
      for (size_t k = 0; k < w; ++k) {
        const int32_t sc = plan.cols[k];
        o[k] = sc == kPadFill ? fill[c] : row[(static_cast<size_t>(sc) - src_x) * pixel_stride];
      }
    }
  }
}

void AddPaddingFingerprint(const ImageTransform& t, core::detail::Fingerprint& fp) {
  if (t.crop != CropMode::kRandomCrop) return;
  fp.Add(std::string_view("random_crop"));
  for (uint32_t p : t.padding) fp.Add(uint64_t{p});
  fp.Add(uint64_t{t.pad_if_needed}).Add(uint64_t(t.padding_mode));
  for (uint8_t v : t.pad_fill) fp.Add(uint64_t{v});
}

}  // namespace feedline::image
