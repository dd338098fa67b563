// What a Batch handle points at, and where its buffer goes when released.
#ifndef FEEDLINE_SRC_ENGINE_DETAIL_BATCH_DATA_H_
#define FEEDLINE_SRC_ENGINE_DETAIL_BATCH_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "feedline/batch.h"
#include "feedline/buffer.h"

namespace feedline::detail {

// Where each field of a batch lives inside one buffer. Immutable, shared by
// the loader and every batch it delivers.
struct BatchLayout {
  uint64_t batch_size = 0;
  std::vector<FieldSpec> fields;
  std::vector<size_t> sample_bytes;  // per field
  std::vector<size_t> offsets;       // per field, kBufferAlignment-aligned
  size_t total_bytes = 0;
  // Per field: its index among the kBytes fields, or -1 for a kTensor field.
  std::vector<int> bytes_index;
  size_t num_bytes_fields = 0;

  static BatchLayout Make(uint64_t batch_size, std::vector<FieldSpec> fields);
};

// The kBytes fields of one batch, beside its buffer: values[j][i] holds
// sample i's bytes of the j-th kBytes field (BatchLayout::bytes_index).
// Allocated per batch and freed with it, not recycled through the ring:
// these are small (text, JSON, encoded arrays) and not counted in the
// ring's budget (docs/fields.md).
struct BytesFields {
  std::vector<std::vector<std::vector<uint8_t>>> values;
};

// Takes back a batch buffer when the last Batch referencing it is gone. The
// loader's state implements it and outlives every batch it delivered.
class BufferHome {
 public:
  virtual ~BufferHome() = default;
  virtual void Return(std::unique_ptr<Buffer> buffer) = 0;
};

struct BatchData {
  BatchData() = default;
  BatchData(const BatchData&) = delete;
  BatchData& operator=(const BatchData&) = delete;
  ~BatchData() {
    if (home != nullptr && buffer != nullptr) home->Return(std::move(buffer));
  }

  std::shared_ptr<BufferHome> home;
  std::unique_ptr<Buffer> buffer;
  std::shared_ptr<const BatchLayout> layout;
  uint64_t epoch = 0;
  uint64_t index = 0;
  std::vector<uint64_t> ids;
  size_t num_padding = 0;
  std::vector<SampleError> skipped;
  std::unique_ptr<BytesFields> bytes;  // null when the layout has no kBytes field
};

}  // namespace feedline::detail

#endif  // FEEDLINE_SRC_ENGINE_DETAIL_BATCH_DATA_H_
