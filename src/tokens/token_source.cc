// Token dtypes, the flat (nanoGPT) reader and the one rule that tells token
// shards, a Megatron prefix and a flat file apart.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "feedline/tokens.h"
#include "src/core/crc32c.h"
#include "src/core/detail/endian.h"
#include "src/tokens/mapped_file.h"
#include "src/tokens/token_codec.h"
#include "src/tokens/token_scan_hwy.h"

namespace feedline {

size_t TokenDTypeSize(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUInt8:
    case TokenDType::kInt8: return 1;
    case TokenDType::kInt16:
    case TokenDType::kUInt16: return 2;
    case TokenDType::kInt32:
    case TokenDType::kUInt32: return 4;
    case TokenDType::kInt64: return 8;
  }
  return 1;
}

std::string_view TokenDTypeName(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUInt8: return "uint8";
    case TokenDType::kInt8: return "int8";
    case TokenDType::kInt16: return "int16";
    case TokenDType::kUInt16: return "uint16";
    case TokenDType::kInt32: return "int32";
    case TokenDType::kUInt32: return "uint32";
    case TokenDType::kInt64: return "int64";
  }
  return "?";
}

Result<TokenDType> ParseTokenDType(std::string_view name) {
  for (TokenDType d :
       {TokenDType::kUInt8, TokenDType::kInt8, TokenDType::kInt16, TokenDType::kUInt16,
        TokenDType::kInt32, TokenDType::kUInt32, TokenDType::kInt64}) {
    if (TokenDTypeName(d) == name) return d;
  }
  return InvalidArgumentError("unknown token dtype '" + std::string(name) +
                              "' (uint8, int8, int16, uint16, int32, uint32, int64)");
}

namespace tokens::detail {
namespace {

template <typename T>
Status Widen(const uint8_t* p, uint64_t n, int64_t* out, const std::string& path,
             uint64_t first_token) {
  for (uint64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_signed_v<T>) {
      if (v < 0) {
        return DataLossError("token file '" + path + "': token " + std::to_string(first_token + i) +
                             " is negative (" + std::to_string(v) + ")");
      }
    }
    if constexpr (std::is_same_v<T, int8_t>) {
      out[i] = static_cast<uint8_t>(v);  // 0..127 here: the same value, no char sign games
    } else {
      out[i] = static_cast<int64_t>(v);
    }
  }
  return Status::OK();
}

}  // namespace

Status WidenTokens(TokenDType dtype, const uint8_t* p, uint64_t n, int64_t* out,
                   const std::string& path, uint64_t first_token) {
  switch (dtype) {
    case TokenDType::kUInt8: return Widen<uint8_t>(p, n, out, path, first_token);
    case TokenDType::kInt8: return Widen<int8_t>(p, n, out, path, first_token);
    case TokenDType::kInt16: return Widen<int16_t>(p, n, out, path, first_token);
    case TokenDType::kUInt16: return Widen<uint16_t>(p, n, out, path, first_token);
    case TokenDType::kInt32: return Widen<int32_t>(p, n, out, path, first_token);
    case TokenDType::kUInt32: return Widen<uint32_t>(p, n, out, path, first_token);
    case TokenDType::kInt64: return Widen<int64_t>(p, n, out, path, first_token);
  }
  return InternalError("unknown token dtype");
}

int64_t LoadToken(TokenDType dtype, const uint8_t* base, uint64_t t) {
  int64_t v = 0;
  // A negative id never equals a (non-negative) eos token; its read fails.
  (void)WidenTokens(dtype, base + t * TokenDTypeSize(dtype), 1, &v, std::string(), t);
  return v;
}

namespace {

// The largest id a token of `dtype` can hold.
int64_t MaxTokenId(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUInt8: return std::numeric_limits<uint8_t>::max();
    case TokenDType::kInt8: return std::numeric_limits<int8_t>::max();
    case TokenDType::kInt16: return std::numeric_limits<int16_t>::max();
    case TokenDType::kUInt16: return std::numeric_limits<uint16_t>::max();
    case TokenDType::kInt32: return std::numeric_limits<int32_t>::max();
    case TokenDType::kUInt32: return std::numeric_limits<uint32_t>::max();
    case TokenDType::kInt64: return std::numeric_limits<int64_t>::max();
  }
  return 0;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Status CheckFlatOptions(const std::string& path, const TokenSourceOptions& options) {
  if (options.eos_token && *options.eos_token < 0) {
    return InvalidArgumentError("token file '" + path + "': eos_token " +
                                std::to_string(*options.eos_token) + " is not a token id (>= 0)");
  }
  if (options.eos_token && *options.eos_token > MaxTokenId(options.flat_dtype)) {
    // No token could equal it: the whole file would be one document.
    return InvalidArgumentError("token file '" + path + "': eos_token " +
                                std::to_string(*options.eos_token) + " does not fit its dtype " +
                                std::string(TokenDTypeName(options.flat_dtype)) + " (at most " +
                                std::to_string(MaxTokenId(options.flat_dtype)) + ")");
  }
  return Status::OK();
}

Status CheckFlatSize(const std::string& path, uint64_t size, TokenDType dtype) {
  const size_t item = TokenDTypeSize(dtype);
  if (size % item != 0) {
    return DataLossError("token file '" + path + "': size " + std::to_string(size) +
                         " bytes is not a multiple of the " + std::string(TokenDTypeName(dtype)) +
                         " token size (" + std::to_string(item) + " bytes)");
  }
  if (size == 0) return InvalidArgumentError("token file '" + path + "' is empty (0 bytes)");
  return Status::OK();
}

// 64 KiB read at open, whatever the corpus size. A corpus regenerated under
// the same name and size (another tokenizer, another shuffle, another seed)
// differs in them; an edit of a few tokens between the slices does not show.
std::vector<std::pair<uint64_t, uint64_t>> FlatDigestRanges(uint64_t size) {
  constexpr uint64_t kSlices = 16, kSliceBytes = 4096;
  if (size <= kSlices * kSliceBytes) return {{0, size}};
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const uint64_t last = size - kSliceBytes;
  for (uint64_t i = 0; i < kSlices; ++i) out.emplace_back(last * i / (kSlices - 1), kSliceBytes);
  return out;
}

uint64_t FlatFingerprint(const std::string& path, TokenDType dtype, uint64_t num_tokens,
                         std::optional<int64_t> eos, uint32_t digest) {
  std::string s = "flat:" + BaseName(path) + ":" + std::string(TokenDTypeName(dtype)) + ":";
  core::detail::PutFixed64(&s, num_tokens);
  core::detail::PutFixed64(&s, eos ? static_cast<uint64_t>(*eos) : ~uint64_t{0});
  core::detail::PutFixed64(&s, digest);
  return core::detail::Fnv1a64(s.data(), s.size());
}

}  // namespace tokens::detail

namespace {

using tokens::detail::MappedFile;

uint32_t SampledDigest(const uint8_t* data, uint64_t size) {
  uint32_t crc = 0;
  for (const auto& [offset, n] : tokens::detail::FlatDigestRanges(size))
    crc = core::Crc32cExtend(crc, data + offset, n);
  return crc;
}

class FlatTokenFile final : public TokenSource {
 public:
  FlatTokenFile(std::unique_ptr<MappedFile> file, TokenDType dtype, std::optional<int64_t> eos)
      : file_(std::move(file)),
        dtype_(dtype),
        eos_(eos),
        num_tokens_(file_->size() / TokenDTypeSize(dtype)),
        digest_(SampledDigest(file_->data(), file_->size())) {}

  Kind kind() const override { return Kind::kFlat; }
  const std::string& path() const override { return file_->path(); }
  TokenDType dtype() const override { return dtype_; }
  uint64_t num_tokens() const override { return num_tokens_; }

  uint64_t CountDocuments() const override {
    if (!eos_) return 1;
    // An eos as the last token ends the last document; it starts none.
    return 1 + tokens::detail::CountToken(dtype_, file_->data(), 0, num_tokens_ - 1, *eos_);
  }

  void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const override {
    end = std::min(end, num_tokens_);
    if (begin >= end) return;
    if (begin == 0) out->push_back(0);
    // Token s starts a document when token s - 1 is an eos.
    if (eos_) {
      tokens::detail::FindToken(dtype_, file_->data(), begin == 0 ? 0 : begin - 1, end - 1, *eos_,
                                /*offset=*/1, out);
    }
  }

  Status Read(uint64_t begin, uint64_t end, int64_t* out) const override {
    if (begin > end || end > num_tokens_) {
      return OutOfRangeError("token file '" + path() + "': tokens [" + std::to_string(begin) +
                             ", " + std::to_string(end) + ") past its " +
                             std::to_string(num_tokens_) + " tokens");
    }
    return tokens::detail::WidenTokens(dtype_, file_->data() + begin * TokenDTypeSize(dtype_),
                                       end - begin, out, path(), begin);
  }

  const uint8_t* MappedIds() const override { return file_->data(); }

  uint64_t Fingerprint() const override {
    return tokens::detail::FlatFingerprint(path(), dtype_, num_tokens_, eos_, digest_);
  }

 private:
  std::unique_ptr<MappedFile> file_;
  TokenDType dtype_;
  std::optional<int64_t> eos_;
  uint64_t num_tokens_;
  uint32_t digest_;  // SampledDigest of the file, for the fingerprint
};

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::shared_ptr<const TokenSource>> OpenFlatTokenFile(const std::string& path,
                                                             const TokenSourceOptions& options) {
  FEEDLINE_RETURN_IF_ERROR(tokens::detail::CheckFlatOptions(path, options));
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  FEEDLINE_RETURN_IF_ERROR(tokens::detail::CheckFlatSize(path, file->size(), options.flat_dtype));
  return std::shared_ptr<const TokenSource>(
      std::make_shared<FlatTokenFile>(std::move(file), options.flat_dtype, options.eos_token));
}

Result<std::shared_ptr<const TokenSource>> OpenTokenSource(const std::string& path,
                                                           const TokenSourceOptions& options) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if ((exists && S_ISDIR(st.st_mode)) || (exists && S_ISREG(st.st_mode) && path.ends_with(".json")))
    return OpenTokenShards(path);
  if (IsRegularFile(path + ".idx")) return OpenMegatronDataset(path);
  constexpr std::string_view kBin = ".bin";
  if (path.size() > kBin.size() && path.ends_with(kBin)) {
    const std::string prefix = path.substr(0, path.size() - kBin.size());
    if (IsRegularFile(prefix + ".idx")) return OpenMegatronDataset(prefix);
  }
  return OpenFlatTokenFile(path, options);
}

}  // namespace feedline
