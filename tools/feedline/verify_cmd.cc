// `feedline verify DIR|URL`: every checksum of a packed dataset (header, footer,
// index and every record of every shard, and each shard's whole-file CRC
// against the manifest); lists exactly the bad records with shard, record
// number and offset; exit code 1 if anything is wrong. A folder of token
// shards (its manifest's format is "feedline-tokens") gets every block
// checked (VerifyTokenShards).
// `feedline inspect DIR`: records, bytes, classes, image formats and sizes.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "feedline/dataset.h"
#include "feedline/file.h"
#include "feedline/image.h"
#include "feedline/shard.h"
#include "feedline/tokens.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/flags.h"

namespace feedline::cli {
namespace {

// A local directory or an http(s):// URL, through the same file seam the
// loader reads with.
Result<DatasetManifest> LoadManifest(const std::string& dir) {
  const std::string path = JoinName(dir, kManifestName);
  Result<std::unique_ptr<RandomAccessFile>> file = OpenFile(path);
  if (!file.ok()) return file.status().WithContext("dataset manifest");
  if ((*file)->size() > (64u << 20)) return DataLossError("manifest '" + path + "' is over 64 MiB");
  std::string text((*file)->size(), '\0');
  FEEDLINE_RETURN_IF_ERROR((*file)->Read(0, text.size(), text.data()));
  Result<DatasetManifest> m = DatasetManifest::Parse(text);
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

// True when DIR/manifest.json (local or a URL) is token shards' manifest.
bool IsTokenShards(const std::string& dir) {
  auto file = OpenFile(JoinName(dir, kManifestName));
  if (!file.ok() || (*file)->size() > (64u << 20)) return false;
  std::string text((*file)->size(), '\0');
  if (!(*file)->Read(0, text.size(), text.data()).ok()) return false;
  return IsTokenShardsManifest(text);
}

// Token shards (docs/token_shards.md): the open-time checks, then every
// checksum block and every id against the vocabulary.
int VerifyTokens(const std::string& dir) {
  if (IsUrl(dir)) {
    std::printf("FAILED: %s holds token shards, which verify reads from a local directory only\n",
                dir.c_str());
    return 1;
  }
  auto check = VerifyTokenShards(dir);
  if (!check.ok()) {
    std::printf("BAD %s\nFAILED: the token shards could not be opened\n",
                check.status().ToString().c_str());
    return 1;
  }
  for (const std::string& p : check->problems) std::printf("BAD %s\n", p.c_str());
  std::printf("%s: %llu tokens in %llu blocks of %llu shards checked, %zu problems\n",
              check->problems.empty() ? "OK" : "FAILED",
              static_cast<unsigned long long>(check->tokens),
              static_cast<unsigned long long>(check->blocks),
              static_cast<unsigned long long>(check->shards), check->problems.size());
  return check->problems.empty() ? 0 : 1;
}

}  // namespace

const Usage& VerifyUsage() {
  static const Usage u = {
      "verify",
      {"DIR|URL"},
      "check every checksum of a packed dataset or of token shards",
      "Checks the header, footer, index and every record of every shard, and each shard's "
      "whole-file\n"
      "CRC against the manifest; prints each bad record with shard, record number and offset. "
      "Exit\n"
      "code 1 if anything is wrong. Token shards (feedline pack-text): the manifest, each "
      "header and\n"
      "index, then every checksum block and every id against the vocabulary; prints each bad "
      "block.",
      {{"DIR|URL", "a folder written by feedline pack or pack-text, or its http(s):// URL"}},
      {},
  };
  return u;
}

const Usage& InspectUsage() {
  static const Usage u = {
      "inspect",
      {"DIR|URL"},
      "summarise a packed dataset",
      "Prints records, bytes, classes, records per label, image formats and size percentiles.",
      {{"DIR|URL", "a folder written by feedline pack, or its http(s):// URL"}},
      {},
  };
  return u;
}

int RunVerify(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, VerifyUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->positional().size() != 1) return UsageError(VerifyUsage(), "expected one DIR");
  const std::string dir = f->positional()[0];
  if (IsTokenShards(dir)) return VerifyTokens(dir);
  auto m = LoadManifest(dir);
  if (!m.ok()) {
    std::fprintf(stderr, "feedline verify: %s\n", m.status().ToString().c_str());
    return 1;
  }
  uint64_t bad = 0, records = 0;
  std::vector<uint8_t> scratch;
  for (const ShardInfo& s : m->shards) {
    auto r = ShardReader::Open(JoinName(dir, s.name));
    if (!r.ok()) {
      std::printf("BAD shard %s: %s\n", s.name.c_str(), r.status().ToString().c_str());
      bad += s.records;
      continue;
    }
    if ((*r)->file_size() != s.bytes || (*r)->num_records() != s.records) {
      std::printf(
          "BAD shard %s: %llu bytes, %llu records on disk; manifest says %llu bytes, %llu "
          "records\n",
          s.name.c_str(), static_cast<unsigned long long>((*r)->file_size()),
          static_cast<unsigned long long>((*r)->num_records()),
          static_cast<unsigned long long>(s.bytes), static_cast<unsigned long long>(s.records));
      ++bad;
    }
    for (uint64_t i = 0; i < (*r)->num_records(); ++i) {
      ShardRecord rec;
      Status st = (*r)->Read(i, &scratch, &rec);
      ++records;
      if (!st.ok()) {
        std::printf("BAD shard %s record %llu offset %llu: %s\n", s.name.c_str(),
                    static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>((*r)->record_offset(i)), st.ToString().c_str());
        ++bad;
      }
    }
    auto crc = (*r)->FileCrc32c();
    if (!crc.ok() || *crc != s.crc32c) {
      std::printf("BAD shard %s: whole-file crc32c %08x, manifest says %08x\n", s.name.c_str(),
                  crc.ok() ? *crc : 0u, s.crc32c);
      ++bad;
    }
  }
  std::printf("%s: %llu records in %zu shards checked, %llu problems\n", bad ? "FAILED" : "OK",
              static_cast<unsigned long long>(records), m->shards.size(),
              static_cast<unsigned long long>(bad));
  return bad ? 1 : 0;
}

int RunInspect(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, InspectUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->positional().size() != 1) return UsageError(InspectUsage(), "expected one DIR");
  auto ds = ShardDataset::Open(f->positional()[0]);
  if (!ds.ok()) {
    std::fprintf(stderr, "feedline inspect: %s\n", ds.status().ToString().c_str());
    return 1;
  }
  const DatasetManifest& m = (*ds)->manifest();
  uint64_t bytes = 0, data_bytes = 0;
  for (const ShardInfo& s : m.shards) bytes += s.bytes;
  std::map<std::string, uint64_t> formats;
  std::map<int64_t, uint64_t> per_label;
  std::vector<uint32_t> widths, heights;
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < (*ds)->num_records(); ++i) {
    ShardRecord rec;
    Status st = (*ds)->Read(i, &scratch, &rec);
    if (!st.ok()) {
      std::fprintf(stderr, "feedline inspect: %s (run feedline verify)\n", st.ToString().c_str());
      return 1;
    }
    data_bytes += rec.data.size();
    ++per_label[rec.label];
    auto info = ReadImageInfo(rec.data);
    if (info.ok()) {
      ++formats[std::string(ImageFormatName(info->format)) + (info->channels == 1 ? " gray" : "")];
      widths.push_back(info->width);
      heights.push_back(info->height);
    } else {
      ++formats["unreadable: " + std::string(StatusCodeName(info.status().code()))];
    }
  }
  std::printf(
      "dataset %s\n  records %llu in %zu shards, %.1f MB (%.1f MB of data, %.0f bytes per "
      "record)\n",
      (*ds)->dir().c_str(), static_cast<unsigned long long>(m.records), m.shards.size(),
      bytes / 1e6, data_bytes / 1e6, m.records ? double(data_bytes) / m.records : 0.0);
  std::printf(
      "  classes %zu, labels seen %zu (records per label: min %llu, max %llu)\n", m.classes.size(),
      per_label.size(),
      static_cast<unsigned long long>(
          per_label.empty() ? 0
                            : std::min_element(per_label.begin(), per_label.end(),
                                               [](auto& a, auto& b) { return a.second < b.second; })
                                  ->second),
      static_cast<unsigned long long>(
          per_label.empty()
              ? 0
              : std::max_element(per_label.begin(), per_label.end(), [](auto& a, auto& b) {
                  return a.second < b.second;
                })->second));
  std::printf("  formats:");
  for (const auto& [name, count] : formats)
    std::printf(" %s %llu;", name.c_str(), static_cast<unsigned long long>(count));
  std::printf("\n");
  if (!widths.empty()) {
    auto pct = [](std::vector<uint32_t> v, double p) {
      std::sort(v.begin(), v.end());
      return v[static_cast<size_t>(p * (v.size() - 1))];
    };
    std::printf("  width  min %u, p10 %u, median %u, p90 %u, max %u\n", pct(widths, 0),
                pct(widths, 0.1), pct(widths, 0.5), pct(widths, 0.9), pct(widths, 1));
    std::printf("  height min %u, p10 %u, median %u, p90 %u, max %u\n", pct(heights, 0),
                pct(heights, 0.1), pct(heights, 0.5), pct(heights, 0.9), pct(heights, 1));
  }
  return 0;
}

}  // namespace feedline::cli
