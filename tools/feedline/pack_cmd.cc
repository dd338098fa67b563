// `feedline pack SRC OUT [--shard-bytes N] [--threads T] [--overwrite | --resume] [--part i/n]
//                        [--skip-hidden-dirs] [--restart-interval N] [--max-side N --quality Q]`
// `feedline pack --merge OUT`
//
// SRC is an ImageFolder tree (class sub-folders give labels, listed exactly as
// torchvision's ImageFolder lists them; --skip-hidden-dirs leaves out
// directories named .*), WebDataset tars (every member of a key becomes a
// named field of a version-2 record, docs/fields.md), a list with
// --file-columns (every column a named field) or a list file:
// .csv (path,label[,key]; a header line starting with "path" is skipped) or
// .jsonl ({"path": ..., "label": ..., "key": ...} per line); relative paths
// are relative to the list's folder. Output is deterministic for the same
// input: records keep the source order (sorted for folders) and shards are
// cut at fixed points (--shard-bytes of input data). Shards are written in
// parallel to .partial names, fsynced and renamed; the manifest is written
// last, the same way, so a crash never leaves a dataset that looks
// complete. --part i/n packs the i-th of n slices on its own (for a cluster
// scheduler) with its own part manifest; --merge joins the parts.
// --max-side bounds the stored resolution (images whose longer side is over
// N are resized, antialiased, and re-encoded) and --restart-interval
// rewrites JPEGs losslessly with restart markers, so that crops decode only
// the intervals they cover (docs/restart_intervals.md); both are recorded
// in the manifest's optional "pack" field.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "feedline/dataset.h"
#include "feedline/image.h"
#include "feedline/image_folder.h"
#include "feedline/list_dataset.h"
#include "feedline/object_store.h"
#include "feedline/pipeline_builder.h"
#include "feedline/shard.h"
#include "feedline/shard_format.h"
#include "feedline/source.h"
#include "feedline/webdataset.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/files.h"
#include "tools/feedline/flags.h"

namespace feedline::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int Fail(const Status& st) {
  std::fprintf(stderr, "feedline pack: %s\n", st.ToString().c_str());
  return 1;
}

struct Entry {
  std::string path;  // absolute or relative to the working directory
  int64_t label = -1;
  std::string key;
  uint64_t bytes = 0;
  // A version-2 record (named fields): sample `index` of the tars or row
  // `index` of the list; `path` is then only for messages.
  enum class Kind { kFile, kTarSample, kListRow } kind = Kind::kFile;
  uint64_t index = 0;
};

// Where version-2 records come from (docs/fields.md): WebDataset tars, each
// member of a key a field, or a list, each column a field (file columns read).
struct FieldSource {
  std::shared_ptr<const TarDataset> tars;
  std::shared_ptr<const ListDataset> list;
};

// The label of a version-2 record: its "cls" (tars) or "label" (lists) part
// when it holds an integer; -1 when there is none. Not an integer: an error
// naming the record (the loader would refuse it as a label field too).
Status RecordLabel(const Sample& s, std::string_view part, const std::string& where, int64_t* out) {
  *out = -1;
  const Sample::Part* p = s.FindPart(part);
  if (p == nullptr) return Status::OK();
  std::string text(reinterpret_cast<const char*>(p->data.data()), p->data.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  char* end = nullptr;
  errno = 0;
  *out = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return InvalidArgumentError(where + ": '" + std::string(part) + "' does not hold an integer (" +
                                std::to_string(p->data.size()) + " bytes)");
  }
  return Status::OK();
}

Result<std::vector<Entry>> ReadList(const fs::path& list) {
  FEEDLINE_RETURN_IF_ERROR(RequireRegularFile(list).WithContext("list file"));
  std::ifstream in(list);
  if (!in) return NotFoundError("cannot open list '" + list.string() + "'");
  const fs::path base = list.parent_path();
  const bool jsonl = list.extension() == ".jsonl";
  std::vector<Entry> out;
  std::string line;
  for (uint64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF lists
    if (line.empty()) continue;
    Entry e;
    const std::string where = list.string() + " line " + std::to_string(n);
    if (jsonl) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string()) {
        return InvalidArgumentError(where + ": expected a JSON object with a \"path\" string");
      }
      e.path = j["path"].get<std::string>();
      if (j.contains("label")) {
        if (!j["label"].is_number_integer())
          return InvalidArgumentError(where + ": \"label\" is not an integer");
        if (j["label"].is_number_unsigned() && j["label"].get<uint64_t>() > uint64_t{INT64_MAX}) {
          return InvalidArgumentError(where + ": \"label\" is out of the int64 range");
        }
        e.label = j["label"].get<int64_t>();
      }
      if (j.contains("key") && j["key"].is_string()) e.key = j["key"].get<std::string>();
    } else {
      std::vector<std::string> cols;
      size_t start = 0;
      for (size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ',') {
          cols.push_back(line.substr(start, i - start));
          start = i + 1;
        }
      }
      if (cols.size() < 2) return InvalidArgumentError(where + ": expected path,label[,key]");
      e.path = cols[0];
      char* end = nullptr;
      errno = 0;
      e.label = std::strtoll(cols[1].c_str(), &end, 10);
      const bool integer = !cols[1].empty() && *end == '\0' && errno != ERANGE;
      // An optional header line names the columns; a first sample whose
      // path merely starts with "path" is data.
      if (n == 1 && cols[1] == "label") continue;
      if (!integer) {
        return InvalidArgumentError(where + ": label '" + cols[1] + "' is not an integer" +
                                    (errno == ERANGE ? " in the int64 range" : ""));
      }
      if (cols.size() > 2) e.key = cols[2];
    }
    if (e.key.empty()) e.key = e.path;
    if (fs::path(e.path).is_relative()) e.path = (base / e.path).string();
    out.push_back(std::move(e));
  }
  if (out.empty()) return InvalidArgumentError("list '" + list.string() + "' holds no entries");
  return out;
}

struct Plan {
  std::string name;
  size_t begin = 0, end = 0;  // entries
};

struct Options {
  uint64_t shard_bytes = 256u << 20;
  uint32_t threads = 0;
  bool overwrite = false, resume = false;
  uint32_t part = 0, parts = 1;
  uint32_t restart_interval = 0;          // MCUs; 0 = leave JPEGs as they are
  uint32_t max_side = 0;                  // 0 = keep the resolution
  uint32_t quality = 90;                  // JPEG quality of resized images
  std::vector<std::string> file_columns;  // lists packed as version 2: the columns of paths
};

// What --max-side and --restart-interval did, for the summary line.
struct PackCounts {
  std::atomic<uint64_t> resized{0}, transcoded{0}, not_jpeg{0}, kept{0};
  std::mutex mu;
  std::vector<std::string> kept_examples;  // GUARDED_BY(mu): the first few, with reasons

  void Keep(const std::string& path, const Status& why) {
    kept += 1;
    std::lock_guard<std::mutex> l(mu);
    if (kept_examples.size() < 5) kept_examples.push_back(path + ": " + why.ToString());
  }
};

// Applies --max-side and --restart-interval to one record's bytes. A file
// they cannot apply to (not an image, corrupt, a JPEG kind the transcoder
// leaves alone) is stored as it is and counted, never dropped: the loader
// reports it as it would have.
void PrepareRecord(const std::string& path, const Options& o, std::vector<uint8_t>* data,
                   PackCounts* counts) {
  if (o.max_side > 0) {
    const Result<ImageInfo> info = ReadImageInfo(*data);
    if (!info.ok()) {
      counts->Keep(path, info.status());
    } else if (std::max(info->width, info->height) > o.max_side) {
      // The longer side becomes max_side; the shorter keeps the aspect.
      const double f = double(o.max_side) / std::max(info->width, info->height);
      const uint32_t w = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(info->width * f)));
      const uint32_t h =
          std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(info->height * f)));
      Result<RgbImage> img = DecodeImage(*data);
      Result<RgbImage> small =
          img.ok() ? ResizedCrop(*img, 0, 0, img->width, img->height, w, h, Interpolation::kBicubic)
                   : Result<RgbImage>(img.status());
      // PNG stays PNG (lossless stays lossless); everything else is JPEG.
      Result<std::vector<uint8_t>> encoded =
          !small.ok() ? Result<std::vector<uint8_t>>(small.status())
          : info->format == ImageFormat::kPng
              ? EncodePng(*small)
              : EncodeJpeg(*small, static_cast<int>(o.quality), info->channels == 1);
      if (encoded.ok()) {
        *data = std::move(encoded).value();
        counts->resized += 1;
      } else {
        counts->Keep(path, encoded.status());
      }
    }
  }
  if (o.restart_interval > 0 && SniffImageFormat(*data) != ImageFormat::kJpeg)
    counts->not_jpeg += 1;
  if (o.restart_interval > 0 && SniffImageFormat(*data) == ImageFormat::kJpeg) {
    std::vector<uint8_t> out;
    const Status st = AddJpegRestartMarkers(*data, o.restart_interval, &out);
    if (st.ok()) {
      data->swap(out);
      counts->transcoded += 1;
    } else {
      counts->Keep(path, st);
    }
  }
}

// One version-2 record: the sample's parts become named fields; image
// parts get --max-side / --restart-interval as files do.
Status AddFieldsRecord(const Entry& e, const FieldSource& src, const Options& o, PackCounts* counts,
                       std::vector<std::vector<uint8_t>>& prepared, ShardWriter* w) {
  Sample sample;  // fresh: parts accumulate on a sample outside the engine
  Status st = e.kind == Entry::Kind::kTarSample ? src.tars->ReadParts(e.index, sample)
                                                : src.list->ReadParts(e.index, sample);
  if (!st.ok()) return st.WithContext(e.path + " '" + e.key + "'");
  ShardRecord rec;
  rec.key = e.key;
  FEEDLINE_RETURN_IF_ERROR(RecordLabel(sample, e.kind == Entry::Kind::kTarSample ? "cls" : "label",
                                       e.path + " '" + e.key + "'", &rec.label));
  const std::span<const Sample::Part> parts = sample.parts();
  prepared.resize(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    std::span<const uint8_t> data = parts[k].data;
    if ((o.max_side > 0 || o.restart_interval > 0) &&
        KindOfPart(parts[k].name) == FieldRequest::Kind::kImage) {
      prepared[k].assign(data.begin(), data.end());
      PrepareRecord(e.path + " '" + e.key + "." + parts[k].name + "'", o, &prepared[k], counts);
      data = prepared[k];
    }
    rec.fields.push_back({parts[k].name, data});
  }
  // The parts view the sample's scratch, which the next record reuses: the
  // writer copies them into its buffer before returning.
  return w->Add(rec);
}

// The manifest's optional "pack" field: how the records were prepared.
nlohmann::json PackField(const Options& o) {
  nlohmann::json j = nlohmann::json::object();
  if (o.restart_interval > 0) j["restart_interval"] = o.restart_interval;
  if (o.max_side > 0) {
    j["max_side"] = o.max_side;
    j["quality"] = o.quality;
  }
  return j;
}

// Refuses to resume over shards packed with other options than `want`, as
// recorded by the manifest's "pack" field or a killed run's options file.
// Neither present (a run of an older feedline): nothing to compare.
Status CheckResumedOptions(const fs::path& manifest, const fs::path& options,
                           const nlohmann::json& want) {
  nlohmann::json had;
  std::string from;
  if (auto m = ReadRegularFile(manifest.string()); m.ok()) {
    const nlohmann::json j = nlohmann::json::parse(m->begin(), m->end(), nullptr, false);
    had = j.is_object() && j.contains("pack") ? j["pack"] : nlohmann::json::object();
    from = manifest.string();
  } else if (auto f = ReadRegularFile(options.string()); f.ok()) {
    had = nlohmann::json::parse(f->begin(), f->end(), nullptr, false);
    from = options.string();
  } else {
    return Status::OK();
  }
  if (had != want) {
    return FailedPreconditionError("cannot --resume: the shards were packed with options " +
                                   had.dump() + " (" + from + "), this run asks for " +
                                   want.dump() + "; pass the same options, or --overwrite");
  }
  return Status::OK();
}

// `manifest` (DatasetManifest::ToJson) with the "pack" field added when set.
std::string WithPackField(const std::string& manifest, const nlohmann::json& pack) {
  if (pack.empty()) return manifest;
  nlohmann::json j = nlohmann::json::parse(manifest);
  j["pack"] = pack;
  return j.dump(1) + "\n";
}

Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".partial";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot create '" + tmp + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return (err == ENOSPC ? ResourceExhaustedError : UnavailableError)(
          "cannot write '" + tmp + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return UnavailableError("cannot sync '" + tmp + "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return UnavailableError("cannot rename '" + tmp + "'");
  return Status::OK();
}

bool IsOurs(const fs::path& p) {
  const std::string n = p.filename().string();
  return p.extension() == ".fls" || p.extension() == ".partial" || n.rfind("manifest", 0) == 0;
}

// Refuses a non-empty output unless told; removes leftovers of a killed run.
Status PrepareOutput(const fs::path& out, const Options& o) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return UnavailableError("cannot create '" + out.string() + "': " + ec.message());
  FEEDLINE_ASSIGN_OR_RETURN(std::vector<fs::path> listed, ListDirectory(out));
  size_t ours = 0, others = 0;
  for (const fs::path& p : listed) {
    if (p.extension() == ".partial") {
      fs::remove(p, ec);  // a killed run's leftover: never complete
      continue;
    }
    (IsOurs(p) ? ours : others) += 1;
  }
  if (others > 0) {
    return FailedPreconditionError("output '" + out.string() + "' holds " + std::to_string(others) +
                                   " files that are not feedline shards; choose an empty folder");
  }
  if (ours > 0 && !o.overwrite && !o.resume) {
    return FailedPreconditionError(
        "output '" + out.string() + "' is not empty (" + std::to_string(ours) +
        " shard/manifest files); pass --overwrite to replace them or --resume to continue");
  }
  if (o.overwrite) {
    for (const fs::path& p : listed) {
      if (p.extension() == ".partial") continue;
      if (!fs::remove(p, ec) && ec)
        return UnavailableError("cannot remove '" + p.string() + "': " + ec.message());
    }
  }
  return Status::OK();
}

// OUT in a bucket (s3://...): refuses a prefix holding anything but a
// feedline dataset, or one unless --overwrite; returns what is there.
Result<std::vector<ObjectInfo>> PrepareRemoteOutput(const std::string& url, const Options& o) {
  const std::string prefix = url.back() == '/' ? url : url + "/";
  FEEDLINE_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListObjects(prefix));
  size_t ours = 0, others = 0;
  for (const ObjectInfo& obj : listed) (IsOurs(fs::path(obj.key)) ? ours : others) += 1;
  if (others > 0) {
    return FailedPreconditionError("output '" + url + "' holds " + std::to_string(others) +
                                   " objects that are not feedline shards; choose an empty prefix");
  }
  if (ours > 0 && !o.overwrite) {
    return FailedPreconditionError("output '" + url + "' is not empty (" + std::to_string(ours) +
                                   " shard/manifest objects); pass --overwrite to replace them");
  }
  return listed;
}

int Merge(const fs::path& out) {
  std::regex part_re(R"(manifest\.part-(\d+)-of-(\d+)\.json)");
  std::vector<std::pair<int, fs::path>> parts;
  int total = -1;
  auto listed = ListDirectory(out);
  if (!listed.ok()) return Fail(listed.status());
  for (const fs::path& path : *listed) {
    std::smatch m;
    const std::string name = path.filename().string();
    // At most 9 digits: --part writes what fits an int, and stoi must not throw.
    if (!std::regex_match(name, m, part_re) || m[1].length() > 9 || m[2].length() > 9) continue;
    const int n = std::stoi(m[2]);
    if (total >= 0 && n != total)
      return Fail(InvalidArgumentError("part manifests disagree on the number of parts"));
    total = n;
    parts.emplace_back(std::stoi(m[1]), path);
  }
  if (total < 0) return Fail(NotFoundError("no part manifests in '" + out.string() + "'"));
  std::sort(parts.begin(), parts.end());
  if (static_cast<int>(parts.size()) != total) {
    return Fail(FailedPreconditionError(std::to_string(parts.size()) + " of " +
                                        std::to_string(total) +
                                        " parts are packed; run the missing parts first"));
  }
  DatasetManifest merged;
  nlohmann::json pack;
  for (const auto& [i, path] : parts) {
    auto bytes = ReadRegularFile(path.string());
    if (!bytes.ok()) return Fail(bytes.status());
    const std::string text(bytes->begin(), bytes->end());
    const nlohmann::json raw = nlohmann::json::parse(text, nullptr, false);
    const nlohmann::json part_pack =
        raw.is_object() && raw.contains("pack") ? raw["pack"] : nlohmann::json::object();
    if (i > 0 && part_pack != pack) {
      return Fail(InvalidArgumentError("part " + std::to_string(i) +
                                       " was packed with other options (" + part_pack.dump() +
                                       ") than part 0 (" + pack.dump() + ")"));
    }
    pack = part_pack;
    auto m = DatasetManifest::Parse(text);
    if (!m.ok()) return Fail(m.status().WithContext(path.string()));
    if (i > 0 && m->classes != merged.classes) {
      return Fail(
          InvalidArgumentError("part " + std::to_string(i) + " lists other classes than part 0"));
    }
    merged.classes = m->classes;
    merged.records += m->records;
    merged.shards.insert(merged.shards.end(), m->shards.begin(), m->shards.end());
  }
  Status st = WriteFileAtomically(out / kManifestName, WithPackField(merged.ToJson(), pack));
  if (!st.ok()) return Fail(st);
  std::printf("merged %d parts: %llu records in %zu shards\n", total,
              static_cast<unsigned long long>(merged.records), merged.shards.size());
  return 0;
}

}  // namespace

const Usage& PackUsage() {
  static const Usage u = {
      "pack",
      {"SRC OUT [options]", "--merge OUT"},
      "pack an image folder or list into shards",
      "Records keep the source order (sorted for folders) and shards are cut at fixed points of "
      "the\n"
      "input size, so the output is the same for the same input whatever the thread count. Shards "
      "and\n"
      "the manifest are written to .partial names, fsynced and renamed: a crash never leaves a\n"
      "dataset that looks complete.",
      {{"SRC",
        "an ImageFolder tree (class sub-folders give labels), a list file: .csv\n"
        "(path,label[,key]) or .jsonl ({\"path\", \"label\", \"key\"} per line), or WebDataset\n"
        "tars (a .tar or a folder of them: every member of a key a named field, shard format 2)"},
       {"OUT",
        "the output folder (created; must be empty unless --overwrite or --resume), or an\n"
        "s3://bucket/prefix: each shard is uploaded as soon as it is written (multipart above\n"
        "8 MiB) and deleted locally, the manifest last; AWS_* configuration as the AWS CLI's"}},
      {{"shard-bytes", "N", std::to_string(Options{}.shard_bytes),
        "cut a shard after N bytes of input data"},
       {"threads", "N", "0 = one per core", "shards written in parallel"},
       {"part", "I/N", "0/1, everything",
        "pack only the I-th of N slices, with its own part manifest"},
       {"overwrite", "", "", "replace the shards and manifest already in OUT"},
       {"staging", "DIR", "$TMPDIR/feedline-pack-PID",
        "for an s3:// OUT: where shards are written before their upload (one per thread at most)"},
       {"resume", "", "", "keep the finished shards of a killed run that match the plan"},
       {"merge", "", "", "join the part manifests in OUT into one manifest"},
       {"skip-hidden-dirs", "", "",
        "skip directories whose names start with '.' (.ipynb_checkpoints)"},
       {"restart-interval", "N", "0, off",
        "rewrite JPEGs losslessly with a restart marker every N MCUs (snapped per image to tile "
        "the\n"
        "MCU rows), so crops decode only the intervals they cover"},
       {"max-side", "N", "0, off",
        "resize images whose longer side is over N to N (bicubic, antialiased)"},
       {"quality", "Q", "90", "JPEG quality of the images --max-side resizes"},
       {"file-columns", "C1,C2", "none",
        "pack a .csv/.jsonl list as records with named fields (shard format 2): every column\n"
        "a field, these columns' values file paths whose bytes are the field"}},
  };
  return u;
}

int RunPack(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, PackUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->Has("merge")) {
    if (f->positional().size() != 1)
      return UsageError(PackUsage(), "--merge takes one folder, OUT");
    return Merge(f->positional()[0]);
  }
  if (f->positional().size() != 2) return UsageError(PackUsage(), "expected SRC and OUT");
  Options o;
  auto sb = f->GetUint("shard-bytes", o.shard_bytes), th = f->GetUint("threads", 0);
  if (!sb.ok()) return Fail(sb.status());
  if (!th.ok()) return Fail(th.status());
  o.shard_bytes = std::max<uint64_t>(1, *sb);
  o.threads =
      static_cast<uint32_t>(*th == 0 ? std::max(1u, std::thread::hardware_concurrency()) : *th);
  auto ri = f->GetUint("restart-interval", 0), ms = f->GetUint("max-side", 0),
       q = f->GetUint("quality", 90);
  if (!ri.ok()) return Fail(ri.status());
  if (!ms.ok()) return Fail(ms.status());
  if (!q.ok()) return Fail(q.status());
  if (*ri > 65535) return Fail(InvalidArgumentError("--restart-interval is at most 65535 MCUs"));
  if (*q < 1 || *q > 100) return Fail(InvalidArgumentError("--quality wants 1..100"));
  if (f->Has("quality") && *ms == 0)
    return UsageError(PackUsage(), "--quality applies to --max-side only");
  o.restart_interval = static_cast<uint32_t>(*ri);
  o.max_side = static_cast<uint32_t>(std::min<uint64_t>(*ms, 65535));
  o.quality = static_cast<uint32_t>(*q);
  if (f->Has("file-columns")) {
    const std::string cols = f->Get("file-columns");
    size_t start = 0;
    for (size_t i = 0; i <= cols.size(); ++i) {
      if (i == cols.size() || cols[i] == ',') {
        if (i > start) o.file_columns.push_back(cols.substr(start, i - start));
        start = i + 1;
      }
    }
    if (o.file_columns.empty()) return UsageError(PackUsage(), "--file-columns wants C1[,C2...]");
  }
  o.overwrite = f->Has("overwrite");
  o.resume = f->Has("resume");
  if (o.overwrite && o.resume)
    return UsageError(PackUsage(), "--overwrite and --resume exclude each other");
  if (f->Has("part") && std::sscanf(f->Get("part").c_str(), "%u/%u", &o.part, &o.parts) != 2) {
    return Fail(InvalidArgumentError("--part wants i/n"));
  }
  if (o.parts == 0 || o.part >= o.parts)
    return Fail(InvalidArgumentError("--part i/n needs 0 <= i < n"));
  const fs::path src = f->positional()[0];
  // An s3:// OUT is packed into a local staging folder, shard by shard.
  const std::string out_url = IsS3Url(f->positional()[1]) ? f->positional()[1] : "";
  const bool remote_out = !out_url.empty();
  if (remote_out && o.resume)
    return UsageError(PackUsage(),
                      "--resume needs a local OUT (an s3:// OUT is uploaded as it goes)");
  if (!remote_out && f->Has("staging"))
    return UsageError(PackUsage(), "--staging applies to an s3:// OUT");
  const fs::path out =
      remote_out
          ? (f->Has("staging")
                 ? fs::path(f->Get("staging"))
                 : fs::temp_directory_path() / ("feedline-pack-" + std::to_string(::getpid())))
          : fs::path(f->positional()[1]);
  std::vector<ObjectInfo> existing_objects;
  if (remote_out) {
    auto listed = PrepareRemoteOutput(out_url, o);
    if (!listed.ok()) return Fail(listed.status());
    existing_objects = std::move(listed).value();
  }
  // What the staging folder gets goes when the command ends, whichever way:
  // all of it when this run made it, else only the shard files it wrote.
  struct StagingCleanup {
    fs::path dir;
    bool made = false;
    ~StagingCleanup() {
      std::error_code ignored;
      if (dir.empty()) return;
      if (made) {
        fs::remove_all(dir, ignored);
        return;
      }
      for (fs::directory_iterator it(dir, ignored), end; !ignored && it != end;
           it.increment(ignored)) {
        if (IsOurs(it->path())) fs::remove(it->path(), ignored);
      }
    }
  } cleanup;
  if (remote_out) {
    std::error_code exists_ec;
    cleanup.made = !fs::exists(out, exists_ec);
    cleanup.dir = out;
  }
  Status st;

  // The entries, in a deterministic order.
  std::vector<Entry> entries;
  std::vector<std::string> classes;
  std::error_code ec;
  const fs::file_status src_status = fs::status(src, ec);
  if (ec || !(fs::is_directory(src_status) || fs::is_regular_file(src_status))) {
    // Names what SRC is instead: missing, a symlink loop, a fifo...
    return Fail(RequireRegularFile(src).WithContext("SRC (a folder or a list file)"));
  }
  FieldSource fields_source;
  const bool tars = DetectSourceKind(src.string()) == Source::Kind::kTar;
  const bool v2 = tars || !o.file_columns.empty();
  if (tars) {
    TarOptions tar_options;
    tar_options.require_image = false;  // every member is a field
    auto ds = TarDataset::OpenPath(src.string(), tar_options);
    if (!ds.ok()) return Fail(ds.status());
    fields_source.tars = *ds;
    for (uint64_t i = 0; i < (*ds)->num_samples(); ++i) {
      const TarSample& t = (*ds)->sample(i);
      Entry e;
      e.path = (*ds)->paths()[t.tar];
      e.key = t.key;
      e.kind = Entry::Kind::kTarSample;
      e.index = i;
      for (const TarMember& m : t.members) e.bytes += m.size;
      entries.push_back(std::move(e));
    }
  } else if (v2) {
    if (!fs::is_regular_file(src_status)) {
      return UsageError(PackUsage(), "--file-columns applies to a .csv or .jsonl list");
    }
    ListOptions lo;
    lo.file_columns = o.file_columns;
    auto ds = ListDataset::Open(src.string(), lo);
    if (!ds.ok()) return Fail(ds.status());
    for (const std::string& c : o.file_columns) {
      if (std::find((*ds)->columns().begin(), (*ds)->columns().end(), c) ==
          (*ds)->columns().end()) {
        return Fail(InvalidArgumentError("--file-columns: the list has no column '" + c + "'"));
      }
    }
    fields_source.list = *ds;
    for (uint64_t r = 0; r < (*ds)->num_rows(); ++r) {
      Entry e;
      e.path = src.string();
      e.key = (*ds)->Key(r);
      e.kind = Entry::Kind::kListRow;
      e.index = r;
      for (size_t c = 0; c < (*ds)->columns().size(); ++c) {
        if (!(*ds)->Has(r, c)) continue;
        const bool file = std::find(o.file_columns.begin(), o.file_columns.end(),
                                    (*ds)->columns()[c]) != o.file_columns.end();
        if (!file) {
          e.bytes += (*ds)->Value(r, c).size();
          continue;
        }
        const std::string path = (*ds)->FilePath(r, c);
        st = RequireRegularFile(path);
        if (!st.ok()) {
          return Fail(st.WithContext(src.string() + " line " + std::to_string((*ds)->line(r)) +
                                     ", column '" + (*ds)->columns()[c] + "'"));
        }
        e.bytes += fs::file_size(path, ec);
      }
      entries.push_back(std::move(e));
    }
  } else if (fs::is_directory(src_status)) {
    ImageFolderOptions folder_options;
    folder_options.skip_hidden_dirs = f->Has("skip-hidden-dirs");
    auto folder = ImageFolder::Open(src.string(), folder_options);
    if (!folder.ok()) return Fail(folder.status());
    classes = (*folder)->classes;
    for (size_t i = 0; i < (*folder)->files.size(); ++i) {
      entries.push_back(
          {(src / (*folder)->files[i]).string(), (*folder)->labels[i], (*folder)->files[i], 0});
    }
  } else {
    auto list = ReadList(src);
    if (!list.ok()) return Fail(list.status());
    entries = std::move(list).value();
  }
  const size_t n = entries.size();
  const size_t begin = n * o.part / o.parts, end = n * (o.part + 1) / o.parts;
  for (size_t i = begin; i < end && !v2; ++i) {
    // A list may name a fifo or a folder: refuse it here, before any open.
    st = RequireRegularFile(entries[i].path);
    if (!st.ok()) return Fail(st);
    entries[i].bytes = fs::file_size(entries[i].path, ec);
    if (ec) return Fail(NotFoundError("cannot stat '" + entries[i].path + "': " + ec.message()));
  }
  // Cut shards at fixed points of the input size.
  std::vector<Plan> plan;
  const std::string prefix =
      o.parts > 1 ? "part-" + std::to_string(o.part) + "-of-" + std::to_string(o.parts) + "-" : "";
  for (size_t i = begin; i < end;) {
    Plan p;
    p.begin = i;
    uint64_t bytes = 0;
    while (i < end && (bytes == 0 || bytes + entries[i].bytes <= o.shard_bytes))
      bytes += entries[i++].bytes;
    p.end = i;
    char name[64];
    std::snprintf(name, sizeof(name), "shard-%05zu.fls", plan.size());
    p.name = prefix + name;
    plan.push_back(p);
  }
  st = PrepareOutput(out, o);
  if (!st.ok()) return Fail(st);
  const std::string manifest_name = o.parts > 1 ? "manifest.part-" + std::to_string(o.part) +
                                                      "-of-" + std::to_string(o.parts) + ".json"
                                                : kManifestName;
  // --resume keeps shards that match the plan; they must also have been
  // packed with the same options. A finished run says so in its manifest,
  // a killed one in the options file written before any shard.
  const fs::path options_path = out / (manifest_name + ".options");
  if (o.resume) {
    st = CheckResumedOptions(out / manifest_name, options_path, PackField(o));
    if (!st.ok()) return Fail(st);
  }
  st = WriteFileAtomically(options_path, PackField(o).dump() + "\n");
  if (!st.ok()) return Fail(st);

  std::vector<ShardInfo> infos(plan.size());
  PackCounts counts;
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done_records{0}, done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    std::vector<uint8_t> data;
    std::vector<std::vector<uint8_t>> prepared;
    for (size_t s = next++; s < plan.size() && !failed; s = next++) {
      const Plan& p = plan[s];
      const std::string path = (out / p.name).string();
      Status status;
      if (o.resume) {  // keep a finished shard that matches the plan
        auto existing = ShardReader::Open(path);
        if (existing.ok() && (*existing)->num_records() == p.end - p.begin) {
          auto crc = (*existing)->FileCrc32c();
          if (crc.ok()) {
            infos[s] = {p.name, p.end - p.begin, (*existing)->file_size(), *crc};
            done_records += p.end - p.begin;
            continue;
          }
        }
      }
      auto w = ShardWriter::Create(path, v2 ? shard::kShardVersion2 : shard::kShardVersion1);
      status = w.status();
      for (size_t i = p.begin; status.ok() && i < p.end; ++i) {
        const Entry& e = entries[i];
        if (e.kind != Entry::Kind::kFile) {
          status = AddFieldsRecord(e, fields_source, o, &counts, prepared, w->get());
          done_records += 1;
          done_bytes += e.bytes;
          continue;
        }
        std::ifstream in(e.path, std::ios::binary);
        data.resize(e.bytes);
        if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(e.bytes))) {
          status = UnavailableError("cannot read '" + e.path + "'");
          break;
        }
        PrepareRecord(e.path, o, &data, &counts);
        status = (*w)->Add({e.label, e.key, "", data});
        done_records += 1;
        done_bytes += e.bytes;
      }
      if (status.ok()) status = (*w)->Finish();
      if (status.ok()) infos[s] = {p.name, p.end - p.begin, (*w)->bytes(), (*w)->file_crc32c()};
      if (status.ok() && remote_out) {
        // Uploaded whole (or not at all) and dropped, so staging holds at
        // most one shard per thread.
        status = UploadFile(path, JoinName(out_url, p.name));
        std::error_code rm_ec;
        fs::remove(path, rm_ec);
      }
      if (!status.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first_error.ok()) first_error = status;
        failed = true;
      }
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < std::min<size_t>(o.threads, std::max<size_t>(1, plan.size())); ++t)
    pool.emplace_back(work);
  const bool tty = ::isatty(2);
  while (tty && done_records < end - begin && !failed) {
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "\rpacked %llu/%zu records, %.1f MB (%.1f MB/s)   ",
                 static_cast<unsigned long long>(done_records.load()), end - begin,
                 done_bytes / 1e6, s > 0 ? done_bytes / 1e6 / s : 0.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : pool) t.join();
  if (tty) std::fprintf(stderr, "\n");
  if (failed) return Fail(first_error);

  DatasetManifest m;
  m.classes = classes;
  m.shards = infos;
  m.records = end - begin;
  st = WriteFileAtomically(out / manifest_name, WithPackField(m.ToJson(), PackField(o)));
  if (!st.ok()) return Fail(st);
  fs::remove(options_path, ec);  // the manifest says it now
  if (remote_out) {
    // The manifest last: a reader that finds it finds every shard it names.
    st = UploadFile((out / manifest_name).string(), JoinName(out_url, manifest_name));
    if (!st.ok()) return Fail(st.WithContext("uploading the manifest"));
    // --overwrite: shards of the old dataset that the new manifest does not
    // name are deleted (a single dataset only: parts share the prefix).
    for (const ObjectInfo& obj : existing_objects) {
      const std::string name = fs::path(obj.key).filename().string();
      const bool named = std::any_of(infos.begin(), infos.end(),
                                     [&](const ShardInfo& i) { return i.name == name; });
      if (o.parts == 1 && fs::path(name).extension() == ".fls" && !named) {
        st = DeleteObject(JoinName(out_url, name));
        if (!st.ok()) return Fail(st.WithContext("deleting a shard of the replaced dataset"));
      }
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t bytes = 0;
  for (const ShardInfo& i : infos) bytes += i.bytes;
  std::printf("packed %zu records into %zu shards (%.1f MB) in %.2f s (%.1f MB/s of input) -> %s\n",
              end - begin, infos.size(), bytes / 1e6, s, done_bytes / 1e6 / std::max(s, 1e-9),
              remote_out ? JoinName(out_url, manifest_name).c_str()
                         : (out / manifest_name).string().c_str());
  if (o.max_side > 0 || o.restart_interval > 0) {
    std::printf(
        "resized %llu, transcoded with restart markers %llu (%llu not JPEG), stored as they were "
        "%llu\n",
        static_cast<unsigned long long>(counts.resized.load()),
        static_cast<unsigned long long>(counts.transcoded.load()),
        static_cast<unsigned long long>(counts.not_jpeg.load()),
        static_cast<unsigned long long>(counts.kept.load()));
    for (const std::string& k : counts.kept_examples)
      std::printf("  stored as it was: %s\n", k.c_str());
  }
  return 0;
}

}  // namespace feedline::cli
