// Two custom ops on a sample's fields, written against the public headers
// only (feedline/op_registry.h, feedline/image.h), as a user would:
//
//   mask_fraction  the share of a mask image's pixels that are foreground
//                  (some channel >= `threshold`, default 128): a float32
//                  scalar per sample. Decodes with feedline's image decoder
//                  and charges the decode to the loader's RAM budget.
//   byte_histogram how often each byte value occurs in a part, in `bins`
//                  (1..256, default 256) equal buckets: int64 [bins].
//
// Built twice (CMakeLists.txt): into the example's test, where
// FEEDLINE_REGISTER_OP registers them at start-up, and into a shared
// library that feedline::LoadOps / feedline.load_ops() loads.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "feedline/op_registry.h"

namespace mask_ops {

using feedline::FieldSpec;
using feedline::Result;
using feedline::Sample;
using feedline::Status;

class MaskFraction final : public feedline::CustomOp {
 public:
  Result<std::vector<FieldSpec>> Plan(const feedline::OpContext& c) override {
    FEEDLINE_RETURN_IF_ERROR(c.CheckParams({"threshold"}));
    FEEDLINE_ASSIGN_OR_RETURN(threshold_, c.IntParam("threshold", 128, 0, 255));
    return std::vector<FieldSpec>{{c.field, feedline::DType::kFloat32, {}}};
  }

  bool ChargesScratch() const override { return true; }

  Status Apply(Sample& s, feedline::OpState* /*state*/) const override {
    const Sample::Part* mask = FindInput(s);
    if (mask == nullptr) return MissingInput(s);
    // The header first, so that the decode is charged before it allocates.
    FEEDLINE_ASSIGN_OR_RETURN(feedline::ImageInfo info, feedline::ReadImageInfo(mask->data));
    FEEDLINE_RETURN_IF_ERROR(
        s.ChargeScratch(uint64_t{info.width} * info.height * 3, "mask_fraction decode"));
    FEEDLINE_ASSIGN_OR_RETURN(feedline::RgbImage image, feedline::DecodeImage(mask->data));
    const size_t pixels = size_t{image.width} * image.height;
    size_t foreground = 0;
    for (size_t i = 0; i < pixels; ++i) {
      const uint8_t* p = &image.pixels[3 * i];
      if (p[0] >= threshold_ || p[1] >= threshold_ || p[2] >= threshold_) ++foreground;
    }
    *s.output_as<float>(output_index()) =
        pixels == 0 ? 0.0f : static_cast<float>(static_cast<double>(foreground) / pixels);
    return Status::OK();
  }

  uint64_t ConfigFingerprint() const override { return 0x6d61736bULL ^ threshold_; }

 private:
  int64_t threshold_ = 128;
};

class ByteHistogram final : public feedline::CustomOp {
 public:
  Result<std::vector<FieldSpec>> Plan(const feedline::OpContext& c) override {
    FEEDLINE_RETURN_IF_ERROR(c.CheckParams({"bins"}));
    FEEDLINE_ASSIGN_OR_RETURN(bins_, c.IntParam("bins", 256, 1, 256));
    return std::vector<FieldSpec>{{c.field, feedline::DType::kInt64, {bins_}}};
  }

  Status Apply(Sample& s, feedline::OpState* /*state*/) const override {
    const Sample::Part* part = FindInput(s);
    if (part == nullptr) return MissingInput(s);
    int64_t* out = s.output_as<int64_t>(output_index());
    for (int64_t b = 0; b < bins_; ++b) out[b] = 0;
    for (uint8_t byte : part->data) ++out[int64_t{byte} * bins_ / 256];
    return Status::OK();
  }

  uint64_t ConfigFingerprint() const override { return 0x68697374ULL ^ bins_; }

 private:
  int64_t bins_ = 256;
};

FEEDLINE_REGISTER_OP("mask_fraction", MaskFraction);
FEEDLINE_REGISTER_OP("byte_histogram", ByteHistogram);

}  // namespace mask_ops
