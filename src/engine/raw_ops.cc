// The raw-bytes ops (include/feedline/raw_ops.h).
#include "feedline/raw_ops.h"

#include <cstring>
#include <string>
#include <utility>

namespace feedline {

std::shared_ptr<const SampleOp> MakeLabelOp(size_t field) {
  return MakeOp("label", [field](Sample& s) {
    *s.output_as<int64_t>(field) = s.label;
    return Status::OK();
  });
}

std::shared_ptr<const SampleOp> MakeRawBytesOp(size_t bytes_field, size_t length_field,
                                               uint64_t max_bytes) {
  return MakeOp("raw_bytes", [=](Sample& s) {
    const std::span<const uint8_t> data = s.data();
    if (data.size() > max_bytes) {
      return ResourceExhaustedError("record is " + std::to_string(data.size()) +
                                    " bytes, over max_record_bytes=" + std::to_string(max_bytes));
    }
    uint8_t* out = s.output_as<uint8_t>(bytes_field);
    std::memcpy(out, data.data(), data.size());
    std::memset(out + data.size(), 0, max_bytes - data.size());
    *s.output_as<int64_t>(length_field) = static_cast<int64_t>(data.size());
    return Status::OK();
  });
}

Pipeline MakeRawPipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                         uint64_t max_bytes) {
  Pipeline p;
  p.num_samples = num_samples;
  p.fields = {{"bytes", DType::kUInt8, {static_cast<int64_t>(max_bytes)}},
              {"length", DType::kInt64, {}},
              {"label", DType::kInt64, {}}};
  p.ops = {std::move(read_op), MakeRawBytesOp(0, 1, max_bytes), MakeLabelOp(2)};
  return p;
}

}  // namespace feedline
