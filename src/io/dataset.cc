#include "feedline/dataset.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "feedline/file.h"
#include "src/core/detail/fingerprint.h"
#include "src/io/file_cache.h"
#include "src/io/read_ahead.h"

namespace feedline {
namespace {

using Json = nlohmann::json;

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

}  // namespace

std::string DatasetManifest::ToJson() const {
  Json j;
  j["format"] = "feedline-dataset";
  j["version"] = 1;
  j["records"] = records;
  j["classes"] = classes;
  j["shards"] = Json::array();
  for (const ShardInfo& s : shards) {
    j["shards"].push_back(
        {{"name", s.name}, {"records", s.records}, {"bytes", s.bytes}, {"crc32c", Hex(s.crc32c)}});
  }
  return j.dump(1) + "\n";
}

Result<DatasetManifest> DatasetManifest::Parse(std::string_view text) {
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string& why) { return DataLossError("manifest: " + why); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  // Type-check before reading: nlohmann's value()/get() throw on a type
  // mismatch (found by tests/fuzz/manifest_fuzzer.cc).
  if (!j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != "feedline-dataset") {
    return bad("\"format\" is not \"feedline-dataset\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() ||
      j["version"].get<int64_t>() != 1) {
    return InvalidArgumentError("manifest: unsupported \"version\" (this build reads 1)");
  }
  DatasetManifest m;
  if (!j.contains("records") || !j["records"].is_number_unsigned())
    return bad("\"records\" missing or not a count");
  m.records = j["records"].get<uint64_t>();
  if (!j.contains("classes") || !j["classes"].is_array())
    return bad("\"classes\" missing or not a list");
  for (const Json& c : j["classes"]) {
    if (!c.is_string()) return bad("\"classes\" holds a non-string");
    m.classes.push_back(c.get<std::string>());
  }
  if (!j.contains("shards") || !j["shards"].is_array())
    return bad("\"shards\" missing or not a list");
  uint64_t total = 0;
  for (size_t i = 0; i < j["shards"].size(); ++i) {
    const Json& s = j["shards"][i];
    const std::string where = "shard entry " + std::to_string(i);
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string() || !s.contains("records") ||
        !s["records"].is_number_unsigned() || !s.contains("bytes") ||
        !s["bytes"].is_number_unsigned() || !s.contains("crc32c") || !s["crc32c"].is_string()) {
      return bad(where + " needs name, records, bytes and crc32c");
    }
    ShardInfo info;
    info.name = s["name"].get<std::string>();
    if (info.name.empty() || info.name.find('/') != std::string::npos || info.name[0] == '.') {
      return bad(where + " has an invalid name '" + info.name + "'");
    }
    info.records = s["records"].get<uint64_t>();
    info.bytes = s["bytes"].get<uint64_t>();
    const std::string crc = s["crc32c"].get<std::string>();
    char* end = nullptr;
    const unsigned long v = std::strtoul(crc.c_str(), &end, 16);
    if (crc.empty() || crc.size() > 8 || *end != '\0')
      return bad(where + " has a bad crc32c '" + crc + "'");
    info.crc32c = static_cast<uint32_t>(v);
    if (total + info.records < total) return bad("record counts overflow");
    total += info.records;
    m.shards.push_back(std::move(info));
  }
  if (total != m.records) {
    return bad("\"records\" is " + std::to_string(m.records) + " but the shards hold " +
               std::to_string(total));
  }
  return m;
}

Result<std::shared_ptr<const ShardDataset>> ShardDataset::Open(const std::string& dir,
                                                               const HttpOptions& http) {
  const std::string path = JoinName(dir, kManifestName);
  Result<std::unique_ptr<RandomAccessFile>> file = OpenFile(path, http);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound)
      return NotFoundError("no dataset manifest at '" + path + "'");
    return file.status();
  }
  if ((*file)->size() > (64u << 20)) return DataLossError("manifest '" + path + "' is over 64 MiB");
  std::string text((*file)->size(), '\0');
  FEEDLINE_RETURN_IF_ERROR((*file)->Read(0, text.size(), text.data()));
  Result<DatasetManifest> m = DatasetManifest::Parse(text);
  if (!m.ok()) return m.status().WithContext(path);
  auto ds = std::make_shared<ShardDataset>();
  ds->dir_ = dir;
  ds->manifest_ = std::move(m).value();
  uint64_t first = 0;
  const std::shared_ptr<io::FileCache> cache = io::FileCache::Default();
  for (const ShardInfo& s : ds->manifest_.shards) {
    const std::string shard_path = JoinName(dir, s.name);
    // Through the descriptor cache: a dataset of any number of shards holds
    // a bounded set of open files (src/io/file_cache.h).
    FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> shard_file,
                              cache->Open(shard_path, http));
    FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r,
                              ShardReader::Open(std::move(shard_file)));
    if (r->file_size() != s.bytes || r->num_records() != s.records) {
      return DataLossError("shard '" + shard_path +
                           "' disagrees with the manifest: " + std::to_string(r->file_size()) +
                           " bytes and " + std::to_string(r->num_records()) + " records on disk, " +
                           std::to_string(s.bytes) + " and " + std::to_string(s.records) +
                           " in the manifest");
    }
    ds->readers_.push_back(std::move(r));
    ds->first_record_.push_back(first);
    first += s.records;
  }
  return std::shared_ptr<const ShardDataset>(std::move(ds));
}

void ShardDataset::Locate(uint64_t record, size_t* shard, uint64_t* local) const {
  const auto it = std::upper_bound(first_record_.begin(), first_record_.end(), record);
  *shard = static_cast<size_t>(it - first_record_.begin()) - 1;
  *local = record - first_record_[*shard];
}

uint64_t ShardDataset::RecordBytes(uint64_t record) const {
  size_t shard = 0;
  uint64_t local = 0;
  Locate(record, &shard, &local);
  return readers_[shard]->record_extent(local);
}

Status ShardDataset::Read(uint64_t record, std::vector<uint8_t>* scratch, ShardRecord* out) const {
  if (record >= manifest_.records) {
    return OutOfRangeError("dataset has " + std::to_string(manifest_.records) +
                           " records; no record " + std::to_string(record));
  }
  size_t shard = 0;
  uint64_t local = 0;
  Locate(record, &shard, &local);
  return readers_[shard]->Read(local, scratch, out);
}

namespace {

class ShardReadOp final : public SampleOp {
 public:
  ShardReadOp(std::shared_ptr<const ShardDataset> ds, const ReadAheadOptions& ra)
      : ds_(std::move(ds)) {
    if (ra.max_bytes > 0) {
      const ShardDataset* d = ds_.get();
      read_ahead_ = std::make_unique<io::ReadAhead>(
          [d](uint64_t id, io::Fetched* f) {
            ShardRecord rec;
            FEEDLINE_RETURN_IF_ERROR(d->Read(id, &f->buffer, &rec));
            f->data_offset = static_cast<size_t>(rec.data.data() - f->buffer.data());
            f->data_size = rec.data.size();
            f->label = rec.label;
            f->key = std::string(rec.key);
            f->parts.clear();
            for (const ShardField& field : rec.fields) {
              f->parts.push_back({std::string(field.name),
                                  static_cast<size_t>(field.data.data() - f->buffer.data()),
                                  field.data.size()});
            }
            return Status::OK();
          },
          [d](uint64_t id) { return d->RecordBytes(id); }, ra.max_bytes, ra.threads, Runs(d));
    }
  }
  // Consecutive records of one shard (the plan in storage order) are read
  // as one run and checked one by one.
  static io::Coalescing Runs(const ShardDataset* d) {
    io::Coalescing runs;
    runs.span = [d](uint64_t id) {
      size_t shard = 0;
      uint64_t local = 0;
      d->Locate(id, &shard, &local);
      const uint64_t begin = d->shard(shard).record_offset(local);
      return io::Span{shard, begin, begin + d->shard(shard).record_extent(local)};
    };
    runs.fetch_run = [d](const std::vector<uint64_t>& ids, std::vector<io::Fetched>* outs) {
      size_t shard = 0;
      uint64_t first = 0, last = 0;
      d->Locate(ids.front(), &shard, &first);
      d->Locate(ids.back(), &shard, &last);
      const ShardReader& r = d->shard(shard);
      std::vector<uint8_t> run;
      FEEDLINE_RETURN_IF_ERROR(r.ReadRun(first, last, &run));
      const uint64_t base = r.record_offset(first);
      for (size_t k = 0; k < ids.size(); ++k) {
        uint64_t local = 0;  // a run may skip a small record another run holds
        d->Locate(ids[k], &shard, &local);
        io::Fetched& f = (*outs)[k];
        const auto at = static_cast<std::ptrdiff_t>(r.record_offset(local) - base);
        f.buffer.assign(run.begin() + at,
                        run.begin() + at + static_cast<std::ptrdiff_t>(r.record_extent(local)));
        ShardRecord rec;
        FEEDLINE_RETURN_IF_ERROR(r.Parse(local, f.buffer, &rec));
        f.data_offset = static_cast<size_t>(rec.data.data() - f.buffer.data());
        f.data_size = rec.data.size();
        f.label = rec.label;
        f.key = std::string(rec.key);
        f.parts.clear();
        for (const ShardField& field : rec.fields) {
          f.parts.push_back({std::string(field.name),
                             static_cast<size_t>(field.data.data() - f.buffer.data()),
                             field.data.size()});
        }
      }
      return Status::OK();
    };
    return runs;
  }
  std::string_view name() const override { return "read"; }
  // Over the manifest: classes and each shard's name, records, bytes and
  // whole-file CRC (which covers every record's key and payload).
  uint64_t DataFingerprint() const override {
    core::detail::Fingerprint fp;
    fp.Add(std::string_view("shards"));
    for (const std::string& c : ds_->manifest().classes) fp.Add(c);
    for (const ShardInfo& s : ds_->manifest().shards)
      fp.Add(s.name).Add(s.records).Add(s.bytes).Add(uint64_t{s.crc32c});
    return fp.value();
  }
  BackgroundWork* background() const override { return read_ahead_.get(); }

  Status Apply(Sample& s, OpState* /*state*/) const override {
    size_t shard = 0;
    uint64_t local = 0;
    ds_->Locate(s.id(), &shard, &local);
    const ShardReader& r = ds_->shard(shard);
    s.location().file = r.path();
    s.location().record = static_cast<int64_t>(local);
    s.location().offset = static_cast<int64_t>(r.record_offset(local));
    io::Fetched f;
    Status st;
    if (read_ahead_ && read_ahead_->Take(s.id(), &f, &st)) {
      FEEDLINE_RETURN_IF_ERROR(st);
      s.scratch().swap(f.buffer);  // the read-ahead buffer becomes the sample's: no copy
      s.location().key = std::move(f.key);
      s.label = f.label;
      const std::span<const uint8_t> buf(s.scratch());
      s.set_data(buf.subspan(f.data_offset, f.data_size));
      for (const io::Fetched::Part& p : f.parts) s.AddPart(p.name, buf.subspan(p.offset, p.size));
      return Status::OK();
    }
    ShardRecord& rec = Record();
    FEEDLINE_RETURN_IF_ERROR(r.Read(local, &s.scratch(), &rec));
    s.location().key = std::string(rec.key);
    s.label = rec.label;
    s.set_data(rec.data);  // views the scratch buffer the payload was read into
    // Version-2 records: every named field is a part (docs/fields.md).
    for (const ShardField& field : rec.fields) s.AddPart(field.name, field.data);
    return Status::OK();
  }

 private:
  // A record per worker thread, so its fields vector keeps its capacity.
  static ShardRecord& Record() {
    thread_local ShardRecord rec;
    return rec;
  }

  std::shared_ptr<const ShardDataset> ds_;
  std::unique_ptr<io::ReadAhead> read_ahead_;
};

}  // namespace

std::shared_ptr<const SampleOp> MakeShardReadOp(std::shared_ptr<const ShardDataset> dataset,
                                                const ReadAheadOptions& read_ahead) {
  return std::make_shared<ShardReadOp>(std::move(dataset), read_ahead);
}

}  // namespace feedline
