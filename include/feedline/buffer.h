// Batch memory: where the engine writes samples, and who provides it.
//
// The engine never calls malloc for batches itself: it asks a BufferAllocator
// for each of its K batch buffers once (K = the ring depth the budget allows)
// and recycles them for the loader's life. The default gives aligned host
// memory. For device copies the Python layer does not plug in an allocator:
// it pins each recycled host buffer in place (cudaHostRegister) the first
// time it sees it (python/feedline/_device.py), so a ring of K buffers costs
// K registrations. A custom allocator (pinned or device-visible memory from
// C++) works unchanged, within the thread-safety rule below.
//
// Thread safety: Allocate() is called from an engine worker thread WITH the
// engine's lock held (so the buffer count stays exact), at most K times per
// loader: it may be slow, but must not call back into the loader or block
// on anything the loader's threads hold. It must be safe for concurrent use
// when several loaders share one allocator. A Buffer is owned by one holder
// at a time; it is destroyed (memory returned) on whichever thread drops the
// last reference.
#ifndef FEEDLINE_BUFFER_H_
#define FEEDLINE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/status.h"

namespace feedline {

// Every Buffer's data() is aligned to at least this many bytes (a cache line;
// also enough for AVX-512 loads).
inline constexpr size_t kBufferAlignment = 64;

class FEEDLINE_EXPORT Buffer {
 public:
  virtual ~Buffer() = default;
  // Start of size() writable bytes, kBufferAlignment-aligned; stable for the
  // Buffer's lifetime.
  virtual void* data() = 0;
  virtual size_t size() const = 0;
};

class FEEDLINE_EXPORT BufferAllocator {
 public:
  virtual ~BufferAllocator() = default;
  // A buffer of at least `bytes` bytes. Errors (out of memory, a failed
  // pin) are ResourceExhausted naming the size.
  virtual Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) = 0;
  // Short name for metrics and errors: "host", "torch-pinned", ...
  virtual std::string_view name() const = 0;
};

// Plain host memory, kBufferAlignment-aligned, not zeroed.
FEEDLINE_EXPORT std::shared_ptr<BufferAllocator> NewHostAllocator();

// Element types of batch fields, named after torch's dtypes.
enum class DType : uint8_t {
  kUInt8,
  kInt8,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64
};

FEEDLINE_EXPORT size_t DTypeSize(DType dtype);
FEEDLINE_EXPORT std::string_view DTypeName(DType dtype);  // "uint8", "float32", ...

// How a field's per-sample values are stored in a batch.
enum class FieldKind : uint8_t {
  // A fixed-size array: the batch holds one contiguous [batch, shape...]
  // array of `dtype` inside the batch buffer.
  kTensor,
  // Bytes of any length per sample (text, JSON, an encoded array): the
  // batch holds one byte string per sample beside the buffer; dtype and
  // shape are unused. Ops fill it with Sample::bytes_output(); consumers
  // read it with Batch::bytes().
  kBytes,
};

// One per-sample output of a pipeline: in a batch a kTensor field becomes a
// contiguous array of shape [batch, shape...] (e.g. "image" float32
// {3, 224, 224}, "label" int64 {}), a kBytes field one byte string per sample.
struct FEEDLINE_EXPORT FieldSpec {
  std::string name;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // per sample; empty means a scalar
  FieldKind kind = FieldKind::kTensor;

  // Bytes one sample occupies in the batch buffer; 0 if a dimension is not
  // positive, and for a kBytes field (stored beside the buffer).
  size_t SampleBytes() const;
  // A kBytes field named `name`.
  static FieldSpec Bytes(std::string name);
};

}  // namespace feedline

#endif  // FEEDLINE_BUFFER_H_
