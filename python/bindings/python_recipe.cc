// Pipelines with Python ops: the shapes learned from the first sample, then
// the recipe's ops with their fields (docs/python_ops.md).
#include <string>
#include <utility>

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

// The ops of `spec` writing fields [offset, offset + fields), without the map.
struct Inner {
  Pipeline pipeline;
  std::vector<std::pair<size_t, std::shared_ptr<PyOpStats>>> stats;
};

Result<Inner> InnerPipeline(const Source& source, const SampleSpec& spec, const PyRecipe& recipe,
                            const std::optional<MidSpec>& learned, size_t offset) {
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
    case SampleSpec::Output::kFields: {
      if (recipe.chain) {
        return UnimplementedError(
            "Python members in the transform of an image field (fields=) are not supported yet; "
            "use a native transform and map=");
      }
      const bool one_image = source.kind != Source::Kind::kTar;
      FEEDLINE_RETURN_IF_ERROR(AppendFieldOps(spec.fields, one_image, &p, offset));
      break;
    }
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
  if (recipe_in.workers && !recipe_in.chain) {
    return InvalidArgumentError(
        "python_workers runs the Python members of a torchvision Compose; this transform has none");
  }
  PyRecipe recipe = recipe_in;
  if (recipe.chain) recipe.chain->workers = recipe.workers;
  std::optional<MidSpec> learned;
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
    learned = **probe.probe;
    FEEDLINE_RETURN_IF_ERROR(
        PlanSuffix(recipe.chain->suffix, *learned, "image")
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
