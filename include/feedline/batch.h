// Batch: one delivered batch, viewing a buffer of the loader's batch ring.
//
// A Batch is a cheap, copyable handle. The buffer it views is recycled into
// the ring only when the last copy is destroyed, so holding batches (in a
// list, across steps, after the loader itself is gone) is always safe; what
// it costs is backpressure: the loader produces ahead only into free buffers,
// within its memory budget.
//
// Layout: a kTensor field i is a contiguous C-order array [size(), shape...]
// of its dtype starting at data(i); fields are kBufferAlignment-aligned. A
// kBytes field holds one byte string per sample, read with bytes(i, sample).
//
// Thread safety: const methods may be called concurrently. Copies may be
// destroyed on any thread.
#ifndef FEEDLINE_BATCH_H_
#define FEEDLINE_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "feedline/buffer.h"
#include "feedline/export.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

class LoaderCore;
namespace detail {
struct BatchData;
}  // namespace detail

// A sample that failed, with everything needed to find it.
struct FEEDLINE_EXPORT SampleError {
  uint64_t epoch = 0;
  uint64_t batch = 0;  // batch index within the epoch
  uint64_t sample_id = 0;
  std::string op;  // name of the op that failed
  SampleLocation location;
  Status status;  // the op's own status, without added context

  // "<op>/<StatusCodeName>", the key errors are counted by.
  std::string Reason() const;
  // "sample 17 (epoch 0, batch 4, file 'a.fls', record 3, offset 96) in op 'decode': DataLoss: ..."
  std::string ToString() const;
};

class FEEDLINE_EXPORT Batch {
 public:
  Batch() = default;  // empty: size() == 0, no fields

  bool empty() const { return d_ == nullptr; }
  uint64_t epoch() const;
  uint64_t index() const;  // batch number within the epoch
  // Valid samples; below the batch size for a short last batch or when the
  // skip policy dropped samples.
  size_t size() const;
  // Ids of the valid samples, in order.
  std::span<const uint64_t> sample_ids() const;
  // How many of the valid samples are padding duplicates.
  size_t num_padding() const;
  // Samples dropped from this batch under the skip policy.
  std::span<const SampleError> skipped() const;

  size_t num_fields() const;
  const FieldSpec& field(size_t i) const;
  void* data(size_t i) const;
  // size() * field(i).SampleBytes() (0 for a kBytes field)
  size_t field_bytes(size_t i) const;
  // Sample `sample`'s bytes of kBytes field i (sample < size()); valid while
  // this batch or a copy of it lives.
  std::span<const uint8_t> bytes(size_t i, size_t sample) const;
  template <typename T>
  std::span<T> field_as(size_t i) const {
    return {static_cast<T*>(data(i)), field_bytes(i) / sizeof(T)};
  }

  // Shares ownership of the underlying buffer: while any returned pointer
  // lives, the memory stays valid and is not reused. For zero-copy views
  // (torch tensors) that outlive this handle.
  std::shared_ptr<void> keepalive() const;

  // The whole buffer this batch views: every field, the padding between
  // them and the unused tail of a short batch. The ring recycles the same
  // few buffers, so a caller can pin each once (cudaHostRegister) and key
  // it by data(). Empty for an empty batch.
  std::span<std::byte> buffer() const;

 private:
  friend class LoaderCore;
  explicit Batch(std::shared_ptr<detail::BatchData> d) : d_(std::move(d)) {}
  std::shared_ptr<detail::BatchData> d_;
};

}  // namespace feedline

#endif  // FEEDLINE_BATCH_H_
