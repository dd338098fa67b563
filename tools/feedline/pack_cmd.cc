// `feedline pack SRC OUT [--shard-bytes N] [--threads T] [--overwrite | --resume] [--part i/n]
//                        [--skip-hidden-dirs]`
// `feedline pack --merge OUT`
//
// SRC is an ImageFolder tree (class sub-folders give labels, listed exactly as
// torchvision's ImageFolder lists them; --skip-hidden-dirs leaves out
// directories named .*) or a list file:
// .csv (path,label[,key]; a header line starting with "path" is skipped) or
// .jsonl ({"path": ..., "label": ..., "key": ...} per line); relative paths
// are relative to the list's folder. Output is deterministic for the same
// input: records keep the source order (sorted for folders) and shards are
// cut at fixed points (--shard-bytes of input data). Shards are written in
// parallel to .partial names, fsynced and renamed; the manifest is written
// last, the same way, so a crash never leaves a dataset that looks
// complete. --part i/n packs the i-th of n slices on its own (for a cluster
// scheduler) with its own part manifest; --merge joins the parts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "feedline/dataset.h"
#include "feedline/image_folder.h"
#include "feedline/shard.h"
#include "tools/feedline/commands.h"
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
};

Result<std::vector<Entry>> ReadList(const fs::path& list) {
  std::ifstream in(list);
  if (!in) return NotFoundError("cannot open list '" + list.string() + "'");
  const fs::path base = list.parent_path();
  const bool jsonl = list.extension() == ".jsonl";
  std::vector<Entry> out;
  std::string line;
  for (uint64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || (!jsonl && n == 1 && line.rfind("path", 0) == 0)) continue;
    Entry e;
    const std::string where = list.string() + " line " + std::to_string(n);
    if (jsonl) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string()) {
        return InvalidArgumentError(where + ": expected a JSON object with a \"path\" string");
      }
      e.path = j["path"].get<std::string>();
      if (j.contains("label")) {
        if (!j["label"].is_number_integer()) return InvalidArgumentError(where + ": \"label\" is not an integer");
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
      e.label = std::strtoll(cols[1].c_str(), &end, 10);
      if (cols[1].empty() || *end != '\0') return InvalidArgumentError(where + ": label '" + cols[1] + "' is not an integer");
      if (cols.size() > 2) e.key = cols[2];
    }
    if (e.key.empty()) e.key = e.path;
    if (fs::path(e.path).is_relative()) e.path = (base / e.path).string();
    out.push_back(std::move(e));
  }
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
};

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
      return (err == ENOSPC ? ResourceExhaustedError : UnavailableError)("cannot write '" + tmp + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return UnavailableError("cannot sync '" + tmp + "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return UnavailableError("cannot rename '" + tmp + "'");
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
  size_t ours = 0, others = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() == ".partial") {
      fs::remove(e.path(), ec);  // a killed run's leftover: never complete
      continue;
    }
    (IsOurs(e.path()) ? ours : others) += 1;
  }
  if (others > 0) {
    return FailedPreconditionError("output '" + out.string() + "' holds " + std::to_string(others) +
                                   " files that are not feedline shards; choose an empty folder");
  }
  if (ours > 0 && !o.overwrite && !o.resume) {
    return FailedPreconditionError("output '" + out.string() + "' is not empty (" + std::to_string(ours) +
                                   " shard/manifest files); pass --overwrite to replace them or --resume to continue");
  }
  if (o.overwrite) {
    for (const auto& e : fs::directory_iterator(out)) fs::remove(e.path(), ec);
  }
  return Status::OK();
}

int Merge(const fs::path& out) {
  std::regex part_re(R"(manifest\.part-(\d+)-of-(\d+)\.json)");
  std::vector<std::pair<int, fs::path>> parts;
  int total = -1;
  for (const auto& e : fs::directory_iterator(out)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, part_re)) continue;
    const int n = std::stoi(m[2]);
    if (total >= 0 && n != total) return Fail(InvalidArgumentError("part manifests disagree on the number of parts"));
    total = n;
    parts.emplace_back(std::stoi(m[1]), e.path());
  }
  if (total < 0) return Fail(NotFoundError("no part manifests in '" + out.string() + "'"));
  std::sort(parts.begin(), parts.end());
  if (static_cast<int>(parts.size()) != total) {
    return Fail(FailedPreconditionError(std::to_string(parts.size()) + " of " + std::to_string(total) +
                                        " parts are packed; run the missing parts first"));
  }
  DatasetManifest merged;
  for (const auto& [i, path] : parts) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    auto m = DatasetManifest::Parse(text);
    if (!m.ok()) return Fail(m.status().WithContext(path.string()));
    if (i > 0 && m->classes != merged.classes) {
      return Fail(InvalidArgumentError("part " + std::to_string(i) + " lists other classes than part 0"));
    }
    merged.classes = m->classes;
    merged.records += m->records;
    merged.shards.insert(merged.shards.end(), m->shards.begin(), m->shards.end());
  }
  Status st = WriteFileAtomically(out / kManifestName, merged.ToJson());
  if (!st.ok()) return Fail(st);
  std::printf("merged %d parts: %llu records in %zu shards\n", total,
              static_cast<unsigned long long>(merged.records), merged.shards.size());
  return 0;
}

}  // namespace

int RunPack(const std::vector<std::string>& args) {
  auto f = Flags::Parse(args, {"shard-bytes", "threads", "part"}, {"overwrite", "resume", "merge", "skip-hidden-dirs"});
  if (!f.ok()) return Fail(f.status());
  if (f->Has("merge")) {
    if (f->positional().size() != 1) return Fail(InvalidArgumentError("usage: feedline pack --merge OUT"));
    return Merge(f->positional()[0]);
  }
  if (f->positional().size() != 2) return Fail(InvalidArgumentError("usage: feedline pack SRC OUT [options]"));
  Options o;
  auto sb = f->GetUint("shard-bytes", o.shard_bytes), th = f->GetUint("threads", 0);
  if (!sb.ok()) return Fail(sb.status());
  if (!th.ok()) return Fail(th.status());
  o.shard_bytes = std::max<uint64_t>(1, *sb);
  o.threads = static_cast<uint32_t>(*th == 0 ? std::max(1u, std::thread::hardware_concurrency()) : *th);
  o.overwrite = f->Has("overwrite");
  o.resume = f->Has("resume");
  if (o.overwrite && o.resume) return Fail(InvalidArgumentError("--overwrite and --resume exclude each other"));
  if (f->Has("part") && std::sscanf(f->Get("part").c_str(), "%u/%u", &o.part, &o.parts) != 2) {
    return Fail(InvalidArgumentError("--part wants i/n"));
  }
  if (o.parts == 0 || o.part >= o.parts) return Fail(InvalidArgumentError("--part i/n needs 0 <= i < n"));
  const fs::path src = f->positional()[0], out = f->positional()[1];

  // The entries, in a deterministic order.
  std::vector<Entry> entries;
  std::vector<std::string> classes;
  if (fs::is_directory(src)) {
    ImageFolderOptions folder_options;
    folder_options.skip_hidden_dirs = f->Has("skip-hidden-dirs");
    auto folder = ImageFolder::Open(src.string(), folder_options);
    if (!folder.ok()) return Fail(folder.status());
    classes = (*folder)->classes;
    for (size_t i = 0; i < (*folder)->files.size(); ++i) {
      entries.push_back({(src / (*folder)->files[i]).string(), (*folder)->labels[i], (*folder)->files[i], 0});
    }
  } else {
    auto list = ReadList(src);
    if (!list.ok()) return Fail(list.status());
    entries = std::move(list).value();
  }
  const size_t n = entries.size();
  const size_t begin = n * o.part / o.parts, end = n * (o.part + 1) / o.parts;
  std::error_code ec;
  for (size_t i = begin; i < end; ++i) {
    entries[i].bytes = fs::file_size(entries[i].path, ec);
    if (ec) return Fail(NotFoundError("cannot stat '" + entries[i].path + "': " + ec.message()));
  }
  // Cut shards at fixed points of the input size.
  std::vector<Plan> plan;
  const std::string prefix = o.parts > 1 ? "part-" + std::to_string(o.part) + "-of-" + std::to_string(o.parts) + "-" : "";
  for (size_t i = begin; i < end;) {
    Plan p;
    p.begin = i;
    uint64_t bytes = 0;
    while (i < end && (bytes == 0 || bytes + entries[i].bytes <= o.shard_bytes)) bytes += entries[i++].bytes;
    p.end = i;
    char name[64];
    std::snprintf(name, sizeof(name), "shard-%05zu.fls", plan.size());
    p.name = prefix + name;
    plan.push_back(p);
  }
  Status st = PrepareOutput(out, o);
  if (!st.ok()) return Fail(st);

  std::vector<ShardInfo> infos(plan.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done_records{0}, done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    std::vector<uint8_t> data;
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
      auto w = ShardWriter::Create(path);
      status = w.status();
      for (size_t i = p.begin; status.ok() && i < p.end; ++i) {
        const Entry& e = entries[i];
        std::ifstream in(e.path, std::ios::binary);
        data.resize(e.bytes);
        if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(e.bytes))) {
          status = UnavailableError("cannot read '" + e.path + "'");
          break;
        }
        status = (*w)->Add({e.label, e.key, "", data});
        done_records += 1;
        done_bytes += e.bytes;
      }
      if (status.ok()) status = (*w)->Finish();
      if (status.ok()) infos[s] = {p.name, p.end - p.begin, (*w)->bytes(), (*w)->file_crc32c()};
      if (!status.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first_error.ok()) first_error = status;
        failed = true;
      }
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < std::min<size_t>(o.threads, std::max<size_t>(1, plan.size())); ++t) pool.emplace_back(work);
  const bool tty = ::isatty(2);
  while (tty && done_records < end - begin && !failed) {
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "\rpacked %llu/%zu records, %.1f MB (%.1f MB/s)   ",
                 static_cast<unsigned long long>(done_records.load()), end - begin, done_bytes / 1e6,
                 s > 0 ? done_bytes / 1e6 / s : 0.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : pool) t.join();
  if (tty) std::fprintf(stderr, "\n");
  if (failed) return Fail(first_error);

  DatasetManifest m;
  m.classes = classes;
  m.shards = infos;
  m.records = end - begin;
  const std::string manifest_name =
      o.parts > 1 ? "manifest.part-" + std::to_string(o.part) + "-of-" + std::to_string(o.parts) + ".json" : kManifestName;
  st = WriteFileAtomically(out / manifest_name, m.ToJson());
  if (!st.ok()) return Fail(st);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t bytes = 0;
  for (const ShardInfo& i : infos) bytes += i.bytes;
  std::printf("packed %zu records into %zu shards (%.1f MB) in %.2f s (%.1f MB/s of input) -> %s\n", end - begin,
              infos.size(), bytes / 1e6, s, done_bytes / 1e6 / std::max(s, 1e-9),
              (out / manifest_name).string().c_str());
  return 0;
}

}  // namespace feedline::cli
