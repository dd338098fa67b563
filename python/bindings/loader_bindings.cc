// Binds Loader, LoaderOptions, ImageTransform and the recipes. Type
// conversion only: batches become numpy arrays that view the batch buffer
// (zero copy) and keep it alive through their base object; every call that
// blocks or computes releases the GIL. Every string bound for Python goes
// through PyText (messages) or PyFsName (file and class names), never
// pybind11's strict UTF-8 conversion: a name that is not UTF-8 must not turn
// an error into a UnicodeDecodeError or break stats().
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "feedline/columnar.h"
#include "feedline/image.h"
#include "feedline/image_folder.h"
#include "feedline/loader.h"
#include "feedline/object_store.h"
#include "feedline/op_registry.h"
#include "feedline/pipeline_builder.h"
#include "feedline/source.h"
#include "feedline/tokens.h"
#include "python/bindings/errors.h"
#include "python/bindings/numpy_dtype.h"
#include "python/bindings/python_op.h"

namespace py = pybind11;

namespace feedline::python {
namespace {

// The base object of a batch's arrays: a capsule that owns a keepalive of
// the batch buffer. One per batch, shared by its arrays (each holds a
// reference): the buffer goes back to the ring when the last one dies.
py::capsule KeepaliveCapsule(const Batch& b) {
  auto* keep = new std::shared_ptr<void>(b.keepalive());
  return py::capsule(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
}

// A numpy array over field i of the batch, its base `keepalive`.
py::array FieldArray(const Batch& b, size_t i, const py::capsule& keepalive) {
  const FieldSpec& f = b.field(i);
  std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(b.size())};
  for (int64_t d : f.shape) shape.push_back(d);
  return py::array(NumpyDType(f.dtype), shape, b.data(i), keepalive);
}

// Fields a map= op reads: in the batch buffer, not shown to Python.
constexpr std::string_view kHiddenPrefix = "@in:";

// A token batch's rows' segment starts ("document_starts" [batch, seq_len]
// int32, "num_documents" [batch] int32), where present.
struct DocumentStartFields {
  size_t starts = 0, counts = 0;
};
std::optional<DocumentStartFields> FindDocumentStarts(const Batch& b) {
  std::optional<size_t> starts, counts;
  for (size_t i = 0; i < b.num_fields(); ++i) {
    const FieldSpec& f = b.field(i);
    if (f.kind == FieldKind::kBytes || f.dtype != DType::kInt32) continue;
    if (f.name == "document_starts" && f.shape.size() == 1) starts = i;
    if (f.name == "num_documents" && f.shape.empty()) counts = i;
  }
  if (!starts || !counts) return std::nullopt;
  return DocumentStartFields{*starts, *counts};
}

// cu_seqlens of a token batch (TokenCuSeqlens), without the GIL.
Status JoinCuSeqlens(const Batch& b, const DocumentStartFields& f, std::vector<int32_t>* out) {
  return TokenCuSeqlens(static_cast<const int32_t*>(b.data(f.starts)),
                        static_cast<const int32_t*>(b.data(f.counts)), b.size(),
                        static_cast<uint64_t>(b.field(f.starts).shape[0]), out);
}

// A numpy array that owns `v` (no copy).
py::array OwnedArray(std::vector<int32_t> v) {
  auto* owned = new std::vector<int32_t>(std::move(v));
  py::capsule base(owned, [](void* p) { delete static_cast<std::vector<int32_t>*>(p); });
  return py::array(py::dtype::of<int32_t>(), {static_cast<py::ssize_t>(owned->size())},
                   owned->data(), base);
}

// Calls visit(field index, value, dtype name) for each field Python sees,
// in order (FieldName gives an index's name): a numpy array over the buffer
// (sharing one keepalive capsule), a list of bytes per sample, or, for a
// token batch's segment starts, `cu_seqlens` (their join, an array of its
// own, not in the buffer).
template <typename Visit>
void VisitFields(const Batch& b, const std::optional<DocumentStartFields>& starts,
                 std::vector<int32_t> cu_seqlens, Visit&& visit) {
  std::optional<py::capsule> keepalive;
  for (size_t i = 0; i < b.num_fields(); ++i) {
    if (b.field(i).name.starts_with(kHiddenPrefix)) continue;  // map='s inputs
    if (starts && (i == starts->starts || i == starts->counts)) {
      if (i == starts->starts) visit(i, OwnedArray(std::move(cu_seqlens)), "int32");
      continue;
    }
    if (b.field(i).kind == FieldKind::kBytes) {
      // One bytes object per sample (copied: they are small and Python owns them).
      py::list values;
      for (size_t k = 0; k < b.size(); ++k) {
        const std::span<const uint8_t> v = b.bytes(i, k);
        values.append(py::bytes(reinterpret_cast<const char*>(v.data()), v.size()));
      }
      visit(i, std::move(values), "bytes");
    } else {
      if (!keepalive) keepalive = KeepaliveCapsule(b);
      visit(i, FieldArray(b, i, *keepalive), DTypeName(b.field(i).dtype));
    }
  }
}

// The Python name of field i (cu_seqlens in place of the segment starts).
py::str FieldName(const Batch& b, size_t i, const std::optional<DocumentStartFields>& starts) {
  return starts && i == starts->starts ? py::str("cu_seqlens") : PyText(b.field(i).name);
}

py::dict BatchDict(const Batch& b, const std::optional<DocumentStartFields>& starts = std::nullopt,
                   std::vector<int32_t> cu_seqlens = {}) {
  py::dict d;
  py::list fields, names, dtypes;
  VisitFields(b, starts, std::move(cu_seqlens),
              [&](size_t i, py::object value, std::string_view dtype) {
                fields.append(std::move(value));
                names.append(FieldName(b, i, starts));
                dtypes.append(PyText(dtype));
              });
  d["fields"] = fields;
  d["names"] = names;
  d["dtypes"] = dtypes;
  d["sample_ids"] =
      py::array_t<uint64_t>(static_cast<py::ssize_t>(b.size()), b.sample_ids().data());
  d["epoch"] = b.epoch();
  d["index"] = b.index();
  d["num_padding"] = b.num_padding();
  // For pinning: the address and size of the whole recycled buffer.
  d["buffer"] = py::make_tuple(reinterpret_cast<uintptr_t>(b.buffer().data()), b.buffer().size());
  py::list skipped;
  for (const SampleError& e : b.skipped()) skipped.append(PyText(e.ToString()));
  d["skipped"] = skipped;
  return d;
}

py::dict MetricsDict(const MetricsSnapshot& m) {
  py::dict d;
  d["uptime_s"] = m.uptime_ns / 1e9;
  d["num_threads"] = m.num_threads;
  py::list ops;
  for (const OpMetrics& op : m.ops) {
    ops.append(py::dict(py::arg("name") = PyText(op.name), py::arg("items") = op.items,
                        py::arg("errors") = op.errors, py::arg("busy_s") = op.busy_ns / 1e9,
                        py::arg("python") = false));
  }
  d["ops"] = ops;
  py::list workers;
  for (const WorkerMetrics& w : m.workers) {
    workers.append(py::dict(py::arg("samples") = w.samples, py::arg("busy_s") = w.busy_ns / 1e9,
                            py::arg("wait_input_s") = w.wait_input_ns / 1e9,
                            py::arg("blocked_output_s") = w.blocked_output_ns / 1e9,
                            py::arg("parked_s") = w.parked_ns / 1e9,
                            py::arg("scratch_bytes") = w.scratch_bytes));
  }
  d["workers"] = workers;
  const RingMetrics& r = m.ring;
  d["ring"] = py::dict(
      py::arg("batches_delivered") = r.batches_delivered, py::arg("depth_ready") = r.depth_ready,
      py::arg("depth_filling") = r.depth_filling,
      py::arg("buffers_allocated") = r.buffers_allocated, py::arg("buffers_max") = r.buffers_max,
      py::arg("buffers_held_by_consumer") = r.buffers_held_by_consumer,
      py::arg("batch_bytes") = r.batch_bytes, py::arg("bytes_held") = r.bytes_held,
      py::arg("peak_bytes_held") = r.peak_bytes_held, py::arg("max_bytes") = r.max_bytes);
  d["consumer"] = py::dict(py::arg("batches") = m.consumer.batches,
                           py::arg("next_calls") = m.consumer.next_calls,
                           py::arg("wait_s") = m.consumer.wait_ns / 1e9);
  const TunerMetrics& t = m.tuner;
  py::dict tuner;
  tuner["threads_auto"] = t.threads_auto;
  tuner["ring_auto"] = t.ring_auto;
  tuner["read_ahead_auto"] = t.read_ahead_auto;
  tuner["cpu_budget"] = t.cpu_budget;
  tuner["trainer_cpu_cores"] = t.trainer_cpu_cores;
  tuner["trainer_step_cores"] = t.trainer_step_cores;
  tuner["effective_cpu_budget"] = t.effective_cpu_budget;
  tuner["ram_budget"] = t.ram_budget;
  tuner["threads"] = t.threads;
  tuner["max_threads"] = t.max_threads;
  tuner["ring_depth"] = t.ring_depth;
  tuner["max_ring_depth"] = t.max_ring_depth;
  tuner["read_ahead_in_flight"] = t.read_ahead_in_flight;
  tuner["read_ahead_bytes"] = t.read_ahead_bytes;
  tuner["reserved_bytes"] = t.reserved_bytes;
  tuner["scratch_allowance_bytes"] = t.scratch_allowance_bytes;
  tuner["scratch_waits"] = t.scratch_waits;
  tuner["scratch_bytes"] = t.scratch_bytes;
  tuner["charged_bytes"] = t.charged_bytes;
  tuner["peak_charged_bytes"] = t.peak_charged_bytes;
  tuner["windows"] = t.windows;
  tuner["changes"] = t.changes;
  py::list tuner_log;
  for (const std::string& line : t.log) tuner_log.append(PyText(line));
  tuner["log"] = tuner_log;
  d["tuner"] = tuner;
  py::list log;
  for (const SampleError& e : m.errors.log) log.append(PyText(e.ToString()));
  py::dict by_reason;
  for (const auto& [reason, n] : m.errors.by_reason) by_reason[PyText(reason)] = n;
  d["errors"] =
      py::dict(py::arg("total") = m.errors.total, py::arg("skipped") = m.errors.skipped,
               py::arg("empty_batches") = m.errors.empty_batches, py::arg("by_reason") = by_reason,
               py::arg("log") = log, py::arg("log_dropped") = m.errors.log_dropped);
  return d;
}

// Owns one C++ loader over any source OpenSource knows, with the recipe
// BuildPipeline makes for `spec` (pipeline_builder.h).
class PyLoader {
 public:
  PyLoader(const std::string& root, const SampleSpec& spec, const LoaderOptions& options,
           const SourceOptions& source_options, const PyRecipe& recipe)
      : workers_(recipe.workers), chain_name_(recipe.chain ? recipe.chain->name : "") {
    // The GIL is released while sources are listed, the first sample runs
    // for the Python ops' shapes, and workers start.
    Result<std::unique_ptr<Loader>> loader = [&]() -> Result<std::unique_ptr<Loader>> {
      py::gil_scoped_release release;
      FEEDLINE_ASSIGN_OR_RETURN(Source source, OpenSource(root, source_options));
      classes_ = source.classes;
      folder_ = source.folder;
      source_kind_ = SourceKindName(source.kind);
      Result<Pipeline> pipeline =
          recipe.chain || recipe.map || !recipe.field_chains.empty()
              ? BuildPythonPipeline(source, spec, recipe, options, &python_stats_)
              : BuildPipeline(source, spec);
      FEEDLINE_RETURN_IF_ERROR(pipeline.status());
      // A source read by groups shuffles by groups (sampler.h).
      pipeline->sample_groups = source.sample_groups;
      pipeline->group_window = source.group_window;
      return Loader::Create(std::move(*pipeline), options);
    }();
    loader_ = ValueOrThrow(std::move(loader));
  }
  // Python ops take the GIL in their workers: joining them needs it released.
  ~PyLoader() {
    if (loader_ != nullptr) {
      py::gil_scoped_release release;
      loader_.reset();
    }
  }
  // Over a pipeline another recipe built (tokens: TokenWindowPipeline).
  PyLoader(const Pipeline& pipeline, const LoaderOptions& options) {
    Result<std::unique_ptr<Loader>> loader = [&]() {
      py::gil_scoped_release release;
      return Loader::Create(pipeline, options);
    }();
    loader_ = ValueOrThrow(std::move(loader));
  }

  // The next batch as a dict (BatchDict), or None at the end of the epoch
  // (Wait). cu_seqlens: a token batch comes with its segment starts joined.
  py::object Next(double poll_s, bool cu_seqlens) {
    Batch b;
    std::optional<DocumentStartFields> starts;
    std::vector<int32_t> joined;
    if (!Wait(poll_s, cu_seqlens, &b, &starts, &joined)) return py::none();
    return BatchDict(b, starts, std::move(joined));
  }

  // The lean form of Next for feedline.TokenLoader's loop: (names, arrays,
  // index) or None at the end of the epoch, with cu_seqlens joined. The
  // names tuple is made once per loader (the fields never change), so a
  // batch costs its arrays and nothing else.
  py::object NextArrays(double poll_s) {
    Batch b;
    std::optional<DocumentStartFields> starts;
    std::vector<int32_t> joined;
    if (!Wait(poll_s, true, &b, &starts, &joined)) return py::none();
    std::vector<py::object> values;
    std::vector<size_t> fields;
    VisitFields(b, starts, std::move(joined), [&](size_t i, py::object value, std::string_view) {
      values.push_back(std::move(value));
      fields.push_back(i);
    });
    if (!array_names_) {
      py::tuple names(fields.size());
      for (size_t k = 0; k < fields.size(); ++k) names[k] = FieldName(b, fields[k], starts);
      array_names_ = std::move(names);
    }
    py::tuple arrays(values.size());
    for (size_t k = 0; k < values.size(); ++k) arrays[k] = std::move(values[k]);
    return py::make_tuple(*array_names_, std::move(arrays), b.index());
  }

  py::bytes State() { return py::bytes(Get().SaveState()); }
  void Restore(const std::string& blob) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Get().RestoreState(blob);
    }
    ThrowIfError(st);
  }
  void SetEpoch(uint64_t epoch) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Get().SetEpoch(epoch);
    }
    ThrowIfError(st);
  }
  // The engine's metrics; a Python op's entry adds its GIL times.
  py::dict Metrics() {
    py::dict d = MetricsDict(Get().Metrics());
    py::list ops = d["ops"];
    for (const auto& [index, stats] : python_stats_) {
      if (index >= ops.size()) continue;
      py::dict op = ops[index];
      op["python"] = true;
      if (workers_ && py::str(op["name"]).cast<std::string>() == chain_name_) {
        // In worker processes: this process never holds the GIL for it.
        const WorkerPoolStats& w = workers_->stats();
        op["processes"] = workers_->size();
        op["proc_calls"] = w.calls.load(std::memory_order_relaxed);
        op["proc_wait_s"] = w.wait_ns.load(std::memory_order_relaxed) / 1e9;
        op["proc_call_s"] = w.call_ns.load(std::memory_order_relaxed) / 1e9;
        op["proc_run_s"] = w.run_ns.load(std::memory_order_relaxed) / 1e9;
        continue;
      }
      op["gil_wait_s"] = stats->gil_wait_ns.load(std::memory_order_relaxed) / 1e9;
      op["gil_held_s"] = stats->gil_held_ns.load(std::memory_order_relaxed) / 1e9;
    }
    return d;
  }
  uint64_t NumBatches() { return Get().num_batches(); }
  uint64_t Epoch() { return Get().epoch(); }
  py::tuple Position() {
    const SamplerPosition p = Get().position();
    return py::make_tuple(p.epoch, p.batch);
  }
  uint32_t NumThreads() { return Get().num_threads(); }
  // Class names as os.fsdecode() gives them, so that they equal
  // torchvision's class_to_idx keys even when not UTF-8 (a 'replace'
  // decoding could merge two classes into one key).
  const std::string& source_kind() const { return source_kind_; }
  py::list Classes() const {
    py::list out;
    for (const std::string& c : classes_) out.append(PyFsName(c));
    return out;
  }
  // torchvision's ImageFolder.samples: [(path, label)] for a folder source,
  // None for the others.
  py::object Samples() const {
    if (folder_ == nullptr) return py::none();
    py::list out;
    for (size_t i = 0; i < folder_->files.size(); ++i) {
      out.append(py::make_tuple(PyFsName(folder_->Path(i)), folder_->labels[i]));
    }
    return out;
  }
  void Cancel() { Get().Cancel(); }
  // Joins the worker threads (without the GIL: ops may take a while to
  // notice). Batches already handed out stay valid.
  void Close() {
    std::unique_ptr<Loader> doomed = std::move(loader_);
    py::gil_scoped_release release;
    doomed.reset();
  }
  bool closed() const { return loader_ == nullptr; }

 private:
  Loader& Get() {
    if (!loader_) ThrowIfError(FailedPreconditionError("the loader is closed"));
    return *loader_;
  }

  // Waits for the next batch in slices of `poll_s` without the GIL,
  // checking for signals in between (Ctrl-C interrupts a long wait); false
  // at the end of the epoch. cu_seqlens: a token batch's segment starts are
  // found and joined here, still without the GIL.
  bool Wait(double poll_s, bool cu_seqlens, Batch* b, std::optional<DocumentStartFields>* starts,
            std::vector<int32_t>* joined) {
    Loader& l = Get();
    const auto poll = std::chrono::nanoseconds(static_cast<int64_t>(poll_s * 1e9));
    while (true) {
      bool end = false, timed_out = false;
      Status st;
      {
        py::gil_scoped_release release;
        st = l.NextFor(b, &end, poll, &timed_out);
        if (st.ok() && !end && !timed_out && cu_seqlens) {
          *starts = FindDocumentStarts(*b);
          if (*starts) st = JoinCuSeqlens(*b, **starts, joined);
        }
      }
      ThrowIfError(st);
      if (!timed_out) return !end;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  std::optional<py::tuple> array_names_;  // NextArrays' names, made at its first batch
  std::vector<std::string> classes_;
  std::string source_kind_;  // SourceKindName of what was opened; "" for a pipeline
  std::shared_ptr<const ImageFolder> folder_;  // null unless the source is a folder
  std::shared_ptr<WorkerPool> workers_;        // python_workers=N, else null
  std::string chain_name_;                     // the Compose's Python op, if any
  std::vector<std::pair<size_t, std::shared_ptr<PyOpStats>>>
      python_stats_;  // (op index, GIL times)
  std::unique_ptr<Loader> loader_;
};

}  // namespace

void RegisterLoader(py::module_& m) {
  py::enum_<DType>(m, "DType")
      .value("uint8", DType::kUInt8)
      .value("float32", DType::kFloat32)
      .value("float16", DType::kFloat16)
      .value("bfloat16", DType::kBFloat16);
  py::enum_<Layout>(m, "Layout").value("CHW", Layout::kCHW).value("HWC", Layout::kHWC);
  py::enum_<Interpolation>(m, "Interpolation")
      .value("BILINEAR", Interpolation::kBilinear)
      .value("BICUBIC", Interpolation::kBicubic);
  py::enum_<CropMode>(m, "CropMode")
      .value("RANDOM_RESIZED", CropMode::kRandomResized)
      .value("RESIZE_CENTER", CropMode::kResizeCenter)
      .value("RESIZE_FULL", CropMode::kResizeFull)
      .value("RANDOM_CROP", CropMode::kRandomCrop)
      .value("RESIZE_RANDOM", CropMode::kResizeRandom)
      .value("CENTER_CROP", CropMode::kCenterCrop);
  py::enum_<PaddingMode>(m, "PaddingMode")
      .value("CONSTANT", PaddingMode::kConstant)
      .value("EDGE", PaddingMode::kEdge)
      .value("REFLECT", PaddingMode::kReflect)
      .value("SYMMETRIC", PaddingMode::kSymmetric);
  py::enum_<ErrorPolicy>(m, "ErrorPolicy")
      .value("RAISE", ErrorPolicy::kRaise)
      .value("SKIP", ErrorPolicy::kSkip);

  py::class_<ImageTransform>(m, "ImageTransform")
      .def(py::init<>())
      .def_readwrite("crop", &ImageTransform::crop)
      .def_readwrite("height", &ImageTransform::height)
      .def_readwrite("width", &ImageTransform::width)
      .def_readwrite("scale", &ImageTransform::scale)
      .def_readwrite("ratio", &ImageTransform::ratio)
      .def_readwrite("resize_size", &ImageTransform::resize_size)
      .def_readwrite("padding", &ImageTransform::padding)
      .def_readwrite("pad_if_needed", &ImageTransform::pad_if_needed)
      .def_readwrite("padding_mode", &ImageTransform::padding_mode)
      .def_readwrite("pad_fill", &ImageTransform::pad_fill)
      .def_readwrite("hflip_prob", &ImageTransform::hflip_prob)
      .def_readwrite("interpolation", &ImageTransform::interpolation)
      .def_readwrite("pixel_ops", &ImageTransform::pixel_ops)
      .def_readwrite("erase_ops", &ImageTransform::erase_ops)
      .def_readwrite("normalize", &ImageTransform::normalize)
      .def_readwrite("mean", &ImageTransform::mean)
      .def_readwrite("std", &ImageTransform::std)
      .def_readwrite("dtype", &ImageTransform::dtype)
      .def_readwrite("layout", &ImageTransform::layout)
      .def_readwrite("dct_scaling", &ImageTransform::dct_scaling);
  m.def("available_cores", &AvailableCores);
  m.def("imagenet_train", &ImageNetTrain, py::arg("size") = 224);
  m.def("imagenet_eval", &ImageNetEval, py::arg("resize") = 256, py::arg("size") = 224);
  // One image through the fused path, outside the engine (TransformImage):
  // `crop` (x, y, w, h) is torchvision's crop-then-resize box, else the
  // transform's own deterministic box (Resize modes). Returns the output
  // tensor's raw bytes (ImageField(t)), for tests that hand feedline the
  // random parameters torchvision drew. `seed` draws the pixel ops'
  // parameters (SampleRng::ForSample(seed, 0, 0, 0)).
  m.def(
      "transform_image",
      [](const py::bytes& data, const ImageTransform& t,
         std::optional<std::array<uint32_t, 4>> crop, bool flip, uint64_t seed) {
        const std::string bytes = data;
        std::vector<uint8_t> out(ImageField(t).SampleBytes());
        Status st;
        {
          py::gil_scoped_release release;
          const std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            bytes.size());
          CropBox box;
          if (crop) {
            box.region_x = (*crop)[0];
            box.region_y = (*crop)[1];
            box.region_width = box.width = (*crop)[2];
            box.region_height = box.height = (*crop)[3];
          } else {
            Result<ImageInfo> info = ReadImageInfo(in, t.limits);
            if (!info.ok()) {
              st = info.status();
            } else {
              SampleRng rng = SampleRng::ForSample(0, 0, 0, 0);
              box = ChooseCrop(t, info->width, info->height, rng);
            }
          }
          box.flip = flip;
          SampleRng pixel_rng = SampleRng::ForSample(seed, 0, 0, 0);
          if (st.ok()) st = TransformImage(in, t, box, out.data(), &pixel_rng);
        }
        ThrowIfError(st);
        return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
      },
      py::arg("data"), py::arg("transform"), py::arg("crop") = py::none(), py::arg("flip") = false,
      py::arg("seed") = 0);

  py::class_<FieldRequest> request(m, "FieldRequest");
  py::enum_<FieldRequest::Kind>(request, "Kind")
      .value("IMAGE", FieldRequest::Kind::kImage)
      .value("LABEL", FieldRequest::Kind::kLabel)
      .value("TEXT", FieldRequest::Kind::kText)
      .value("JSON", FieldRequest::Kind::kJson)
      .value("NDARRAY", FieldRequest::Kind::kNdarray)
      .value("BYTES", FieldRequest::Kind::kBytes)
      .value("OP", FieldRequest::Kind::kOp);
  request.def(py::init<>())
      .def_readwrite("name", &FieldRequest::name)
      .def_readwrite("kind", &FieldRequest::kind)
      .def_readwrite("parts", &FieldRequest::parts)
      .def_readwrite("transform", &FieldRequest::transform)
      .def_readwrite("op", &FieldRequest::op)
      .def_readwrite("params", &FieldRequest::params);
  m.def("registered_ops", &RegisteredOps);
  m.def(
      "load_ops",
      [](const std::string& path) {
        // dlopen runs the library's static constructors: no GIL needed.
        Result<std::vector<std::string>> names = [&] {
          py::gil_scoped_release release;
          return LoadOps(path);
        }();
        return ValueOrThrow(std::move(names));
      },
      py::arg("path"));
  m.def(
      "kind_of_part", [](const std::string& part) { return KindOfPart(part); }, py::arg("part"));
  m.def("default_parts", &DefaultParts, py::arg("kind"));

  py::class_<SampleSpec> spec(m, "SampleSpec");
  py::enum_<SampleSpec::Output>(spec, "Output")
      .value("IMAGE", SampleSpec::Output::kImage)
      .value("RAW_BYTES", SampleSpec::Output::kRawBytes)
      .value("FIELDS", SampleSpec::Output::kFields);
  spec.def(py::init<>())
      .def_readwrite("output", &SampleSpec::output)
      .def_readwrite("transform", &SampleSpec::transform)
      .def_readwrite("max_record_bytes", &SampleSpec::max_record_bytes)
      .def_readwrite("fields", &SampleSpec::fields);

  // Python ops (docs/python_ops.md).
  py::class_<SuffixStep> step(m, "SuffixStep");
  py::enum_<SuffixStep::Kind>(step, "Kind")
      .value("TO_TENSOR", SuffixStep::Kind::kToTensor)
      .value("PIL_TO_TENSOR", SuffixStep::Kind::kPilToTensor)
      .value("TO_IMAGE", SuffixStep::Kind::kToImage)
      .value("TO_DTYPE", SuffixStep::Kind::kToDtype)
      .value("NORMALIZE", SuffixStep::Kind::kNormalize);
  step.def(py::init<>())
      .def_readwrite("kind", &SuffixStep::kind)
      .def_readwrite("dtype", &SuffixStep::dtype)
      .def_readwrite("scale", &SuffixStep::scale)
      .def_readwrite("mean", &SuffixStep::mean)
      .def_readwrite("std", &SuffixStep::std);
  py::class_<ImageChain> chain(m, "ImageChain");
  py::enum_<ImageChain::Prefix>(chain, "Prefix")
      .value("DECODE", ImageChain::Prefix::kDecode)
      .value("TRANSFORM", ImageChain::Prefix::kTransform)
      .value("RESIZE_SHORT", ImageChain::Prefix::kResizeShort);
  chain.def(py::init<>())
      .def_readwrite("prefix", &ImageChain::prefix)
      .def_readwrite("transform", &ImageChain::transform)
      .def_readwrite("name", &ImageChain::name)
      .def_readwrite("members", &ImageChain::members)
      .def_readwrite("suffix", &ImageChain::suffix)
      .def_property(
          "run", [](const ImageChain& c) { return c.run ? c.run->get() : py::object(py::none()); },
          [](ImageChain& c, py::object fn) { c.run = std::make_shared<PyHandle>(std::move(fn)); });
  py::class_<WorkerPool, std::shared_ptr<WorkerPool>>(m, "WorkerPool")
      .def(py::init([](const std::vector<std::tuple<int, int, int, int>>& workers) {
             std::vector<WorkerPool::Worker> ws;
             for (const auto& [pid, sock, in_fd, out_fd] : workers) {
               ws.push_back({pid, sock, in_fd, out_fd});
             }
             return std::make_shared<WorkerPool>(std::move(ws));
           }),
           py::arg("workers"),
           "Takes ownership of each worker's (pid, socket fd, input memfd, output memfd).")
      .def("shutdown", &WorkerPool::Shutdown, py::call_guard<py::gil_scoped_release>())
      .def("close", &WorkerPool::Close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("broken",
                             [](const WorkerPool& p) -> py::object {
                               const Status st = p.broken();
                               if (st.ok()) return py::none();
                               return PyText(st.message());
                             })
      .def_property_readonly("pids", &WorkerPool::pids);
  py::class_<PyRecipe>(m, "PyRecipe")
      .def(py::init<>())
      .def_readwrite("workers", &PyRecipe::workers)
      .def_readwrite("chain", &PyRecipe::chain)
      .def_readwrite("field_chains", &PyRecipe::field_chains)
      .def_property(
          "map", [](const PyRecipe& r) { return r.map ? r.map->get() : py::object(py::none()); },
          [](PyRecipe& r, py::object fn) {
            r.map = fn.is_none() ? nullptr : std::make_shared<PyHandle>(std::move(fn));
          });

  py::class_<HttpOptions>(m, "HttpOptions")
      .def(py::init<>())
      .def_readwrite("connect_timeout_ms", &HttpOptions::connect_timeout_ms)
      .def_readwrite("stall_timeout_ms", &HttpOptions::stall_timeout_ms)
      .def_readwrite("request_timeout_ms", &HttpOptions::request_timeout_ms)
      .def_readwrite("max_attempts", &HttpOptions::max_attempts)
      .def_readwrite("initial_backoff_ms", &HttpOptions::initial_backoff_ms)
      .def_readwrite("s3", &HttpOptions::s3);

  py::class_<S3Options> s3(m, "S3Options");
  py::enum_<S3Options::Addressing>(s3, "Addressing")
      .value("AUTO", S3Options::Addressing::kAuto)
      .value("PATH", S3Options::Addressing::kPath)
      .value("VIRTUAL", S3Options::Addressing::kVirtual);
  s3.def(py::init<>())
      .def_readwrite("endpoint_url", &S3Options::endpoint_url)
      .def_readwrite("region", &S3Options::region)
      .def_readwrite("profile", &S3Options::profile)
      .def_readwrite("addressing", &S3Options::addressing)
      .def_readwrite("anonymous", &S3Options::anonymous)
      .def_readwrite("part_bytes", &S3Options::part_bytes)
      .def_readwrite("max_concurrency", &S3Options::max_concurrency);
  // object_store.h: listing and uploads (feedline.object_store).
  m.def(
      "list_objects",
      [](const std::string& url, const HttpOptions& http) {
        Result<std::vector<ObjectInfo>> r = [&] {
          py::gil_scoped_release nogil;
          return ListObjects(url, http);
        }();
        ThrowIfError(r.status());
        py::list out;
        for (const ObjectInfo& o : *r) out.append(py::make_tuple(o.key, o.size, o.etag));
        return out;
      },
      py::arg("url"), py::arg("http") = HttpOptions());
  m.def(
      "upload_directory",
      [](const std::string& dir, const std::string& url, const std::string& last,
         const HttpOptions& http) {
        Status st;
        {
          py::gil_scoped_release nogil;
          st = UploadDirectory(dir, url, last, http);
        }
        ThrowIfError(st);
      },
      py::arg("dir"), py::arg("url"), py::arg("last") = "", py::arg("http") = HttpOptions());
  m.def(
      "object_store_stats",
      [] {
        const ObjectStoreStats s = GetObjectStoreStats();
        return py::dict(py::arg("requests") = s.requests, py::arg("retries") = s.retries,
                        py::arg("gets") = s.gets, py::arg("bytes") = s.bytes,
                        py::arg("first_byte_s") = s.first_byte_s, py::arg("busy_s") = s.busy_s,
                        py::arg("in_flight") = s.in_flight,
                        py::arg("peak_in_flight") = s.peak_in_flight);
      },
      "The process's object-store requests so far (object_store.h ObjectStoreStats).");
  m.def(
      "read_file",
      [](const std::string& name, uint64_t offset, int64_t n, const HttpOptions& http) {
        std::string out;
        Status st;
        {
          py::gil_scoped_release nogil;
          Result<std::unique_ptr<RandomAccessFile>> f = OpenFile(name, http);
          st = f.status();
          if (st.ok()) {
            const uint64_t size = (*f)->size();
            const uint64_t len =
                n < 0 ? (offset < size ? size - offset : 0) : static_cast<uint64_t>(n);
            out.resize(len);
            st = (*f)->Read(offset, len, out.data());
          }
        }
        ThrowIfError(st);
        return py::bytes(out);
      },
      py::arg("name"), py::arg("offset") = 0, py::arg("n") = -1, py::arg("http") = HttpOptions(),
      "n bytes (-1: to the end) at offset of a local file, URL or s3:// object, through OpenFile "
      "(for an object, ranged GETs: a large read in concurrent parts).");
  m.def(
      "read_object",
      [](const std::string& url, uint64_t max_bytes, const HttpOptions& http) {
        std::vector<uint8_t> out;
        Status st;
        {
          py::gil_scoped_release nogil;
          st = ReadObject(url, max_bytes, &out, http);
        }
        ThrowIfError(st);
        return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
      },
      py::arg("url"), py::arg("max_bytes") = uint64_t{1} << 30, py::arg("http") = HttpOptions());

  // The one source-kind rule (source.h), for the Python face and the doctor (after
  // HttpOptions: its default argument).
  // An s3:// prefix costs one listing (with `http`), done without the GIL.
  m.def(
      "source_kind",
      [](const std::string& path, const HttpOptions& http) {
        py::gil_scoped_release release;
        return std::string(SourceKindName(DetectSourceKind(path, http)));
      },
      py::arg("path"), py::arg("http") = HttpOptions());
  py::class_<SourceOptions>(m, "SourceOptions")
      .def(py::init<>())
      .def_readwrite("http", &SourceOptions::http)
      .def_readwrite("read_ahead_bytes", &SourceOptions::read_ahead_bytes)
      .def_readwrite("read_ahead_threads", &SourceOptions::read_ahead_threads)
      .def_readwrite("parts", &SourceOptions::parts)
      .def_readwrite("list_file_columns", &SourceOptions::list_file_columns)
      .def_readwrite("columns", &SourceOptions::columns)
      .def_readwrite("shuffle_window", &SourceOptions::shuffle_window)
      .def_readwrite("columnar_threads", &SourceOptions::columnar_threads)
      .def_property(
          "columnar",
          [](const SourceOptions& o) {
            return std::const_pointer_cast<ColumnarDataset>(o.columnar);
          },
          [](SourceOptions& o, std::shared_ptr<ColumnarDataset> d) { o.columnar = std::move(d); })
      .def_property(
          "skip_hidden_dirs", [](const SourceOptions& o) { return o.folder.skip_hidden_dirs; },
          [](SourceOptions& o, bool v) { o.folder.skip_hidden_dirs = v; });

  py::class_<LoaderOptions>(m, "LoaderOptions")
      .def(py::init<>())
      .def_readwrite("batch_size", &LoaderOptions::batch_size)
      .def_readwrite("shuffle", &LoaderOptions::shuffle)
      .def_readwrite("seed", &LoaderOptions::seed)
      .def_readwrite("rank", &LoaderOptions::rank)
      .def_readwrite("world_size", &LoaderOptions::world_size)
      .def_readwrite("drop_last", &LoaderOptions::drop_last)
      .def_readwrite("start_epoch", &LoaderOptions::start_epoch)
      .def_readwrite("num_threads", &LoaderOptions::num_threads)
      .def_readwrite("cpu_budget", &LoaderOptions::cpu_budget)
      .def_readwrite("auto_ring_start", &LoaderOptions::auto_ring_start)
      .def_readwrite("tune_interval_ms", &LoaderOptions::tune_interval_ms)
      .def_readwrite("ring_depth", &LoaderOptions::ring_depth)
      .def_readwrite("max_bytes", &LoaderOptions::max_bytes)
      .def_readwrite("error_policy", &LoaderOptions::error_policy)
      .def_readwrite("max_errors", &LoaderOptions::max_errors)
      .def_readwrite("stall_timeout_ms", &LoaderOptions::stall_timeout_ms)
      .def_readwrite("elastic", &LoaderOptions::elastic);

  // A recipe's output, opaque to Python: handed from a recipe binding to Loader.
  py::class_<Pipeline>(m, "Pipeline")
      .def_readonly("num_samples", &Pipeline::num_samples)
      .def_property_readonly("fields", [](const Pipeline& p) {
        py::list names;
        for (const FieldSpec& f : p.fields) names.append(PyText(f.name));
        return names;
      });

  py::class_<PyLoader>(m, "Loader")
      .def(py::init<const std::string&, const SampleSpec&, const LoaderOptions&,
                    const SourceOptions&, const PyRecipe&>(),
           py::arg("root"), py::arg("spec"), py::arg("options"),
           py::arg("source") = SourceOptions(), py::arg("recipe") = PyRecipe())
      .def(py::init<const Pipeline&, const LoaderOptions&>(), py::arg("pipeline"),
           py::arg("options"))
      .def("next", &PyLoader::Next, py::arg("poll_s") = 0.1, py::arg("cu_seqlens") = false)
      .def("next_arrays", &PyLoader::NextArrays, py::arg("poll_s") = 0.1)
      .def("state", &PyLoader::State)
      .def("restore", &PyLoader::Restore)
      .def("set_epoch", &PyLoader::SetEpoch)
      .def("metrics", &PyLoader::Metrics)
      .def("cancel", &PyLoader::Cancel)
      .def("close", &PyLoader::Close)
      .def_property_readonly("closed", &PyLoader::closed)
      .def_property_readonly("num_batches", &PyLoader::NumBatches)
      .def_property_readonly("epoch", &PyLoader::Epoch)
      .def_property_readonly("position", &PyLoader::Position)
      .def_property_readonly("num_threads", &PyLoader::NumThreads)
      .def_property_readonly("classes", &PyLoader::Classes)
      .def_property_readonly("source_kind", [](const PyLoader& l) { return l.source_kind(); })
      .def_property_readonly("samples", &PyLoader::Samples);
}

}  // namespace feedline::python
