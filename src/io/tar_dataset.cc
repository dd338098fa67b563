#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "feedline/file.h"
#include "feedline/webdataset.h"
#include "src/core/detail/fingerprint.h"
#include "src/io/file_cache.h"
#include "src/io/read_ahead.h"

namespace feedline {
namespace {

constexpr size_t kMaxExpanded = 1000000;

// The index of the '}' closing the '{' at `open`, or npos.
size_t MatchingBrace(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

// A whole decimal integer, optionally negative.
bool ParseInt(std::string_view t, int64_t* v) {
  if (t.empty() || t.size() > 18) return false;
  size_t i = t[0] == '-' ? 1 : 0;
  if (i == t.size()) return false;
  int64_t x = 0;
  for (; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9') return false;
    x = x * 10 + (t[i] - '0');
  }
  *v = t[0] == '-' ? -x : x;
  return true;
}

// "a..b" or "a..b..step" with integers or single letters: its items.
bool ExpandRange(std::string_view body, std::vector<std::string>* out) {
  const size_t dots = body.find("..");
  if (dots == std::string_view::npos) return false;
  const std::string_view left = body.substr(0, dots);
  std::string_view right = body.substr(dots + 2);
  int64_t step = 1;
  if (const size_t more = right.find(".."); more != std::string_view::npos) {
    if (!ParseInt(right.substr(more + 2), &step)) return false;
    right = right.substr(0, more);
    if (step == 0) step = 1;
  }
  step = step < 0 ? -step : step;
  int64_t a = 0, b = 0;
  const bool ints = ParseInt(left, &a) && ParseInt(right, &b);
  const auto letter = [](std::string_view t) {
    return t.size() == 1 && std::isalpha(static_cast<unsigned char>(t[0])) != 0;
  };
  if (!ints && !(letter(left) && letter(right))) return false;
  if (!ints) a = static_cast<unsigned char>(left[0]), b = static_cast<unsigned char>(right[0]);
  // braceexpand's padding: either end written with a leading zero pads
  // every item to the wider end.
  const auto zero_led = [](std::string_view t) {
    return t != "0" && t != "-0" && (t.substr(0, 1) == "0" || t.substr(0, 2) == "-0");
  };
  const size_t width =
      ints && (zero_led(left) || zero_led(right)) ? std::max(left.size(), right.size()) : 0;
  const int64_t dir = a <= b ? step : -step;
  for (int64_t v = a; dir > 0 ? v <= b : v >= b; v += dir) {
    if (out->size() > kMaxExpanded) return true;  // the caller reports the count
    if (!ints) {
      out->emplace_back(1, static_cast<char>(v));
      continue;
    }
    std::string digits = std::to_string(v < 0 ? -v : v);
    const size_t sign = v < 0 ? 1 : 0;
    if (digits.size() + sign < width) digits.insert(0, width - sign - digits.size(), '0');
    out->push_back((v < 0 ? "-" : "") + digits);
  }
  return true;
}

// The pieces of `body` between top-level commas.
std::vector<std::string> SplitTopLevel(const std::string& body) {
  std::vector<std::string> pieces(1);
  int depth = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '\\' && i + 1 < body.size()) {
      pieces.back() += c;
      pieces.back() += body[++i];
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}') --depth;
    if (c == ',' && depth == 0) {
      pieces.emplace_back();
    } else {
      pieces.back() += c;
    }
  }
  return pieces;
}

Status ExpandInto(const std::string& pattern, const std::string& s, std::vector<std::string>* out) {
  size_t open = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '}') {
      return InvalidArgumentError("pattern '" + pattern + "': a '}' at offset " +
                                  std::to_string(i) + " closes no '{'");
    } else if (s[i] == '{') {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) {
    out->push_back(s);
    return Status::OK();
  }
  const size_t close = MatchingBrace(s, open);
  if (close == std::string::npos) {
    return InvalidArgumentError("pattern '" + pattern + "': the '{' at offset " +
                                std::to_string(open) + " is never closed");
  }
  const std::string head = s.substr(0, open);
  const std::string body = s.substr(open + 1, close - open - 1);
  std::vector<std::string> items;
  if (!ExpandRange(body, &items)) {
    const std::vector<std::string> pieces = SplitTopLevel(body);
    if (pieces.size() == 1) {
      // Not a group: literal braces around whatever the inside expands to.
      std::vector<std::string> inner;
      FEEDLINE_RETURN_IF_ERROR(ExpandInto(pattern, body, &inner));
      for (std::string& x : inner) items.push_back("{" + x + "}");
    } else {
      for (const std::string& piece : pieces)
        FEEDLINE_RETURN_IF_ERROR(ExpandInto(pattern, piece, &items));
    }
  }
  std::vector<std::string> tails;
  FEEDLINE_RETURN_IF_ERROR(ExpandInto(pattern, s.substr(close + 1), &tails));
  for (const std::string& item : items) {
    for (const std::string& tail : tails) {
      if (out->size() >= kMaxExpanded) {
        return InvalidArgumentError("pattern '" + pattern + "' names more than " +
                                    std::to_string(kMaxExpanded) + " files");
      }
      out->push_back(head + item + tail);
    }
  }
  return Status::OK();
}

// The member extensions read as the sample's image: the formats the image
// decoders know, as WebDataset names them.
constexpr char kImageExtensions[] = "jpg jpeg png webp bmp gif tif tiff ppm pgm pbm pnm";

bool IsImageExtension(const std::string& ext) {
  for (const char* e :
       {"jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff", "ppm", "pgm", "pbm", "pnm"}) {
    if (ext == e) return true;
  }
  return false;
}

constexpr uint64_t kBlock = 512;
constexpr uint64_t kIndexBlock = 4u << 20;
// A label file is a short decimal integer; anything longer is not one.
constexpr uint64_t kMaxClsBytes = 64;

// Octal numeric field (NUL/space padded); base-256 for GNU large sizes.
bool ParseNumber(const uint8_t* p, size_t n, uint64_t* out) {
  if (p[0] & 0x80) {  // base-256
    uint64_t v = p[0] & 0x7F;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | p[i];
    }
    *out = v;
    return true;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + (p[i] - '0');
    any = true;
  }
  for (; i < n; ++i) {
    if (p[i] != ' ' && p[i] != '\0') return false;
  }
  *out = v;
  return any;
}

std::string Field(const uint8_t* p, size_t n) {
  size_t len = 0;
  while (len < n && p[len] != '\0') ++len;
  return std::string(reinterpret_cast<const char*>(p), len);
}

// The value of the last "path=" record in a PAX extended header, a run of
// "<len> <key>=<value>\n" records where <len> counts the whole record in
// decimal. Returns false with *why set for a record that breaks that form:
// each record is checked in time linear in its length, and a length that
// points backwards or past the header is an error, never a loop.
bool PaxPath(const std::string& data, std::string* path, std::string* why) {
  path->clear();
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t start = pos;
    size_t len = 0, i = pos;
    for (; i < data.size() && data[i] >= '0' && data[i] <= '9' && i - pos < 8; ++i) {
      len = len * 10 + static_cast<size_t>(data[i] - '0');
    }
    auto fail = [&](const std::string& reason) {
      *why = "malformed PAX record at byte " + std::to_string(start) +
             " of the extended header: " + reason;
      return false;
    };
    if (i == pos) return fail("no decimal length");
    if (i >= data.size() || data[i] != ' ') return fail("no space after the length");
    if (len <= i - pos + 1) return fail("length " + std::to_string(len) + " is too short");
    if (len > data.size() - pos)
      return fail("length " + std::to_string(len) + " is outside the header (" +
                  std::to_string(data.size() - pos) + " bytes left)");
    const size_t end = pos + len;  // one past the record's '\n'
    if (data[end - 1] != '\n') return fail("the record does not end in a newline");
    const size_t key = i + 1;
    const size_t eq = data.find('=', key);
    if (eq == std::string::npos || eq >= end - 1) return fail("no '=' in the record");
    if (data.compare(key, eq - key, "path") == 0) path->assign(data, eq + 1, end - 1 - (eq + 1));
    pos = end;
  }
  return true;
}

struct Member {
  std::string name;
  uint64_t offset, size, header_offset;
};

}  // namespace

TarDataset::~TarDataset() = default;

Result<std::shared_ptr<const TarDataset>> TarDataset::Open(std::vector<std::string> paths,
                                                           const TarOptions& options) {
  if (paths.empty()) return InvalidArgumentError("no tar files given");
  auto ds = std::shared_ptr<TarDataset>(new TarDataset());
  ds->options_ = options;
  ds->paths_ = std::move(paths);
  // Through the descriptor cache: 10^5 tars hold a bounded set of open
  // files (src/io/file_cache.h).
  const std::shared_ptr<io::FileCache> cache = io::FileCache::Default();
  for (uint32_t t = 0; t < ds->paths_.size(); ++t) {
    const std::string& path = ds->paths_[t];
    Result<std::unique_ptr<RandomAccessFile>> opened = cache->Open(path, options.http);
    if (!opened.ok()) return opened.status().WithContext("tar");
    ds->files_.push_back(std::move(opened).value());
    const RandomAccessFile& file = *ds->files_.back();
    const uint64_t size = file.size();
    auto bad = [&path](uint64_t at, const std::string& why) {
      return DataLossError("tar '" + path + "' member header at offset " + std::to_string(at) +
                           ": " + why);
    };

    // Remote tars (URLs, s3://) carry no index: the headers are read in
    // blocks of kIndexBlock, one ranged request each, not one per member.
    const bool remote = IsRemote(path);
    std::vector<uint8_t> block;
    uint64_t block_start = 0;
    auto read = [&](uint64_t at, size_t n, void* out) -> Status {
      if (!remote || n > kIndexBlock) return file.Read(at, n, out);
      if (block.empty() || at < block_start || at + n > block_start + block.size()) {
        const uint64_t len = std::min<uint64_t>(kIndexBlock, size - at);
        if (len < n) return file.Read(at, n, out);
        block.resize(static_cast<size_t>(len));
        block_start = at;
        Status st = file.Read(at, block.size(), block.data());
        if (!st.ok()) {
          block.clear();
          return st;
        }
      }
      std::memcpy(out, block.data() + (at - block_start), n);
      return Status::OK();
    };

    std::vector<Member> members;
    std::string long_name;
    uint8_t h[kBlock] = {};  // filled by read(); zeroed for the analyzer
    uint64_t pos = 0;
    bool ended = false;
    while (pos + kBlock <= size) {
      // Read errors name the tar and the member as the parse errors do.
      const Status read_header = read(pos, kBlock, h);
      if (!read_header.ok())
        return read_header.WithContext("tar '" + path + "' member header at offset " +
                                       std::to_string(pos));
      if (std::all_of(h, h + kBlock, [](uint8_t b) { return b == 0; })) {
        ended = true;  // end-of-archive marker
        break;
      }
      uint64_t stored = 0, sum = 0;
      if (!ParseNumber(h + 148, 8, &stored)) return bad(pos, "unreadable header checksum");
      for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
      if (sum != stored)
        return bad(pos, "header checksum mismatch (" + std::to_string(sum) +
                            " != " + std::to_string(stored) + ")");
      uint64_t member_size = 0;
      if (!ParseNumber(h + 124, 12, &member_size)) return bad(pos, "unreadable size field");
      const uint64_t data = pos + kBlock;
      if (member_size > size || data + member_size > size) {
        return bad(pos, "member of " + std::to_string(member_size) +
                            " bytes runs past the end of the file (" + std::to_string(size) +
                            " bytes; truncated?)");
      }
      const char type = static_cast<char>(h[156]);
      std::string name = Field(h, 100);
      if (std::memcmp(h + 257, "ustar", 5) == 0) {
        const std::string prefix = Field(h + 345, 155);
        if (!prefix.empty()) name = prefix + "/" + name;
      }
      if (type == 'L' || type == 'x') {  // GNU long name / PAX header for the next member
        if (member_size > (1u << 20)) return bad(pos, "oversized extended header");
        std::string text(member_size, '\0');
        const Status read_text = read(data, member_size, text.data());
        if (!read_text.ok()) {
          return read_text.WithContext("tar '" + path + "' member header at offset " +
                                       std::to_string(pos));
        }
        if (type == 'L') {
          long_name = Field(reinterpret_cast<const uint8_t*>(text.data()), text.size());
        } else {
          std::string why;
          if (!PaxPath(text, &long_name, &why)) return bad(pos, why);
        }
      } else if (type == '0' || type == '\0' || type == '7') {  // regular file
        if (!long_name.empty()) name = long_name;
        members.push_back({name, data, member_size, pos});
        long_name.clear();
      } else {
        long_name.clear();  // directories, links, PAX globals: not samples
      }
      pos = data + (member_size + kBlock - 1) / kBlock * kBlock;
    }
    if (!ended && pos != size) {
      return DataLossError("tar '" + path + "' is truncated: " + std::to_string(size - pos) +
                           " stray bytes at offset " + std::to_string(pos) +
                           " (no end-of-archive marker)");
    }

    // Group consecutive members by key; a key must not come back later.
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < members.size();) {
      const Member& m0 = members[i];
      const size_t slash = m0.name.rfind('/');
      const size_t dot = m0.name.find('.', slash == std::string::npos ? 0 : slash + 1);
      const std::string key = m0.name.substr(0, dot);
      if (seen.count(key)) {
        return bad(m0.header_offset, "key '" + key +
                                         "' appears again after other samples (WebDataset needs a "
                                         "sample's files together)");
      }
      seen[key] = i;
      TarSample s;
      s.tar = t;
      s.key = key;
      bool has_image = false;
      for (; i < members.size(); ++i) {
        const Member& m = members[i];
        const size_t sl = m.name.rfind('/');
        const size_t d = m.name.find('.', sl == std::string::npos ? 0 : sl + 1);
        if (m.name.substr(0, d) != key) break;
        std::string ext = d == std::string::npos ? "" : m.name.substr(d + 1);
        std::transform(ext.begin(), ext.end(), ext.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        if (!options.require_image) {  // members are kept only for parts (memory: 10^6 samples)
          for (const TarMember& earlier : s.members) {
            if (earlier.ext == ext) {
              return bad(m.header_offset, "sample '" + key + "' has two '" + ext + "' members");
            }
          }
          s.members.push_back({ext, m.offset, m.size});
          // Parts are checked per sample by the field that reads them (a bad
          // .cls is then one sample error, skippable), not at open.
          if (!IsImageExtension(ext)) continue;
        }
        if (IsImageExtension(ext)) {
          if (!options.require_image) {
            // Several images are several parts; `offset`/`size` name the first.
            if (!has_image) {
              s.offset = m.offset;
              s.size = m.size;
            }
            has_image = true;
            continue;
          }
          if (has_image) {
            return bad(m.header_offset, "sample '" + key + "' has a second image member '" +
                                            m.name + "' (this source reads one image per sample)");
          }
          s.offset = m.offset;
          s.size = m.size;
          has_image = true;
        } else if (ext == "cls") {
          if (m.size > kMaxClsBytes)
            return bad(m.header_offset, "'" + m.name + "' is too long for a label");
          std::string text(m.size, '\0');
          const Status read_cls = read(m.offset, m.size, text.data());
          if (!read_cls.ok()) {
            return read_cls.WithContext("tar '" + path + "' label member '" + m.name +
                                        "' at offset " + std::to_string(m.header_offset));
          }
          char* end = nullptr;
          errno = 0;
          s.label = std::strtoll(text.c_str(), &end, 10);
          while (end && (*end == '\n' || *end == ' ' || *end == '\r')) ++end;
          if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
            return bad(m.header_offset, "'" + m.name + "' does not hold an integer label");
          }
        }
      }
      if (!has_image && options.require_image) {
        return bad(m0.header_offset, "sample '" + key + "' has no image member (" +
                                         std::string(kImageExtensions) + ")");
      }
      ds->samples_.push_back(std::move(s));
    }
  }
  if (ds->samples_.empty()) return InvalidArgumentError("the tar files hold no samples");
  return std::shared_ptr<const TarDataset>(std::move(ds));
}

Result<std::vector<std::string>> ExpandBraces(const std::string& pattern) {
  std::vector<std::string> out;
  FEEDLINE_RETURN_IF_ERROR(ExpandInto(pattern, pattern, &out));
  // "\{" and "\}" stand for the braces themselves (and "\," for a comma).
  for (std::string& name : out) {
    std::string plain;
    for (size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '\\' && i + 1 < name.size() &&
          (name[i + 1] == '{' || name[i + 1] == '}' || name[i + 1] == ',')) {
        ++i;
      }
      plain += name[i];
    }
    name = std::move(plain);
  }
  return out;
}

Result<std::shared_ptr<const TarDataset>> TarDataset::OpenPath(const std::string& path,
                                                               const TarOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.find('{') != std::string::npos) {
    FEEDLINE_ASSIGN_OR_RETURN(std::vector<std::string> names, ExpandBraces(path));
    return Open(std::move(names), options);
  }
  if (!fs::is_directory(path, ec)) return Open({path}, options);
  std::vector<std::string> tars;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".tar") tars.push_back(it->path().string());
  }
  if (ec) return UnavailableError("cannot list '" + path + "': " + ec.message());
  std::sort(tars.begin(), tars.end());
  if (tars.empty()) return NotFoundError("no .tar files in '" + path + "'");
  return Open(std::move(tars), options);
}

Status TarDataset::Read(uint64_t i, std::vector<uint8_t>* out) const {
  const TarSample& s = samples_[i];
  out->resize(s.size);
  const Status st = files_[s.tar]->Read(s.offset, s.size, out->data());
  if (!st.ok()) {
    return st.WithContext("tar '" + paths_[s.tar] + "' sample " + std::to_string(i) + " '" + s.key +
                          "' at offset " + std::to_string(s.offset));
  }
  return Status::OK();
}

Status TarDataset::ReadRange(uint32_t tar, uint64_t offset, uint64_t n, uint8_t* out) const {
  const Status st = files_[tar]->Read(offset, n, out);
  if (!st.ok()) {
    return st.WithContext("tar '" + paths_[tar] + "' bytes " + std::to_string(offset) + " to " +
                          std::to_string(offset + n));
  }
  return Status::OK();
}

Status TarDataset::ReadSpan(uint64_t i, std::vector<uint8_t>* out) const {
  const TarSample& s = samples_[i];
  out->clear();
  if (s.members.empty()) return Status::OK();
  // The members of a key are consecutive in the tar: one read covers them
  // (and the 512-byte headers between them).
  const uint64_t begin = s.members.front().offset;
  const uint64_t end = s.members.back().offset + s.members.back().size;
  out->resize(end - begin);
  const Status st = files_[s.tar]->Read(begin, end - begin, out->data());
  if (!st.ok()) {
    return st.WithContext("tar '" + paths_[s.tar] + "' sample " + std::to_string(i) + " '" + s.key +
                          "' at offset " + std::to_string(begin));
  }
  return Status::OK();
}

Status TarDataset::ReadParts(uint64_t i, Sample& sample) const {
  const TarSample& s = samples_[i];
  if (s.members.empty()) return Status::OK();
  std::vector<uint8_t>& buf = sample.scratch();
  FEEDLINE_RETURN_IF_ERROR(ReadSpan(i, &buf));
  const uint64_t begin = s.members.front().offset;
  for (const TarMember& m : s.members) {
    sample.AddPart(m.ext, std::span<const uint8_t>(buf).subspan(m.offset - begin, m.size));
  }
  if (s.size > 0) sample.set_data(std::span<const uint8_t>(buf).subspan(s.offset - begin, s.size));
  return Status::OK();
}

namespace {

class TarReadOp final : public SampleOp {
 public:
  TarReadOp(std::shared_ptr<const TarDataset> ds, bool parts, const ReadAheadOptions& ra)
      : ds_(std::move(ds)), parts_(parts) {
    core::detail::Fingerprint fp;
    fp.Add(std::string_view(parts ? "tar-parts" : "tar"));
    for (uint64_t i = 0; i < ds_->num_samples(); ++i) {
      const TarSample& t = ds_->sample(i);
      fp.Add(t.key).Add(t.size).Add(static_cast<uint64_t>(t.label));
      if (parts) {
        for (const TarMember& m : t.members) fp.Add(m.ext).Add(m.size);
      }
    }
    fingerprint_ = fp.value();
    if (ra.max_bytes > 0) {
      const TarDataset* d = ds_.get();
      io::Coalescing runs;
      runs.span = [d, parts](uint64_t id) { return SpanOf(d->sample(id), parts); };
      runs.fetch_run = [d, parts](const std::vector<uint64_t>& ids,
                                  std::vector<io::Fetched>* outs) {
        return FetchRun(*d, parts, ids, outs);
      };
      read_ahead_ = std::make_unique<io::ReadAhead>(
          [d, parts](uint64_t id, io::Fetched* f) { return Fetch(*d, parts, id, f); },
          [d, parts](uint64_t id) { return Extent(d->sample(id), parts); }, ra.max_bytes,
          ra.threads, std::move(runs));
    }
  }
  std::string_view name() const override { return "read"; }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  BackgroundWork* background() const override { return read_ahead_.get(); }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const TarSample& t = ds_->sample(s.id());
    s.location().file = ds_->paths()[t.tar];
    s.location().record = static_cast<int64_t>(s.id());
    s.location().offset = static_cast<int64_t>(t.offset);
    s.location().key = t.key;
    s.label = t.label;
    io::Fetched f;
    Status st;
    if (read_ahead_ && read_ahead_->Take(s.id(), &f, &st)) {
      FEEDLINE_RETURN_IF_ERROR(st);
      s.scratch().swap(f.buffer);  // the read-ahead buffer becomes the sample's: no copy
      const std::span<const uint8_t> buf(s.scratch());
      for (const io::Fetched::Part& p : f.parts) s.AddPart(p.name, buf.subspan(p.offset, p.size));
      if (!parts_ || t.size > 0) s.set_data(buf.subspan(f.data_offset, f.data_size));
      return Status::OK();
    }
    if (parts_) return ds_->ReadParts(s.id(), s);
    FEEDLINE_RETURN_IF_ERROR(ds_->Read(s.id(), &s.scratch()));
    s.set_data(s.scratch());
    return Status::OK();
  }

 private:
  // The bytes one sample's read covers: its image, or (parts) every member
  // and the headers between them.
  static uint64_t Extent(const TarSample& t, bool parts) {
    if (!parts) return t.size;
    if (t.members.empty()) return 0;
    return t.members.back().offset + t.members.back().size - t.members.front().offset;
  }
  static io::Span SpanOf(const TarSample& t, bool parts) {
    const uint64_t begin = parts ? (t.members.empty() ? 0 : t.members.front().offset) : t.offset;
    return {t.tar, begin, begin + Extent(t, parts)};
  }
  // Consecutive samples of one tar: one read of their whole span (headers
  // and padding between them included), carved into each sample's bytes.
  static Status FetchRun(const TarDataset& d, bool parts, const std::vector<uint64_t>& ids,
                         std::vector<io::Fetched>* outs) {
    const io::Span first = SpanOf(d.sample(ids.front()), parts);
    const io::Span last = SpanOf(d.sample(ids.back()), parts);
    std::vector<uint8_t> run(last.end - first.begin);
    FEEDLINE_RETURN_IF_ERROR(d.ReadRange(first.file, first.begin, run.size(), run.data()));
    for (size_t k = 0; k < ids.size(); ++k) {
      const TarSample& t = d.sample(ids[k]);
      const io::Span sp = SpanOf(t, parts);
      io::Fetched& f = (*outs)[k];
      f.buffer.assign(run.begin() + static_cast<std::ptrdiff_t>(sp.begin - first.begin),
                      run.begin() + static_cast<std::ptrdiff_t>(sp.end - first.begin));
      f.parts.clear();
      if (parts) {
        for (const TarMember& m : t.members) {
          f.parts.push_back(
              {m.ext, static_cast<size_t>(m.offset - sp.begin), static_cast<size_t>(m.size)});
        }
      }
      f.data_offset = static_cast<size_t>(parts && t.size > 0 ? t.offset - sp.begin : 0);
      f.data_size = static_cast<size_t>(t.size);
    }
    return Status::OK();
  }
  // What Apply would read, into a read-ahead buffer (the same one read).
  static Status Fetch(const TarDataset& d, bool parts, uint64_t id, io::Fetched* f) {
    const TarSample& t = d.sample(id);
    f->parts.clear();
    if (!parts) {
      FEEDLINE_RETURN_IF_ERROR(d.Read(id, &f->buffer));
      f->data_offset = 0;
      f->data_size = f->buffer.size();
      return Status::OK();
    }
    FEEDLINE_RETURN_IF_ERROR(d.ReadSpan(id, &f->buffer));
    const uint64_t begin = t.members.empty() ? 0 : t.members.front().offset;
    for (const TarMember& m : t.members) {
      f->parts.push_back(
          {m.ext, static_cast<size_t>(m.offset - begin), static_cast<size_t>(m.size)});
    }
    f->data_offset = static_cast<size_t>(t.size > 0 ? t.offset - begin : 0);
    f->data_size = static_cast<size_t>(t.size);
    return Status::OK();
  }

  std::shared_ptr<const TarDataset> ds_;
  const bool parts_;
  uint64_t fingerprint_ = 0;
  std::unique_ptr<io::ReadAhead> read_ahead_;
};

}  // namespace

std::shared_ptr<const SampleOp> MakeTarReadOp(std::shared_ptr<const TarDataset> dataset,
                                              const ReadAheadOptions& read_ahead) {
  return std::make_shared<TarReadOp>(std::move(dataset), /*parts=*/false, read_ahead);
}

std::shared_ptr<const SampleOp> MakeTarPartsReadOp(std::shared_ptr<const TarDataset> dataset,
                                                   const ReadAheadOptions& read_ahead) {
  return std::make_shared<TarReadOp>(std::move(dataset), /*parts=*/true, read_ahead);
}

}  // namespace feedline
