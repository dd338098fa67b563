#include "feedline/source.h"

#include <filesystem>

#include "feedline/dataset.h"
#include "feedline/file.h"
#include "feedline/image_folder.h"
#include "feedline/list_dataset.h"
#include "feedline/webdataset.h"

namespace feedline {

const char* SourceKindName(Source::Kind kind) {
  switch (kind) {
    case Source::Kind::kShards: return "shards";
    case Source::Kind::kTar: return "tar";
    case Source::Kind::kImageFolder: return "folder";
    case Source::Kind::kList: return "list";
  }
  return "?";
}

Source::Kind DetectSourceKind(const std::string& path) {
  namespace fs = std::filesystem;
  if (IsUrl(path))
    return Source::Kind::kShards;  // remote data: a packed dataset served over HTTP(S)
  const fs::path ext = fs::path(path).extension();
  if (IsS3Url(path)) {
    // An object store: a .tar or list object by its name; a prefix holds a
    // packed dataset (its manifest.json is read at open).
    if (ext == ".tar") return Source::Kind::kTar;
    if (ext == ".csv" || ext == ".jsonl") return Source::Kind::kList;
    return Source::Kind::kShards;
  }
  if (ext == ".tar") return Source::Kind::kTar;
  if (ext == ".csv" || ext == ".jsonl") return Source::Kind::kList;
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return Source::Kind::kImageFolder;  // opening it names the problem
  if (fs::exists(fs::path(path) / kManifestName, ec)) return Source::Kind::kShards;
  bool any_tar = false, any_dir = false;
  // error_code overloads throughout: a symlink loop here must not throw.
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    any_tar |= it->path().extension() == ".tar";
    any_dir |= it->is_directory(entry_ec);
  }
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
  if (url && DetectSourceKind(path) == Source::Kind::kShards) {
    // remote data: a packed dataset served over HTTP(S) or in a bucket
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardDataset> ds,
                              ShardDataset::Open(path, options.http));
    s.kind = Source::Kind::kShards;
    s.num_samples = ds->num_records();
    s.classes = ds->manifest().classes;
    s.read_op = MakeShardReadOp(std::move(ds), ra);
    return s;
  }
  const Source::Kind kind = DetectSourceKind(path);
  if (kind == Source::Kind::kTar) {
    TarOptions tar;
    tar.require_image = !options.parts;
    tar.http = options.http;
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TarDataset> ds,
                              TarDataset::OpenPath(path, tar));
    s.kind = Source::Kind::kTar;
    s.num_samples = ds->num_samples();
    s.read_op = options.parts ? MakeTarPartsReadOp(std::move(ds)) : MakeTarReadOp(std::move(ds));
  } else if (kind == Source::Kind::kList) {
    ListOptions lo;
    lo.file_columns = options.list_file_columns;
    lo.path_label = !options.parts;
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
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ImageFolder> folder,
                              ImageFolder::Open(path, options.folder));
    s.kind = Source::Kind::kImageFolder;
    s.num_samples = folder->files.size();
    s.classes = folder->classes;
    s.folder = folder;
    s.read_op = MakeReadFileOp(std::move(folder));
  }
  return s;
}

}  // namespace feedline
