// Python ops: the native prefix and suffix around a Compose's Python
// middle, the Python op itself, and map= (docs/python_ops.md).
#include "python/bindings/python_op.h"

#include <pybind11/numpy.h>

#include <cstring>
#include <string>
#include <utility>

#include "python/bindings/errors.h"
#include "python/bindings/numpy_dtype.h"
#include "src/core/clock.h"
#include "src/core/detail/fingerprint.h"
#include "src/image/half.h"
#include "src/image/pad_crop.h"

namespace py = pybind11;

namespace feedline::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Serialises every Python op of the process, so that the global generators
// they reseed are theirs alone for the call (docs/python_ops.md).
std::mutex& PythonOpLock() {
  static std::mutex m;
  return m;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string PyLine(const py::handle& obj) {
  // backslashreplace: a message with surrogates must not raise here.
  py::object b = py::reinterpret_steal<py::object>(
      PyUnicode_AsEncodedString(py::str(obj).ptr(), "utf-8", "backslashreplace"));
  if (!b) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return std::string(PyBytes_AsString(b.ptr()), static_cast<size_t>(PyBytes_Size(b.ptr())));
}

// The exception with its traceback, as Python prints it.
Status PythonError(const std::string& op, py::error_already_set& e) {
  std::string text;
  try {
    py::list lines =
        py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), e.trace());
    for (py::handle l : lines) text += PyLine(l);
  } catch (...) {
    PyErr_Clear();
    text = e.what();
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return Status(StatusCode::kUnknown, op + " raised " + PyLine(e.type().attr("__name__")) + ": " +
                                          PyLine(e.value()) + "\n" + text);
}

// Runs `f` holding the Python-op lock and the GIL; times both.
template <typename F>
Status CallPython(const std::string& op, PyOpStats& stats, F&& f) {
  const int64_t t0 = core::NowNs();
  std::lock_guard<std::mutex> lock(PythonOpLock());
  if (Finalizing()) return CancelledError("the Python interpreter is shutting down");
  py::gil_scoped_acquire gil;
  const int64_t t1 = core::NowNs();
  Status st;
  try {
    st = f();
  } catch (py::error_already_set& e) {
    st = PythonError(op, e);
  } catch (const std::exception& e) {
    st = Status(StatusCode::kUnknown, op + ": " + e.what());
  }
  const int64_t t2 = core::NowNs();
  stats.calls.fetch_add(1, std::memory_order_relaxed);
  stats.gil_wait_ns.fetch_add(static_cast<uint64_t>(t1 - t0), std::memory_order_relaxed);
  stats.gil_held_ns.fetch_add(static_cast<uint64_t>(t2 - t1), std::memory_order_relaxed);
  return st;
}

std::optional<DType> DTypeOf(const std::string& name) {
  for (DType d : {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64, DType::kFloat16,
                  DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

// An (array, dtype name) pair from Python as a contiguous array of a known
// dtype: its spec and bytes.
Status ReadArray(const std::string& op, py::handle value, py::handle dtype_name, DType* dtype,
                 std::vector<int64_t>* shape, std::vector<uint8_t>* bytes) {
  const std::string name = py::str(dtype_name);
  const std::optional<DType> d = DTypeOf(name);
  if (!d) {
    return InvalidArgumentError(op + " returned a " + name +
                                " tensor: batches hold uint8, int8, int32, int64, float16, "
                                "bfloat16, float32 or float64");
  }
  py::array a = py::array::ensure(value, py::array::c_style);
  if (!a) throw py::error_already_set();
  shape->assign(a.shape(), a.shape() + a.ndim());
  if (static_cast<size_t>(a.nbytes()) != static_cast<size_t>(a.size()) * DTypeSize(*d)) {
    return InternalError(op + ": array itemsize does not match dtype " + name);
  }
  *dtype = *d;
  bytes->resize(static_cast<size_t>(a.nbytes()));
  if (!bytes->empty()) std::memcpy(bytes->data(), a.data(), bytes->size());
  return Status::OK();
}

// What the prefix and the Python op hand to the next op of the same sample
// on the same thread (the engine runs a sample's ops back to back there).
struct Handoff {
  const void* chain = nullptr;
  uint64_t id = 0, epoch = 0;
  int stage = 0;  // 1: pixels ready; 2: middle output ready
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // uint8 HWC
  MidSpec mid;
  std::vector<uint8_t> mid_bytes;
  std::vector<float> values;  // suffix scratch
};
thread_local Handoff t_handoff;

Status CheckHandoff(const void* chain, const Sample& s, int stage, std::string_view op) {
  const Handoff& h = t_handoff;
  if (h.chain != chain || h.id != s.id() || h.epoch != s.epoch() || h.stage != stage) {
    return InternalError(std::string(op) + ": the previous op of this chain did not run on this " +
                         "sample on this thread");
  }
  return Status::OK();
}

// True once a probe recorded its first sample (written under the lock).
template <typename T>
bool ProbeDone(const std::optional<T>& probe) {
  std::lock_guard<std::mutex> lock(PythonOpLock());
  return probe.has_value();
}

// The chain's members and native parameters (what changes a sample's bytes).
uint64_t ChainFingerprint(const ImageChain& c) {
  const ImageTransform& t = c.transform;
  core::detail::Fingerprint fp;
  fp.Add(std::string_view("python_chain")).Add(std::string_view(c.members));
  fp.Add(uint64_t(c.prefix)).Add(uint64_t(t.crop)).Add(uint64_t{t.height}).Add(uint64_t{t.width});
  fp.Add(t.scale[0]).Add(t.scale[1]).Add(t.ratio[0]).Add(t.ratio[1]).Add(uint64_t{t.resize_size});
  fp.Add(t.hflip_prob).Add(uint64_t(t.interpolation)).Add(uint64_t{t.dct_scaling});
  image::AddPaddingFingerprint(t, fp);
  for (const SuffixStep& st : c.suffix) {
    fp.Add(uint64_t(st.kind)).Add(uint64_t(st.dtype)).Add(uint64_t{st.scale});
    for (float v : st.mean) fp.Add(double{v});
    for (float v : st.std) fp.Add(double{v});
  }
  return fp.value();
}

struct ChainShared {
  ImageChain chain;
  std::optional<ChainInput> input;  // fields=: the image field it reads
  std::string prefix_name = "decode_transform", suffix_name = "to_tensor";
  std::string what;  // the Python op in messages: its name, and the field's
  std::optional<MidSpec> learned;
  std::shared_ptr<std::optional<MidSpec>> probe;
  std::shared_ptr<PyOpStats> stats;
  std::optional<FieldSpec> out;
};

// The chain's fingerprint and, with fields=, its field's name and parts.
uint64_t ChainFingerprint(const ChainShared& c) {
  if (!c.input) return ChainFingerprint(c.chain);
  return core::detail::Fingerprint()
      .Add(ChainFingerprint(c.chain))
      .Add(FieldRequestFingerprint(c.input->request))
      .value();
}

class PrefixOp final : public SampleOp {
 public:
  explicit PrefixOp(std::shared_ptr<const ChainShared> c) : c_(std::move(c)) {}
  std::string_view name() const override { return c_->prefix_name; }
  uint64_t ConfigFingerprint() const override { return ChainFingerprint(*c_); }
  Status Apply(Sample& s, OpState*) const override {
    Handoff& h = t_handoff;
    h.chain = c_.get();
    h.id = s.id();
    h.epoch = s.epoch();
    h.stage = 0;
    const ImageChain& ch = c_->chain;
    if (c_->input) {
      FEEDLINE_RETURN_IF_ERROR(
          SelectImagePart(s, c_->input->request, c_->input->source_has_labels));
    }
    const std::span<const uint8_t> bytes = s.data();
    if (ch.prefix == ImageChain::Prefix::kDecode) {
      FEEDLINE_ASSIGN_OR_RETURN(RgbImage img, DecodeImage(bytes, ch.transform.limits));
      h.width = img.width;
      h.height = img.height;
      h.pixels = std::move(img.pixels);
    } else {
      FEEDLINE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(bytes, ch.transform.limits));
      ImageTransform t = ch.transform;
      if (ch.prefix == ImageChain::Prefix::kResizeShort) {
        // torchvision's Resize(int): the shorter side becomes the size, the
        // longer int(size * long / short).
        const uint64_t size = t.resize_size;
        t.crop = CropMode::kResizeFull;
        if (info.width <= info.height) {
          t.width = static_cast<uint32_t>(size);
          t.height = static_cast<uint32_t>(size * info.height / info.width);
        } else {
          t.height = static_cast<uint32_t>(size);
          t.width = static_cast<uint32_t>(size * info.width / info.height);
        }
      }
      SampleRng rng = s.rng();
      const CropBox box = ChooseCrop(t, info.width, info.height, rng);
      h.width = t.width;
      h.height = t.height;
      h.pixels.resize(size_t{t.width} * t.height * 3);
      FEEDLINE_RETURN_IF_ERROR(TransformImage(bytes, t, box, h.pixels.data(), &rng));
    }
    h.stage = 1;
    return Status::OK();
  }

 private:
  std::shared_ptr<const ChainShared> c_;
};

class PythonChainOp final : public SampleOp {
 public:
  explicit PythonChainOp(std::shared_ptr<const ChainShared> c) : c_(std::move(c)) {}
  std::string_view name() const override { return c_->chain.name; }
  uint64_t ConfigFingerprint() const override { return ChainFingerprint(*c_); }
  Status Apply(Sample& s, OpState*) const override {
    FEEDLINE_RETURN_IF_ERROR(CheckHandoff(c_.get(), s, 1, c_->chain.name));
    Handoff& h = t_handoff;
    if (c_->probe && ProbeDone(*c_->probe)) {  // the probe loader ran ahead: one call is enough
      h.mid = **c_->probe;
      h.stage = 2;
      return Status::OK();
    }
    SampleRng rng = s.rng();
    const uint64_t seed = rng.NextU64();
    MidSpec mid;
    const Status st =
        c_->chain.workers ? RunInWorker(s, h, seed, &mid) : RunInProcess(h, seed, &mid);
    if (!st.ok()) return st;
    if (c_->learned && !(mid == *c_->learned)) {
      return InvalidArgumentError(c_->what + " returned a " + mid.ToString() +
                                  " for this sample; the loader was created for a " +
                                  c_->learned->ToString() +
                                  " (learned from the first sample at creation)");
    }
    h.mid = std::move(mid);
    h.stage = 2;
    return Status::OK();
  }

 private:
  // The middle on this thread, under the Python-op lock and the GIL.
  Status RunInProcess(Handoff& h, uint64_t seed, MidSpec* mid) const {
    return CallPython(c_->what, *c_->stats, [&]() -> Status {
      // A view of the pixels: the Python side copies them into its PIL image.
      py::array pixels(
          py::dtype("uint8"),
          {static_cast<py::ssize_t>(h.height), static_cast<py::ssize_t>(h.width), py::ssize_t{3}},
          h.pixels.data(), py::none());
      py::tuple out = c_->chain.run->get()(pixels, seed);
      mid->pil = out[1].cast<bool>();
      FEEDLINE_RETURN_IF_ERROR(
          ReadArray(c_->what, out[0], out[2], &mid->dtype, &mid->shape, &h.mid_bytes));
      if (c_->probe && !c_->probe->has_value()) *c_->probe = *mid;  // under the Python-op lock
      return Status::OK();
    });
  }

  // The middle in a worker process (python_workers.h): no GIL here; the
  // thread blocks on the worker's socket only.
  Status RunInWorker(const Sample& s, Handoff& h, uint64_t seed, MidSpec* mid) const {
    const std::string& op = c_->chain.name;
    WorkerReply reply;
    FEEDLINE_RETURN_IF_ERROR(c_->chain.workers->Run(
        op, h.pixels.data(), h.height, h.width, 3, seed, [&s] { return s.cancelled(); }, &reply,
        &h.mid_bytes));
    const std::optional<DType> d = DTypeOf(reply.dtype);
    if (!d) {
      return InvalidArgumentError(op + " returned a " + reply.dtype +
                                  " tensor: batches hold uint8, int8, int32, int64, float16, "
                                  "bfloat16, float32 or float64");
    }
    size_t n = DTypeSize(*d);
    for (int64_t x : reply.shape) n *= static_cast<size_t>(x < 0 ? 0 : x);
    if (n != h.mid_bytes.size()) {
      return InternalError(op + ": the worker's output has " + std::to_string(h.mid_bytes.size()) +
                           " bytes, its shape " + ShapeText(reply.shape) + " needs " +
                           std::to_string(n));
    }
    mid->pil = reply.pil;
    mid->dtype = *d;
    mid->shape = std::move(reply.shape);
    if (c_->probe) {
      std::lock_guard<std::mutex> lock(PythonOpLock());
      if (!c_->probe->has_value()) *c_->probe = *mid;
    }
    return Status::OK();
  }

  std::shared_ptr<const ChainShared> c_;
};

// Element i of a CHW (or HWC/HW for a PIL image) input, as a float.
void LoadValues(const MidSpec& mid, const std::vector<uint8_t>& bytes, std::vector<float>* out) {
  const size_t n = mid.dtype == DType::kUInt8 ? bytes.size() : bytes.size() / sizeof(float);
  out->resize(n);
  if (mid.pil) {  // HWC (or HW) -> CHW
    const size_t hh = static_cast<size_t>(mid.shape[0]), ww = static_cast<size_t>(mid.shape[1]);
    const size_t cc = mid.shape.size() == 3 ? static_cast<size_t>(mid.shape[2]) : 1;
    for (size_t c = 0; c < cc; ++c) {
      for (size_t i = 0; i < hh * ww; ++i) (*out)[c * hh * ww + i] = bytes[i * cc + c];
    }
  } else if (mid.dtype == DType::kUInt8) {
    for (size_t i = 0; i < n; ++i) (*out)[i] = bytes[i];
  } else {
    std::memcpy(out->data(), bytes.data(), n * sizeof(float));
  }
}

class SuffixOp final : public SampleOp {
 public:
  SuffixOp(std::shared_ptr<const ChainShared> c, size_t field) : c_(std::move(c)), field_(field) {}
  std::string_view name() const override { return c_->suffix_name; }
  Status Apply(Sample& s, OpState*) const override {
    FEEDLINE_RETURN_IF_ERROR(CheckHandoff(c_.get(), s, 2, c_->suffix_name));
    Handoff& h = t_handoff;
    h.stage = 0;
    if (!c_->out) {  // probe mode: the field is a placeholder
      std::memset(s.output(field_), 0, 1);
      return Status::OK();
    }
    const FieldSpec& out = *c_->out;
    const std::vector<SuffixStep>& steps = c_->chain.suffix;
    if (steps.empty()) {  // the middle's tensor is the output (checked against the spec)
      std::memcpy(s.output(field_), h.mid_bytes.data(), out.SampleBytes());
      return Status::OK();
    }
    std::vector<float>& v = h.values;
    LoadValues(h.mid, h.mid_bytes, &v);
    const size_t plane =
        out.shape.size() == 3 ? static_cast<size_t>(out.shape[1] * out.shape[2]) : 1;
    bool is_uint8 = h.mid.dtype == DType::kUInt8;
    for (const SuffixStep& st : steps) {
      switch (st.kind) {
        case SuffixStep::Kind::kToTensor:
          for (float& x : v) x = x / 255.0f;
          is_uint8 = false;
          break;
        case SuffixStep::Kind::kPilToTensor:
        case SuffixStep::Kind::kToImage: break;
        case SuffixStep::Kind::kToDtype:
          if (is_uint8 && st.dtype != DType::kUInt8 && st.scale) {
            for (float& x : v) x = x / 255.0f;
          }
          is_uint8 = st.dtype == DType::kUInt8;
          break;
        case SuffixStep::Kind::kNormalize:
          for (size_t i = 0; i < v.size(); ++i) {
            const size_t c = i / plane;
            const float m = st.mean.size() == 1 ? st.mean[0] : st.mean[c];
            const float d = st.std.size() == 1 ? st.std[0] : st.std[c];
            v[i] = (v[i] - m) / d;
          }
          break;
      }
    }
    void* dst = s.output(field_);
    switch (out.dtype) {
      case DType::kUInt8:
        for (size_t i = 0; i < v.size(); ++i) static_cast<uint8_t*>(dst)[i] = uint8_t(v[i]);
        break;
      case DType::kFloat16:
        for (size_t i = 0; i < v.size(); ++i)
          static_cast<uint16_t*>(dst)[i] = image::FloatToHalf(v[i]);
        break;
      case DType::kBFloat16:
        for (size_t i = 0; i < v.size(); ++i)
          static_cast<uint16_t*>(dst)[i] = image::FloatToBFloat16(v[i]);
        break;
      default: std::memcpy(dst, v.data(), v.size() * sizeof(float)); break;
    }
    return Status::OK();
  }

 private:
  std::shared_ptr<const ChainShared> c_;
  const size_t field_;
};

class PythonMapOp final : public SampleOp {
 public:
  PythonMapOp(std::shared_ptr<PyHandle> fn, std::vector<FieldSpec> in, size_t in_offset,
              std::vector<FieldSpec> out, std::shared_ptr<PyOpStats> stats,
              std::shared_ptr<std::optional<std::vector<FieldSpec>>> probe)
      : fn_(std::move(fn)),
        in_(std::move(in)),
        in_offset_(in_offset),
        out_(std::move(out)),
        stats_(std::move(stats)),
        probe_(std::move(probe)) {}
  std::string_view name() const override { return "python:map"; }
  Status Apply(Sample& s, OpState*) const override {
    if (out_.empty() && ProbeDone(*probe_)) return Status::OK();
    SampleRng rng = s.rng();
    const uint64_t seed = rng.NextU64();
    const std::string op = "python:map";
    return CallPython(op, *stats_, [&]() -> Status {
      py::list values;
      for (size_t j = 0; j < in_.size(); ++j) {
        const FieldSpec& f = in_[j];
        if (f.kind == FieldKind::kBytes) {
          const std::vector<uint8_t>& b = s.bytes_output(in_offset_ + j);
          values.append(py::bytes(reinterpret_cast<const char*>(b.data()), b.size()));
        } else {
          std::vector<py::ssize_t> shape(f.shape.begin(), f.shape.end());
          py::array a(NumpyDType(f.dtype), shape);  // a copy: fn may keep it
          std::memcpy(a.mutable_data(), s.output(in_offset_ + j), f.SampleBytes());
          values.append(py::make_tuple(a, PyText(DTypeName(f.dtype))));
        }
      }
      // (name, value, dtype name) per output field: the map may add, drop
      // or change fields (python/feedline/_pyops.py, MapRunner); the
      // first sample's output, learned at creation, is the loader's.
      py::list result = fn_->get()(values, seed);
      if (!out_.empty() && result.size() != out_.size()) {
        return InternalError("python:map: " + std::to_string(result.size()) +
                             " fields, the loader has " + std::to_string(out_.size()));
      }
      std::vector<FieldSpec> got;
      std::vector<uint8_t> bytes;
      for (size_t k = 0; k < result.size(); ++k) {
        py::tuple item = result[k];
        FieldSpec f;
        f.name = item[0].cast<std::string>();
        const bool is_bytes = item[2].cast<std::string>() == "bytes";
        if (!out_.empty()) {
          const FieldSpec& want = out_[k];
          if (f.name != want.name) {
            return InternalError("python:map: field " + std::to_string(k) + " is '" + f.name +
                                 "', the loader's is '" + want.name + "'");
          }
          if (is_bytes != (want.kind == FieldKind::kBytes)) {
            return InvalidArgumentError(
                "python:map returned field '" + f.name + "' as " +
                (is_bytes ? std::string("bytes") : std::string("a tensor")) +
                " for this sample; the loader was created for " +
                (is_bytes ? std::string("a tensor") : std::string("bytes")) +
                " (learned from the first sample at creation)");
          }
        }
        if (is_bytes) {
          f.kind = FieldKind::kBytes;
          if (out_.empty()) {
            got.push_back(f);
            continue;
          }
          const std::string b = item[1].cast<std::string>();
          s.bytes_output(k).assign(b.begin(), b.end());
          continue;
        }
        FEEDLINE_RETURN_IF_ERROR(ReadArray(op, item[1], item[2], &f.dtype, &f.shape, &bytes));
        if (out_.empty()) {
          got.push_back(f);
          continue;
        }
        const FieldSpec& want = out_[k];
        if (f.dtype != want.dtype || f.shape != want.shape) {
          return InvalidArgumentError(
              "python:map returned field '" + f.name + "' as " + std::string(DTypeName(f.dtype)) +
              " " + ShapeText(f.shape) + " for this sample; the loader was created for " +
              std::string(DTypeName(want.dtype)) + " " + ShapeText(want.shape) +
              " (learned from the first sample at creation)");
        }
        std::memcpy(s.output(k), bytes.data(), want.SampleBytes());
      }
      if (out_.empty() && !probe_->has_value()) *probe_ = std::move(got);
      return Status::OK();
    });
  }

 private:
  std::shared_ptr<PyHandle> fn_;
  const std::vector<FieldSpec> in_;
  const size_t in_offset_;
  const std::vector<FieldSpec> out_;
  std::shared_ptr<PyOpStats> stats_;
  std::shared_ptr<std::optional<std::vector<FieldSpec>>> probe_;
};

}  // namespace

PyHandle::~PyHandle() {
  if (!obj_) return;
  if (Finalizing()) {
    obj_.release();  // the interpreter is going away: leak rather than touch it
    return;
  }
  py::gil_scoped_acquire gil;
  obj_ = py::object();
}

std::string MidSpec::ToString() const {
  if (pil) {
    return "PIL image " + std::to_string(shape.size() > 1 ? shape[1] : 0) + "x" +
           std::to_string(shape.empty() ? 0 : shape[0]) +
           (shape.size() == 3 ? " with " + std::to_string(shape[2]) + " channels"
                              : " (one channel)");
  }
  return std::string(DTypeName(dtype)) + " tensor " + ShapeText(shape);
}

Result<FieldSpec> PlanSuffix(const std::vector<SuffixStep>& steps, const MidSpec& mid,
                             const std::string& name) {
  FieldSpec f;
  f.name = name;
  f.dtype = mid.dtype;
  f.shape = mid.shape;
  bool pil = mid.pil;
  if (pil && (mid.dtype != DType::kUInt8 || mid.shape.size() < 2 || mid.shape.size() > 3)) {
    return InvalidArgumentError("the Python members return a PIL image of an unsupported mode");
  }
  if (!pil && !steps.empty() && mid.dtype != DType::kUInt8 && mid.dtype != DType::kFloat32) {
    return InvalidArgumentError("the Python members return a " + mid.ToString() +
                                ": the native ToTensor/ToDtype/Normalize after them take uint8 or "
                                "float32 tensors");
  }
  auto to_chw = [&] {
    const int64_t c = mid.shape.size() == 3 ? mid.shape[2] : 1;
    f.shape = {c, mid.shape[0], mid.shape[1]};
    pil = false;
  };
  for (const SuffixStep& st : steps) {
    switch (st.kind) {
      case SuffixStep::Kind::kToTensor:
      case SuffixStep::Kind::kPilToTensor:
        if (!pil) {
          return InvalidArgumentError(
              "the Python members return a " + mid.ToString() + ", but " +
              (st.kind == SuffixStep::Kind::kToTensor ? "ToTensor" : "PILToTensor") +
              " after them expects a PIL image (torchvision would fail too)");
        }
        to_chw();
        f.dtype = st.kind == SuffixStep::Kind::kToTensor ? DType::kFloat32 : DType::kUInt8;
        break;
      case SuffixStep::Kind::kToImage:
        if (pil) to_chw(), f.dtype = DType::kUInt8;
        break;
      case SuffixStep::Kind::kToDtype:
        if (pil) {
          return InvalidArgumentError(
              "ToDtype/ConvertImageDtype after the Python members gets a PIL image: torchvision "
              "needs a tensor there");
        }
        f.dtype = st.dtype;
        break;
      case SuffixStep::Kind::kNormalize: {
        if (pil || f.dtype == DType::kUInt8) {
          return InvalidArgumentError("Normalize after the Python members gets a " +
                                      std::string(pil ? "PIL image" : "uint8 tensor") +
                                      ": torchvision needs a float tensor");
        }
        const size_t c = f.shape.size() == 3 ? static_cast<size_t>(f.shape[0]) : 0;
        if (c == 0 || (st.mean.size() != 1 && st.mean.size() != c) ||
            (st.std.size() != 1 && st.std.size() != c)) {
          return InvalidArgumentError("Normalize with " + std::to_string(st.mean.size()) +
                                      " means after the Python members gets a " + mid.ToString());
        }
        break;
      }
    }
  }
  if (pil) {
    return InvalidArgumentError(
        "the transform returns a " + mid.ToString() +
        ", which cannot be batched: add ToTensor, PILToTensor or ToImage at its end");
  }
  return f;
}

ChainOps MakeImageChainOps(const ImageChain& chain, size_t field, std::optional<MidSpec> learned,
                           std::optional<ChainInput> input) {
  auto shared = std::make_shared<ChainShared>();
  shared->chain = chain;
  shared->what = chain.name;
  std::string out_name = "image";
  if (input) {
    const std::string& f = input->request.name;
    out_name = f;
    shared->chain.name = chain.name + ":" + f;
    shared->what = shared->chain.name + " (the transform of field '" + f + "')";
    if (f != "image") shared->prefix_name += ":" + f;
    shared->suffix_name += ":" + f;
    shared->input = std::move(input);
  }
  shared->chain.transform.dtype = DType::kUInt8;
  shared->chain.transform.layout = Layout::kHWC;
  shared->chain.transform.normalize = false;
  shared->stats = std::make_shared<PyOpStats>();
  ChainOps ops;
  if (learned) {
    shared->learned = learned;
    Result<FieldSpec> out = PlanSuffix(chain.suffix, *learned, out_name);
    if (out.ok()) shared->out = *out;
  } else {
    shared->probe = std::make_shared<std::optional<MidSpec>>();
    ops.probe = shared->probe;
  }
  ops.stats = shared->stats;
  std::shared_ptr<const ChainShared> c = shared;
  ops.ops = {std::make_shared<PrefixOp>(c), std::make_shared<PythonChainOp>(c),
             std::make_shared<SuffixOp>(c, field)};
  return ops;
}

MapOp MakeMapOp(std::shared_ptr<PyHandle> fn, std::vector<FieldSpec> in, size_t in_offset,
                std::vector<FieldSpec> out) {
  MapOp m;
  m.stats = std::make_shared<PyOpStats>();
  m.probe = std::make_shared<std::optional<std::vector<FieldSpec>>>();
  m.op = std::make_shared<PythonMapOp>(std::move(fn), std::move(in), in_offset, std::move(out),
                                       m.stats, m.probe);
  return m;
}

}  // namespace feedline::python
