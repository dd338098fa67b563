#include "feedline/source.h"

#include <filesystem>

#include "feedline/dataset.h"
#include "feedline/file.h"
#include "feedline/image_folder.h"
#include "feedline/webdataset.h"

namespace feedline {

const char* SourceKindName(Source::Kind kind) {
  switch (kind) {
    case Source::Kind::kShards: return "shards";
    case Source::Kind::kTar: return "tar";
    case Source::Kind::kImageFolder: return "folder";
  }
  return "?";
}

Result<Source> OpenSource(const std::string& path, const SourceOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  Source s;
  const bool url = IsUrl(path);
  ReadAheadOptions ra;
  ra.max_bytes = options.read_ahead_bytes != ~uint64_t{0} ? options.read_ahead_bytes : url ? (64u << 20) : 0;
  ra.threads = options.read_ahead_threads;
  if (url) {  // remote data: a packed dataset served over HTTP(S)
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardDataset> ds, ShardDataset::Open(path, options.http));
    s.kind = Source::Kind::kShards;
    s.num_samples = ds->num_records();
    s.classes = ds->manifest().classes;
    s.read_op = MakeShardReadOp(std::move(ds), ra);
    return s;
  }
  bool tars = fs::path(path).extension() == ".tar";
  if (!tars && fs::is_directory(path, ec) && !fs::exists(fs::path(path) / kManifestName, ec)) {
    bool any_tar = false, any_dir = false;
    // error_code overloads throughout: a symlink loop here must not throw.
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code entry_ec;
      any_tar |= it->path().extension() == ".tar";
      any_dir |= it->is_directory(entry_ec);
    }
    tars = any_tar && !any_dir;
  }
  if (tars) {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TarDataset> ds, TarDataset::OpenPath(path));
    s.kind = Source::Kind::kTar;
    s.num_samples = ds->num_samples();
    s.read_op = MakeTarReadOp(std::move(ds));
  } else if (fs::exists(fs::path(path) / kManifestName, ec)) {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ShardDataset> ds, ShardDataset::Open(path));
    s.kind = Source::Kind::kShards;
    s.num_samples = ds->num_records();
    s.classes = ds->manifest().classes;
    s.read_op = MakeShardReadOp(std::move(ds), ra);
  } else {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const ImageFolder> folder, ImageFolder::Open(path, options.folder));
    s.kind = Source::Kind::kImageFolder;
    s.num_samples = folder->files.size();
    s.classes = folder->classes;
    s.folder = folder;
    s.read_op = MakeReadFileOp(std::move(folder));
  }
  return s;
}

}  // namespace feedline
