// feedline token shards (docs/token_shards.md): a manifest and shards of
// ids, a document index and per-block checksums, read through memory maps.
// Everything but the ids is checked at open; a block of ids is checked the
// first time a read touches it, so opening reads the indices only.
#include "src/tokens/token_shards.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "src/core/crc32c.h"
#include "src/core/detail/endian.h"
#include "src/tokens/mapped_file.h"
#include "src/tokens/token_codec.h"
#include "src/tokens/token_shard_format.h"

namespace feedline {
namespace tokens::detail {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string Hex32(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof(b), "%08x", v);
  return b;
}

}  // namespace

Result<TokenShardLayout> ParseTokenShard(const uint8_t* p, uint64_t size, const std::string& path) {
  const std::string where = "token shard '" + path + "': ";
  auto bad = [&](const std::string& field, const std::string& what) {
    return DataLossError(where + field + " " + what);
  };
  if (size < kTokenShardHeaderSize) {
    return DataLossError(where + "truncated header: " + std::to_string(size) + " bytes, need " +
                         std::to_string(kTokenShardHeaderSize));
  }
  if (std::memcmp(p, kTokenShardMagic, sizeof(kTokenShardMagic)) != 0) {
    return DataLossError(where + "bad magic (not a feedline token shard)");
  }
  const auto version = Load<uint32_t>(p + kVersionAt);
  if (version != kTokenShardVersion) {
    return bad("version", std::to_string(version) + ", this build reads " +
                              std::to_string(kTokenShardVersion));
  }
  const auto header_crc = Load<uint32_t>(p + kHeaderCrcAt);
  const uint32_t computed = MaskTokenCrc(core::Crc32c(p, kHeaderCrcAt));
  if (header_crc != computed) {
    return bad("header_crc32c",
               Hex32(header_crc) + " does not match the header (computed " + Hex32(computed) + ")");
  }
  const auto flags = Load<uint32_t>(p + kFlagsAt);
  if (flags != 0) return bad("flags", "= " + std::to_string(flags) + ", no flags are defined");
  const auto reserved = Load<uint32_t>(p + kReservedAt);
  if (reserved != 0) return bad("reserved", "= " + std::to_string(reserved) + ", must be 0");
  TokenShardLayout l;
  const auto width = Load<uint32_t>(p + kDTypeAt);
  if (width == 2) {
    l.dtype = TokenDType::kUInt16;
  } else if (width == 4) {
    l.dtype = TokenDType::kUInt32;
  } else {
    return bad("dtype", "= " + std::to_string(width) + " (2 uint16 or 4 uint32)");
  }
  l.item = width;
  l.block_log2 = Load<uint32_t>(p + kBlockLog2At);
  if (l.block_log2 < kMinBlockLog2 || l.block_log2 > kMaxBlockLog2) {
    return bad("block_log2", "= " + std::to_string(l.block_log2) + " (must be " +
                                 std::to_string(kMinBlockLog2) + " to " +
                                 std::to_string(kMaxBlockLog2) + ")");
  }
  l.num_tokens = Load<uint64_t>(p + kTokenCountAt);
  l.num_documents = Load<uint64_t>(p + kDocCountAt);
  l.vocab_size = Load<uint64_t>(p + kVocabSizeAt);
  l.header_crc = header_crc;
  if (l.num_tokens == 0) return bad("token_count", "= 0 (a shard holds at least one token)");
  if (l.num_documents == 0 || l.num_documents > l.num_tokens) {
    return bad("document_count", "= " + std::to_string(l.num_documents) + " (must be 1 to the " +
                                     std::to_string(l.num_tokens) + " tokens)");
  }
  const uint64_t max_vocab = uint64_t{1} << (8 * l.item);
  if (l.vocab_size == 0 || l.vocab_size > max_vocab) {
    return bad("vocab_size", "= " + std::to_string(l.vocab_size) + " (must be 1 to " +
                                 std::to_string(max_vocab) + " for " +
                                 std::string(TokenDTypeName(l.dtype)) + ")");
  }
  // Sizes without overflow: every part must fit in the bytes after the header.
  const uint64_t left = size - kTokenShardHeaderSize;
  if (l.num_tokens > left / l.item) {
    return bad("token_count", "= " + std::to_string(l.num_tokens) + " needs more than the " +
                                  std::to_string(size) + " bytes of the file");
  }
  const uint64_t token_bytes = l.num_tokens * l.item;
  const uint64_t pad = TokenPadding(token_bytes);
  l.doc_index_at = kTokenShardHeaderSize + token_bytes + pad;
  l.num_blocks = ((l.num_tokens - 1) >> l.block_log2) + 1;
  // num_documents <= num_tokens <= size, so 8 * (D + 1) cannot overflow.
  const uint64_t expected = l.doc_index_at + 8 * (l.num_documents + 1) + 4 * l.num_blocks;
  if (l.doc_index_at > size || expected != size) {
    return DataLossError(where + "size " + std::to_string(size) + " bytes, expected " +
                         std::to_string(expected) + " from token_count " +
                         std::to_string(l.num_tokens) + " and document_count " +
                         std::to_string(l.num_documents));
  }
  l.block_crcs_at = l.doc_index_at + 8 * (l.num_documents + 1);
  for (uint64_t i = 0; i < pad; ++i) {
    if (p[kTokenShardHeaderSize + token_bytes + i] != 0) {
      return bad("padding", "byte " + std::to_string(i) + " is not 0");
    }
  }
  const uint8_t* docs = p + l.doc_index_at;
  const auto doc_crc = Load<uint32_t>(p + kDocIndexCrcAt);
  const uint32_t doc_computed = MaskTokenCrc(core::Crc32c(docs, 8 * (l.num_documents + 1)));
  if (doc_crc != doc_computed) {
    return bad("document_index_crc32c",
               Hex32(doc_crc) + " does not match the document index (" + Hex32(doc_computed) + ")");
  }
  for (uint64_t k = 0; k <= l.num_documents; ++k) {
    const auto v = Load<uint64_t>(docs + 8 * k);
    const uint64_t prev = k == 0 ? 0 : Load<uint64_t>(docs + 8 * (k - 1));
    const bool ok = k == 0 ? v == 0 : (v > prev && v <= l.num_tokens);
    if (!ok || (k == l.num_documents && v != l.num_tokens)) {
      return bad("document_index[" + std::to_string(k) + "]",
                 "= " + std::to_string(v) +
                     " (must start at 0, strictly increase and end at the token_count " +
                     std::to_string(l.num_tokens) + ")");
    }
  }
  const auto blocks_crc = Load<uint32_t>(p + kBlockCrcsCrcAt);
  const uint32_t blocks_computed =
      MaskTokenCrc(core::Crc32c(p + l.block_crcs_at, 4 * l.num_blocks));
  if (blocks_crc != blocks_computed) {
    return bad("block_crcs_crc32c", Hex32(blocks_crc) + " does not match the block checksums (" +
                                        Hex32(blocks_computed) + ")");
  }
  return l;
}

}  // namespace tokens::detail

namespace {

using Json = nlohmann::json;
using tokens::detail::Load;
using tokens::detail::MappedFile;
using tokens::detail::TokenShardLayout;

struct Shard {
  std::string name;
  std::unique_ptr<MappedFile> file;
  TokenShardLayout layout;
  // One flag per checksum block: set once a read found the block intact.
  std::unique_ptr<std::atomic<uint8_t>[]> verified;

  uint64_t DocStart(uint64_t k) const {
    return Load<uint64_t>(file->data() + layout.doc_index_at + 8 * k);
  }
};

class TokenShardDataset final : public TokenSource {
 public:
  TokenShardDataset(std::string manifest, TokenDType dtype, std::vector<Shard> shards)
      : manifest_(std::move(manifest)), dtype_(dtype), shards_(std::move(shards)) {
    offsets_.push_back(0);
    for (const Shard& s : shards_) {
      offsets_.push_back(offsets_.back() + s.layout.num_tokens);
      documents_ += s.layout.num_documents;
    }
  }

  Kind kind() const override { return Kind::kTokenShards; }
  const std::string& path() const override { return manifest_; }
  TokenDType dtype() const override { return dtype_; }
  uint64_t num_tokens() const override { return offsets_.back(); }
  uint64_t CountDocuments() const override { return documents_; }

  void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const override {
    end = std::min(end, num_tokens());
    for (size_t i = ShardOf(begin); begin < end && i < shards_.size(); ++i) {
      const Shard& s = shards_[i];
      const uint64_t base = offsets_[i];
      if (base >= end) break;  // this shard and the rest start past the range
      const uint64_t lo_t = std::max(begin, base) - base;
      const uint64_t hi_t = std::min(end, offsets_[i + 1]) - base;
      if (lo_t >= hi_t) continue;
      // The index strictly increases (checked at open): binary search.
      uint64_t lo = 0, hi = s.layout.num_documents;
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (s.DocStart(mid) < lo_t) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      for (uint64_t k = lo; k < s.layout.num_documents; ++k) {
        const uint64_t t = s.DocStart(k);
        if (t >= hi_t) break;
        out->push_back(base + t);
      }
    }
  }

  Status Read(uint64_t begin, uint64_t end, int64_t* out) const override {
    if (begin > end || end > num_tokens()) {
      return OutOfRangeError("token shards '" + manifest_ + "': tokens [" + std::to_string(begin) +
                             ", " + std::to_string(end) + ") past its " +
                             std::to_string(num_tokens()) + " tokens");
    }
    for (size_t i = ShardOf(begin); begin < end; ++i) {
      const uint64_t base = offsets_[i];
      const uint64_t stop = std::min(end, offsets_[i + 1]);
      FEEDLINE_RETURN_IF_ERROR(ReadShard(shards_[i], begin - base, stop - base, out));
      out += stop - begin;
      begin = stop;
    }
    return Status::OK();
  }

  // Every block of every shard read and checked (on a freshly opened
  // dataset no block is marked verified yet, so each is).
  void Verify(TokenShardsCheck* check) const {
    std::vector<int64_t> ids;
    check->shards += shards_.size();
    for (const Shard& s : shards_) {
      const TokenShardLayout& l = s.layout;
      for (uint64_t k = 0; k < l.num_blocks; ++k) {
        const uint64_t first = k << l.block_log2;
        const uint64_t last = std::min(l.num_tokens, (k + 1) << l.block_log2);
        ids.resize(last - first);
        const Status st = ReadShard(s, first, last, ids.data());
        ++check->blocks;
        check->tokens += last - first;
        if (!st.ok()) check->problems.emplace_back(st.message());
      }
    }
  }

  uint64_t Fingerprint() const override {
    // Each header carries the CRCs of its index and of its block checksums,
    // which cover every id: 64 bytes per shard fingerprint the contents.
    std::string s = "tokenshards:";
    for (const Shard& sh : shards_) {
      s += sh.name + ":";
      s.append(reinterpret_cast<const char*>(sh.file->data()),
               tokens::detail::kTokenShardHeaderSize);
    }
    return core::detail::Fnv1a64(s.data(), s.size());
  }

 private:
  size_t ShardOf(uint64_t t) const {
    return static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), t) -
                               offsets_.begin()) -
           1;
  }

  static Status ReadShard(const Shard& s, uint64_t a, uint64_t b, int64_t* out) {
    const TokenShardLayout& l = s.layout;
    const uint8_t* ids = s.file->data() + tokens::detail::kTokenShardHeaderSize;
    for (uint64_t k = a >> l.block_log2; k <= (b - 1) >> l.block_log2; ++k) {
      if (s.verified[k].load(std::memory_order_acquire) != 0) continue;
      const uint64_t first = k << l.block_log2;
      const uint64_t last = std::min(l.num_tokens, first + (uint64_t{1} << l.block_log2));
      const auto stored = Load<uint32_t>(s.file->data() + l.block_crcs_at + 4 * k);
      const uint32_t computed =
          tokens::detail::MaskTokenCrc(core::Crc32c(ids + first * l.item, (last - first) * l.item));
      if (stored != computed) {
        char msg[96];
        std::snprintf(msg, sizeof(msg), "stored %08x, computed %08x", stored, computed);
        return DataLossError("token shard '" + s.file->path() + "': block_crcs[" +
                             std::to_string(k) + "] (tokens [" + std::to_string(first) + ", " +
                             std::to_string(last) + ")) checksum mismatch: " + msg);
      }
      s.verified[k].store(1, std::memory_order_release);
    }
    FEEDLINE_RETURN_IF_ERROR(
        tokens::detail::WidenTokens(l.dtype, ids + a * l.item, b - a, out, s.file->path(), a));
    for (uint64_t j = 0; j < b - a; ++j) {
      if (static_cast<uint64_t>(out[j]) >= l.vocab_size) {
        return DataLossError("token shard '" + s.file->path() + "': token " +
                             std::to_string(a + j) + " = " + std::to_string(out[j]) +
                             " is not below the vocab_size " + std::to_string(l.vocab_size));
      }
    }
    return Status::OK();
  }

  std::string manifest_;
  TokenDType dtype_;
  std::vector<Shard> shards_;
  std::vector<uint64_t> offsets_;  // shards + 1 entries
  uint64_t documents_ = 0;
};

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A manifest field that must be a non-negative integer.
Result<uint64_t> UintField(const Json& j, const char* field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_number_unsigned()) {
    return DataLossError(
        where + "\"" + field + "\" " +
        (it == j.end() ? "is missing" : "= " + it->dump() + " is not an integer >= 0"));
  }
  return it->get<uint64_t>();
}

}  // namespace

Result<std::shared_ptr<const TokenSource>> OpenTokenShards(const std::string& path) {
  const std::string manifest_path = IsDirectory(path) ? (path.ends_with('/') ? path : path + "/") +
                                                            tokens::detail::kTokenManifestName
                                                      : path;
  const std::string prefix = manifest_path.substr(0, manifest_path.find_last_of('/') + 1);
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mf, MappedFile::Open(manifest_path));
  const std::string where = "token manifest '" + manifest_path + "': ";
  const auto* text = reinterpret_cast<const char*>(mf->data());
  const Json j = Json::parse(text, text + mf->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLossError(where + "not a JSON object");
  // Type first: json::value() throws on a present field of another type.
  const auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || *fmt != tokens::detail::kTokenManifestFormat) {
    return DataLossError(where + "\"format\" is " + (fmt == j.end() ? "missing" : fmt->dump()) +
                         ", expected \"" + tokens::detail::kTokenManifestFormat + "\"");
  }
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t version, UintField(j, "version", where));
  if (version != static_cast<uint64_t>(tokens::detail::kTokenManifestVersion)) {
    return DataLossError(where + "\"version\" = " + std::to_string(version) +
                         ", this build reads " +
                         std::to_string(tokens::detail::kTokenManifestVersion));
  }
  const auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string() || (*dt != "uint16" && *dt != "uint32")) {
    return DataLossError(where + "\"dtype\" = " + (dt == j.end() ? "missing" : dt->dump()) +
                         " (uint16 or uint32)");
  }
  const TokenDType dtype = *dt == "uint16" ? TokenDType::kUInt16 : TokenDType::kUInt32;
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t tokens, UintField(j, "tokens", where));
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t documents, UintField(j, "documents", where));
  const auto tok = j.find("tokenizer");
  if (tok == j.end() || !tok->is_object()) {
    return DataLossError(where + "\"tokenizer\" is missing or not an object");
  }
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t vocab_size,
                            UintField(*tok, "vocab_size", where + "tokenizer "));
  const auto shards_it = j.find("shards");
  if (shards_it == j.end() || !shards_it->is_array() || shards_it->empty()) {
    return DataLossError(where + "\"shards\" is missing, not an array, or empty");
  }
  std::vector<Shard> shards;
  uint64_t sum_tokens = 0, sum_documents = 0;
  for (size_t i = 0; i < shards_it->size(); ++i) {
    const Json& e = (*shards_it)[i];
    const std::string at = where + "shards[" + std::to_string(i) + "] ";
    if (!e.is_object()) return DataLossError(at + "is not an object");
    const auto name_it = e.find("name");
    if (name_it == e.end() || !name_it->is_string()) {
      return DataLossError(at + "\"name\" is missing or not a string");
    }
    const std::string name = name_it->get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return DataLossError(at + "\"name\" = \"" + name + "\" is not a file name in the directory");
    }
    FEEDLINE_ASSIGN_OR_RETURN(uint64_t n, UintField(e, "tokens", at));
    FEEDLINE_ASSIGN_OR_RETURN(uint64_t d, UintField(e, "documents", at));
    FEEDLINE_ASSIGN_OR_RETURN(uint64_t bytes, UintField(e, "bytes", at));
    const auto crc_it = e.find("header_crc32c");
    if (crc_it == e.end() || !crc_it->is_string()) {
      return DataLossError(at + "\"header_crc32c\" is missing or not a string");
    }
    Shard s;
    s.name = name;
    FEEDLINE_ASSIGN_OR_RETURN(s.file, MappedFile::Open(prefix + name));
    const std::string& file = s.file->path();
    if (s.file->size() != bytes) {
      return DataLossError("token shard '" + file + "': size " + std::to_string(s.file->size()) +
                           " bytes, the manifest says " + std::to_string(bytes));
    }
    FEEDLINE_ASSIGN_OR_RETURN(
        s.layout, tokens::detail::ParseTokenShard(s.file->data(), s.file->size(), file));
    const TokenShardLayout& l = s.layout;
    auto differ = [&](const std::string& field, const std::string& header,
                      const std::string& manifest) {
      return DataLossError("token shard '" + file + "': " + field + " " + header +
                           " in the header, " + manifest + " in the manifest '" + manifest_path +
                           "'");
    };
    if (l.num_tokens != n)
      return differ("token_count", std::to_string(l.num_tokens), std::to_string(n));
    if (l.num_documents != d)
      return differ("document_count", std::to_string(l.num_documents), std::to_string(d));
    if (l.dtype != dtype)
      return differ("dtype", std::string(TokenDTypeName(l.dtype)),
                    std::string(TokenDTypeName(dtype)));
    if (l.vocab_size != vocab_size)
      return differ("vocab_size", std::to_string(l.vocab_size), std::to_string(vocab_size));
    if (tokens::detail::Hex32(l.header_crc) != crc_it->get<std::string>())
      return differ("header_crc32c", tokens::detail::Hex32(l.header_crc),
                    crc_it->get<std::string>());
    s.verified = std::make_unique<std::atomic<uint8_t>[]>(l.num_blocks);
    for (uint64_t k = 0; k < l.num_blocks; ++k) s.verified[k].store(0, std::memory_order_relaxed);
    sum_tokens += n;
    sum_documents += d;
    shards.push_back(std::move(s));
  }
  if (sum_tokens != tokens) {
    return DataLossError(where + "\"tokens\" = " + std::to_string(tokens) +
                         ", but its shards hold " + std::to_string(sum_tokens));
  }
  if (sum_documents != documents) {
    return DataLossError(where + "\"documents\" = " + std::to_string(documents) +
                         ", but its shards hold " + std::to_string(sum_documents));
  }
  return std::shared_ptr<const TokenSource>(
      std::make_shared<TokenShardDataset>(manifest_path, dtype, std::move(shards)));
}

bool IsTokenShardsManifest(std::string_view manifest_text) {
  const Json j = Json::parse(manifest_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto fmt = j.find("format");
  return fmt != j.end() && fmt->is_string() && *fmt == tokens::detail::kTokenManifestFormat;
}

Result<TokenShardsCheck> VerifyTokenShards(const std::string& path) {
  FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> source, OpenTokenShards(path));
  TokenShardsCheck check;
  // OpenTokenShards makes nothing else.
  static_cast<const TokenShardDataset&>(*source).Verify(&check);
  return check;
}

}  // namespace feedline
