// Megatron-LM indexed datasets (`prefix.bin` + `prefix.idx`), read through
// memory maps. The index layout (docs/tokens.md, all little-endian):
//
//   offset      size  field
//   0           9     magic "MMIDIDX\0\0"
//   9           8     version, u64 (1)
//   17          1     dtype code, u8 (1 uint8, 2 int8, 3 int16, 4 int32,
//                     5 int64, 6 float64, 7 float32, 8 uint16)
//   18          8     sequence count n, u64
//   26          8     document count d, u64 (documents + 1)
//   34          4n    sequence lengths, i32, in tokens
//   34+4n       8n    sequence pointers, i64, byte offsets into .bin
//   34+12n      8d    document indices, i64: document k is sequences
//                     [doc[k], doc[k+1]); doc[0] = 0, doc[d-1] = n
//
// Nothing after the document indices is read (Megatron's multimodal
// "modes" array is refused: the index must end there).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "feedline/tokens.h"
#include "src/core/detail/endian.h"
#include "src/tokens/mapped_file.h"
#include "src/tokens/token_codec.h"

namespace feedline {
namespace {

using tokens::detail::MappedFile;

constexpr char kMagic[] = "MMIDIDX\0\0";  // 9 bytes, without the literal's terminator
constexpr size_t kMagicSize = 9;
constexpr uint64_t kVersion = 1;
constexpr uint64_t kHeaderSize = 34;

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Result<TokenDType> DTypeOfCode(uint8_t code, const std::string& idx) {
  switch (code) {
    case 1: return TokenDType::kUInt8;
    case 2: return TokenDType::kInt8;
    case 3: return TokenDType::kInt16;
    case 4: return TokenDType::kInt32;
    case 5: return TokenDType::kInt64;
    case 8: return TokenDType::kUInt16;
    case 6:
    case 7:
      return InvalidArgumentError("Megatron index '" + idx + "': dtype code " +
                                  std::to_string(code) + " (" +
                                  (code == 6 ? "float64" : "float32") +
                                  ") holds no token ids; integer dtypes only (codes 1-5, 8)");
    default:
      return DataLossError("Megatron index '" + idx + "': unknown dtype code " +
                           std::to_string(code) + " (known: 1-8)");
  }
}

class MegatronDataset final : public TokenSource {
 public:
  MegatronDataset(std::unique_ptr<MappedFile> index, std::unique_ptr<MappedFile> bin,
                  TokenDType dtype, uint64_t num_sequences, uint64_t num_doc_indices)
      : index_(std::move(index)),
        bin_(std::move(bin)),
        dtype_(dtype),
        item_(TokenDTypeSize(dtype)),
        n_(num_sequences),
        d_(num_doc_indices),
        num_tokens_(bin_->size() / item_) {}

  Kind kind() const override { return Kind::kMegatron; }
  const std::string& path() const override { return bin_->path(); }
  TokenDType dtype() const override { return dtype_; }
  uint64_t num_tokens() const override { return num_tokens_; }
  uint64_t CountDocuments() const override { return d_ - 1; }

  void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const override {
    end = std::min(end, num_tokens_);
    // DocStart(k) is non-decreasing in k (validated at open): binary search.
    uint64_t lo = 0, hi = d_ - 1;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (DocStart(mid) < begin) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    for (uint64_t k = lo; k + 1 < d_; ++k) {
      const uint64_t s = DocStart(k);
      if (s >= end) break;
      // Empty documents start where the next one does: one start.
      if (out->empty() || out->back() != s) out->push_back(s);
    }
  }

  Status Read(uint64_t begin, uint64_t end, int64_t* out) const override {
    if (begin > end || end > num_tokens_) {
      return OutOfRangeError("Megatron dataset '" + path() + "': tokens [" + std::to_string(begin) +
                             ", " + std::to_string(end) + ") past its " +
                             std::to_string(num_tokens_) + " tokens");
    }
    // Sequences are contiguous from byte 0 (validated): token t is at t * item.
    return tokens::detail::WidenTokens(dtype_, bin_->data() + begin * item_, end - begin, out,
                                       path(), begin);
  }

  // Sequences are contiguous from byte 0 (validated), as Read relies on.
  const uint8_t* MappedIds() const override { return bin_->data(); }

  uint64_t Fingerprint() const override {
    const std::string& p = path();
    const size_t slash = p.find_last_of('/');
    std::string s = "megatron:" + (slash == std::string::npos ? p : p.substr(slash + 1)) + ":";
    core::detail::PutFixed64(&s, num_tokens_);
    core::detail::PutFixed64(
        &s, core::detail::Fnv1a64(reinterpret_cast<const char*>(index_->data()), index_->size()));
    return core::detail::Fnv1a64(s.data(), s.size());
  }

 private:
  int64_t Pointer(uint64_t j) const {
    return Load<int64_t>(index_->data() + kHeaderSize + 4 * n_ + 8 * j);
  }
  int64_t DocIndex(uint64_t k) const {
    return Load<int64_t>(index_->data() + kHeaderSize + 12 * n_ + 8 * k);
  }
  // The first token of document k.
  uint64_t DocStart(uint64_t k) const {
    const auto j = static_cast<uint64_t>(DocIndex(k));
    return j < n_ ? static_cast<uint64_t>(Pointer(j)) / item_ : num_tokens_;
  }

  std::unique_ptr<MappedFile> index_;
  std::unique_ptr<MappedFile> bin_;
  TokenDType dtype_;
  uint64_t item_;
  uint64_t n_;  // sequences
  uint64_t d_;  // document indices (documents + 1)
  uint64_t num_tokens_;
};

}  // namespace

Result<std::shared_ptr<const TokenSource>> OpenMegatronDataset(const std::string& prefix) {
  const std::string idx_path = prefix + ".idx";
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> idx, MappedFile::Open(idx_path));
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> bin, MappedFile::Open(prefix + ".bin"));
  const std::string where = "Megatron index '" + idx_path + "': ";
  const uint8_t* p = idx->data();
  const uint64_t size = idx->size();
  if (size < kHeaderSize) {
    return DataLossError(where + "truncated header: " + std::to_string(size) + " bytes, need " +
                         std::to_string(kHeaderSize));
  }
  if (std::memcmp(p, kMagic, kMagicSize) != 0) {
    return DataLossError(where + "bad magic (not an MMIDIDX index)");
  }
  const auto version = Load<uint64_t>(p + 9);
  if (version != kVersion) {
    return DataLossError(where + "version " + std::to_string(version) + ", this build reads " +
                         std::to_string(kVersion));
  }
  FEEDLINE_ASSIGN_OR_RETURN(TokenDType dtype, DTypeOfCode(p[17], idx_path));
  const uint64_t item = TokenDTypeSize(dtype);
  const auto n = Load<uint64_t>(p + 18);
  const auto d = Load<uint64_t>(p + 26);
  // Sizes first, without overflow: the arrays must fit in the bytes left.
  const uint64_t left = size - kHeaderSize;
  if (n > left / 12 || d > (left - 12 * n) / 8) {
    return DataLossError(where + "sequence count " + std::to_string(n) + " and document count " +
                         std::to_string(d) + " need more than the " + std::to_string(size) +
                         " bytes of the index");
  }
  const uint64_t expected = kHeaderSize + 12 * n + 8 * d;
  if (expected != size) {
    return DataLossError(
        where + "size " + std::to_string(size) + " bytes, expected " + std::to_string(expected) +
        " from sequence count " + std::to_string(n) + " and document count " + std::to_string(d) +
        (size == expected + n ? " (a multimodal index with sequence modes: not read)" : ""));
  }
  if (d == 0) return DataLossError(where + "document count 0 (at least the leading 0 is written)");
  const uint8_t* lengths = p + kHeaderSize;
  const uint8_t* pointers = lengths + 4 * n;
  const uint8_t* docs = pointers + 8 * n;
  uint64_t next = 0;  // the byte where sequence i must start
  for (uint64_t i = 0; i < n; ++i) {
    const auto len = Load<int32_t>(lengths + 4 * i);
    const auto ptr = Load<int64_t>(pointers + 8 * i);
    if (len < 0) {
      return DataLossError(where + "sequence_lengths[" + std::to_string(i) +
                           "] = " + std::to_string(len) + " is negative");
    }
    if (ptr < 0 || static_cast<uint64_t>(ptr) != next) {
      return DataLossError(where + "sequence_pointers[" + std::to_string(i) +
                           "] = " + std::to_string(ptr) + ", expected " + std::to_string(next) +
                           " (the sum of the earlier lengths x " + std::to_string(item) +
                           " bytes)");
    }
    const uint64_t bytes = static_cast<uint64_t>(len) * item;
    if (bytes > bin->size() - next) {
      return DataLossError(where + "sequence_lengths[" + std::to_string(i) +
                           "] = " + std::to_string(len) + " at byte " + std::to_string(next) +
                           " runs past the end of '" + bin->path() + "' (" +
                           std::to_string(bin->size()) + " bytes)");
    }
    next += bytes;
  }
  if (next != bin->size()) {
    return DataLossError(where + "the sequences end at byte " + std::to_string(next) + " but '" +
                         bin->path() + "' has " + std::to_string(bin->size()) + " bytes");
  }
  for (uint64_t k = 0; k < d; ++k) {
    const auto v = Load<int64_t>(docs + 8 * k);
    const int64_t prev = k == 0 ? 0 : Load<int64_t>(docs + 8 * (k - 1));
    const bool bad = (k == 0 && v != 0) || v < prev || v > static_cast<int64_t>(n) ||
                     (k + 1 == d && v != static_cast<int64_t>(n));
    if (bad) {
      return DataLossError(where + "document_indices[" + std::to_string(k) +
                           "] = " + std::to_string(v) +
                           " (must start at 0, never decrease, and end at the " +
                           "sequence count " + std::to_string(n) + ")");
    }
  }
  if (bin->size() == 0) {
    return InvalidArgumentError("Megatron dataset '" + bin->path() + "' holds no tokens");
  }
  return std::shared_ptr<const TokenSource>(
      std::make_shared<MegatronDataset>(std::move(idx), std::move(bin), dtype, n, d));
}

}  // namespace feedline
