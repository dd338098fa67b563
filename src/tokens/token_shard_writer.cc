// TokenShardWriter: writes feedline token shards (docs/token_shards.md)
// crash-safe, as `feedline pack` writes image shards: each shard goes to a
// .partial name, its header last (it holds the counts and the checksums),
// is fsynced and renamed; manifest.json is written last the same way.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "feedline/tokens.h"
#include "src/core/crc32c.h"
#include "src/core/detail/endian.h"
#include "src/tokens/token_shard_format.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using core::detail::PutFixed64;
using tokens::detail::MaskTokenCrc;

constexpr size_t kFlushBytes = 1 << 20;

void PutFixed32(std::string* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}

Status IoError(const std::string& what, const std::string& file, int err) {
  const std::string msg = what + " '" + file + "': " + std::generic_category().message(err);
  if (err == ENOSPC || err == EDQUOT) return ResourceExhaustedError(msg + " (disk full)");
  return UnavailableError(msg);
}

Status WriteAll(int fd, const char* p, size_t n, const std::string& file) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return IoError("cannot write", file, errno);
    done += static_cast<size_t>(w);
  }
  return Status::OK();
}

// Makes a rename inside `dir` durable.
void SyncDir(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string ShardName(size_t i) {
  char b[32];
  std::snprintf(b, sizeof(b), "tokens-%05zu.flt", i);
  return b;
}

std::string Hex32(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof(b), "%08x", v);
  return b;
}

class TokenShardWriterImpl final : public TokenShardWriter {
 public:
  TokenShardWriterImpl(std::string dir, TokenShardWriterOptions options, Json tokenizer,
                       Json source)
      : dir_(std::move(dir)),
        options_(std::move(options)),
        dtype_(options_.vocab_size <= 65536 ? TokenDType::kUInt16 : TokenDType::kUInt32),
        item_(TokenDTypeSize(dtype_)),
        tokenizer_(std::move(tokenizer)),
        source_(std::move(source)) {}

  ~TokenShardWriterImpl() override {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(partial_.c_str());
    }
  }

  Status AddDocument(const int64_t* ids, uint64_t n) override {
    FEEDLINE_RETURN_IF_ERROR(Usable());
    const uint64_t doc = documents_;
    if (n == 0) {
      return InvalidArgumentError("token shards '" + dir_ + "': document " + std::to_string(doc) +
                                  " is empty (every document holds at least its eos token)");
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= options_.vocab_size) {
        return InvalidArgumentError("token shards '" + dir_ + "': document " + std::to_string(doc) +
                                    " token " + std::to_string(i) + " = " + std::to_string(ids[i]) +
                                    " is outside the vocabulary [0, " +
                                    std::to_string(options_.vocab_size) + ")");
      }
    }
    if (fd_ < 0) FEEDLINE_RETURN_IF_ERROR(Fail(OpenShard()));
    doc_starts_.push_back(shard_tokens_);
    size_t at = buffer_.size();
    for (uint64_t i = 0; i < n; ++i) {
      const auto v = static_cast<uint32_t>(ids[i]);
      if (item_ == 2) {
        buffer_.push_back(static_cast<char>(v));
        buffer_.push_back(static_cast<char>(v >> 8));
      } else {
        PutFixed32(&buffer_, v);
      }
    }
    // The block checksums over the new ids, a block boundary at a time.
    constexpr uint64_t kBlock = uint64_t{1} << tokens::detail::kDefaultBlockLog2;
    for (uint64_t left = n; left > 0;) {
      const uint64_t take = std::min(left, kBlock - in_block_);
      block_crc_ = core::Crc32cExtend(block_crc_, buffer_.data() + at, take * item_);
      at += take * item_;
      left -= take;
      in_block_ += take;
      if (in_block_ == kBlock) EndBlock();
    }
    shard_tokens_ += n;
    tokens_ += n;
    ++documents_;
    if (buffer_.size() >= kFlushBytes) FEEDLINE_RETURN_IF_ERROR(Fail(Flush()));
    if (shard_tokens_ >= options_.shard_tokens) FEEDLINE_RETURN_IF_ERROR(Fail(CloseShard()));
    return Status::OK();
  }

  Status Finish() override {
    FEEDLINE_RETURN_IF_ERROR(Usable());
    if (documents_ == 0) {
      return FailedPreconditionError("token shards '" + dir_ + "': no documents to write");
    }
    if (fd_ >= 0) FEEDLINE_RETURN_IF_ERROR(Fail(CloseShard()));
    Json tokenizer = tokenizer_;
    tokenizer["vocab_size"] = options_.vocab_size;
    Json j = {{"format", tokens::detail::kTokenManifestFormat},
              {"version", tokens::detail::kTokenManifestVersion},
              {"dtype", std::string(TokenDTypeName(dtype_))},
              {"tokens", tokens_},
              {"documents", documents_},
              {"tokenizer", tokenizer},
              {"source", source_},
              {"shards", manifest_shards_}};
    const std::string text = j.dump(1) + "\n";
    const std::string path = dir_ + "/" + tokens::detail::kTokenManifestName;
    const std::string tmp = path + ".partial";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Fail(IoError("cannot create", tmp, errno));
    Status s = WriteAll(fd, text.data(), text.size(), tmp);
    if (s.ok() && ::fsync(fd) != 0) s = IoError("cannot fsync", tmp, errno);
    if (::close(fd) != 0 && s.ok()) s = IoError("cannot close", tmp, errno);
    if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
      s = IoError("cannot rename to", path, errno);
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return Fail(s);
    }
    SyncDir(dir_);
    finished_ = true;
    return Status::OK();
  }

  uint64_t num_tokens() const override { return tokens_; }
  uint64_t num_documents() const override { return documents_; }
  TokenDType dtype() const override { return dtype_; }

 private:
  Status Usable() const {
    if (finished_)
      return FailedPreconditionError("token shards '" + dir_ + "' are already finished");
    if (!failed_.ok()) {
      return FailedPreconditionError("token shards '" + dir_ +
                                     "': an earlier write failed: " + failed_.ToString());
    }
    return Status::OK();
  }

  Status Fail(Status s) {
    if (!s.ok() && failed_.ok()) failed_ = s;
    return s;
  }

  Status OpenShard() {
    name_ = ShardName(manifest_shards_.size());
    partial_ = dir_ + "/" + name_ + ".partial";
    fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return IoError("cannot create", partial_, errno);
    // The header is written last, in place: it holds counts and checksums.
    buffer_.assign(tokens::detail::kTokenShardHeaderSize, '\0');
    shard_tokens_ = 0;
    doc_starts_.clear();
    block_crcs_.clear();
    block_crc_ = 0;
    in_block_ = 0;
    return Status::OK();
  }

  void EndBlock() {
    block_crcs_.push_back(MaskTokenCrc(block_crc_));
    block_crc_ = 0;
    in_block_ = 0;
  }

  Status Flush() {
    FEEDLINE_RETURN_IF_ERROR(WriteAll(fd_, buffer_.data(), buffer_.size(), partial_));
    buffer_.clear();
    return Status::OK();
  }

  Status CloseShard() {
    if (in_block_ > 0) EndBlock();
    buffer_.append(tokens::detail::TokenPadding(shard_tokens_ * item_), '\0');
    std::string tail;
    for (uint64_t s : doc_starts_) PutFixed64(&tail, s);
    PutFixed64(&tail, shard_tokens_);
    const uint32_t doc_crc = MaskTokenCrc(core::Crc32c(tail.data(), tail.size()));
    const size_t blocks_at = tail.size();
    for (uint32_t c : block_crcs_) PutFixed32(&tail, c);
    const uint32_t blocks_crc =
        MaskTokenCrc(core::Crc32c(tail.data() + blocks_at, tail.size() - blocks_at));
    buffer_ += tail;
    FEEDLINE_RETURN_IF_ERROR(Flush());
    std::string h(tokens::detail::kTokenShardMagic, sizeof(tokens::detail::kTokenShardMagic));
    PutFixed32(&h, tokens::detail::kTokenShardVersion);
    PutFixed32(&h, 0);  // flags
    PutFixed32(&h, static_cast<uint32_t>(item_));
    PutFixed32(&h, tokens::detail::kDefaultBlockLog2);
    PutFixed64(&h, shard_tokens_);
    PutFixed64(&h, doc_starts_.size());
    PutFixed64(&h, options_.vocab_size);
    PutFixed32(&h, doc_crc);
    PutFixed32(&h, blocks_crc);
    PutFixed32(&h, 0);  // reserved
    const uint32_t header_crc = MaskTokenCrc(core::Crc32c(h.data(), h.size()));
    PutFixed32(&h, header_crc);
    if (::pwrite(fd_, h.data(), h.size(), 0) != static_cast<ssize_t>(h.size()))
      return IoError("cannot write the header of", partial_, errno);
    const off_t bytes = ::lseek(fd_, 0, SEEK_END);
    if (::fsync(fd_) != 0) return IoError("cannot fsync", partial_, errno);
    if (::close(fd_) != 0) {
      fd_ = -1;
      return IoError("cannot close", partial_, errno);
    }
    fd_ = -1;
    const std::string path = dir_ + "/" + name_;
    if (::rename(partial_.c_str(), path.c_str()) != 0)
      return IoError("cannot rename to", path, errno);
    SyncDir(dir_);
    manifest_shards_.push_back({{"name", name_},
                                {"tokens", shard_tokens_},
                                {"documents", doc_starts_.size()},
                                {"bytes", static_cast<uint64_t>(bytes)},
                                {"header_crc32c", Hex32(header_crc)}});
    return Status::OK();
  }

  // Constant after construction.
  const std::string dir_;
  const TokenShardWriterOptions options_;
  const TokenDType dtype_;
  const size_t item_;
  const Json tokenizer_;
  const Json source_;

  // The shard being written (fd_ >= 0 while one is open).
  int fd_ = -1;
  std::string name_, partial_;
  std::string buffer_;  // bytes not yet written, from the file's current end
  uint64_t shard_tokens_ = 0;
  std::vector<uint64_t> doc_starts_;
  std::vector<uint32_t> block_crcs_;
  uint32_t block_crc_ = 0;  // unmasked CRC32C of the current block so far
  uint64_t in_block_ = 0;

  Json manifest_shards_ = Json::array();
  uint64_t tokens_ = 0;
  uint64_t documents_ = 0;
  bool finished_ = false;
  Status failed_;
};

}  // namespace

Result<std::unique_ptr<TokenShardWriter>> TokenShardWriter::Create(
    const std::string& dir, const TokenShardWriterOptions& options) {
  if (options.vocab_size == 0 || options.vocab_size > (uint64_t{1} << 32)) {
    return InvalidArgumentError("token shards '" + dir + "': vocab_size " +
                                std::to_string(options.vocab_size) + " (must be 1 to 2^32)");
  }
  if (options.shard_tokens == 0) {
    return InvalidArgumentError("token shards '" + dir + "': shard_tokens must be >= 1");
  }
  Json parsed[2];
  const std::string* texts[2] = {&options.tokenizer_json, &options.source_json};
  const char* names[2] = {"tokenizer", "source"};
  for (int i = 0; i < 2; ++i) {
    parsed[i] = Json::parse(*texts[i], nullptr, /*allow_exceptions=*/false);
    if (parsed[i].is_discarded() || !parsed[i].is_object()) {
      return InvalidArgumentError("token shards '" + dir + "': the " + names[i] +
                                  " description is not a JSON object: " + *texts[i]);
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create '" + dir + "': " + ec.message());
  const fs::path manifest = fs::path(dir) / tokens::detail::kTokenManifestName;
  if (fs::exists(manifest, ec)) {
    return FailedPreconditionError("token shards '" + dir + "' are already packed (" +
                                   manifest.string() +
                                   " exists); remove the directory to pack again");
  }
  // Leftovers of an unfinished run (no manifest): our names only.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if ((n.starts_with("tokens-") && (n.ends_with(".flt") || n.ends_with(".flt.partial"))) ||
        n == std::string(tokens::detail::kTokenManifestName) + ".partial") {
      fs::remove(e.path(), ec);
    }
  }
  return std::unique_ptr<TokenShardWriter>(
      new TokenShardWriterImpl(dir, options, std::move(parsed[0]), std::move(parsed[1])));
}

}  // namespace feedline
