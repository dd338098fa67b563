#include "feedline/image_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "feedline/file.h"
#include "src/core/detail/fingerprint.h"
#include "src/io/read_ahead.h"

namespace feedline {
namespace {

// torchvision.datasets.folder.IMG_EXTENSIONS (0.14 and later).
constexpr std::string_view kImageExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                 ".pgm", ".tif",  ".tiff", ".webp"};

std::string ErrnoMessage(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// os.path.join(a, b) for a relative b: no doubled '/' when a ends in one, so
// the paths match torchvision's byte for byte.
std::string JoinPath(const std::string& a, std::string_view b) {
  std::string out = a;
  if (!out.empty() && out.back() != '/') out += '/';
  out += b;
  return out;
}

// The length of the UTF-8 sequence at s[i] under Python's strict decoder
// (no overlongs, no encoded surrogates, nothing past U+10FFFF), or 0 when
// s[i] does not start a valid sequence; its code point in *cp.
size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto cont = [&](size_t k, unsigned lo, unsigned hi) {
    return k < s.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned b = byte(i);
  size_t len = 0;
  if (b < 0x80) {
    len = 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    len = cont(i + 1, 0x80, 0xBF) ? 2 : 0;
  } else if (b >= 0xE0 && b <= 0xEF) {
    const unsigned lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    len = cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
  } else if (b >= 0xF0 && b <= 0xF4) {
    const unsigned lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    len = cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  }
  if (len == 0) return 0;
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (byte(i + k) & 0x3F);
  *cp = c;
  return len;
}

// The key Python sorts an os.fsdecode()'d name by: its code points, where
// every byte that does not start a valid sequence becomes U+DC00 + byte
// (surrogateescape). Plain byte order differs from this for mixed names
// (a stray 0xC3 byte sorts after U+4E00 in Python, before it as bytes),
// and torchvision sorts str.
std::u32string FsSortKey(std::string_view s) {
  std::u32string key;
  key.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {  // not the start of a valid sequence: escaped alone
      key.push_back(0xDC00 + static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    key.push_back(cp);
    i += len;
  }
  return key;
}

// True when all of `s` decodes strictly. Byte order of valid UTF-8 is code
// point order, so such names sort as Python sorts them without keys: the
// common case, and a fifth of a large listing's time saved.
bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t cp = 0;
    const size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

// Sorts `items` as Python's sorted() sorts the os.fsdecode()'d forms of
// name(item).
template <typename T, typename NameOf>
void SortByFsName(std::vector<T>* items, NameOf name) {
  const bool valid =
      std::all_of(items->begin(), items->end(), [&](const T& t) { return IsValidUtf8(name(t)); });
  if (valid) {
    std::sort(items->begin(), items->end(), [&](const T& a, const T& b) {
      return std::string_view(name(a)) < std::string_view(name(b));
    });
    return;
  }
  std::vector<std::pair<std::u32string, size_t>> keyed;
  keyed.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) keyed.emplace_back(FsSortKey(name((*items)[i])), i);
  std::sort(keyed.begin(), keyed.end());
  std::vector<T> sorted;
  sorted.reserve(items->size());
  for (const auto& [key, i] : keyed) sorted.push_back(std::move((*items)[i]));
  items->swap(sorted);
}

void SortLikePython(std::vector<std::string>* names) {
  SortByFsName(names, [](const std::string& n) -> const std::string& { return n; });
}

bool IsHidden(std::string_view name) { return !name.empty() && name[0] == '.'; }

// One entry of a directory, its type found as os.scandir's DirEntry.is_dir()
// finds it: symlinks followed, d_type trusted where it is definite. Only a
// symlink or an entry of unknown type (DT_LNK, DT_UNKNOWN) is stat'ed, so a
// directory of regular files costs no call per file (on a network file
// system each would be a round trip).
struct Listed {
  enum class Kind { kDirectory, kFile, kOther };
  std::string name;
  Kind kind = Kind::kFile;
  int stat_errno = 0;  // the target could not be stat'ed (dangling link, ELOOP)
  mode_t mode = 0;     // for kOther: what it is
};

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// A directory opened for listing, and its identity (device and inode, from
// fstat on the open descriptor: the loop check needs no stat by name).
struct OpenedDir {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

Status OpenDirectory(const std::string& path, OpenedDir* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return UnavailableError("cannot list directory '" + path + "': " + ErrnoMessage(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return UnavailableError("cannot list directory '" + path + "': " + ErrnoMessage(err));
  }
  *out = {fd, st.st_dev, st.st_ino};
  return Status::OK();
}

// Lists the open directory `dir` (closing it) with getdents64 directly:
// readdir's fdopendir would fstat it a second time. `buffer` is reused
// across directories.
Status ListDirectory(const std::string& path, const OpenedDir& dir, std::vector<char>* buffer,
                     std::vector<Listed>* out) {
  FdCloser closer{dir.fd};
  // 128 KiB: an ImageNet class directory (1,300 names) in one or two calls.
  if (buffer->empty()) buffer->resize(128 << 10);
  while (true) {
    const ssize_t got = ::getdents64(dir.fd, buffer->data(), buffer->size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return UnavailableError("cannot list directory '" + path + "': " + ErrnoMessage(errno));
    if (got == 0) break;
    for (ssize_t pos = 0; pos < got;) {
      struct Dirent64 {  // the kernel's linux_dirent64
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[1];
      };
      const auto* e = reinterpret_cast<const Dirent64*>(buffer->data() + pos);
      pos += e->d_reclen;
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      Listed l;
      l.name = std::string(name);
      switch (e->d_type) {
        case DT_REG: l.kind = Listed::Kind::kFile; break;
        case DT_DIR: l.kind = Listed::Kind::kDirectory; break;
        case DT_FIFO: l.kind = Listed::Kind::kOther, l.mode = S_IFIFO; break;
        case DT_SOCK: l.kind = Listed::Kind::kOther, l.mode = S_IFSOCK; break;
        case DT_CHR: l.kind = Listed::Kind::kOther, l.mode = S_IFCHR; break;
        case DT_BLK: l.kind = Listed::Kind::kOther, l.mode = S_IFBLK; break;
        default: {  // DT_LNK (followed, as os.walk(followlinks=True) does), DT_UNKNOWN
          struct stat st {};
          if (::fstatat(dir.fd, e->d_name, &st, 0) != 0) {
            l.kind = Listed::Kind::kFile;
            l.stat_errno = errno;
          } else if (S_ISDIR(st.st_mode)) {
            l.kind = Listed::Kind::kDirectory;
          } else if (S_ISREG(st.st_mode)) {
            l.kind = Listed::Kind::kFile;
          } else {
            l.kind = Listed::Kind::kOther;
            l.mode = st.st_mode;
          }
        }
      }
      out->push_back(std::move(l));
    }
  }
  return Status::OK();
}

const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// The image files under class directory `cls` (relative to root), in
// sorted(os.walk(class_dir, followlinks=True)) order, appended to `files`.
Status WalkClass(const std::string& root, const std::string& cls, const ImageFolderOptions& options,
                 std::vector<char>* buffer, std::vector<std::string>* files) {
  struct Dir {
    std::string rel;  // relative to root
    size_t parent;    // index into dirs; npos for the class directory
    dev_t dev = 0;    // identity, known once the directory is opened
    ino_t ino = 0;
    std::vector<std::string> files;  // image names directly inside
  };
  constexpr size_t kNone = ~size_t{0};
  std::vector<Dir> dirs;
  dirs.push_back({cls, kNone});
  std::vector<Listed> listed;
  // Every directory is listed once; the order of listing does not matter,
  // since the result is sorted by path as torchvision sorts os.walk's.
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string dir_path = JoinPath(root, dirs[i].rel);
    OpenedDir opened;
    FEEDLINE_RETURN_IF_ERROR(OpenDirectory(dir_path, &opened));
    dirs[i].dev = opened.dev;
    dirs[i].ino = opened.ino;
    bool loop = false;
    for (size_t a = dirs[i].parent; a != kNone && !loop; a = dirs[a].parent) {
      loop = dirs[a].dev == opened.dev && dirs[a].ino == opened.ino;
    }
    if (loop) {  // its files are listed under the ancestor (header)
      ::close(opened.fd);
      continue;
    }
    listed.clear();
    FEEDLINE_RETURN_IF_ERROR(ListDirectory(dir_path, opened, buffer, &listed));
    for (Listed& l : listed) {
      if (l.kind == Listed::Kind::kDirectory) {
        if (options.skip_hidden_dirs && IsHidden(l.name)) continue;
        dirs.push_back({dirs[i].rel + "/" + l.name, i});
        continue;
      }
      if (!HasImageExtension(l.name)) continue;
      if (l.kind == Listed::Kind::kOther) {
        return InvalidArgumentError("image folder '" + root + "': '" + JoinPath(dir_path, l.name) +
                                    "' is " + KindOf(l.mode) +
                                    ", not a regular file; remove it or rename it");
      }
      dirs[i].files.push_back(std::move(l.name));
    }
  }
  std::vector<size_t> order(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) order[i] = i;
  SortByFsName(&order, [&](size_t i) -> const std::string& { return dirs[i].rel; });
  for (const size_t i : order) {
    SortLikePython(&dirs[i].files);
    for (const std::string& f : dirs[i].files) files->push_back(dirs[i].rel + "/" + f);
  }
  return Status::OK();
}

// A sample file larger than this is refused before any allocation: no image
// within DecodeLimits' defaults comes close, and a stray multi-GB file must
// not take the process's memory.
constexpr int64_t kMaxFileBytes = int64_t{256} << 20;

// Over the classes and every sample's relative path and label, in order.
uint64_t FolderFingerprint(const ImageFolder& f) {
  core::detail::Fingerprint fp;
  fp.Add(std::string_view("folder"));
  for (const std::string& c : f.classes) fp.Add(c);
  for (size_t i = 0; i < f.files.size(); ++i)
    fp.Add(f.files[i]).Add(static_cast<uint64_t>(f.labels[i]));
  return fp.value();
}

// The part name WebDataset would give the file: its extension, lowered.
std::string PartName(const std::string& file) {
  const size_t dot = file.rfind('.');
  const size_t slash = file.rfind('/');
  std::string ext;
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    for (size_t i = dot + 1; i < file.size() && ext.size() < 16; ++i) {
      ext += static_cast<char>(std::tolower(static_cast<unsigned char>(file[i])));
    }
  }
  return ext;
}

class ReadFileOp final : public SampleOp {
 public:
  ReadFileOp(std::shared_ptr<const ImageFolder> folder, HttpOptions http,
             const ReadAheadOptions& ra)
      : folder_(std::move(folder)),
        http_(std::move(http)),
        fingerprint_(FolderFingerprint(*folder_)) {
    if (!folder_->etags.empty() && ra.max_bytes > 0) {
      const ImageFolder* f = folder_.get();
      const HttpOptions* http_ptr = &http_;
      read_ahead_ = std::make_unique<io::ReadAhead>(
          [f, http_ptr](uint64_t id, io::Fetched* out) {
            out->buffer.clear();
            FEEDLINE_RETURN_IF_ERROR(
                ReadWholeFile(f->Path(id), kMaxFileBytes, &out->buffer, *http_ptr, f->etags[id]));
            out->data_size = out->buffer.size();
            return Status::OK();
          },
          [f](uint64_t id) { return f->sizes[id]; }, ra.max_bytes, ra.threads);
    }
  }
  std::string_view name() const override { return "read"; }
  // Over the listing's classes, paths and labels: no sizes or ETags, so a
  // loader state saved on a local folder resumes on its copy in a bucket.
  uint64_t DataFingerprint() const override { return fingerprint_; }
  BackgroundWork* background() const override { return read_ahead_.get(); }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const std::string path = folder_->Path(s.id());
    s.location().file = path;
    s.location().key = folder_->files[s.id()];
    s.label = folder_->labels[s.id()];
    io::Fetched f;
    Status st;
    if (read_ahead_ && read_ahead_->Take(s.id(), &f, &st)) {
      FEEDLINE_RETURN_IF_ERROR(st);
      s.scratch().swap(f.buffer);  // the read-ahead buffer becomes the sample's: no copy
    } else {
      s.scratch().clear();
      FEEDLINE_RETURN_IF_ERROR(
          ReadWholeFile(path, kMaxFileBytes, &s.scratch(), http_,
                        folder_->etags.empty() ? std::string() : folder_->etags[s.id()]));
    }
    s.set_data(s.scratch());
    // One part, named by the file's extension as WebDataset names members.
    s.AddPart(PartName(folder_->files[s.id()]), s.data());
    return Status::OK();
  }

 private:
  std::shared_ptr<const ImageFolder> folder_;
  const HttpOptions http_;
  const uint64_t fingerprint_;
  std::unique_ptr<io::ReadAhead> read_ahead_;
};

// Splits `rel` ("cls/sub/x.jpg") at '/'; false when a component is empty,
// "." or "..", which no local path has.
bool SplitKey(std::string_view rel, std::vector<std::string_view>* parts) {
  parts->clear();
  size_t begin = 0;
  while (true) {
    const size_t slash = rel.find('/', begin);
    const std::string_view part =
        rel.substr(begin, slash == std::string_view::npos ? std::string_view::npos : slash - begin);
    if (part.empty() || part == "." || part == "..") return false;
    parts->push_back(part);
    if (slash == std::string_view::npos) return true;
    begin = slash + 1;
  }
}

}  // namespace

Result<std::shared_ptr<const ImageFolder>> ImageFolder::Open(const std::string& root,
                                                             const ImageFolderOptions& options) {
  if (IsS3Url(root)) {
    const std::string prefix = root.back() == '/' ? root : root + "/";
    FEEDLINE_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListObjects(prefix, options.http));
    return FromObjects(root, objects, options);
  }
  struct stat root_st {};
  if (::stat(root.c_str(), &root_st) != 0) {
    return NotFoundError("image folder '" + root + "' is not a directory: " + ErrnoMessage(errno));
  }
  if (!S_ISDIR(root_st.st_mode))
    return NotFoundError("image folder '" + root + "' is not a directory");
  std::vector<Listed> listed;
  std::vector<char> buffer;
  OpenedDir opened;
  FEEDLINE_RETURN_IF_ERROR(OpenDirectory(root, &opened));
  FEEDLINE_RETURN_IF_ERROR(ListDirectory(root, opened, &buffer, &listed));
  auto folder = std::make_shared<ImageFolder>();
  folder->root = root;
  std::vector<Listed> class_dirs;
  for (Listed& l : listed) {
    // find_classes uses DirEntry.is_dir(), which raises on every stat
    // error but "no such file" (a dangling link is just not a class).
    if (l.stat_errno != 0 && l.stat_errno != ENOENT) {
      return UnavailableError("image folder '" + root + "': cannot stat '" +
                              JoinPath(root, l.name) + "': " + ErrnoMessage(l.stat_errno));
    }
    if (l.kind != Listed::Kind::kDirectory) continue;
    if (options.skip_hidden_dirs && IsHidden(l.name)) continue;
    class_dirs.push_back(std::move(l));
  }
  SortByFsName(&class_dirs, [](const Listed& l) -> const std::string& { return l.name; });
  if (class_dirs.empty()) {
    return NotFoundError("image folder '" + root +
                         "' has no class directories (root/<class>/<image>)");
  }
  std::vector<std::string> empty;
  for (size_t label = 0; label < class_dirs.size(); ++label) {
    const Listed& c = class_dirs[label];
    folder->classes.push_back(c.name);
    const size_t before = folder->files.size();
    FEEDLINE_RETURN_IF_ERROR(WalkClass(root, c.name, options, &buffer, &folder->files));
    if (folder->files.size() == before) empty.push_back(c.name);
    folder->labels.resize(folder->files.size(), static_cast<int64_t>(label));
  }
  if (!empty.empty()) {
    // torchvision refuses these too ("Found no valid file for the classes
    // ..."): a label with no sample is almost always a stray directory.
    std::string msg = "image folder '" + root + "': found no valid file for the classes ";
    std::string hidden;
    for (size_t i = 0; i < empty.size(); ++i) {
      msg += (i > 0 ? ", '" : "'") + empty[i] + "' ('" + JoinPath(root, empty[i]) + "')";
      if (hidden.empty() && IsHidden(empty[i])) hidden = empty[i];
    }
    msg += "; supported extensions are:";
    for (std::string_view ext : kImageExtensions) (msg += ' ') += ext;
    if (!hidden.empty()) {
      msg += ". '" + hidden +
             "' is a hidden directory: pass skip_hidden_dirs=True (feedline pack "
             "--skip-hidden-dirs) to "
             "skip hidden directories";
    }
    return NotFoundError(msg);
  }
  return std::shared_ptr<const ImageFolder>(std::move(folder));
}

Result<std::shared_ptr<const ImageFolder>> ImageFolder::FromObjects(
    const std::string& root, const std::vector<ObjectInfo>& objects,
    const ImageFolderOptions& options) {
  if (!IsS3Url(root)) {
    return InvalidArgumentError("image folder '" + root + "': a listing needs an s3:// root");
  }
  // "s3://bucket/prefix" -> key prefix "prefix/" ("" for the bucket's root).
  const size_t bucket_end = root.find('/', 5);
  std::string prefix = bucket_end == std::string::npos ? "" : root.substr(bucket_end + 1);
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  const std::string base = root.back() == '/' ? root.substr(0, root.size() - 1) : root;

  struct Entry {           // one image object
    std::string_view cls;  // "cls"
    std::string_view dir;  // "cls/sub"
    std::string_view name;
    size_t object;
    size_t label = 0;
  };
  std::vector<std::string_view> class_names;
  std::vector<Entry> entries;
  std::vector<std::string_view> parts;
  for (size_t i = 0; i < objects.size(); ++i) {
    const std::string& key = objects[i].key;
    if (key.compare(0, prefix.size(), prefix) != 0) {
      return InvalidArgumentError("image folder '" + root + "': listed key '" + key +
                                  "' is not under '" + prefix + "'");
    }
    std::string_view rel = std::string_view(key).substr(prefix.size());
    const bool marker = !rel.empty() && rel.back() == '/';
    if (marker) rel.remove_suffix(1);
    if (rel.empty()) continue;  // the prefix's own marker
    if (!SplitKey(rel, &parts)) {
      return InvalidArgumentError("image folder '" + root + "': key '" + key +
                                  "' has an empty, '.' or '..' path component, which no "
                                  "folder on disk has; rename the object");
    }
    const size_t dirs = marker ? parts.size() : parts.size() - 1;
    if (dirs == 0) continue;  // a file at the root: not a sample, as on disk
    bool hidden = false;
    for (size_t d = 0; d < dirs && !hidden; ++d) hidden = IsHidden(parts[d]);
    if (options.skip_hidden_dirs && hidden) continue;
    class_names.push_back(parts[0]);
    if (marker || !HasImageExtension(parts.back())) continue;
    const std::string_view dir = rel.substr(0, rel.size() - parts.back().size() - 1);
    entries.push_back({parts[0], dir, parts.back(), i});
  }
  std::sort(class_names.begin(), class_names.end());
  class_names.erase(std::unique(class_names.begin(), class_names.end()), class_names.end());
  if (class_names.empty()) {
    return NotFoundError("image folder '" + root + "' has no class directories (" +
                         std::to_string(objects.size()) + " objects listed under '" + prefix +
                         "'; expected keys <class>/<image>)");
  }
  // S3 keys are UTF-8, whose byte order is Python's str order; the names'
  // own order still goes through the one sort the local listing uses.
  SortByFsName(&class_names, [](std::string_view n) { return n; });
  // torchvision's order: classes in order; inside one, directories by
  // path, then files by name.
  std::unordered_map<std::string_view, size_t> label_of;
  for (size_t label = 0; label < class_names.size(); ++label) label_of[class_names[label]] = label;
  for (Entry& e : entries) e.label = label_of[e.cls];
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.label != b.label) return a.label < b.label;
    if (a.dir != b.dir) return a.dir < b.dir;
    return a.name < b.name;
  });
  auto folder = std::make_shared<ImageFolder>();
  folder->root = base;
  folder->files.reserve(entries.size());
  folder->labels.reserve(entries.size());
  folder->sizes.reserve(entries.size());
  folder->etags.reserve(entries.size());
  std::vector<size_t> per_class(class_names.size(), 0);
  for (const Entry& e : entries) {
    folder->files.push_back(std::string(e.dir) + "/" + std::string(e.name));
    folder->labels.push_back(static_cast<int64_t>(e.label));
    folder->sizes.push_back(objects[e.object].size);
    folder->etags.push_back(objects[e.object].etag);
    ++per_class[e.label];
  }
  std::vector<std::string> empty;
  for (size_t label = 0; label < class_names.size(); ++label) {
    folder->classes.emplace_back(class_names[label]);
    if (per_class[label] == 0) empty.push_back(folder->classes.back());
  }
  if (!empty.empty()) {
    std::string msg = "image folder '" + root + "': found no valid file for the classes ";
    for (size_t i = 0; i < empty.size(); ++i) {
      msg += (i > 0 ? ", '" : "'") + empty[i] + "' ('" + JoinPath(base, empty[i]) + "/')";
    }
    msg += "; supported extensions are:";
    for (std::string_view ext : kImageExtensions) (msg += ' ') += ext;
    return NotFoundError(msg);
  }
  return std::shared_ptr<const ImageFolder>(std::move(folder));
}

bool HasImageExtension(std::string_view name) {
  for (std::string_view ext : kImageExtensions) {
    if (name.size() < ext.size()) continue;
    const std::string_view tail = name.substr(name.size() - ext.size());
    bool same = true;
    for (size_t i = 0; i < ext.size() && same; ++i) {
      // ASCII folding (not the locale's tolower) is Python's str.lower()
      // here: no other character lowers to one of these letters.
      const char c = tail[i];
      same = (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) == ext[i];
    }
    if (same) return true;
  }
  return false;
}

std::string ImageFolder::Path(size_t i) const { return JoinPath(root, files[i]); }

std::shared_ptr<const SampleOp> MakeReadFileOp(std::shared_ptr<const ImageFolder> folder,
                                               const HttpOptions& http,
                                               const ReadAheadOptions& read_ahead) {
  return std::make_shared<ReadFileOp>(std::move(folder), http, read_ahead);
}

}  // namespace feedline
