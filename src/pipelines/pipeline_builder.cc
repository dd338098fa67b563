// Recipes: the ops of each SampleSpec output over any source's read op.
#include "feedline/pipeline_builder.h"

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

Pipeline MakeImagePipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                           const ImageTransform& transform) {
  Pipeline p;
  p.num_samples = num_samples;
  p.fields = {ImageField(transform), {"label", DType::kInt64, {}}};
  p.ops = {std::move(read_op), MakeImageOp(transform, 0), MakeLabelOp(1)};
  return p;
}

namespace {

Result<Pipeline> FieldsPipeline(const Source& source, const std::vector<FieldRequest>& fields) {
  if (fields.empty())
    return InvalidArgumentError("BuildPipeline: kFields needs at least one field");
  // Folders and packed shards give one image and a label per sample.
  const bool one_image =
      source.kind == Source::Kind::kImageFolder || source.kind == Source::Kind::kShards;
  Pipeline p;
  p.num_samples = source.num_samples;
  p.ops.push_back(source.read_op);
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldRequest& r = fields[i];
    if (r.name.empty())
      return InvalidArgumentError("BuildPipeline: field " + std::to_string(i) + " has no name");
    for (size_t j = 0; j < i; ++j) {
      if (fields[j].name == r.name) {
        return InvalidArgumentError("BuildPipeline: two fields are named '" + r.name + "'");
      }
    }
    if (r.kind == FieldRequest::Kind::kBytes && r.parts.empty()) {
      return InvalidArgumentError("BuildPipeline: bytes field '" + r.name +
                                  "' needs the parts it is read from");
    }
    p.fields.push_back(FieldSpecOf(r));
    p.ops.push_back(MakeFieldOp(r, i, one_image));
  }
  return p;
}

}  // namespace

Result<Pipeline> BuildPipeline(const Source& source, const SampleSpec& spec) {
  if (source.read_op == nullptr)
    return InvalidArgumentError("BuildPipeline: the source has no read op");
  switch (spec.output) {
    case SampleSpec::Output::kImage:
      return MakeImagePipeline(source.read_op, source.num_samples, spec.transform);
    case SampleSpec::Output::kRawBytes:
      if (spec.max_record_bytes == 0) {
        return InvalidArgumentError("BuildPipeline: raw bytes need max_record_bytes > 0");
      }
      return MakeRawPipeline(source.read_op, source.num_samples, spec.max_record_bytes);
    case SampleSpec::Output::kFields: return FieldsPipeline(source, spec.fields);
  }
  return InvalidArgumentError("BuildPipeline: unknown output " +
                              std::to_string(static_cast<int>(spec.output)));
}

Pipeline ImageFolderPipeline(std::shared_ptr<const ImageFolder> folder,
                             const ImageTransform& transform) {
  const uint64_t n = folder->files.size();
  return MakeImagePipeline(MakeReadFileOp(std::move(folder)), n, transform);
}

Pipeline RawFolderPipeline(std::shared_ptr<const ImageFolder> folder, uint64_t max_bytes) {
  const uint64_t n = folder->files.size();
  return MakeRawPipeline(MakeReadFileOp(std::move(folder)), n, max_bytes);
}

Pipeline ShardImagePipeline(std::shared_ptr<const ShardDataset> dataset,
                            const ImageTransform& transform) {
  const uint64_t n = dataset->num_records();
  return MakeImagePipeline(MakeShardReadOp(std::move(dataset)), n, transform);
}

}  // namespace feedline
