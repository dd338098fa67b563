#include "feedline/buffer.h"

#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

namespace feedline {
namespace {

class HostBuffer final : public Buffer {
 public:
  HostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  ~HostBuffer() override { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_;
  size_t size_;
};

constexpr size_t kPageBytes = 4096;

class HostAllocator final : public BufferAllocator {
 public:
  Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    if (bytes > std::numeric_limits<size_t>::max() - kBufferAlignment) {
      return ResourceExhaustedError("host allocator: cannot allocate " + std::to_string(bytes) +
                                    " bytes");
    }
    // A page or more: whole pages, so that no two buffers share one and each
    // can be pinned on its own (cudaHostRegister works on pages).
    const size_t align = bytes >= kPageBytes ? kPageBytes : kBufferAlignment;
    if (bytes > std::numeric_limits<size_t>::max() - align) {
      return ResourceExhaustedError("host allocator: cannot allocate " + std::to_string(bytes) +
                                    " bytes");
    }
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p == nullptr) {
      return ResourceExhaustedError("host allocator: out of memory allocating " +
                                    std::to_string(bytes) + " bytes");
    }
    return std::unique_ptr<Buffer>(std::make_unique<HostBuffer>(p, bytes));
  }
  std::string_view name() const override { return "host"; }
};

}  // namespace

std::shared_ptr<BufferAllocator> NewHostAllocator() { return std::make_shared<HostAllocator>(); }

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8: return 1;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kFloat64: return 8;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

size_t FieldSpec::SampleBytes() const {
  if (kind == FieldKind::kBytes) return 0;
  size_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    n *= static_cast<size_t>(d);
  }
  return n;
}

FieldSpec FieldSpec::Bytes(std::string name) {
  FieldSpec f;
  f.name = std::move(name);
  f.kind = FieldKind::kBytes;
  return f;
}

}  // namespace feedline
