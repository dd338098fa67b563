// Parquet and Arrow IPC datasets through Arrow C++ (docs/columnar.md).
//
// Files are opened once (footer or IPC schema, checked); a group (a Parquet
// row group or an IPC record batch) is the unit of reading: its read columns
// are decoded into Arrow arrays, held by a shared_ptr, and a sample's parts
// point into them. The read op's cache keeps decoded groups within a byte
// budget, least recently used out first; its read-ahead decodes the groups
// of the plan in the order the plan first needs them.
#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/io/interfaces.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/byte_size.h>
#include <arrow/util/config.h>
#include <arrow/util/future.h>
#include <arrow/util/key_value_metadata.h>
#include <fnmatch.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "feedline/columnar.h"
#include "feedline/object_store.h"
#include "src/core/detail/fingerprint.h"

namespace feedline {
namespace {

using core::detail::Fingerprint;

constexpr uint64_t kDefaultCacheBytes = 256ull << 20;
constexpr uint32_t kMaxDefaultWindow = 64;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string BaseName(const std::string& name) {
  const size_t slash = name.find_last_of('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

bool IsIpcName(std::string_view name) {
  const std::string l = Lower(name);
  return EndsWith(l, ".arrow") || EndsWith(l, ".feather") || EndsWith(l, ".ipc");
}

// Every Arrow allocation of ours comes from the process's malloc, not the
// wheel's bundled mimalloc/jemalloc: one allocator (and one set of arenas)
// in the process, whose memory the RAM budget and the sanitizers see (a
// buffer freed on one thread and reused on another is then ordered by
// malloc's own synchronisation, which TSan intercepts).
arrow::MemoryPool* Pool() { return arrow::system_memory_pool(); }

// The error of the last failed read on this thread, so that an I/O error
// that came back through Arrow keeps its code (Unavailable, NotFound, ...).
thread_local Status t_last_read_error;

// Arrow's status as ours, prefixed with where it happened.
Status FromArrow(const arrow::Status& s, const std::string& where) {
  if (s.IsIOError() && !t_last_read_error.ok()) {
    Status e =
        Status(t_last_read_error.code(), where + ": " + std::string(t_last_read_error.message()));
    t_last_read_error = Status();
    return e;
  }
  if (s.IsOutOfMemory()) return ResourceExhaustedError(where + ": " + s.message());
  return DataLossError(where + ": " + s.message());
}

// feedline's RandomAccessFile (pread locally, ranged GETs remotely, with
// their retries and timeouts) as Arrow's. Reads at an offset are safe for
// concurrent use; the stream position is for Arrow's sequential reads.
class ArrowFile final : public arrow::io::RandomAccessFile {
 public:
  explicit ArrowFile(std::unique_ptr<feedline::RandomAccessFile> file)
      : file_(std::move(file)), size_(static_cast<int64_t>(file_->size())) {}

  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> Tell() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pos_;
  }
  arrow::Status Seek(int64_t position) override {
    if (position < 0) return arrow::Status::Invalid("negative seek");
    std::lock_guard<std::mutex> lock(mu_);
    pos_ = position;
    return arrow::Status::OK();
  }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    ARROW_ASSIGN_OR_RAISE(const int64_t n, ReadAt(pos_, nbytes, out));
    pos_ += n;
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> b, ReadAt(pos_, nbytes));
    pos_ += b->size();
    return b;
  }
  arrow::Result<int64_t> GetSize() override { return size_; }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    if (position < 0 || nbytes < 0) return arrow::Status::Invalid("negative read offset or length");
    const int64_t n = std::max<int64_t>(0, std::min(nbytes, size_ - position));
    if (n == 0) return 0;
    const Status s = file_->Read(static_cast<uint64_t>(position), static_cast<size_t>(n), out);
    if (!s.ok()) {
      t_last_read_error = s;
      return arrow::Status::IOError(std::string(s.message()));
    }
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes) override {
    const int64_t n =
        std::max<int64_t>(0, std::min(nbytes, size_ - std::max<int64_t>(position, 0)));
    ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::ResizableBuffer> buf,
                          arrow::AllocateResizableBuffer(n, Pool()));
    ARROW_ASSIGN_OR_RAISE(const int64_t got, ReadAt(position, n, buf->mutable_data()));
    ARROW_RETURN_NOT_OK(buf->Resize(got));
    return std::shared_ptr<arrow::Buffer>(std::move(buf));
  }
  // Pre-buffering asks for its coalesced ranges here: read them at once on
  // the calling thread (the loader's threads are the parallelism; Arrow's
  // I/O pool stays idle).
  arrow::Future<std::shared_ptr<arrow::Buffer>> ReadAsync(const arrow::io::IOContext&,
                                                          int64_t position,
                                                          int64_t nbytes) override {
    return arrow::Future<std::shared_ptr<arrow::Buffer>>::MakeFinished(ReadAt(position, nbytes));
  }
  arrow::Future<std::shared_ptr<arrow::Buffer>> ReadAsync(const arrow::io::IOContext&,
                                                          int64_t position, int64_t nbytes,
                                                          bool allow_short_read) override {
    return arrow::Future<std::shared_ptr<arrow::Buffer>>::MakeFinished(
        ReadAt(position, nbytes, allow_short_read));
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, bool allow_short_read,
                                void* out) override {
    ARROW_ASSIGN_OR_RAISE(const int64_t n, ReadAt(position, nbytes, out));
    if (n < nbytes && !allow_short_read) return ShortRead(position, nbytes, n);
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes,
                                                       bool allow_short_read) override {
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> b, ReadAt(position, nbytes));
    if (b->size() < nbytes && !allow_short_read) return ShortRead(position, nbytes, b->size());
    return b;
  }

 private:
  arrow::Status ShortRead(int64_t position, int64_t nbytes, int64_t got) const {
    return arrow::Status::IOError("a read of ", nbytes, " bytes at ", position, " got ", got,
                                  ": the file has ", size_, " bytes");
  }

  std::unique_ptr<feedline::RandomAccessFile> file_;
  const int64_t size_;
  mutable std::mutex mu_;
  int64_t pos_ = 0;
  std::atomic<bool> closed_{false};
};

bool IsFixedWidthNumber(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::INT8:
    case arrow::Type::UINT8:
    case arrow::Type::INT16:
    case arrow::Type::UINT16:
    case arrow::Type::INT32:
    case arrow::Type::UINT32:
    case arrow::Type::INT64:
    case arrow::Type::UINT64:
    case arrow::Type::HALF_FLOAT:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE: return true;
    default: return false;
  }
}

bool IsBinaryLike(arrow::Type::type id) {
  return id == arrow::Type::BINARY || id == arrow::Type::LARGE_BINARY ||
         id == arrow::Type::BINARY_VIEW || id == arrow::Type::FIXED_SIZE_BINARY;
}

bool IsStringLike(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::STRING_VIEW;
}

bool IsListLike(arrow::Type::type id) {
  return id == arrow::Type::LIST || id == arrow::Type::LARGE_LIST ||
         id == arrow::Type::FIXED_SIZE_LIST;
}

// The element type of a list column that makes an .npy: a number, or a
// fixed-size list of numbers (a second dimension).
const arrow::DataType* ArrayLeaf(const arrow::DataType& t, int32_t* inner) {
  *inner = 0;
  if (!IsListLike(t.id())) return nullptr;
  const arrow::DataType& v = *t.field(0)->type();
  if (IsFixedWidthNumber(v.id())) return &v;
  if (v.id() == arrow::Type::FIXED_SIZE_LIST) {
    const arrow::DataType& leaf = *v.field(0)->type();
    if (!IsFixedWidthNumber(leaf.id())) return nullptr;
    *inner = static_cast<const arrow::FixedSizeListType&>(v).list_size();
    return &leaf;
  }
  return nullptr;
}

ColumnKind KindOf(const arrow::DataType& t) {
  const arrow::Type::type id = t.id();
  if (IsBinaryLike(id)) return ColumnKind::kEncoded;
  if (IsStringLike(id)) return ColumnKind::kText;
  if (id == arrow::Type::BOOL || (arrow::is_integer(id))) return ColumnKind::kInteger;
  if (id == arrow::Type::STRUCT) {
    const auto& st = static_cast<const arrow::StructType&>(t);
    const std::shared_ptr<arrow::Field> bytes = st.GetFieldByName("bytes");
    if (bytes != nullptr && IsBinaryLike(bytes->type()->id())) return ColumnKind::kEncoded;
    return ColumnKind::kOther;
  }
  int32_t inner = 0;
  if (ArrayLeaf(t, &inner) != nullptr) return ColumnKind::kArray;
  return ColumnKind::kOther;
}

const char* NpyDescr(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::INT8: return "|i1";
    case arrow::Type::UINT8: return "|u1";
    case arrow::Type::INT16: return "<i2";
    case arrow::Type::UINT16: return "<u2";
    case arrow::Type::INT32: return "<i4";
    case arrow::Type::UINT32: return "<u4";
    case arrow::Type::INT64: return "<i8";
    case arrow::Type::UINT64: return "<u8";
    case arrow::Type::HALF_FLOAT: return "<f2";
    case arrow::Type::FLOAT: return "<f4";
    default: return "<f8";
  }
}

// An .npy version 1.0 header for a C-order array of `descr` and `shape`,
// padded so the data starts on a 64-byte boundary (numpy's own rule).
void AppendNpyHeader(std::vector<uint8_t>* out, const char* descr, int64_t d0, int32_t d1) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(d0) + (d1 > 0 ? ", " + std::to_string(d1) + "), }" : ",), }");
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out->insert(out->end(), magic, magic + 8);
  out->push_back(static_cast<uint8_t>(dict.size() & 0xff));
  out->push_back(static_cast<uint8_t>(dict.size() >> 8));
  out->insert(out->end(), dict.begin(), dict.end());
}

// One read column of a decoded group: its chunks (a group is usually one).
struct GroupColumn {
  std::vector<std::shared_ptr<arrow::Array>> chunks;
  std::vector<int64_t> starts;  // first row of each chunk within the group

  // (chunk, index in it) of `row`.
  std::pair<const arrow::Array*, int64_t> At(int64_t row) const {
    const size_t c =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), row) - starts.begin()) -
        1;
    return {chunks[c].get(), row - starts[c]};
  }
};

struct Group {
  std::vector<GroupColumn> columns;  // in the dataset's read-column order
  uint64_t bytes = 0;                // Arrow buffers held
};

// Where a group lies.
struct GroupRef {
  uint32_t file = 0;
  int32_t index = 0;       // row group or record batch in its file
  uint64_t first_row = 0;  // in the file
  uint64_t rows = 0;
  uint64_t est_bytes = 0;  // decoded size, from the footer (Parquet) or the batch
};

struct FileEntry {
  std::string name;
  uint64_t size = 0;
  bool parquet = true;
  std::shared_ptr<ArrowFile> file;                           // Parquet
  std::shared_ptr<parquet::FileMetaData> metadata;           // Parquet
  std::vector<int> leaves;                                   // Parquet leaf columns read
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;  // IPC (memory-mapped)
};

// How a read column becomes a part.
struct ReadColumn {
  ColumnInfo info;
  std::string part;  // lower-cased name
  std::shared_ptr<arrow::DataType> type;
  bool has_path = false;  // a {bytes, path} struct whose path is read (the key)
};

std::string GroupWhere(const FileEntry& f, const GroupRef& g) {
  return "file '" + f.name + "', " + (f.parquet ? "row group " : "record batch ") +
         std::to_string(g.index) + " (rows " + std::to_string(g.first_row) + "-" +
         std::to_string(g.first_row + g.rows - 1) + ")";
}

// The leaf column indices under a manifest field; for a {bytes, path}
// struct only those two children.
void CollectLeaves(const parquet::arrow::SchemaField& f, bool image_struct, std::vector<int>* out) {
  if (f.is_leaf()) {
    out->push_back(f.column_index);
    return;
  }
  for (const parquet::arrow::SchemaField& c : f.children) {
    if (image_struct && c.field->name() != "bytes" && c.field->name() != "path") continue;
    CollectLeaves(c, false, out);
  }
}

template <typename T>
Status Guard(const std::string& where, T&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return DataLossError(where + ": " + e.what());
  }
}

class ColumnarDatasetImpl final : public ColumnarDataset {
 public:
  static Result<std::shared_ptr<const ColumnarDataset>> Make(const std::vector<std::string>& files,
                                                             const ColumnarOptions& options) {
    if (files.empty()) return InvalidArgumentError("a columnar dataset needs at least one file");
    auto ds = std::shared_ptr<ColumnarDatasetImpl>(new ColumnarDatasetImpl());
    ds->options_ = options;
    std::shared_ptr<arrow::Schema> first_schema;
    for (size_t i = 0; i < files.size(); ++i) {
      FileEntry f;
      f.name = files[i];
      std::shared_ptr<arrow::Schema> schema;
      parquet::arrow::SchemaManifest manifest;
      FEEDLINE_RETURN_IF_ERROR(IsIpcName(f.name) ? OpenIpc(&f, &schema, options)
                                                 : OpenParquet(&f, &schema, &manifest, options));
      if (i == 0) {
        first_schema = schema;
        FEEDLINE_RETURN_IF_ERROR(ds->ResolveColumns(*schema));
      }
      FEEDLINE_RETURN_IF_ERROR(ds->AddFile(std::move(f), *schema, manifest, i == 0));
    }
    if (ds->num_rows_ == 0)
      return InvalidArgumentError("columnar dataset '" + files[0] + "' has no rows");
    ds->ReadClassNames(*first_schema);
    ds->ResolveWindow();
    ds->ComputeFingerprint();
    return std::shared_ptr<const ColumnarDataset>(std::move(ds));
  }

  // Record batches from an Arrow C stream, held as they are (zero-copy: the
  // exporter's buffers stay alive until this dataset goes).
  static Result<std::shared_ptr<const ColumnarDataset>> MakeFromStream(
      ArrowArrayStream* stream, const std::string& name, const ColumnarOptions& options) {
    const std::string where = "Arrow stream '" + name + "'";
    auto reader = arrow::ImportRecordBatchReader(stream);
    if (!reader.ok()) return FromArrow(reader.status(), where);
    FileEntry f;
    f.name = name;
    f.parquet = false;
    for (;;) {
      auto batch = (*reader)->Next();
      if (!batch.ok())
        return FromArrow(batch.status(),
                         where + ", record batch " + std::to_string(f.batches.size()));
      if (*batch == nullptr) break;
      f.batches.push_back(std::move(*batch));
    }
    const std::shared_ptr<arrow::Schema> schema = (*reader)->schema();
    auto ds = std::shared_ptr<ColumnarDatasetImpl>(new ColumnarDatasetImpl());
    ds->options_ = options;
    FEEDLINE_RETURN_IF_ERROR(ds->ResolveColumns(*schema));
    FEEDLINE_RETURN_IF_ERROR(
        ds->AddFile(std::move(f), *schema, parquet::arrow::SchemaManifest(), true));
    if (ds->num_rows_ == 0) return InvalidArgumentError(where + " has no rows");
    ds->ReadClassNames(*schema);
    ds->ResolveWindow();
    ds->ComputeFingerprint();
    return std::shared_ptr<const ColumnarDataset>(std::move(ds));
  }

  const std::vector<std::string>& files() const override { return names_; }
  uint64_t num_rows() const override { return num_rows_; }
  const std::vector<ColumnInfo>& schema() const override { return schema_; }
  const std::vector<ColumnInfo>& columns() const override { return column_infos_; }
  const std::vector<uint64_t>& group_sizes() const override { return group_sizes_; }
  uint32_t shuffle_window() const override { return window_; }
  const std::vector<std::string>& classes() const override { return classes_; }
  uint64_t Fingerprint() const override { return fingerprint_; }

  Status Read(uint64_t row, Sample& sample) const override {
    if (row >= num_rows_)
      return OutOfRangeError("row " + std::to_string(row) + " of " + std::to_string(num_rows_));
    const uint32_t g = GroupOf(row);
    // The last group this thread read, so that reading rows in order decodes
    // each group once (by the dataset's id: an address may be reused).
    struct Last {
      uint64_t dataset = 0;
      uint32_t group = 0;
      std::shared_ptr<const Group> data;
    };
    thread_local Last last;
    if (last.dataset != id_ || last.group != g || last.data == nullptr) {
      last.data.reset();
      FEEDLINE_ASSIGN_OR_RETURN(last.data, Load(g));
      last.dataset = id_;
      last.group = g;
    }
    return Fill(row, g, *last.data, sample, /*copy=*/true);
  }

  uint64_t cache_bytes() const {
    return options_.cache_bytes == 0 ? kDefaultCacheBytes : options_.cache_bytes;
  }
  uint32_t read_ahead_threads() const {
    if (options_.read_ahead_threads != ~0u) return options_.read_ahead_threads;
    return IsRemote(names_[0]) ? 4 : 1;
  }
  size_t num_groups() const { return groups_.size(); }
  uint64_t est_bytes(uint32_t g) const { return groups_[g].est_bytes; }

  uint32_t GroupOf(uint64_t row) const {
    return static_cast<uint32_t>(std::upper_bound(group_first_.begin(), group_first_.end(), row) -
                                 group_first_.begin() - 1);
  }

  // Decodes group g's read columns.
  Result<std::shared_ptr<const Group>> Load(uint32_t g) const {
    const GroupRef& ref = groups_[g];
    const FileEntry& f = files_[ref.file];
    const std::string where = GroupWhere(f, ref);
    auto group = std::make_shared<Group>();
    std::shared_ptr<arrow::Table> table;
    std::shared_ptr<arrow::RecordBatch> batch;
    if (f.parquet) {
      FEEDLINE_RETURN_IF_ERROR(Guard(where, [&]() -> Status {
        parquet::ReaderProperties props(Pool());
        std::unique_ptr<parquet::ParquetFileReader> pr =
            parquet::ParquetFileReader::Open(f.file, props, f.metadata);
        parquet::ArrowReaderProperties aprops;
        aprops.set_use_threads(false);
        aprops.set_pre_buffer(true);  // the read columns' chunks coalesced into few reads
        auto reader = parquet::arrow::FileReader::Make(Pool(), std::move(pr), aprops);
        if (!reader.ok()) return FromArrow(reader.status(), where);
        arrow::Result<std::shared_ptr<arrow::Table>> t =
            (*reader)->ReadRowGroup(ref.index, f.leaves);
        if (!t.ok()) return FromArrow(t.status(), where);
        table = std::move(*t);
        return Status();
      }));
      if (static_cast<uint64_t>(table->num_rows()) != ref.rows) {
        return DataLossError(where + ": the footer says " + std::to_string(ref.rows) +
                             " rows, the columns read hold " + std::to_string(table->num_rows()));
      }
    } else {
      batch = f.batches[static_cast<size_t>(ref.index)];
    }
    for (const ReadColumn& c : columns_) {
      GroupColumn col;
      if (table != nullptr) {
        const std::shared_ptr<arrow::ChunkedArray> chunked = table->GetColumnByName(c.info.name);
        if (chunked == nullptr)
          return DataLossError(where + ": column '" + c.info.name + "' was not read");
        int64_t start = 0;
        for (const std::shared_ptr<arrow::Array>& a : chunked->chunks()) {
          col.chunks.push_back(a);
          col.starts.push_back(start);
          start += a->length();
        }
      } else {
        const std::shared_ptr<arrow::Array> a = batch->GetColumnByName(c.info.name);
        if (a == nullptr) return DataLossError(where + ": column '" + c.info.name + "' is missing");
        col.chunks.push_back(a);
        col.starts.push_back(0);
      }
      for (const auto& a : col.chunks)
        group->bytes += static_cast<uint64_t>(arrow::util::TotalBufferSize(*a));
      if (col.chunks.empty()) {  // a group of no rows cannot be; keep At() defined anyway
        return DataLossError(where + ": column '" + c.info.name + "' read no data");
      }
      group->columns.push_back(std::move(col));
    }
    return std::shared_ptr<const Group>(std::move(group));
  }

  // Row `row` (in group g, decoded as `group`) into the sample. With
  // `copy`, every part is copied into the sample's scratch (the caller does
  // not keep the group alive); otherwise parts of bytes and text point into
  // the group.
  Status Fill(uint64_t row, uint32_t g, const Group& group, Sample& sample, bool copy) const {
    const GroupRef& ref = groups_[g];
    const FileEntry& f = files_[ref.file];
    const int64_t in_group = static_cast<int64_t>(row - group_first_[g]);
    const uint64_t file_row = ref.first_row + static_cast<uint64_t>(in_group);
    SampleLocation& loc = sample.location();
    loc.file = f.name;
    loc.record = static_cast<int64_t>(file_row);
    loc.offset = -1;
    loc.key.clear();
    // Spans are taken after every generated part is in scratch (it may grow).
    struct Pending {
      size_t column;
      std::string_view view;  // into the group (copy == false)
      size_t offset = 0, size = 0;
      bool in_scratch = false;
    };
    std::vector<uint8_t>& scratch = sample.scratch();
    scratch.clear();
    thread_local std::vector<Pending> pending;  // capacity kept: no allocation per sample
    pending.clear();
    auto where = [&](const ReadColumn& c) {
      return "file '" + f.name + "', " + (f.parquet ? "row group " : "record batch ") +
             std::to_string(ref.index) + ", row " + std::to_string(file_row) + ", column '" +
             c.info.name + "'";
    };
    int64_t label = -1;
    for (size_t ci = 0; ci < columns_.size(); ++ci) {
      const ReadColumn& c = columns_[ci];
      auto [array, i] = group.columns[ci].At(in_group);
      if (array->IsNull(i)) return DataLossError(where(c) + ": the value is null");
      switch (c.info.kind) {
        case ColumnKind::kEncoded:
        case ColumnKind::kText: {
          // A {bytes, path} struct's bytes child (its data is the struct's,
          // which the group holds), or the column itself.
          std::shared_ptr<arrow::Array> child;
          if (array->type_id() == arrow::Type::STRUCT) {
            const auto& st = static_cast<const arrow::StructArray&>(*array);
            child = st.GetFieldByName("bytes");
            if (child == nullptr)
              return DataLossError(where(c) + ": the struct has no 'bytes' field");
            if (child->IsNull(i)) {
              return DataLossError(
                  where(c) + ": its 'bytes' is null (an image given by path only is not read)");
            }
            if (c.has_path) {
              const std::shared_ptr<arrow::Array> path = st.GetFieldByName("path");
              if (path != nullptr && !path->IsNull(i)) loc.key = std::string(BinaryView(*path, i));
            }
          }
          const std::string_view v = BinaryView(child != nullptr ? *child : *array, i);
          if (copy) {
            pending.push_back({ci, {}, scratch.size(), v.size(), true});
            scratch.insert(scratch.end(), v.begin(), v.end());
          } else {
            pending.push_back({ci, v, 0, 0, false});
          }
          break;
        }
        case ColumnKind::kInteger: {
          int64_t v = 0;
          FEEDLINE_RETURN_IF_ERROR(IntegerAt(*array, i, &v, where(c)));
          if (static_cast<int>(ci) == label_column_) label = v;
          if (options_.parts) {
            char buf[24];
            const auto r = std::to_chars(buf, buf + sizeof(buf), v);
            pending.push_back({ci, {}, scratch.size(), static_cast<size_t>(r.ptr - buf), true});
            scratch.insert(scratch.end(), buf, r.ptr);
          }
          break;
        }
        case ColumnKind::kArray: {
          const size_t begin = scratch.size();
          FEEDLINE_RETURN_IF_ERROR(AppendNpy(*array, i, &scratch, where(c)));
          pending.push_back({ci, {}, begin, scratch.size() - begin, true});
          break;
        }
        case ColumnKind::kOther:
          return InternalError(where(c) + ": a column of no part kind was read");
      }
    }
    if (loc.key.empty()) loc.key = "row " + std::to_string(file_row);
    sample.label = label;
    auto span_of = [&](const Pending& p) {
      return p.in_scratch ? std::span<const uint8_t>(scratch.data() + p.offset, p.size)
                          : std::span<const uint8_t>(
                                reinterpret_cast<const uint8_t*>(p.view.data()), p.view.size());
    };
    for (const Pending& p : pending) {
      if (options_.parts) {
        sample.AddPart(columns_[p.column].part, span_of(p));
      } else if (static_cast<int>(p.column) == image_column_) {
        sample.set_data(span_of(p));
      }
    }
    return Status();
  }

 private:
  ColumnarDatasetImpl() = default;

  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  static std::string_view BinaryView(const arrow::Array& a, int64_t i) {
    switch (a.type_id()) {
      case arrow::Type::BINARY:
      case arrow::Type::STRING: return static_cast<const arrow::BinaryArray&>(a).GetView(i);
      case arrow::Type::LARGE_BINARY:
      case arrow::Type::LARGE_STRING:
        return static_cast<const arrow::LargeBinaryArray&>(a).GetView(i);
      case arrow::Type::BINARY_VIEW:
      case arrow::Type::STRING_VIEW:
        return static_cast<const arrow::BinaryViewArray&>(a).GetView(i);
      case arrow::Type::FIXED_SIZE_BINARY:
        return static_cast<const arrow::FixedSizeBinaryArray&>(a).GetView(i);
      default: return {};
    }
  }

  template <typename ArrowType>
  static int64_t NumberAt(const arrow::Array& a, int64_t i) {
    return static_cast<int64_t>(static_cast<const arrow::NumericArray<ArrowType>&>(a).Value(i));
  }

  static Status IntegerAt(const arrow::Array& a, int64_t i, int64_t* out,
                          const std::string& where) {
    switch (a.type_id()) {
      case arrow::Type::BOOL:
        *out = static_cast<const arrow::BooleanArray&>(a).Value(i) ? 1 : 0;
        return Status();
      case arrow::Type::INT8: *out = NumberAt<arrow::Int8Type>(a, i); return Status();
      case arrow::Type::UINT8: *out = NumberAt<arrow::UInt8Type>(a, i); return Status();
      case arrow::Type::INT16: *out = NumberAt<arrow::Int16Type>(a, i); return Status();
      case arrow::Type::UINT16: *out = NumberAt<arrow::UInt16Type>(a, i); return Status();
      case arrow::Type::INT32: *out = NumberAt<arrow::Int32Type>(a, i); return Status();
      case arrow::Type::UINT32: *out = NumberAt<arrow::UInt32Type>(a, i); return Status();
      case arrow::Type::INT64: *out = NumberAt<arrow::Int64Type>(a, i); return Status();
      case arrow::Type::UINT64: {
        const uint64_t v = static_cast<const arrow::UInt64Array&>(a).Value(i);
        if (v > static_cast<uint64_t>(INT64_MAX)) {
          return OutOfRangeError(where + ": " + std::to_string(v) + " does not fit an int64");
        }
        *out = static_cast<int64_t>(v);
        return Status();
      }
      default: return InternalError(where + ": not an integer column");
    }
  }

  // Element i of a list column as an .npy.
  static Status AppendNpy(const arrow::Array& a, int64_t i, std::vector<uint8_t>* out,
                          const std::string& where) {
    int32_t inner = 0;
    const arrow::DataType* leaf = ArrayLeaf(*a.type(), &inner);
    if (leaf == nullptr) return InternalError(where + ": not a list of numbers");
    int64_t begin = 0, length = 0;
    std::shared_ptr<arrow::Array> values;
    switch (a.type_id()) {
      case arrow::Type::LIST: {
        const auto& l = static_cast<const arrow::ListArray&>(a);
        begin = l.value_offset(i);
        length = l.value_length(i);
        values = l.values();
        break;
      }
      case arrow::Type::LARGE_LIST: {
        const auto& l = static_cast<const arrow::LargeListArray&>(a);
        begin = l.value_offset(i);
        length = l.value_length(i);
        values = l.values();
        break;
      }
      default: {
        const auto& l = static_cast<const arrow::FixedSizeListArray&>(a);
        begin = l.value_offset(i);
        length = l.value_length(i);
        values = l.values();
        break;
      }
    }
    int64_t leaf_begin = begin, leaf_count = length;
    if (inner > 0) {
      const auto& fl = static_cast<const arrow::FixedSizeListArray&>(*values);
      if (fl.null_count() > 0) {
        for (int64_t k = begin; k < begin + length; ++k) {
          if (fl.IsNull(k))
            return DataLossError(where + ": element " + std::to_string(k - begin) + " is null");
        }
      }
      leaf_begin = fl.value_offset(begin);
      leaf_count = length * inner;
      values = fl.values();
    }
    if (values->null_count() > 0) {
      for (int64_t k = leaf_begin; k < leaf_begin + leaf_count; ++k) {
        if (values->IsNull(k)) return DataLossError(where + ": a value in the list is null");
      }
    }
    const int width = leaf->byte_width();
    const uint8_t* data =
        values->data()->GetValues<uint8_t>(1, 0) + (values->offset() + leaf_begin) * width;
    AppendNpyHeader(out, NpyDescr(leaf->id()), length, inner);
    out->insert(out->end(), data, data + leaf_count * width);
    return Status();
  }

  static Status OpenParquet(FileEntry* f, std::shared_ptr<arrow::Schema>* schema,
                            parquet::arrow::SchemaManifest* manifest,
                            const ColumnarOptions& options) {
    FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<feedline::RandomAccessFile> file,
                              OpenFile(f->name, options.http));
    f->size = file->size();
    f->parquet = true;
    f->file = std::make_shared<ArrowFile>(std::move(file));
    const std::string where = "Parquet file '" + f->name + "'";
    return Guard(where, [&]() -> Status {
      std::unique_ptr<parquet::ParquetFileReader> pr =
          parquet::ParquetFileReader::Open(f->file, parquet::ReaderProperties(Pool()));
      f->metadata = pr->metadata();
      parquet::ArrowReaderProperties aprops;
      aprops.set_use_threads(false);
      auto reader = parquet::arrow::FileReader::Make(Pool(), std::move(pr), aprops);
      if (!reader.ok()) return FromArrow(reader.status(), where);
      const arrow::Status st = (*reader)->GetSchema(schema);
      if (!st.ok()) return FromArrow(st, where);
      // The manifest maps top-level fields to leaf columns (AddFile).
      *manifest = (*reader)->manifest();
      return Status();
    });
  }

  static Status OpenIpc(FileEntry* f, std::shared_ptr<arrow::Schema>* schema,
                        const ColumnarOptions&) {
    f->parquet = false;
    const std::string where = "Arrow file '" + f->name + "'";
    if (IsRemote(f->name)) {
      return UnimplementedError(where +
                                ": Arrow IPC files are read from local disk (memory-mapped); "
                                "for a bucket, use Parquet");
    }
    auto mm = arrow::io::MemoryMappedFile::Open(f->name, arrow::io::FileMode::READ);
    if (!mm.ok()) return NotFoundError(where + ": " + mm.status().message());
    auto size = (*mm)->GetSize();
    if (!size.ok()) return FromArrow(size.status(), where);
    f->size = static_cast<uint64_t>(*size);
    // The whole mapping as one buffer, read through a BufferReader: its reads
    // (ReadAsync included) are slices answered on this thread; a
    // MemoryMappedFile's ReadAsync would go to Arrow's I/O thread pool.
    auto whole = (*mm)->ReadAt(0, *size);
    if (!whole.ok()) return FromArrow(whole.status(), where);
    return Guard(where, [&]() -> Status {
      // The file format (footer, random access) first, else the stream format
      // (what datasets writes): its batches are found by reading it through.
      arrow::ipc::IpcReadOptions ipc = arrow::ipc::IpcReadOptions::Defaults();
      ipc.memory_pool = Pool();
      ipc.use_threads = false;  // compressed buffers decoded on this thread, not Arrow's pool
      auto fr = arrow::ipc::RecordBatchFileReader::Open(
          std::make_shared<arrow::io::BufferReader>(*whole), ipc);
      if (fr.ok()) {
        *schema = (*fr)->schema();
        for (int b = 0; b < (*fr)->num_record_batches(); ++b) {
          auto batch = (*fr)->ReadRecordBatch(b);
          if (!batch.ok())
            return FromArrow(batch.status(), where + ", record batch " + std::to_string(b));
          f->batches.push_back(*batch);
        }
        return Status();
      }
      auto sr = arrow::ipc::RecordBatchStreamReader::Open(
          std::make_shared<arrow::io::BufferReader>(*whole), ipc);
      if (!sr.ok()) {
        return DataLossError(where + ": neither an Arrow IPC file nor stream (" +
                             fr.status().message() + "; " + sr.status().message() + ")");
      }
      *schema = (*sr)->schema();
      for (;;) {
        std::shared_ptr<arrow::RecordBatch> batch;
        const arrow::Status st = (*sr)->ReadNext(&batch);
        if (!st.ok())
          return FromArrow(st, where + ", record batch " + std::to_string(f->batches.size()));
        if (batch == nullptr) break;
        f->batches.push_back(std::move(batch));
      }
      return Status();
    });
  }

  // Which columns are read, from the first file's schema.
  Status ResolveColumns(const arrow::Schema& schema) {
    for (const std::shared_ptr<arrow::Field>& field : schema.fields()) {
      schema_.push_back({field->name(), field->type()->ToString(), KindOf(*field->type())});
    }
    std::string have;
    for (const ColumnInfo& c : schema_)
      have += (have.empty() ? "" : ", ") + c.name + " (" + c.type + ")";
    auto find = [&](std::string_view want) -> int {
      int found = -1;
      for (size_t i = 0; i < schema_.size(); ++i) {
        if (Lower(schema_[i].name) == Lower(want)) {
          if (found >= 0) return -2;  // two columns differ only in case
          found = static_cast<int>(i);
        }
      }
      return found;
    };
    std::vector<int> picked;
    if (!options_.columns.empty()) {
      for (const std::string& want : options_.columns) {
        const int i = find(want);
        if (i == -2)
          return InvalidArgumentError("columns of '" + want +
                                      "' differ only in case; the file has " + have);
        if (i < 0) {
          if (options_.parts) continue;  // a field's other parts may be the ones present
          return InvalidArgumentError("no column '" + want + "'; the file has " + have);
        }
        if (std::find(picked.begin(), picked.end(), i) == picked.end()) picked.push_back(i);
      }
      if (picked.empty())
        return InvalidArgumentError("none of the columns asked for is in the file; it has " + have);
    }
    if (!options_.parts) {
      // Image classification: the image column and the label column.
      int image = -1, label = -1;
      if (!picked.empty()) {
        image = picked[0];
        if (picked.size() > 1) label = picked[1];
      } else {
        for (const char* n : {"image", "img", "jpg", "jpeg", "png", "webp"}) {
          if (const int i = find(n); i >= 0 && schema_[i].kind == ColumnKind::kEncoded) {
            image = i;
            break;
          }
        }
        if (image < 0) {
          for (size_t i = 0; i < schema_.size(); ++i) {
            if (schema_[i].kind != ColumnKind::kEncoded) continue;
            if (image >= 0) {
              return InvalidArgumentError(
                  "more than one column of encoded bytes and none named 'image'; name the "
                  "image column (fields=); the file has " +
                  have);
            }
            image = static_cast<int>(i);
          }
        }
        if (image < 0)
          return InvalidArgumentError(
              "no column of encoded images (binary or {bytes, path}); the file has " + have);
        for (const char* n : {"label", "labels", "cls", "class", "target"}) {
          if (const int i = find(n); i >= 0) {
            label = i;  // checked to be integers below
            break;
          }
        }
      }
      if (schema_[image].kind != ColumnKind::kEncoded) {
        return InvalidArgumentError(
            "column '" + schema_[image].name + "' (" + schema_[image].type +
            ") is not encoded bytes (binary or a struct with a binary 'bytes')");
      }
      if (label >= 0 && schema_[label].kind != ColumnKind::kInteger) {
        return InvalidArgumentError("label column '" + schema_[label].name + "' (" +
                                    schema_[label].type + ") is not an integer column");
      }
      picked = {image};
      image_column_ = 0;
      if (label >= 0) {
        picked.push_back(label);
        label_column_ = 1;
      }
    }
    for (const int i : picked) {
      const ColumnInfo& info = schema_[i];
      if (info.kind == ColumnKind::kOther) {
        return InvalidArgumentError(
            "column '" + info.name + "' has type " + info.type +
            ", which no part can be (binary, {bytes, path} struct, string, integer, or a "
            "list of numbers)");
      }
      ReadColumn c;
      c.info = info;
      c.part = Lower(info.name);
      c.type = schema.field(i)->type();
      if (c.type->id() == arrow::Type::STRUCT) {
        c.has_path =
            static_cast<const arrow::StructType&>(*c.type).GetFieldByName("path") != nullptr;
      }
      columns_.push_back(c);
      column_infos_.push_back(info);
    }
    if (options_.parts) {
      for (size_t k = 0; k < columns_.size(); ++k) {
        if (columns_[k].info.kind == ColumnKind::kInteger &&
            Lower(columns_[k].info.name) == "label") {
          label_column_ = static_cast<int>(k);
        }
      }
    }
    return Status();
  }

  // Checks file f against the columns read and records its groups.
  Status AddFile(FileEntry f, const arrow::Schema& schema,
                 const parquet::arrow::SchemaManifest& manifest, bool first) {
    const uint32_t index = static_cast<uint32_t>(files_.size());
    for (const ReadColumn& c : columns_) {
      const std::shared_ptr<arrow::Field> field = schema.GetFieldByName(c.info.name);
      if (field == nullptr) {
        return InvalidArgumentError("file '" + f.name + "' has no column '" + c.info.name +
                                    "' (the first file, '" + (first ? f.name : files_[0].name) +
                                    "', has it)");
      }
      if (!field->type()->Equals(*c.type)) {
        return InvalidArgumentError("file '" + f.name + "': column '" + c.info.name + "' is " +
                                    field->type()->ToString() + ", in '" + files_[0].name +
                                    "' it is " + c.type->ToString());
      }
    }
    uint64_t rows_in_file = 0;
    if (f.parquet) {
      for (const ReadColumn& c : columns_) {
        const int fi = schema.GetFieldIndex(c.info.name);
        CollectLeaves(manifest.schema_fields[static_cast<size_t>(fi)],
                      c.type->id() == arrow::Type::STRUCT && c.info.kind == ColumnKind::kEncoded,
                      &f.leaves);
      }
      const parquet::FileMetaData& md = *f.metadata;
      for (int rg = 0; rg < md.num_row_groups(); ++rg) {
        const std::unique_ptr<parquet::RowGroupMetaData> rmd = md.RowGroup(rg);
        GroupRef g;
        g.file = index;
        g.index = rg;
        g.first_row = rows_in_file;
        g.rows = static_cast<uint64_t>(rmd->num_rows());
        for (const int leaf : f.leaves) {
          const std::unique_ptr<parquet::ColumnChunkMetaData> cc = rmd->ColumnChunk(leaf);
          const int64_t start = cc->has_dictionary_page()
                                    ? std::min(cc->dictionary_page_offset(), cc->data_page_offset())
                                    : cc->data_page_offset();
          if (start < 0 || cc->total_compressed_size() < 0 ||
              static_cast<uint64_t>(start) + static_cast<uint64_t>(cc->total_compressed_size()) >
                  f.size) {
            return DataLossError("file '" + f.name + "', row group " + std::to_string(rg) +
                                 ", column '" + md.schema()->Column(leaf)->path()->ToDotString() +
                                 "': the footer places it at bytes " + std::to_string(start) + "+" +
                                 std::to_string(cc->total_compressed_size()) + ", the file has " +
                                 std::to_string(f.size));
          }
          g.est_bytes += static_cast<uint64_t>(std::max<int64_t>(0, cc->total_uncompressed_size()));
        }
        rows_in_file += g.rows;
        if (g.rows > 0) groups_.push_back(g);
      }
      if (rows_in_file != static_cast<uint64_t>(md.num_rows())) {
        return DataLossError("file '" + f.name + "': its footer says " +
                             std::to_string(md.num_rows()) + " rows, its row groups hold " +
                             std::to_string(rows_in_file));
      }
    } else {
      for (size_t b = 0; b < f.batches.size(); ++b) {
        GroupRef g;
        g.file = index;
        g.index = static_cast<int32_t>(b);
        g.first_row = rows_in_file;
        g.rows = static_cast<uint64_t>(f.batches[b]->num_rows());
        for (const ReadColumn& c : columns_) {
          const std::shared_ptr<arrow::Array> a = f.batches[b]->GetColumnByName(c.info.name);
          if (a != nullptr) g.est_bytes += static_cast<uint64_t>(arrow::util::TotalBufferSize(*a));
        }
        rows_in_file += g.rows;
        if (g.rows > 0) groups_.push_back(g);
      }
    }
    for (size_t k = group_sizes_.size(); k < groups_.size(); ++k) {
      group_first_.push_back(num_rows_);
      group_sizes_.push_back(groups_[k].rows);
      num_rows_ += groups_[k].rows;
    }
    names_.push_back(f.name);
    files_.push_back(std::move(f));
    return Status();
  }

  // A Hugging Face ClassLabel's names for the label column.
  void ReadClassNames(const arrow::Schema& schema) {
    if (label_column_ < 0 || schema.metadata() == nullptr) return;
    const auto hf = schema.metadata()->Get("huggingface");
    if (!hf.ok()) return;
    const nlohmann::json j = nlohmann::json::parse(*hf, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return;
    const nlohmann::json* features = nullptr;
    if (j.contains("info") && j["info"].is_object() && j["info"].contains("features")) {
      features = &j["info"]["features"];
    }
    if (features == nullptr || !features->is_object()) return;
    const std::string& name = columns_[static_cast<size_t>(label_column_)].info.name;
    if (!features->contains(name)) return;
    const nlohmann::json& feature = (*features)[name];
    if (!feature.is_object() || !feature.contains("names") || !feature["names"].is_array()) return;
    for (const nlohmann::json& n : feature["names"]) {
      if (!n.is_string()) {
        classes_.clear();
        return;
      }
      classes_.push_back(n.get<std::string>());
    }
  }

  void ResolveWindow() {
    if (options_.shuffle_window > 0) {
      window_ = options_.shuffle_window;
      return;
    }
    uint64_t total = 0;
    for (const GroupRef& g : groups_) total += g.est_bytes;
    const uint64_t avg = std::max<uint64_t>(1, total / std::max<size_t>(1, groups_.size()));
    window_ =
        static_cast<uint32_t>(std::clamp<uint64_t>(cache_bytes() / 2 / avg, 1, kMaxDefaultWindow));
  }

  void ComputeFingerprint() {
    core::detail::Fingerprint fp;
    fp.Add(std::string_view("columnar/1"));
    fp.Add(uint64_t{options_.parts ? 1u : 0u});
    for (const FileEntry& f : files_) {
      fp.Add(std::string_view(BaseName(f.name)));
      fp.Add(f.size);
    }
    for (const uint64_t s : group_sizes_) fp.Add(s);
    for (const ColumnInfo& c : column_infos_) {
      fp.Add(std::string_view(c.name));
      fp.Add(std::string_view(c.type));
    }
    fingerprint_ = fp.value();
  }

  ColumnarOptions options_;
  std::vector<FileEntry> files_;
  std::vector<std::string> names_;
  std::vector<ColumnInfo> schema_;
  std::vector<ReadColumn> columns_;
  std::vector<ColumnInfo> column_infos_;
  int image_column_ = -1;  // index in columns_ (no parts)
  int label_column_ = -1;
  std::vector<GroupRef> groups_;
  std::vector<uint64_t> group_first_;
  std::vector<uint64_t> group_sizes_;
  uint64_t num_rows_ = 0;
  uint32_t window_ = 1;
  std::vector<std::string> classes_;
  uint64_t fingerprint_ = 0;
  const uint64_t id_ = NextId();  // for Read's per-thread last group
};

// Decoded groups within a byte budget, and their read-ahead (BackgroundWork).
class GroupCache final : public BackgroundWork {
 public:
  explicit GroupCache(std::shared_ptr<const ColumnarDatasetImpl> ds)
      : ds_(std::move(ds)), budget_(ds_->cache_bytes()), threads_(ds_->read_ahead_threads()) {
    in_flight_limit_ = threads_;
  }
  ~GroupCache() override { Stop(); }

  Result<std::shared_ptr<const Group>> Get(uint32_t g) {
    std::unique_lock<std::mutex> lock(mu_);
    NoteUse(g);
    for (;;) {
      auto it = map_.find(g);
      if (it == map_.end()) break;
      Entry& e = it->second;
      if (e.state == Entry::kReady) {
        e.tick = ++tick_;
        return e.data;
      }
      if (e.state == Entry::kFailed) return e.error;
      cv_.wait(lock);
    }
    return LoadLocked(g, lock);
  }

  void OnPlan(std::shared_ptr<const EpochPlan> plan, uint64_t first) override {
    Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Errors are per plan: a group that failed is tried again next epoch.
      for (auto it = map_.begin(); it != map_.end();) {
        it = it->second.state == Entry::kFailed ? map_.erase(it) : std::next(it);
      }
      plan_ = std::move(plan);
      first_ = first;
      seq_.clear();
      seq_index_.clear();
      next_ = 0;
      consumed_ = 0;
      stop_ = false;
      seq_ready_ = false;
    }
    if (plan_ == nullptr || threads_ == 0) return;
    for (uint32_t t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { Run(t); });
  }
  uint64_t ReservedBytes() const override { return budget_; }
  ReadAheadMetrics Metrics() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ReadAheadMetrics m;
    m.in_flight_limit = in_flight_limit_;
    m.max_in_flight = threads_;
    m.bytes_limit = budget_;
    m.max_bytes = budget_;
    m.fetches = loads_;
    m.fetch_ns = load_ns_;
    m.fetched_bytes = loaded_bytes_;
    m.peak_bytes = peak_;
    return m;
  }
  void SetLimits(uint32_t in_flight, uint64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_limit_ = std::clamp<uint32_t>(in_flight, threads_ > 0 ? 1 : 0, threads_);
    cv_.notify_all();
  }

 private:
  struct Entry {
    enum State { kLoading, kReady, kFailed } state = kLoading;
    std::shared_ptr<const Group> data;
    Status error;
    uint64_t bytes = 0;
    uint64_t tick = 0;
  };

  // Called with mu_ held: where the workers are in the read-ahead's order.
  void NoteUse(uint32_t g) {
    if (!seq_ready_) return;
    const auto it = seq_index_.find(g);
    if (it != seq_index_.end() && it->second + 1 > consumed_) {
      consumed_ = it->second + 1;
      cv_.notify_all();
    }
  }

  Result<std::shared_ptr<const Group>> LoadLocked(uint32_t g, std::unique_lock<std::mutex>& lock) {
    map_[g] = Entry{};
    ++in_flight_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::shared_ptr<const Group>> r = ds_->Load(g);
    const uint64_t ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    lock.lock();
    --in_flight_;
    Entry& e = map_[g];
    ++loads_;
    load_ns_ += ns;
    if (!r.ok()) {
      e.state = Entry::kFailed;
      e.error = r.status();
      cv_.notify_all();
      return r.status();
    }
    e.state = Entry::kReady;
    e.data = *r;
    e.bytes = (*r)->bytes;
    e.tick = ++tick_;
    held_ += e.bytes;
    loaded_bytes_ += e.bytes;
    peak_ = std::max(peak_, held_);
    Evict(g);
    cv_.notify_all();
    return *r;
  }

  // Least recently used ready groups out until within the budget (never `keep`).
  void Evict(uint32_t keep) {
    while (held_ > budget_) {
      auto victim = map_.end();
      for (auto it = map_.begin(); it != map_.end(); ++it) {
        if (it->first == keep || it->second.state != Entry::kReady) continue;
        if (victim == map_.end() || it->second.tick < victim->second.tick) victim = it;
      }
      if (victim == map_.end()) return;
      held_ -= victim->second.bytes;
      map_.erase(victim);
    }
  }

  void Run(uint32_t t) {
    std::unique_lock<std::mutex> lock(mu_);
    if (t == 0 && !seq_ready_) {
      // The groups in the order the plan first needs them (from `first_`).
      std::shared_ptr<const EpochPlan> plan = plan_;
      const uint64_t first = first_;
      lock.unlock();
      std::vector<uint32_t> seq;
      std::unordered_map<uint32_t, size_t> index;
      for (size_t k = first; k < plan->ids.size(); ++k) {
        const uint32_t g = ds_->GroupOf(plan->ids[k]);
        if (index.emplace(g, seq.size()).second) seq.push_back(g);
      }
      lock.lock();
      seq_ = std::move(seq);
      seq_index_ = std::move(index);
      seq_ready_ = true;
      cv_.notify_all();
    }
    for (;;) {
      // Ahead of the workers by at most one group per thread, and within the budget.
      cv_.wait(lock, [&] {
        if (stop_) return true;
        if (!seq_ready_ || next_ >= seq_.size()) return false;
        return in_flight_ < in_flight_limit_ && next_ < consumed_ + in_flight_limit_ &&
               held_ + ds_->est_bytes(seq_[next_]) <= budget_;
      });
      if (stop_) return;
      const uint32_t g = seq_[next_++];
      if (map_.count(g) != 0) continue;
      (void)LoadLocked(g, lock);
    }
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  const std::shared_ptr<const ColumnarDatasetImpl> ds_;
  const uint64_t budget_;
  const uint32_t threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint32_t, Entry> map_;
  uint64_t held_ = 0, peak_ = 0, tick_ = 0;
  uint64_t loads_ = 0, load_ns_ = 0, loaded_bytes_ = 0;
  uint32_t in_flight_ = 0, in_flight_limit_ = 0;
  std::shared_ptr<const EpochPlan> plan_;
  uint64_t first_ = 0;
  std::vector<uint32_t> seq_;
  std::unordered_map<uint32_t, size_t> seq_index_;
  size_t next_ = 0, consumed_ = 0;
  bool stop_ = false, seq_ready_ = false;
  std::vector<std::thread> workers_;
};

// A worker's hold on the group of its current sample.
class PinState final : public OpState {
 public:
  std::shared_ptr<const Group> group;
};

class ColumnarReadOp final : public SampleOp {
 public:
  explicit ColumnarReadOp(std::shared_ptr<const ColumnarDatasetImpl> ds)
      : ds_(std::move(ds)), cache_(std::make_unique<GroupCache>(ds_)) {}
  std::string_view name() const override { return "read"; }
  std::unique_ptr<OpState> NewState() const override { return std::make_unique<PinState>(); }
  Status Apply(Sample& sample, OpState* state) const override {
    auto* pin = static_cast<PinState*>(state);
    const uint64_t row = sample.id();
    const uint32_t g = ds_->GroupOf(row);
    pin->group.reset();  // the previous sample's group may leave the cache now
    FEEDLINE_ASSIGN_OR_RETURN(pin->group, cache_->Get(g));
    return ds_->Fill(row, g, *pin->group, sample, /*copy=*/false);
  }
  BackgroundWork* background() const override { return cache_.get(); }
  uint64_t DataFingerprint() const override { return ds_->Fingerprint(); }
  uint64_t ConfigFingerprint() const override {
    Fingerprint fp;
    fp.Add(std::string_view("columnar-read/1"));
    fp.Add(uint64_t{ds_->shuffle_window()});
    return fp.value();
  }

 private:
  std::shared_ptr<const ColumnarDatasetImpl> ds_;
  std::unique_ptr<GroupCache> cache_;
};

// The data files a save_to_disk folder's state.json names, in order.
Result<std::vector<std::string>> SaveToDiskFiles(const std::string& dir) {
  std::vector<uint8_t> text;
  FEEDLINE_RETURN_IF_ERROR(ReadWholeFile(dir + "/state.json", 64 << 20, &text));
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object() || !j.contains("_data_files") || !j["_data_files"].is_array()) {
    return DataLossError("'" + dir + "/state.json' has no _data_files list");
  }
  std::vector<std::string> out;
  for (const nlohmann::json& f : j["_data_files"]) {
    if (!f.is_object() || !f.contains("filename") || !f["filename"].is_string()) {
      return DataLossError("'" + dir + "/state.json': a _data_files entry has no filename");
    }
    out.push_back(dir + "/" + f["filename"].get<std::string>());
  }
  if (out.empty()) return NotFoundError("'" + dir + "/state.json' names no data files");
  return out;
}

}  // namespace

bool ColumnarSupported() { return true; }
std::string ColumnarLibraryVersion() { return std::string("arrow ") + ARROW_VERSION_STRING; }

Result<std::vector<std::string>> ColumnarDataset::ListFiles(const std::string& path,
                                                            const HttpOptions& http) {
  auto pick = [&](std::vector<std::string> names) -> Result<std::vector<std::string>> {
    std::vector<std::string> parquet, ipc;
    for (std::string& n : names) {
      const std::string l = Lower(BaseName(n));
      if (EndsWith(l, ".parquet"))
        parquet.push_back(std::move(n));
      else if (IsIpcName(l))
        ipc.push_back(std::move(n));
    }
    std::vector<std::string>& out = parquet.empty() ? ipc : parquet;
    std::sort(out.begin(), out.end());
    if (out.empty()) return NotFoundError("'" + path + "' holds no .parquet or .arrow files");
    return out;
  };
  if (IsS3Url(path)) {
    const std::string l = Lower(path);
    if (EndsWith(l, ".parquet") || IsIpcName(l)) return std::vector<std::string>{path};
    const std::string prefix = EndsWith(path, "/") ? path : path + "/";
    FEEDLINE_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListObjects(prefix, http));
    const size_t slash = prefix.find('/', 5);
    const std::string bucket_url = prefix.substr(0, slash + 1);
    std::vector<std::string> names;
    names.reserve(objects.size());
    for (const ObjectInfo& o : objects) names.push_back(bucket_url + o.key);
    return pick(std::move(names));
  }
  if (IsUrl(path)) return std::vector<std::string>{path};
  const std::string last = BaseName(path);
  if (last.find_first_of("*?[") != std::string::npos) {
    // The last component is the pattern (fnmatch(3): *, ?, [...]; a leading
    // '.' only matched by a '.'), in the folder before it.
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir.empty() ? "/" : dir, ec)) {
      const std::string leaf = e.path().filename().string();
      if (fnmatch(last.c_str(), leaf.c_str(), FNM_PERIOD) == 0 && e.is_regular_file(ec)) {
        names.push_back(slash == std::string::npos ? leaf : dir + "/" + leaf);
      }
    }
    if (names.empty()) return NotFoundError("no file matches '" + path + "'");
    std::sort(names.begin(), names.end());
    return names;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::exists(path, ec)) return NotFoundError("'" + path + "' does not exist");
    return std::vector<std::string>{path};
  }
  if (std::filesystem::exists(path + "/state.json", ec)) return SaveToDiskFiles(path);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    if (e.is_regular_file(ec)) names.push_back(e.path().string());
  }
  if (ec) return NotFoundError("cannot list '" + path + "': " + ec.message());
  return pick(std::move(names));
}

Result<std::shared_ptr<const ColumnarDataset>> ColumnarDataset::Open(
    const std::vector<std::string>& files, const ColumnarOptions& options) {
  return ColumnarDatasetImpl::Make(files, options);
}

Result<std::shared_ptr<const ColumnarDataset>> ColumnarDataset::FromArrowStream(
    ArrowArrayStream* stream, const std::string& name, const ColumnarOptions& options) {
  if (stream == nullptr) return InvalidArgumentError("FromArrowStream: no stream");
  return ColumnarDatasetImpl::MakeFromStream(stream, name, options);
}

std::shared_ptr<const SampleOp> MakeColumnarReadOp(std::shared_ptr<const ColumnarDataset> dataset) {
  auto impl = std::dynamic_pointer_cast<const ColumnarDatasetImpl>(std::move(dataset));
  return std::make_shared<ColumnarReadOp>(std::move(impl));
}

}  // namespace feedline
