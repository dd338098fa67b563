#include "feedline/source.h"

#include <cctype>
#include <filesystem>

#include "feedline/columnar.h"
#include "feedline/dataset.h"
#include "feedline/file.h"
#include "feedline/image_folder.h"
#include "feedline/list_dataset.h"
#include "feedline/object_store.h"
#include "feedline/webdataset.h"

namespace feedline {

const char* SourceKindName(Source::Kind kind) {
  switch (kind) {
    case Source::Kind::kShards: return "shards";
    case Source::Kind::kTar: return "tar";
    case Source::Kind::kImageFolder: return "folder";
    case Source::Kind::kList: return "list";
    case Source::Kind::kColumnar: return "columnar";
  }
  return "?";
}

const char* ColumnKindName(ColumnKind kind) {
  switch (kind) {
    case ColumnKind::kEncoded: return "encoded";
    case ColumnKind::kText: return "text";
    case ColumnKind::kInteger: return "integer";
    case ColumnKind::kArray: return "array";
    case ColumnKind::kOther: break;
  }
  return "other";
}

namespace {

// A Parquet or Arrow IPC file (or a pattern of them) by its name.
bool IsColumnarName(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".parquet" || ext == ".arrow" || ext == ".feather" || ext == ".ipc";
}

// "s3://bucket/prefix" with one trailing '/': the listing's prefix.
std::string AsPrefix(const std::string& url) { return url.back() == '/' ? url : url + "/"; }

// An s3:// prefix's kind, by the local directory rule applied to its
// listing: manifest.json directly under it is packed shards; .tar objects
// directly under it and nothing deeper is tars (their URLs, in key order,
// which is a local directory's sorted order, into *tars); anything else is
// a folder (ImageFolder::FromObjects names what is wrong with it).
Source::Kind KindOfListing(const std::string& prefix_url, const std::vector<ObjectInfo>& objects,
                           std::vector<std::string>* tars) {
  const size_t bucket_end = prefix_url.find('/', 5);
  const std::string prefix =
      bucket_end == std::string::npos ? "" : prefix_url.substr(bucket_end + 1);
  bool deeper = false, any_parquet = false;
  std::vector<std::string> found;
  for (const ObjectInfo& o : objects) {
    if (o.key.size() < prefix.size()) continue;
    const std::string_view rel = std::string_view(o.key).substr(prefix.size());
    if (rel == kManifestName) return Source::Kind::kShards;
    if (rel.empty()) continue;
    if (rel.find('/') != std::string_view::npos) {
      deeper = true;
    } else if (IsColumnarName(std::string(rel))) {
      any_parquet = true;
    } else if (rel.size() > 4 && rel.substr(rel.size() - 4) == ".tar") {
      found.push_back(JoinName(prefix_url, std::string(rel)));
    }
  }
  if (any_parquet && found.empty() && !deeper) return Source::Kind::kColumnar;
  if (found.empty() || deeper) return Source::Kind::kImageFolder;
  if (tars != nullptr) *tars = std::move(found);
  return Source::Kind::kTar;
}

// An s3:// name that is a prefix rather than one object (by its name).
bool IsS3Prefix(const std::string& path) {
  if (!IsS3Url(path)) return false;
  const std::filesystem::path ext = std::filesystem::path(path).extension();
  return ext != ".tar" && ext != ".csv" && ext != ".jsonl" && !IsColumnarName(path);
}

}  // namespace

Source::Kind DetectSourceKind(const std::string& path, const HttpOptions& http) {
  namespace fs = std::filesystem;
  const fs::path ext = fs::path(path).extension();
  if (IsColumnarName(path)) return Source::Kind::kColumnar;
  if (IsUrl(path)) {
    // a tar (or a pattern of them) by its name, else a packed dataset
    return ext == ".tar" ? Source::Kind::kTar : Source::Kind::kShards;
  }
  if (IsS3Prefix(path)) {
    const Result<std::vector<ObjectInfo>> objects = ListObjects(AsPrefix(path), http);
    // Unlistable: shards, whose opening names the problem.
    return objects.ok() ? KindOfListing(AsPrefix(path), *objects, nullptr) : Source::Kind::kShards;
  }
  if (ext == ".tar") return Source::Kind::kTar;
  if (ext == ".csv" || ext == ".jsonl") return Source::Kind::kList;
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return Source::Kind::kImageFolder;  // opening it names the problem
  if (fs::exists(fs::path(path) / kManifestName, ec)) return Source::Kind::kShards;
  // datasets' save_to_disk folder
  if (fs::exists(fs::path(path) / "state.json", ec) &&
      fs::exists(fs::path(path) / "dataset_info.json", ec)) {
    return Source::Kind::kColumnar;
  }
  bool any_tar = false, any_dir = false, any_columnar = false;
  // error_code overloads throughout: a symlink loop here must not throw.
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    any_tar |= it->path().extension() == ".tar";
    any_columnar |= IsColumnarName(it->path().string());
    any_dir |= it->is_directory(entry_ec);
  }
  if (any_columnar && !any_tar && !any_dir) return Source::Kind::kColumnar;
  return any_tar && !any_dir ? Source::Kind::kTar : Source::Kind::kImageFolder;
}

Result<Source> OpenSource(const std::string& path, const SourceOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  Source s;
  const bool url = IsRemote(path);
  ReadAheadOptions ra;
  ra.max_bytes = options.read_ahead_bytes != ~uint64_t{0} ? options.read_ahead_bytes
                 : url                                    ? (64u << 20)
                                                          : 0;
  ra.threads = options.read_ahead_threads;
  Source::Kind kind;
  std::vector<std::string> tar_urls;
  std::vector<ObjectInfo> objects;
  if (options.columnar != nullptr) {
    s.kind = Source::Kind::kColumnar;
    s.num_samples = options.columnar->num_rows();
    s.classes = options.columnar->classes();
    s.sample_groups = options.columnar->group_sizes();
    s.group_window = options.columnar->shuffle_window();
    s.read_op = MakeColumnarReadOp(options.columnar);
    return s;
  }
  if (IsS3Prefix(path)) {
    // One listing says what the prefix holds and is the folder's listing.
    FEEDLINE_ASSIGN_OR_RETURN(objects, ListObjects(AsPrefix(path), options.http));
    if (objects.empty()) {
      return NotFoundError("'" + AsPrefix(path) +
                           "' holds no objects: nothing to load (a packed dataset has "
                           "manifest.json there, an image folder <class>/<image> keys)");
    }
    kind = KindOfListing(AsPrefix(path), objects, &tar_urls);
  } else {
    kind = DetectSourceKind(path, options.http);
  }
  if (kind == Source::Kind::kColumnar) {
    ColumnarOptions co;
    co.columns = options.columns;
    co.parts = options.parts;
    co.http = options.http;
    if (options.read_ahead_bytes != ~uint64_t{0} && options.read_ahead_bytes > 0) {
      co.cache_bytes = options.read_ahead_bytes;
    }
    co.read_ahead_threads = options.columnar_threads;
    co.shuffle_window = options.shuffle_window;
    FEEDLINE_ASSIGN_OR_RETURN(std::vector<std::string> files,
                              ColumnarDataset::ListFiles(path, options.http));
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ColumnarDataset> ds,
                              ColumnarDataset::Open(files, co));
    s.kind = Source::Kind::kColumnar;
    s.num_samples = ds->num_rows();
    s.classes = ds->classes();
    s.sample_groups = ds->group_sizes();
    s.group_window = ds->shuffle_window();
    s.read_op = MakeColumnarReadOp(std::move(ds));
    return s;
  }
  if (url && kind == Source::Kind::kShards) {
    // remote data: a packed dataset served over HTTP(S) or in a bucket
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardDataset> ds,
                              ShardDataset::Open(path, options.http));
    s.kind = Source::Kind::kShards;
    s.num_samples = ds->num_records();
    s.classes = ds->manifest().classes;
    s.read_op = MakeShardReadOp(std::move(ds), ra);
    return s;
  }
  if (kind == Source::Kind::kTar) {
    TarOptions tar;
    tar.require_image = !options.parts;
    tar.http = options.http;
    FEEDLINE_ASSIGN_OR_RETURN(
        std::shared_ptr<const TarDataset> ds,
        tar_urls.empty() ? TarDataset::OpenPath(path, tar) : TarDataset::Open(tar_urls, tar));
    s.kind = Source::Kind::kTar;
    s.num_samples = ds->num_samples();
    s.read_op =
        options.parts ? MakeTarPartsReadOp(std::move(ds), ra) : MakeTarReadOp(std::move(ds), ra);
  } else if (kind == Source::Kind::kList) {
    ListOptions lo;
    lo.file_columns = options.list_file_columns;
    lo.path_label = !options.parts;
    lo.http = options.http;
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ListDataset> ds, ListDataset::Open(path, lo));
    s.kind = Source::Kind::kList;
    s.num_samples = ds->num_rows();
    s.read_op = MakeListReadOp(std::move(ds), options.parts);
  } else if (kind == Source::Kind::kShards) {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardDataset> ds, ShardDataset::Open(path));
    s.kind = Source::Kind::kShards;
    s.num_samples = ds->num_records();
    s.classes = ds->manifest().classes;
    s.read_op = MakeShardReadOp(std::move(ds), ra);
  } else {
    ImageFolderOptions fo = options.folder;
    fo.http = options.http;
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ImageFolder> folder,
                              IsS3Prefix(path) ? ImageFolder::FromObjects(path, objects, fo)
                                               : ImageFolder::Open(path, fo));
    s.kind = Source::Kind::kImageFolder;
    s.num_samples = folder->files.size();
    s.classes = folder->classes;
    s.folder = folder;
    s.read_op = MakeReadFileOp(std::move(folder), options.http, ra);
  }
  return s;
}

}  // namespace feedline
