// Python ops (docs/python_ops.md): the SampleOps that run a torchvision
// Compose's untranslatable middle, and map=, in Python on the worker
// threads, between a native prefix (decode + geometry) and a native suffix
// (ToTensor, ToDtype, Normalize).
//
// Thread safety: the ops are SampleOps (Apply is safe for concurrent use).
// Every Python call takes one process-wide lock, then the GIL, and gives
// both back before returning; no worker holds the GIL outside it. The
// prefix, Python and suffix ops of one sample hand data over through a
// per-thread slot: the engine runs a sample's ops back to back on one
// thread (sample.h), so the slot needs no lock.
#ifndef FEEDLINE_PYTHON_BINDINGS_PYTHON_OP_H_
#define FEEDLINE_PYTHON_BINDINGS_PYTHON_OP_H_

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "feedline/image.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "feedline/sample.h"
#include "feedline/source.h"
#include "python/bindings/python_workers.h"

namespace feedline::python {

// GIL counters of one Python op, shared by its workers.
struct PyOpStats {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> gil_wait_ns{0};  // waiting for the Python-op lock and the GIL
  std::atomic<uint64_t> gil_held_ns{0};  // running with the GIL held
};

// A Python object that may be dropped on a thread without the GIL (an op
// destroyed with the loader): its destructor takes the GIL, or leaks the
// reference while the interpreter is finalizing.
class PyHandle {
 public:
  PyHandle() = default;
  explicit PyHandle(pybind11::object obj) : obj_(std::move(obj)) {}
  ~PyHandle();
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;
  const pybind11::object& get() const { return obj_; }

 private:
  pybind11::object obj_;
};

// One native member after the Python middle.
struct SuffixStep {
  enum class Kind { kToTensor, kPilToTensor, kToImage, kToDtype, kNormalize };
  Kind kind = Kind::kToTensor;
  DType dtype = DType::kFloat32;  // kToDtype
  bool scale = true;              // kToDtype: uint8 -> float divides by 255
  std::vector<float> mean, std;   // kNormalize
};

// What the Python middle returned: a PIL image (uint8, HWC or HW) or a tensor.
struct MidSpec {
  bool pil = true;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
  std::string ToString() const;  // "PIL image 3x224x224 (HWC)", "tensor float32 [3, 224, 224]"
  bool operator==(const MidSpec& o) const {
    return pil == o.pil && dtype == o.dtype && shape == o.shape;
  }
};

// A Compose split into native prefix, Python middle and native suffix.
struct ImageChain {
  enum class Prefix { kDecode, kTransform, kResizeShort };
  Prefix prefix = Prefix::kDecode;
  // kTransform: the geometry and flip (output forced to uint8 HWC);
  // kResizeShort: resize_size, interpolation and hflip_prob (Resize(int)).
  ImageTransform transform;
  std::shared_ptr<PyHandle> run;  // callable(pixels HWC uint8, seed) -> (array, is_pil)
  std::string name;               // "python:MyOp+RandomRotation"
  std::string members;            // what the middle runs, for the fingerprint
  std::vector<SuffixStep> suffix;
  // python_workers=N: the middle runs in these worker processes instead of
  // under the GIL on the worker threads (null: in-process).
  std::shared_ptr<WorkerPool> workers;
};

// The output field of the suffix for middle output `mid`, or why not.
Result<FieldSpec> PlanSuffix(const std::vector<SuffixStep>& steps, const MidSpec& mid,
                             const std::string& name);

// Where a chain reads its encoded image: without one, the sample's data
// (the image recipe); with one, the part of image field `request` that
// SelectImagePart picks (fields=). The ops' names then say the field: the
// prefix "decode_transform:<field>" ("decode_transform" for a field named
// "image", as MakeFieldOp names it), the Python op "<chain.name>:<field>",
// the suffix "to_tensor:<field>"; a Python member's error says the field.
struct ChainInput {
  FieldRequest request;  // the image field: its name and parts
  bool source_has_labels = false;
};

// Ops of a chain that writes field `field`. With `learned` empty they run
// in probe mode: the suffix writes a placeholder byte and the first
// sample's middle output is kept in *probe.
struct ChainOps {
  std::vector<std::shared_ptr<const SampleOp>> ops;  // prefix, python, suffix
  std::shared_ptr<PyOpStats> stats;                  // of ops[1]
  std::shared_ptr<std::optional<MidSpec>> probe;     // probe mode: set by the first sample
};
ChainOps MakeImageChainOps(const ImageChain& chain, size_t field, std::optional<MidSpec> learned,
                           std::optional<ChainInput> input = std::nullopt);

// map=: `fn` (callable(values, seed) -> values, one per field) over the
// sample's fields [in_offset, in_offset + in.size()), writing fields
// [0, out.size()). With `out` empty it runs in probe mode, keeping the
// first sample's output specs in *probe.
struct MapOp {
  std::shared_ptr<const SampleOp> op;
  std::shared_ptr<PyOpStats> stats;
  std::shared_ptr<std::optional<std::vector<FieldSpec>>> probe;
};
MapOp MakeMapOp(std::shared_ptr<PyHandle> fn, std::vector<FieldSpec> in, size_t in_offset,
                std::vector<FieldSpec> out);

// What Python adds to a SampleSpec: a chain for the image (kImage output),
// chains for image fields (kFields output), and a map= function.
struct PyRecipe {
  std::optional<ImageChain> chain;
  // kFields: (image field name, its chain), one per field whose transform
  // has Python members; each field runs and learns its own.
  std::vector<std::pair<std::string, ImageChain>> field_chains;
  std::shared_ptr<PyHandle> map;        // callable(values, seed) -> [(value, dtype name)]
  std::shared_ptr<WorkerPool> workers;  // python_workers=N: the chain's middle runs there
};

// The pipeline of `spec` over `source` with the recipe's Python ops, their
// output shapes learned by running the first sample (ProbeFirst) with
// `options`. `python_stats` gets (op index, counters) for each Python op.
Result<Pipeline> BuildPythonPipeline(
    const Source& source, const SampleSpec& spec, const PyRecipe& recipe,
    const LoaderOptions& options,
    std::vector<std::pair<size_t, std::shared_ptr<PyOpStats>>>* python_stats);

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_PYTHON_OP_H_
