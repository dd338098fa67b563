#include <algorithm>
#include <cstring>
#include <string>

#include "feedline/shard.h"
#include "feedline/shard_format.h"
#include "src/core/crc32c.h"
#include "src/core/detail/endian.h"

namespace feedline {
namespace {

using core::detail::DecodeFixed64;
using shard::UnmaskCrc;

uint32_t DecodeFixed32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint64_t Fixed64(const uint8_t* p) { return DecodeFixed64(reinterpret_cast<const char*>(p)); }

}  // namespace

// For a shard whose footer is missing or broken: walks the records from the
// start to say where the intact data ends, so the error names the record.
std::string ShardReader::DescribeTruncation() const {
  uint64_t offset = shard::kHeaderSize, n = 0;
  uint8_t h[shard::kRecordHeaderSize];
  while (offset + shard::kRecordHeaderSize <= file_size_) {
    if (!ReadAt(offset, h, sizeof(h)).ok() ||
        std::memcmp(h, shard::kRecordMagic, sizeof(shard::kRecordMagic)) != 0 ||
        UnmaskCrc(DecodeFixed32(h + 20)) != core::Crc32c(h, 20) || Fixed64(h + 8) != n) {
      break;  // the index (or garbage) starts here, or the header is cut
    }
    const uint64_t next = offset + shard::kRecordHeaderSize + DecodeFixed32(h + 4);
    if (next > file_size_) {
      return "record " + std::to_string(n) + " at offset " + std::to_string(offset) +
             " is cut off (" + std::to_string(file_size_ - offset) + " of " +
             std::to_string(next - offset) + " bytes present)";
    }
    offset = next;
    ++n;
  }
  return std::to_string(n) + " complete records precede offset " + std::to_string(offset) +
         ", where the file has " + std::to_string(file_size_ - offset) +
         " more bytes but no valid footer";
}

ShardReader::ShardReader(std::unique_ptr<RandomAccessFile> file)
    : file_(std::move(file)), path_(file_->name()), file_size_(file_->size()) {}

Result<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path,
                                                       const HttpOptions& http) {
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(path, http));
  return Open(std::move(file));
}

Result<std::unique_ptr<ShardReader>> ShardReader::Open(std::unique_ptr<RandomAccessFile> file) {
  std::unique_ptr<ShardReader> r(new ShardReader(std::move(file)));
  const std::string& path = r->path_;
  auto bad = [&path](const std::string& why) {
    return DataLossError("shard '" + path + "': " + why);
  };
  const uint64_t size = r->file_size_;
  uint8_t h[shard::kHeaderSize];
  if (size < shard::kHeaderSize + shard::kFooterSize) {
    // Name a foreign file as such even when it is small.
    if (size >= sizeof(shard::kHeaderMagic) && r->ReadAt(0, h, sizeof(shard::kHeaderMagic)).ok() &&
        std::memcmp(h, shard::kHeaderMagic, sizeof(shard::kHeaderMagic)) != 0) {
      return InvalidArgumentError("'" + path + "' is not a feedline shard (bad header magic)");
    }
    return bad("too small to be a shard (" + std::to_string(size) +
               " bytes; header and footer need " +
               std::to_string(shard::kHeaderSize + shard::kFooterSize) + ")");
  }
  FEEDLINE_RETURN_IF_ERROR(r->ReadAt(0, h, sizeof(h)));
  if (std::memcmp(h, shard::kHeaderMagic, sizeof(shard::kHeaderMagic)) != 0) {
    return InvalidArgumentError("'" + path + "' is not a feedline shard (bad header magic)");
  }
  const uint32_t version = DecodeFixed32(h + 8);
  if (version < shard::kShardVersion1 || version > shard::kMaxShardVersion) {
    return InvalidArgumentError("shard '" + path + "' has format version " +
                                std::to_string(version) + "; this build reads versions 1 to " +
                                std::to_string(shard::kMaxShardVersion));
  }
  r->version_ = version;
  if (UnmaskCrc(DecodeFixed32(h + 20)) != core::Crc32c(h, 20))
    return bad("header checksum mismatch");
  if (DecodeFixed32(h + 12) != 0) return bad("unknown header flags");

  uint8_t f[shard::kFooterSize];
  FEEDLINE_RETURN_IF_ERROR(r->ReadAt(size - shard::kFooterSize, f, sizeof(f)));
  if (std::memcmp(f + 32, shard::kFooterMagic, sizeof(shard::kFooterMagic)) != 0) {
    return bad("truncated or unfinished: no footer; " + r->DescribeTruncation());
  }
  if (UnmaskCrc(DecodeFixed32(f + 24)) != core::Crc32c(f, 24))
    return bad("footer checksum mismatch");
  if (DecodeFixed32(f + 20) != version) return bad("footer version disagrees with header");
  const uint64_t index_offset = Fixed64(f), count = Fixed64(f + 8);
  // Bound the count by the bytes actually present before trusting it.
  const uint64_t room = size - shard::kFooterSize;
  if (index_offset < shard::kHeaderSize || index_offset > room ||
      count > (room - index_offset) / shard::kIndexEntrySize ||
      index_offset + count * shard::kIndexEntrySize != room) {
    return bad("footer is inconsistent with the file size (index at " +
               std::to_string(index_offset) + ", " + std::to_string(count) + " records, " +
               std::to_string(size) + " bytes)");
  }
  std::vector<uint8_t> index(count * shard::kIndexEntrySize);
  FEEDLINE_RETURN_IF_ERROR(r->ReadAt(index_offset, index.data(), index.size()));
  if (UnmaskCrc(DecodeFixed32(f + 16)) != core::Crc32c(index.data(), index.size())) {
    return bad("index checksum mismatch");
  }
  r->offsets_.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t o = Fixed64(index.data() + i * shard::kIndexEntrySize);
    const uint64_t min =
        i == 0 ? shard::kHeaderSize
               : r->offsets_[i - 1] + shard::kRecordHeaderSize + shard::kPayloadFixedSize;
    if ((i == 0 && o != shard::kHeaderSize) || o < min ||
        o + shard::kRecordHeaderSize + shard::kPayloadFixedSize > index_offset) {
      return bad("index entry " + std::to_string(i) + " (offset " + std::to_string(o) +
                 ") is out of order or out of range");
    }
    r->offsets_[i] = o;
  }
  if (count == 0 && index_offset != shard::kHeaderSize)
    return bad("records present but no index entries");
  r->index_offset_ = index_offset;
  return r;
}

Result<uint32_t> ShardReader::FileCrc32c() const {
  std::vector<uint8_t> buf(1 << 20);
  uint32_t crc = 0;
  for (uint64_t off = 0; off < file_size_;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), file_size_ - off));
    FEEDLINE_RETURN_IF_ERROR(ReadAt(off, buf.data(), n));
    crc = core::Crc32cExtend(crc, buf.data(), n);
    off += n;
  }
  return crc;
}

Status ShardReader::RecordError(uint64_t i, std::string_view reason) const {
  return DataLossError("shard '" + path_ + "' record " + std::to_string(i) + " at offset " +
                       std::to_string(offsets_[i]) + ": " + std::string(reason));
}

Status ShardReader::Read(uint64_t i, std::vector<uint8_t>* scratch, ShardRecord* out) const {
  if (i >= offsets_.size()) {
    return OutOfRangeError("shard '" + path_ + "' has " + std::to_string(offsets_.size()) +
                           " records; no record " + std::to_string(i));
  }
  const uint64_t offset = offsets_[i];
  const uint64_t end = i + 1 < offsets_.size() ? offsets_[i + 1] : index_offset_;
  // One read for header and payload: the extent comes from the index, which
  // Open checked against the file size, so this never allocates more than
  // the record's share of the file.
  const uint64_t extent = end - offset;
  scratch->resize(extent);
  // The file names itself and the offset; say which record it was too
  // (keeping the code: EIO stays Unavailable, a short file DataLoss).
  const Status read = ReadAt(offset, scratch->data(), extent);
  if (!read.ok()) {
    return read.WithContext("shard '" + path_ + "' record " + std::to_string(i) + " at offset " +
                            std::to_string(offset));
  }
  return Parse(i, *scratch, out);
}

Status ShardReader::ReadRun(uint64_t first, uint64_t last, std::vector<uint8_t>* out) const {
  if (first > last || last >= offsets_.size()) {
    return OutOfRangeError("shard '" + path_ + "' has " + std::to_string(offsets_.size()) +
                           " records; no run " + std::to_string(first) + ".." +
                           std::to_string(last));
  }
  const uint64_t begin = offsets_[first], end = offsets_[last] + record_extent(last);
  out->resize(end - begin);
  const Status read = ReadAt(begin, out->data(), out->size());
  if (!read.ok()) {
    return read.WithContext("shard '" + path_ + "' records " + std::to_string(first) + " to " +
                            std::to_string(last) + " at offset " + std::to_string(begin));
  }
  return Status::OK();
}

Status ShardReader::Parse(uint64_t i, const std::vector<uint8_t>& bytes, ShardRecord* out) const {
  const std::vector<uint8_t>* scratch = &bytes;
  const uint64_t extent = record_extent(i);
  if (bytes.size() != extent) {
    return RecordError(i, "holds " + std::to_string(bytes.size()) + " bytes, its extent is " +
                              std::to_string(extent));
  }
  const uint8_t* h = scratch->data();
  if (std::memcmp(h, shard::kRecordMagic, sizeof(shard::kRecordMagic)) != 0) {
    return RecordError(i, "bad record magic (index points at no record)");
  }
  if (UnmaskCrc(DecodeFixed32(h + 20)) != core::Crc32c(h, 20))
    return RecordError(i, "record header checksum mismatch");
  if (Fixed64(h + 8) != i) {
    return RecordError(i, "index points at record " + std::to_string(Fixed64(h + 8)));
  }
  const uint64_t payload = DecodeFixed32(h + 4);
  if (payload + shard::kRecordHeaderSize != extent || payload < shard::kPayloadFixedSize) {
    return RecordError(i,
                       "record length " + std::to_string(payload) + " disagrees with the index (" +
                           std::to_string(extent - shard::kRecordHeaderSize) + " bytes available)");
  }
  if (UnmaskCrc(DecodeFixed32(h + 16)) != core::Crc32c(h + shard::kRecordHeaderSize, payload)) {
    return RecordError(i, "checksum mismatch");
  }
  const uint8_t* p = scratch->data() + shard::kRecordHeaderSize;
  const uint64_t k = DecodeFixed32(p + 8), m = DecodeFixed32(p + 12), d = DecodeFixed32(p + 16);
  out->fields.clear();
  if (version_ == shard::kShardVersion1) {
    if (shard::kPayloadFixedSize + k + m + d != payload) {
      return RecordError(i, "field lengths (" + std::to_string(k) + " + " + std::to_string(m) +
                                " + " + std::to_string(d) + ") disagree with the record length");
    }
    out->data = std::span<const uint8_t>(p + shard::kPayloadFixedSize + k + m, d);
  } else {
    // d is the field count; each entry is bounded by the payload before use.
    if (shard::kPayloadFixedSize + k + m > payload) {
      return RecordError(i, "key and metadata lengths (" + std::to_string(k) + " + " +
                                std::to_string(m) + ") run past the record length");
    }
    uint64_t pos = shard::kPayloadFixedSize + k + m;
    if (d > (payload - pos) / shard::kFieldEntrySize) {
      return RecordError(i, "field count " + std::to_string(d) + " cannot fit in the record");
    }
    out->fields.reserve(d);
    for (uint64_t f = 0; f < d; ++f) {
      if (payload - pos < shard::kFieldEntrySize) {
        return RecordError(i, "field " + std::to_string(f) + " runs past the record");
      }
      const uint64_t name_len = DecodeFixed32(p + pos), data_len = DecodeFixed32(p + pos + 4);
      pos += shard::kFieldEntrySize;
      if (name_len == 0 || name_len > shard::kMaxFieldNameBytes) {
        return RecordError(i, "field " + std::to_string(f) + " name length " +
                                  std::to_string(name_len) + " (1 to 255)");
      }
      if (name_len + data_len > payload - pos) {
        return RecordError(i, "field " + std::to_string(f) + " (" + std::to_string(name_len) +
                                  " + " + std::to_string(data_len) +
                                  " bytes) runs past the record");
      }
      ShardField field;
      field.name = std::string_view(reinterpret_cast<const char*>(p + pos), name_len);
      field.data = std::span<const uint8_t>(p + pos + name_len, data_len);
      for (const ShardField& earlier : out->fields) {
        if (earlier.name == field.name) {
          return RecordError(i, "two fields named '" + std::string(field.name) + "'");
        }
      }
      out->fields.push_back(field);
      pos += name_len + data_len;
    }
    if (pos != payload) {
      return RecordError(i, std::to_string(payload - pos) + " bytes after the last field");
    }
    out->data = out->fields.empty() ? std::span<const uint8_t>() : out->fields.front().data;
  }
  out->label = static_cast<int64_t>(Fixed64(p));
  const auto* text = reinterpret_cast<const char*>(p + shard::kPayloadFixedSize);
  out->key = std::string_view(text, k);
  out->metadata = std::string_view(text + k, m);
  return Status::OK();
}

}  // namespace feedline
