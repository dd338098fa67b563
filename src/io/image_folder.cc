#include "feedline/image_folder.h"

#include "feedline/file.h"
#include "src/core/detail/fingerprint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace feedline {
namespace {

namespace fs = std::filesystem;

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// A sample file larger than this is refused before any allocation: no image
// within DecodeLimits' defaults comes close, and a stray multi-GB file must
// not take the process's memory.
constexpr int64_t kMaxFileBytes = int64_t{256} << 20;

// Reads a whole file into `out` through the RandomAccessFile seam (one
// pread loop for every local reader).
Status ReadWholeFile(const std::string& path, std::vector<uint8_t>* out) {
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(path));
  if (file->size() > static_cast<uint64_t>(kMaxFileBytes)) {
    return ResourceExhaustedError("'" + path + "' is " + std::to_string(file->size()) + " bytes, over the " +
                                  std::to_string(kMaxFileBytes) + "-byte per-sample limit");
  }
  out->resize(file->size());
  return file->Read(0, out->size(), out->data());
}

// Over the classes and every sample's relative path and label, in order.
uint64_t FolderFingerprint(const ImageFolder& f) {
  core::detail::Fingerprint fp;
  fp.Add(std::string_view("folder"));
  for (const std::string& c : f.classes) fp.Add(c);
  for (size_t i = 0; i < f.files.size(); ++i) fp.Add(f.files[i]).Add(static_cast<uint64_t>(f.labels[i]));
  return fp.value();
}

class ReadFileOp final : public SampleOp {
 public:
  explicit ReadFileOp(std::shared_ptr<const ImageFolder> folder)
      : folder_(std::move(folder)), fingerprint_(FolderFingerprint(*folder_)) {}
  std::string_view name() const override { return "read"; }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const std::string& rel = folder_->files[s.id()];
    const std::string path = folder_->root + "/" + rel;
    s.location().file = path;
    s.location().key = rel;
    s.label = folder_->labels[s.id()];
    FEEDLINE_RETURN_IF_ERROR(ReadWholeFile(path, &s.scratch()));
    s.set_data(s.scratch());
    return Status::OK();
  }

 private:
  std::shared_ptr<const ImageFolder> folder_;
  const uint64_t fingerprint_;
};

}  // namespace

Result<std::shared_ptr<const ImageFolder>> ImageFolder::Open(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFoundError("image folder '" + root + "' is not a directory");
  auto folder = std::make_shared<ImageFolder>();
  folder->root = root;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory()) folder->classes.push_back(e.path().filename().string());
  }
  if (ec) return UnavailableError("cannot list '" + root + "': " + ec.message());
  std::sort(folder->classes.begin(), folder->classes.end());
  if (folder->classes.empty()) {
    return InvalidArgumentError("image folder '" + root + "' has no class sub-folders");
  }
  for (size_t label = 0; label < folder->classes.size(); ++label) {
    std::vector<std::string> files;
    const fs::path dir = fs::path(root) / folder->classes[label];
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
      if (it->is_regular_file() && IsImageFile(it->path())) {
        files.push_back(fs::relative(it->path(), root).string());
      }
    }
    if (ec) return UnavailableError("cannot list '" + dir.string() + "': " + ec.message());
    std::sort(files.begin(), files.end());
    for (std::string& f : files) {
      folder->files.push_back(std::move(f));
      folder->labels.push_back(static_cast<int64_t>(label));
    }
  }
  if (folder->files.empty()) {
    return InvalidArgumentError("image folder '" + root + "' has no .jpg/.jpeg/.png files");
  }
  return std::shared_ptr<const ImageFolder>(std::move(folder));
}

std::shared_ptr<const SampleOp> MakeReadFileOp(std::shared_ptr<const ImageFolder> folder) {
  return std::make_shared<ReadFileOp>(std::move(folder));
}

std::shared_ptr<const SampleOp> MakeLabelOp(size_t field) {
  return MakeOp("label", [field](Sample& s) {
    *s.output_as<int64_t>(field) = s.label;
    return Status::OK();
  });
}

std::shared_ptr<const SampleOp> MakeRawBytesOp(size_t bytes_field, size_t length_field,
                                               uint64_t max_bytes) {
  return MakeOp("raw_bytes", [=](Sample& s) {
    const std::span<const uint8_t> data = s.data();
    if (data.size() > max_bytes) {
      return ResourceExhaustedError("record is " + std::to_string(data.size()) +
                                    " bytes, over max_record_bytes=" + std::to_string(max_bytes));
    }
    uint8_t* out = s.output_as<uint8_t>(bytes_field);
    std::memcpy(out, data.data(), data.size());
    std::memset(out + data.size(), 0, max_bytes - data.size());
    *s.output_as<int64_t>(length_field) = static_cast<int64_t>(data.size());
    return Status::OK();
  });
}

Pipeline MakeRawPipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples, uint64_t max_bytes) {
  Pipeline p;
  p.num_samples = num_samples;
  p.fields = {{"bytes", DType::kUInt8, {static_cast<int64_t>(max_bytes)}},
              {"length", DType::kInt64, {}},
              {"label", DType::kInt64, {}}};
  p.ops = {std::move(read_op), MakeRawBytesOp(0, 1, max_bytes), MakeLabelOp(2)};
  return p;
}

Pipeline MakeImagePipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                           const ImageTransform& transform) {
  Pipeline p;
  p.num_samples = num_samples;
  p.fields = {ImageField(transform), {"label", DType::kInt64, {}}};
  p.ops = {std::move(read_op), MakeImageOp(transform, 0), MakeLabelOp(1)};
  return p;
}

Pipeline RawFolderPipeline(std::shared_ptr<const ImageFolder> folder, uint64_t max_bytes) {
  const uint64_t n = folder->files.size();
  return MakeRawPipeline(MakeReadFileOp(std::move(folder)), n, max_bytes);
}

Pipeline ImageFolderPipeline(std::shared_ptr<const ImageFolder> folder, const ImageTransform& transform) {
  const uint64_t n = folder->files.size();
  return MakeImagePipeline(MakeReadFileOp(std::move(folder)), n, transform);
}

}  // namespace feedline
