#include "src/pipelines/remote_tokens.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "feedline/file.h"
#include "src/core/crc32c.h"
#include "src/core/mutex.h"
#include "src/tokens/token_codec.h"

namespace feedline::pipelines::detail {
namespace {

// Fixed-size blocks of one remote file, fetched on first use (one ranged
// read each; readers of a block in flight wait for it), least recently used
// dropped beyond the bound. A failed fetch is not cached: the next read
// tries again.
class BlockCache {
 public:
  BlockCache(std::unique_ptr<RandomAccessFile> file, uint64_t block, uint64_t max_bytes)
      : file_(std::move(file)),
        block_(block),
        max_blocks_(std::max<uint64_t>(2, max_bytes / block)) {}

  const RandomAccessFile& file() const { return *file_; }

  Status Read(uint64_t offset, uint64_t n, uint8_t* out) const {
    while (n > 0) {
      const uint64_t b = offset / block_, in = offset - b * block_;
      std::shared_ptr<const Block> blk;
      FEEDLINE_RETURN_IF_ERROR(Get(b, &blk));
      const uint64_t take = std::min<uint64_t>(n, blk->bytes.size() - in);
      std::memcpy(out, blk->bytes.data() + in, take);
      out += take;
      offset += take;
      n -= take;
    }
    return Status::OK();
  }

 private:
  struct Block {
    std::vector<uint8_t> bytes;
    bool ready = false;
    Status status;
    uint64_t used = 0;
  };

  Status Get(uint64_t b, std::shared_ptr<const Block>* out) const {
    core::MutexLock l(&mu_);
    auto it = blocks_.find(b);
    if (it != blocks_.end()) {
      std::shared_ptr<Block> blk = it->second;
      while (!blk->ready) cv_.Wait(&l);
      if (!blk->status.ok()) return blk->status;
      blk->used = ++clock_;
      *out = std::move(blk);
      return Status::OK();
    }
    auto blk = std::make_shared<Block>();
    blocks_[b] = blk;
    l.Unlock();
    const uint64_t begin = b * block_;
    const uint64_t len = std::min<uint64_t>(block_, file_->size() - begin);
    blk->bytes.resize(len);
    Status st = file_->Read(begin, len, blk->bytes.data());
    l.Lock();
    blk->status = st;
    blk->ready = true;
    blk->used = ++clock_;
    if (!st.ok()) blocks_.erase(b);  // not cached: the next read tries again
    while (blocks_.size() > max_blocks_) {
      auto oldest = blocks_.end();
      for (auto i = blocks_.begin(); i != blocks_.end(); ++i) {
        if (i->second->ready && (oldest == blocks_.end() || i->second->used < oldest->second->used))
          oldest = i;
      }
      if (oldest == blocks_.end()) break;
      blocks_.erase(oldest);  // holders keep their shared_ptr
    }
    cv_.SignalAll();
    if (!st.ok()) return st;
    *out = std::move(blk);
    return Status::OK();
  }

  const std::unique_ptr<RandomAccessFile> file_;
  const uint64_t block_;
  const uint64_t max_blocks_;
  mutable core::Mutex mu_;
  mutable core::CondVar cv_;
  mutable std::unordered_map<uint64_t, std::shared_ptr<Block>> blocks_ GUARDED_BY(mu_);
  mutable uint64_t clock_ GUARDED_BY(mu_) = 0;
};

// The local reader's sampled digest (FlatDigestRanges), by ranged reads.
Result<uint32_t> RemoteDigest(const RandomAccessFile& f) {
  uint32_t crc = 0;
  std::vector<uint8_t> buf;
  for (const auto& [offset, n] : tokens::detail::FlatDigestRanges(f.size())) {
    buf.resize(n);
    FEEDLINE_RETURN_IF_ERROR(f.Read(offset, n, buf.data()));
    crc = core::Crc32cExtend(crc, buf.data(), n);
  }
  return crc;
}

class RemoteFlatTokenFile final : public TokenSource {
 public:
  RemoteFlatTokenFile(std::unique_ptr<RandomAccessFile> file, TokenDType dtype,
                      std::optional<int64_t> eos, uint32_t digest)
      : path_(file->name()),
        dtype_(dtype),
        eos_(eos),
        num_tokens_(file->size() / TokenDTypeSize(dtype)),
        digest_(digest),
        cache_(std::move(file), kRemoteBlockBytes, kRemoteCacheBytes) {}

  Kind kind() const override { return Kind::kFlat; }
  const std::string& path() const override { return path_; }
  TokenDType dtype() const override { return dtype_; }
  uint64_t num_tokens() const override { return num_tokens_; }

  // Reads the whole file once (in 8 MiB ranges, past the cache).
  uint64_t CountDocuments() const override {
    if (!eos_) return 1;
    const size_t item = TokenDTypeSize(dtype_);
    constexpr uint64_t kChunkTokens = 1u << 20;
    std::vector<int64_t> ids(kChunkTokens);
    std::vector<uint8_t> raw(kChunkTokens * item);
    uint64_t count = 0;
    for (uint64_t t = 0; t + 1 < num_tokens_; t += kChunkTokens) {
      const uint64_t n = std::min<uint64_t>(kChunkTokens, num_tokens_ - 1 - t);
      if (!cache_.file().Read(t * item, n * item, raw.data()).ok()) break;  // counted so far
      if (!tokens::detail::WidenTokens(dtype_, raw.data(), n, ids.data(), path_, t).ok()) break;
      count += static_cast<uint64_t>(
          std::count(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), *eos_));
    }
    return 1 + count;
  }

  void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const override {
    end = std::min(end, num_tokens_);
    if (begin >= end) return;
    if (begin == 0) out->push_back(0);
    if (!eos_) return;
    // Token s starts a document when token s - 1 is an eos.
    const uint64_t from = begin == 0 ? 0 : begin - 1;
    std::vector<int64_t> ids(end - 1 - from);
    if (ids.empty() || !Read(from, end - 1, ids.data()).ok())
      return;  // the window's Read reports it
    for (uint64_t k = 0; k < ids.size(); ++k) {
      if (ids[k] == *eos_) out->push_back(from + k + 1);
    }
  }

  Status Read(uint64_t begin, uint64_t end, int64_t* out) const override {
    if (begin > end || end > num_tokens_) {
      return OutOfRangeError("token file '" + path_ + "': tokens [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") past its " + std::to_string(num_tokens_) +
                             " tokens");
    }
    const size_t item = TokenDTypeSize(dtype_);
    thread_local std::vector<uint8_t> raw;
    raw.resize((end - begin) * item);
    FEEDLINE_RETURN_IF_ERROR(cache_.Read(begin * item, raw.size(), raw.data()));
    return tokens::detail::WidenTokens(dtype_, raw.data(), end - begin, out, path_, begin);
  }

  // The local reader's, so the same corpus in a bucket resumes a local state.
  uint64_t Fingerprint() const override {
    return tokens::detail::FlatFingerprint(path_, dtype_, num_tokens_, eos_, digest_);
  }

 private:
  const std::string path_;
  const TokenDType dtype_;
  const std::optional<int64_t> eos_;
  const uint64_t num_tokens_;
  const uint32_t digest_;
  BlockCache cache_;
};

}  // namespace

Result<std::shared_ptr<const TokenSource>> OpenRemoteFlatTokenFile(
    const std::string& url, const TokenSourceOptions& options, const HttpOptions& http) {
  FEEDLINE_RETURN_IF_ERROR(tokens::detail::CheckFlatOptions(url, options));
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(url, http));
  FEEDLINE_RETURN_IF_ERROR(tokens::detail::CheckFlatSize(url, file->size(), options.flat_dtype));
  FEEDLINE_ASSIGN_OR_RETURN(uint32_t digest, RemoteDigest(*file));
  return std::shared_ptr<const TokenSource>(std::make_shared<RemoteFlatTokenFile>(
      std::move(file), options.flat_dtype, options.eos_token, digest));
}

}  // namespace feedline::pipelines::detail

namespace feedline {

Result<std::shared_ptr<const TokenCorpus>> OpenTokenCorpus(const std::vector<std::string>& paths,
                                                           const TokenSourceOptions& options,
                                                           const HttpOptions& http) {
  if (paths.empty()) return InvalidArgumentError("a token corpus needs at least one source");
  std::vector<std::shared_ptr<const TokenSource>> sources;
  for (const std::string& path : paths) {
    if (!IsRemote(path)) {
      FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> s,
                                OpenTokenSource(path, options));
      sources.push_back(std::move(s));
      continue;
    }
    std::string prefix = path;
    if (prefix.size() > 4 && prefix.ends_with(".bin")) prefix.resize(prefix.size() - 4);
    if (path.ends_with("/") || path.ends_with(".json") || OpenFile(prefix + ".idx", http).ok()) {
      return UnimplementedError("token source '" + path +
                                "': token shards and Megatron datasets are read from local disk "
                                "only (flat token files are read remotely); copy it to local disk");
    }
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> s,
                              pipelines::detail::OpenRemoteFlatTokenFile(path, options, http));
    sources.push_back(std::move(s));
  }
  return std::make_shared<const TokenCorpus>(std::move(sources));
}

}  // namespace feedline
