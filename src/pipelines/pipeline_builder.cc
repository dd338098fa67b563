// Recipes: the ops of each SampleSpec output over any source's read op.
#include "feedline/pipeline_builder.h"

#include <cstring>
#include <string>
#include <utility>

namespace feedline {

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
  FEEDLINE_RETURN_IF_ERROR(AppendFieldOps(fields, one_image, &p).WithContext("BuildPipeline"));
  return p;
}

}  // namespace

Status AppendFieldOps(const std::vector<FieldRequest>& requests, bool source_has_labels,
                      Pipeline* pipeline, size_t output_offset) {
  const size_t first = pipeline->fields.size();
  auto taken = [&](const std::string& name) {
    for (size_t j = first; j < pipeline->fields.size(); ++j) {
      if (pipeline->fields[j].name == name) return true;
    }
    return false;
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    const FieldRequest& r = requests[i];
    if (r.name.empty()) return InvalidArgumentError("field " + std::to_string(i) + " has no name");
    if (taken(r.name)) return InvalidArgumentError("two fields are named '" + r.name + "'");
    if ((r.kind == FieldRequest::Kind::kBytes || r.kind == FieldRequest::Kind::kOp) &&
        r.parts.empty()) {
      return InvalidArgumentError(std::string(FieldKindName(r.kind)) + " field '" + r.name +
                                  "' needs the parts it is read from");
    }
    if (r.kind != FieldRequest::Kind::kOp) {
      pipeline->fields.push_back(FieldSpecOf(r));
      pipeline->ops.push_back(
          MakeFieldOp(r, output_offset + pipeline->fields.size() - 1, source_has_labels));
      continue;
    }
    OpContext c;
    c.op = r.op;
    c.field = r.name;
    c.parts = r.parts;
    c.params = r.params;
    c.upstream = pipeline->fields;
    c.first_output = output_offset + pipeline->fields.size();
    c.source_has_labels = source_has_labels;
    FEEDLINE_ASSIGN_OR_RETURN(PlannedOp planned, PlanOp(std::move(c)));
    for (FieldSpec& f : planned.outputs) {
      if (taken(f.name)) {
        return InvalidArgumentError("op '" + r.op + "' for field '" + r.name + "': output '" +
                                    f.name + "' is the name of another field");
      }
      pipeline->fields.push_back(std::move(f));
    }
    pipeline->ops.push_back(std::move(planned.op));
  }
  return Status::OK();
}

namespace {

Result<Pipeline> OutputPipeline(const Source& source, const SampleSpec& spec) {
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

}  // namespace

Result<Pipeline> BuildPipeline(const Source& source, const SampleSpec& spec) {
  if (source.read_op == nullptr)
    return InvalidArgumentError("BuildPipeline: the source has no read op");
  FEEDLINE_ASSIGN_OR_RETURN(Pipeline p, OutputPipeline(source, spec));
  // A source read by groups shuffles by groups (sampler.h).
  p.sample_groups = source.sample_groups;
  p.group_window = source.group_window;
  return p;
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
