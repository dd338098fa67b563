#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "feedline/shard.h"
#include "feedline/shard_format.h"
#include "src/core/crc32c.h"
#include "src/core/detail/endian.h"

namespace feedline {
namespace {

using core::detail::PutFixed64;
using shard::MaskCrc;

// Buffered appends flush at this size: large sequential writes.
constexpr size_t kFlushBytes = 1 << 20;

void PutFixed32(std::string* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}

Status IoError(const std::string& what, const std::string& file, int err) {
  const std::string msg = what + " '" + file + "': " + std::generic_category().message(err);
  if (err == ENOSPC || err == EDQUOT) return ResourceExhaustedError(msg + " (disk full)");
  return UnavailableError(msg);
}

}  // namespace

Result<std::unique_ptr<ShardWriter>> ShardWriter::Create(const std::string& path,
                                                         uint32_t version) {
  if (version != shard::kShardVersion1 && version != shard::kShardVersion2) {
    return InvalidArgumentError("shard '" + path + "': cannot write format version " +
                                std::to_string(version) + " (1 and 2 are written)");
  }
  const std::string partial = path + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", partial, errno);
  auto w = std::unique_ptr<ShardWriter>(new ShardWriter(path, fd, version));
  std::string header(shard::kHeaderMagic, sizeof(shard::kHeaderMagic));
  PutFixed32(&header, version);
  PutFixed32(&header, 0);  // flags
  PutFixed32(&header, 0);  // reserved
  PutFixed32(&header, MaskCrc(core::Crc32c(header.data(), header.size())));
  FEEDLINE_RETURN_IF_ERROR(w->Write(header.data(), header.size()));
  return w;
}

ShardWriter::ShardWriter(std::string path, int fd, uint32_t version)
    : path_(std::move(path)), partial_(path_ + ".partial"), fd_(fd), version_(version) {
  buffer_.reserve(kFlushBytes + (1 << 16));
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(partial_.c_str());
}

Status ShardWriter::Write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  file_crc_ = core::Crc32cExtend(file_crc_, p, n);
  buffer_.insert(buffer_.end(), p, p + n);
  offset_ += n;
  return buffer_.size() >= kFlushBytes ? Flush() : Status::OK();
}

Status ShardWriter::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot write", partial_, errno);
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return Status::OK();
}

Status ShardWriter::Add(const ShardRecord& r) {
  if (finished_) return FailedPreconditionError("shard '" + path_ + "' is already finished");
  const std::string what = "record '" + std::string(r.key) + "'";
  const bool v2 = version_ == shard::kShardVersion2;
  if (!v2 && !r.fields.empty()) {
    return InvalidArgumentError(what + " has named fields: they need a version 2 shard");
  }
  if (v2 && !r.data.empty()) {
    return InvalidArgumentError(what + ": a version 2 record carries its bytes in named fields");
  }
  uint64_t body = r.data.size();
  // v2: each field's entry header, name and data, in order.
  for (size_t i = 0; i < r.fields.size(); ++i) {
    const ShardField& f = r.fields[i];
    if (f.name.empty() || f.name.size() > shard::kMaxFieldNameBytes) {
      return InvalidArgumentError(what + ": field " + std::to_string(i) + " name '" +
                                  std::string(f.name) + "' is empty or over " +
                                  std::to_string(shard::kMaxFieldNameBytes) + " bytes");
    }
    for (size_t j = 0; j < i; ++j) {
      if (r.fields[j].name == f.name) {
        return InvalidArgumentError(what + " has two fields named '" + std::string(f.name) + "'");
      }
    }
    if (f.data.size() > UINT32_MAX) {
      return InvalidArgumentError(what + ": field '" + std::string(f.name) + "' is over 4 GiB");
    }
    body += shard::kFieldEntrySize + f.name.size() + f.data.size();
  }
  const uint64_t payload = shard::kPayloadFixedSize + r.key.size() + r.metadata.size() + body;
  if (payload > shard::kMaxPayloadBytes || r.key.size() > UINT32_MAX ||
      r.metadata.size() > UINT32_MAX || r.data.size() > UINT32_MAX) {
    return InvalidArgumentError(what + " is " + std::to_string(payload) +
                                " bytes, over the shard format's limit of " +
                                std::to_string(shard::kMaxPayloadBytes));
  }
  std::string fixed;
  PutFixed64(&fixed, static_cast<uint64_t>(r.label));
  PutFixed32(&fixed, static_cast<uint32_t>(r.key.size()));
  PutFixed32(&fixed, static_cast<uint32_t>(r.metadata.size()));
  PutFixed32(&fixed, static_cast<uint32_t>(v2 ? r.fields.size() : r.data.size()));
  uint32_t crc = core::Crc32c(fixed.data(), fixed.size());
  crc = core::Crc32cExtend(crc, r.key.data(), r.key.size());
  crc = core::Crc32cExtend(crc, r.metadata.data(), r.metadata.size());
  crc = core::Crc32cExtend(crc, r.data.data(), r.data.size());
  std::vector<std::string> field_headers(r.fields.size());
  for (size_t i = 0; i < r.fields.size(); ++i) {
    PutFixed32(&field_headers[i], static_cast<uint32_t>(r.fields[i].name.size()));
    PutFixed32(&field_headers[i], static_cast<uint32_t>(r.fields[i].data.size()));
    crc = core::Crc32cExtend(crc, field_headers[i].data(), field_headers[i].size());
    crc = core::Crc32cExtend(crc, r.fields[i].name.data(), r.fields[i].name.size());
    crc = core::Crc32cExtend(crc, r.fields[i].data.data(), r.fields[i].data.size());
  }

  std::string header(shard::kRecordMagic, sizeof(shard::kRecordMagic));
  PutFixed32(&header, static_cast<uint32_t>(payload));
  PutFixed64(&header, offsets_.size());
  PutFixed32(&header, MaskCrc(crc));
  PutFixed32(&header, MaskCrc(core::Crc32c(header.data(), header.size())));

  offsets_.push_back(offset_);
  FEEDLINE_RETURN_IF_ERROR(Write(header.data(), header.size()));
  FEEDLINE_RETURN_IF_ERROR(Write(fixed.data(), fixed.size()));
  FEEDLINE_RETURN_IF_ERROR(Write(r.key.data(), r.key.size()));
  FEEDLINE_RETURN_IF_ERROR(Write(r.metadata.data(), r.metadata.size()));
  FEEDLINE_RETURN_IF_ERROR(Write(r.data.data(), r.data.size()));
  for (size_t i = 0; i < r.fields.size(); ++i) {
    FEEDLINE_RETURN_IF_ERROR(Write(field_headers[i].data(), field_headers[i].size()));
    FEEDLINE_RETURN_IF_ERROR(Write(r.fields[i].name.data(), r.fields[i].name.size()));
    FEEDLINE_RETURN_IF_ERROR(Write(r.fields[i].data.data(), r.fields[i].data.size()));
  }
  return Status::OK();
}

Status ShardWriter::Finish() {
  if (finished_) return FailedPreconditionError("shard '" + path_ + "' is already finished");
  const uint64_t index_offset = offset_;
  std::string index;
  index.reserve(offsets_.size() * shard::kIndexEntrySize);
  for (uint64_t o : offsets_) PutFixed64(&index, o);
  std::string footer;
  PutFixed64(&footer, index_offset);
  PutFixed64(&footer, offsets_.size());
  PutFixed32(&footer, MaskCrc(core::Crc32c(index.data(), index.size())));
  PutFixed32(&footer, version_);
  PutFixed32(&footer, MaskCrc(core::Crc32c(footer.data(), footer.size())));
  PutFixed32(&footer, 0);  // reserved
  footer.append(shard::kFooterMagic, sizeof(shard::kFooterMagic));
  FEEDLINE_RETURN_IF_ERROR(Write(index.data(), index.size()));
  FEEDLINE_RETURN_IF_ERROR(Write(footer.data(), footer.size()));
  FEEDLINE_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return IoError("cannot fsync", partial_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return IoError("cannot close", partial_, errno);
  }
  fd_ = -1;
  if (::rename(partial_.c_str(), path_.c_str()) != 0)
    return IoError("cannot rename to", path_, errno);
  finished_ = true;
  // Make the rename itself durable.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

}  // namespace feedline
