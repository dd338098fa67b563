// The per-sample chain: what a worker thread does to turn a sample id into
// its slot of a batch.
//
// A Pipeline is an immutable description: the dataset size, the per-sample
// output fields, and an ordered list of SampleOps. A worker runs the ops of
// one sample back to back on its own thread (a fused chain: no queue, no
// hand-off between ops): typically a source op that fills the sample's bytes,
// label and location from storage, then ops that decode and transform,
// writing the result straight into the sample's output slot in the batch.
//
// The engine knows no format and no codec: those live in ops.
//
// Thread safety: a SampleOp is shared by all workers; Apply() is const and
// must be safe for concurrent use. Mutable per-thread state (scratch buffers,
// codec handles) goes in the OpState that NewState() creates once per worker;
// it is only ever touched by that worker. A Sample is owned by one worker.
#ifndef FEEDLINE_SAMPLE_H_
#define FEEDLINE_SAMPLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/buffer.h"
#include "feedline/export.h"
#include "feedline/random.h"
#include "feedline/sampler.h"
#include "feedline/status.h"

namespace feedline {

namespace detail {
class SampleRunner;
class ScratchGate;
}  // namespace detail

// Where a sample's bytes came from, for error messages. Source ops fill what
// they know; unknown numbers stay -1.
struct FEEDLINE_EXPORT SampleLocation {
  std::string file;     // shard, tar or image path, or URL
  int64_t record = -1;  // record number within the file
  int64_t offset = -1;  // byte offset of the record within the file
  std::string key;      // the sample's key (e.g. a relative path)

  // "file 'a.fls', record 17, offset 4096, key 'n01/x.jpg'"; empty if nothing is known.
  std::string ToString() const;
  void Clear();
};

// One sample in flight: its identity, the data handed from op to op, and
// where its outputs go. Ops read and write it; the engine resets it between
// samples while keeping buffer capacity (no allocation in steady state).
class FEEDLINE_EXPORT Sample {
 public:
  uint64_t id() const { return id_; }
  uint64_t epoch() const { return epoch_; }
  // True for a padding duplicate (see sampler.h).
  bool is_padding() const { return is_padding_; }

  // The random stream of the op now running: a pure function of (seed,
  // epoch, sample id, op index). Each call returns the stream from its start.
  SampleRng rng() const { return SampleRng(epoch_key_, id_, op_index_); }

  // The sample's encoded bytes. A source op either points them at memory that
  // outlives the chain (a record held by the source) with set_data(), or
  // fills scratch() and calls set_data(scratch()).
  std::span<const uint8_t> data() const { return data_; }
  void set_data(std::span<const uint8_t> data) { data_ = data; }
  std::vector<uint8_t>& scratch() { return scratch_; }

  int64_t label = 0;
  SampleLocation& location() { return location_; }
  const SampleLocation& location() const { return location_; }

  // Output slot: field i of this sample, SampleBytes() of fields()[i] long,
  // inside the batch buffer. Write it; do not keep the pointer.
  size_t num_outputs() const { return outputs_.size(); }
  void* output(size_t i) const { return outputs_[i]; }
  template <typename T>
  T* output_as(size_t i) const {
    return static_cast<T*>(outputs_[i]);
  }
  // The output of kBytes field i (FieldKind::kBytes): this sample's byte
  // string, empty when the op starts; assign or append to it. Only for
  // kBytes fields (output(i) of one is not a pointer into the buffer).
  std::vector<uint8_t>& bytes_output(size_t i) const {
    return *static_cast<std::vector<uint8_t>*>(outputs_[i]);
  }

  // Parts: the named byte ranges a source read for this sample, for
  // recipes with several fields (docs/fields.md). A WebDataset tar gives one
  // per member of the sample's key, named by its extension ("jpg", "cls",
  // "txt", "json", "npy", ...); an image folder gives one named by the
  // file's extension. The spans point at memory that outlives the chain
  // (the sample's scratch or the source's). Cleared between samples.
  struct Part {
    std::string name;
    std::span<const uint8_t> data;
  };
  void AddPart(std::string_view name, std::span<const uint8_t> data);
  std::span<const Part> parts() const { return {parts_.data(), num_parts_}; }
  // The first part named `name`, or null.
  const Part* FindPart(std::string_view name) const;

  // True once the loader is being cancelled or destroyed. A long-running op
  // (a slow read, a retry loop) should check it and return CancelledError.
  bool cancelled() const { return cancelled_->load(std::memory_order_relaxed); }

  // Charges `bytes` of scratch this sample is about to allocate (decode
  // buffers sized from a header) to the loader's RAM budget, before the
  // allocation (docs/reliability.md 36). Charges add up over the sample's ops.
  // A sample within the per-worker mark (docs/engine.md, "Decode scratch")
  // proceeds at once; a larger one takes the loader's large-sample
  // allowance, waiting while another sample holds it; one larger than the
  // allowance fails with ResourceExhausted naming `what`, the bytes and the
  // budget. Outside a loader there is no budget and it always succeeds.
  Status ChargeScratch(uint64_t bytes, std::string_view what);
  // Bytes charged so far for this sample.
  uint64_t charged_scratch() const { return charged_scratch_; }

 private:
  friend class detail::SampleRunner;
  uint64_t id_ = 0;
  uint64_t epoch_ = 0;
  uint64_t epoch_key_ = 0;
  uint32_t op_index_ = 0;
  bool is_padding_ = false;
  std::span<const uint8_t> data_;
  std::vector<uint8_t> scratch_;
  std::vector<Part> parts_;  // the first num_parts_ are this sample's; capacity kept
  size_t num_parts_ = 0;
  SampleLocation location_;
  std::vector<void*> outputs_;
  const std::atomic<bool>* cancelled_ = nullptr;
  detail::ScratchGate* gate_ = nullptr;
  uint64_t charged_scratch_ = 0;
  bool holds_allowance_ = false;
};

// Per-worker mutable state of an op.
class FEEDLINE_EXPORT OpState {
 public:
  virtual ~OpState() = default;
  // Bytes of scratch this state holds now (decoder buffers), charged to the
  // loader's RAM budget. Default: 0.
  virtual uint64_t ScratchBytes() const { return 0; }
  // Gives scratch back to the allocator. Called by the worker after a sample
  // when its scratch is above the per-worker mark. Default: nothing.
  virtual void TrimScratch() {}
};

// A read-ahead the tuner may size: what it did and its current limits.
struct FEEDLINE_EXPORT ReadAheadMetrics {
  uint32_t in_flight_limit = 0;  // fetches allowed in flight now
  uint32_t max_in_flight = 0;    // fetcher threads
  uint64_t bytes_limit = 0;      // bytes allowed now
  uint64_t max_bytes = 0;        // reserved from the budget
  uint64_t fetches = 0;          // completed
  uint64_t fetch_ns = 0;         // summed latency of completed fetches
  uint64_t fetched_bytes = 0;
  uint64_t peak_bytes = 0;
};

// What an op does ahead of its samples (a source's read-ahead): told which
// samples come next, sized by the tuner within the bytes it reserved.
// Thread safety: the loader serialises OnPlan calls; the other methods may
// run concurrently with them and with the op's Apply.
class FEEDLINE_EXPORT BackgroundWork {
 public:
  virtual ~BackgroundWork() = default;
  // Called when the loader starts (or restarts) producing an epoch: the
  // sample ids it will ask for, in order, from position `first` on. Called
  // without any engine lock held, serialised (never two at once), from
  // whichever thread moved the stream on: the consumer's (create, SetEpoch,
  // RestoreState, an end of epoch) or a worker's (claims crossing into the
  // next epoch); must not block for long. A null plan means the loader is
  // closing: stop background work (threads must be joined on return).
  virtual void OnPlan(std::shared_ptr<const EpochPlan> plan, uint64_t first) = 0;
  // Bytes this work may hold between samples (read-ahead buffers), fixed
  // for its life. The loader takes them out of its memory budget before
  // sizing the batch ring.
  virtual uint64_t ReservedBytes() const = 0;
  // What it did and its current limits, for the tuner and metrics.
  virtual ReadAheadMetrics Metrics() const = 0;
  // New limits within ReservedBytes() and its threads, set by the tuner.
  virtual void SetLimits(uint32_t in_flight, uint64_t bytes) = 0;
};

class FEEDLINE_EXPORT SampleOp {
 public:
  virtual ~SampleOp() = default;
  // Short stable name used in metrics and errors: "read", "decode", ...
  virtual std::string_view name() const = 0;
  // Called once per worker thread before its first sample; may return null.
  virtual std::unique_ptr<OpState> NewState() const { return nullptr; }
  // Processes one sample. A non-OK status is a sample error: the engine adds
  // the sample id, op name and location and applies the error policy.
  virtual Status Apply(Sample& sample, OpState* state) const = 0;

  // The op's background work (read-ahead), or null (the default). Apply is
  // const and changes nothing a sample sees; background work has state that
  // the loader and the tuner change (threads, plans, limits), so it is a
  // separate, mutable object: the op owns it and it lives as long as the
  // op. An op with background work belongs to one loader at a time.
  virtual BackgroundWork* background() const { return nullptr; }
  // Fingerprints saved in resume states (Loader::SaveState), so that a state
  // is refused on another dataset or another recipe. A source op digests
  // what it reads (sample keys, sizes, labels, classes); a transform op its
  // parameters. 0: nothing to check (the default).
  virtual uint64_t DataFingerprint() const { return 0; }
  virtual uint64_t ConfigFingerprint() const { return 0; }
  // True if the op charges per-sample scratch (Sample::ChargeScratch): the
  // loader then carves its large-sample allowance out of the budget.
  virtual bool ChargesScratch() const { return false; }
};

// An op from a function, for simple stateless steps and tests.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeOp(std::string name,
                                                       std::function<Status(Sample&)> fn);

struct FEEDLINE_EXPORT Pipeline {
  uint64_t num_samples = 0;
  // The source's groups and window for a grouped shuffle (sampler.h,
  // SamplerOptions::group_sizes); empty for sources read per sample.
  std::vector<uint64_t> sample_groups;
  uint64_t group_window = 1;
  std::vector<FieldSpec> fields;                     // outputs, in batch order
  std::vector<std::shared_ptr<const SampleOp>> ops;  // run in order on each sample
};

}  // namespace feedline

#endif  // FEEDLINE_SAMPLE_H_
