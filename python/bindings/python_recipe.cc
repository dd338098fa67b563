// Pipelines with Python ops: the shapes learned from the first sample, then
// the recipe's ops with their fields (docs/python_ops.md).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "python/bindings/python_op.h"

namespace feedline::python {
namespace {

// Runs the first sample of `p` (sample 0 at the start epoch, one thread),
// so that the Python ops in probe mode record what they return. Under the
// skip policy a failing sample is skipped and the next one tried.
Status ProbeFirst(const Pipeline& p, const LoaderOptions& options) {
  LoaderOptions o = options;
  o.batch_size = 1;
  o.shuffle = false;
  o.num_threads = 1;
  o.ring_depth = 2;
  o.rank = 0;
  o.world_size = 1;
  o.drop_last = false;
  o.elastic = false;
  o.allocator = nullptr;
  Status st;
  {
    Result<std::unique_ptr<Loader>> loader = Loader::Create(p, o);
    st = loader.status();
    if (st.ok()) {
      Batch b;
      bool end = false;
      st = (*loader)->Next(&b, &end);
      if (st.ok() && end) st = NotFoundError("no sample gave an output");
    }
  }
  return st.WithContext("running the first sample at creation to learn the output shape");
}

// What each chain's Python middle returned for the first sample: "image"
// for the image recipe's chain, the field's name for an image field's.
using Learned = std::map<std::string, MidSpec>;

// The ops of `spec` writing fields [offset, offset + fields), without the map.
struct Inner {
  Pipeline pipeline;
  std::vector<std::pair<size_t, std::shared_ptr<PyOpStats>>> stats;
  // Probe mode (nothing learned yet): each field chain's first middle output.
  std::vector<std::pair<std::string, std::shared_ptr<std::optional<MidSpec>>>> probes;
};

const ImageChain* FieldChain(const PyRecipe& recipe, const std::string& field) {
  for (const auto& [name, chain] : recipe.field_chains) {
    if (name == field) return &chain;
  }
  return nullptr;
}

// kFields: the field ops of AppendFieldOps, except that an image field with
// a chain gets the chain's ops reading its part (MakeImageChainOps' input).
Status AppendFields(const Source& source, const SampleSpec& spec, const PyRecipe& recipe,
                    const Learned& learned, size_t offset, Inner* in) {
  Pipeline& p = in->pipeline;
  // Folders and packed shards give one image and a label per sample (as
  // BuildPipeline's FieldsPipeline decides).
  const bool one_image =
      source.kind == Source::Kind::kImageFolder || source.kind == Source::Kind::kShards;
  if (recipe.field_chains.empty()) return AppendFieldOps(spec.fields, one_image, &p, offset);
  for (const auto& [name, chain] : recipe.field_chains) {
    bool found = false;
    for (const FieldRequest& r : spec.fields) {
      found = found || (r.name == name && r.kind == FieldRequest::Kind::kImage);
    }
    if (!found)
      return InvalidArgumentError("a Python chain for '" + name + "', not an image field");
  }
  // One request at a time: BuildPipeline(source, spec) checked the names
  // of the whole list first, and each request's field index follows from
  // the fields already appended.
  for (const FieldRequest& r : spec.fields) {
    const ImageChain* chain =
        r.kind == FieldRequest::Kind::kImage ? FieldChain(recipe, r.name) : nullptr;
    if (chain == nullptr) {
      FEEDLINE_RETURN_IF_ERROR(AppendFieldOps({r}, one_image, &p, offset));
      continue;
    }
    ChainInput input{r, one_image};
    if (input.request.parts.empty()) input.request.parts = DefaultParts(r.kind);
    const auto l = learned.find(r.name);
    const std::optional<MidSpec> mid =
        l == learned.end() ? std::nullopt : std::optional<MidSpec>(l->second);
    ChainOps ops = MakeImageChainOps(*chain, offset + p.fields.size(), mid, std::move(input));
    if (mid) {
      FEEDLINE_ASSIGN_OR_RETURN(FieldSpec f, PlanSuffix(chain->suffix, *mid, r.name));
      p.fields.push_back(f);
    } else {
      p.fields.push_back({r.name, DType::kUInt8, {1}});  // probe: a placeholder
      in->probes.emplace_back(r.name, ops.probe);
    }
    in->stats.emplace_back(p.ops.size() + 1, ops.stats);
    for (auto& op : ops.ops) p.ops.push_back(std::move(op));
  }
  return Status::OK();
}

Result<Inner> InnerPipeline(const Source& source, const SampleSpec& spec, const PyRecipe& recipe,
                            const Learned& learned_all, size_t offset) {
  const auto image = learned_all.find("image");
  const std::optional<MidSpec> learned =
      image == learned_all.end() ? std::nullopt : std::optional<MidSpec>(image->second);
  Inner in;
  Pipeline& p = in.pipeline;
  p.num_samples = source.num_samples;
  p.ops.push_back(source.read_op);
  switch (spec.output) {
    case SampleSpec::Output::kImage:
      if (recipe.chain) {
        ChainOps ops = MakeImageChainOps(*recipe.chain, offset, learned);
        if (learned) {
          FEEDLINE_ASSIGN_OR_RETURN(FieldSpec f,
                                    PlanSuffix(recipe.chain->suffix, *learned, "image"));
          p.fields.push_back(f);
        } else {
          p.fields.push_back({"image", DType::kUInt8, {1}});  // probe: a placeholder
        }
        in.stats.emplace_back(p.ops.size() + 1, ops.stats);
        for (auto& op : ops.ops) p.ops.push_back(std::move(op));
      } else {
        p.fields.push_back(ImageField(spec.transform));
        p.ops.push_back(MakeImageOp(spec.transform, offset));
      }
      p.fields.push_back({"label", DType::kInt64, {}});
      p.ops.push_back(MakeLabelOp(offset + 1));
      break;
    case SampleSpec::Output::kRawBytes:
      p.fields = {{"bytes", DType::kUInt8, {static_cast<int64_t>(spec.max_record_bytes)}},
                  {"length", DType::kInt64, {}},
                  {"label", DType::kInt64, {}}};
      p.ops.push_back(MakeRawBytesOp(offset, offset + 1, spec.max_record_bytes));
      p.ops.push_back(MakeLabelOp(offset + 2));
      break;
    case SampleSpec::Output::kFields:
      if (recipe.chain) {
        return InvalidArgumentError(
            "a chain for the image recipe with fields=: give each image field's chain "
            "(PyRecipe.field_chains)");
      }
      FEEDLINE_RETURN_IF_ERROR(AppendFields(source, spec, recipe, learned_all, offset, &in));
      break;
  }
  return in;
}

}  // namespace

Result<Pipeline> BuildPythonPipeline(
    const Source& source, const SampleSpec& spec, const PyRecipe& recipe_in,
    const LoaderOptions& options,
    std::vector<std::pair<size_t, std::shared_ptr<PyOpStats>>>* python_stats) {
  // The native recipe's own checks (field names, sizes) first.
  FEEDLINE_RETURN_IF_ERROR(BuildPipeline(source, spec).status());
  if (recipe_in.workers && !recipe_in.field_chains.empty()) {
    return InvalidArgumentError(
        "python_workers with fields=: the Python members of an image field's transform run on the "
        "loader's threads only; process workers for fields are not supported yet");
  }
  if (recipe_in.workers && !recipe_in.chain) {
    return InvalidArgumentError(
        "python_workers runs the Python members of a torchvision Compose; this transform has none");
  }
  if (!recipe_in.field_chains.empty() && spec.output != SampleSpec::Output::kFields) {
    return InvalidArgumentError("chains for image fields need fields=");
  }
  PyRecipe recipe = recipe_in;
  if (recipe.chain) recipe.chain->workers = recipe.workers;
  Learned learned;
  if (!recipe.field_chains.empty()) {
    // Each image field's chain learns its output from the first sample,
    // all in one probe run.
    FEEDLINE_ASSIGN_OR_RETURN(Inner probe, InnerPipeline(source, spec, recipe, learned, 0));
    FEEDLINE_RETURN_IF_ERROR(ProbeFirst(probe.pipeline, options));
    for (const auto& [field, mid] : probe.probes) {
      if (!mid->has_value()) return InternalError("the first sample ran no Python op");
      learned[field] = **mid;
      FEEDLINE_RETURN_IF_ERROR(PlanSuffix(FieldChain(recipe, field)->suffix, **mid, field)
                                   .status()
                                   .WithContext("field '" + field +
                                                "': the first sample (run at creation to learn " +
                                                "the output shape)"));
    }
  }
  if (recipe.chain) {
    if (spec.output != SampleSpec::Output::kImage) {
      FEEDLINE_RETURN_IF_ERROR(InnerPipeline(source, spec, recipe, learned, 0).status());
    }
    ChainOps probe = MakeImageChainOps(*recipe.chain, 0, std::nullopt);
    Pipeline p0;
    p0.num_samples = source.num_samples;
    p0.fields = {{"image", DType::kUInt8, {1}}, {"label", DType::kInt64, {}}};
    p0.ops = {source.read_op, probe.ops[0], probe.ops[1], probe.ops[2], MakeLabelOp(1)};
    FEEDLINE_RETURN_IF_ERROR(ProbeFirst(p0, options));
    if (!probe.probe->has_value()) return InternalError("the first sample ran no Python op");
    learned["image"] = **probe.probe;
    FEEDLINE_RETURN_IF_ERROR(
        PlanSuffix(recipe.chain->suffix, learned["image"], "image")
            .status()
            .WithContext("the first sample (run at creation to learn the output shape)"));
  }
  if (!recipe.map) {
    FEEDLINE_ASSIGN_OR_RETURN(Inner in, InnerPipeline(source, spec, recipe, learned, 0));
    *python_stats = std::move(in.stats);
    return std::move(in.pipeline);
  }
  std::vector<FieldSpec> out;
  {
    FEEDLINE_ASSIGN_OR_RETURN(Inner in, InnerPipeline(source, spec, recipe, learned, 0));
    MapOp probe = MakeMapOp(recipe.map, in.pipeline.fields, 0, {});
    in.pipeline.ops.push_back(probe.op);
    FEEDLINE_RETURN_IF_ERROR(ProbeFirst(in.pipeline, options));
    if (!probe.probe->has_value()) return InternalError("the first sample ran no map");
    out = **probe.probe;
  }
  FEEDLINE_ASSIGN_OR_RETURN(Inner in, InnerPipeline(source, spec, recipe, learned, out.size()));
  Pipeline& p = in.pipeline;
  std::vector<FieldSpec> inner = p.fields;
  p.fields = out;
  for (FieldSpec f : inner) {
    f.name = "@in:" + f.name;
    p.fields.push_back(std::move(f));
  }
  MapOp map = MakeMapOp(recipe.map, inner, out.size(), out);
  in.stats.emplace_back(p.ops.size(), map.stats);
  p.ops.push_back(map.op);
  *python_stats = std::move(in.stats);
  return std::move(p);
}

}  // namespace feedline::python
