// ImageFolder: layout, labels, torchvision's listing order (sorted walk,
// every extension, symlinks, loops, hidden and empty directories, non-UTF-8
// names), read errors with their path, size cap, and the whole image
// pipeline through the loader on real files. The Python side compares the
// same listing with torchvision itself (tests/integration/
// test_image_folder_parity.py).
#include "feedline/image_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "gtest/gtest.h"
#include "tests/image/test_images.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("feedline_image_folder_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    const RgbImage img = testing::Noise(40, 30, 1);
    const std::vector<uint8_t> jpeg = testing::MustEncodeJpeg(img, 90);
    // Classes in non-sorted creation order; one nested file; one non-image.
    for (const char* path : {"zebra/b.jpg", "zebra/a.JPG", "ant/x/deep.jpeg", "ant/c.jpg"}) {
      Write(path, jpeg);
    }
    Write("ant/notes.txt", {'h', 'i'});
    Result<std::vector<uint8_t>> png = EncodePng(img);
    ASSERT_TRUE(png.ok());
    Write("zebra/p.png", *png);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::vector<uint8_t>& bytes) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }

  fs::path root_;
};

TEST_F(ImageFolderTest, SortedClassesGiveLabelsAndFilesAreSorted) {
  auto folder = ImageFolder::Open(root_.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->classes, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ((*folder)->files,
            (std::vector<std::string>{"ant/c.jpg", "ant/x/deep.jpeg", "zebra/a.JPG", "zebra/b.jpg",
                                      "zebra/p.png"}));
  EXPECT_EQ((*folder)->labels, (std::vector<int64_t>{0, 0, 1, 1, 1}));
}

TEST_F(ImageFolderTest, MissingOrEmptyFoldersAreClearErrors) {
  EXPECT_EQ(ImageFolder::Open((root_ / "nope").string()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ImageFolder::Open((root_ / "ant" / "c.jpg").string()).status().code(),
            StatusCode::kNotFound);
  fs::create_directories(root_ / "empty" / "class");
  Result<std::shared_ptr<const ImageFolder>> r = ImageFolder::Open((root_ / "empty").string());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("found no valid file for the classes 'class' ('" +
                                      (root_ / "empty" / "class").string() + "')"),
            std::string::npos)
      << r.status();
  fs::remove_all(root_ / "empty" / "class");
  Write("empty/file.jpg", {1});
  r = ImageFolder::Open((root_ / "empty").string());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("has no class directories"), std::string::npos) << r.status();
}

// A tree of its own for each listing test, files with one byte each.
class FolderListingTest : public ImageFolderTest {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("feedline_folder_listing_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void Files(std::initializer_list<const char*> paths) {
    for (const char* p : paths) Write(p, {1});
  }
  void Link(const std::string& target, const std::string& rel) {
    fs::create_directories((root_ / rel).parent_path());
    ASSERT_EQ(::symlink(target.c_str(), (root_ / rel).c_str()), 0) << rel;
  }
  Result<std::shared_ptr<const ImageFolder>> Open(const ImageFolderOptions& o = {}) {
    return ImageFolder::Open(root_.string(), o);
  }
};

TEST_F(FolderListingTest, DirectoriesComeInSortedPathOrderNotDepthFirst) {
  // sorted(os.walk()) sorts by path: "c/a" < "c/a-b" < "c/a/x" ('-' < '/'),
  // where a depth-first walk gives c/a, c/a/x, c/a-b.
  Files({"c/a/x/3.jpg", "c/a-b/2.jpg", "c/a/1.jpg", "c/z.jpg", "c/a/0.jpg", "b/q.png"});
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->classes, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ((*folder)->files,
            (std::vector<std::string>{"b/q.png", "c/z.jpg", "c/a/0.jpg", "c/a/1.jpg", "c/a-b/2.jpg",
                                      "c/a/x/3.jpg"}));
  EXPECT_EQ((*folder)->labels, (std::vector<int64_t>{0, 1, 1, 1, 1, 1}));
  EXPECT_EQ((*folder)->Path(0), (root_ / "b/q.png").string());
  // A root given with a trailing '/' gives the same paths (os.path.join).
  auto slash = ImageFolder::Open(root_.string() + "/");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ((*slash)->Path(0), (root_ / "b/q.png").string());
}

TEST_F(FolderListingTest, EveryTorchvisionExtensionCountsInAnyCase) {
  Files({"c/1.jpg", "c/2.JPEG", "c/3.Png", "c/4.ppm", "c/5.BMP", "c/6.pgm", "c/7.tif", "c/8.TIFF",
         "c/9.webp", "c/.png", "c/a.txt", "c/b.jpg.txt", "c/jpg", "c/c.gif"});
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  // Sorted by code point: '.' < digits.
  EXPECT_EQ((*folder)->files,
            (std::vector<std::string>{"c/.png", "c/1.jpg", "c/2.JPEG", "c/3.Png", "c/4.ppm",
                                      "c/5.BMP", "c/6.pgm", "c/7.tif", "c/8.TIFF", "c/9.webp"}));
  EXPECT_TRUE(HasImageExtension("x.JpEg"));
  EXPECT_FALSE(HasImageExtension("jpg"));
  EXPECT_FALSE(HasImageExtension("x.jpgx"));
}

TEST_F(FolderListingTest, SymlinkedFilesAndDirectoriesAreFollowed) {
  Files({"store/deep/p.jpg", "store/q.png", "c/own.jpg"});
  Link((root_ / "store/q.png").string(), "c/link.png");
  Link("../store", "c/linked");           // a directory link inside a class
  Link((root_ / "store").string(), "d");  // a class that is a link
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->classes, (std::vector<std::string>{"c", "d", "store"}));
  EXPECT_EQ(
      (*folder)->files,
      (std::vector<std::string>{"c/link.png", "c/own.jpg", "c/linked/q.png", "c/linked/deep/p.jpg",
                                "d/q.png", "d/deep/p.jpg", "store/q.png", "store/deep/p.jpg"}));
}

TEST_F(FolderListingTest, ASymlinkLoopIsNotEnteredAndItsFilesAreListedOnce) {
  Files({"c/a.jpg", "c/sub/b.jpg"});
  Link("..", "c/sub/up");        // c/sub/up -> c: back to an ancestor
  Link(".", "c/self");           // c/self -> c
  Link("../../c", "c/sub/abs");  // another route to c
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->files, (std::vector<std::string>{"c/a.jpg", "c/sub/b.jpg"}));
  // A link to itself at the root cannot be stat'ed: a clear error, no throw.
  Link("x", "x");
  auto r = Open();
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("cannot stat '" + (root_ / "x").string() + "'"),
            std::string::npos)
      << r.status();
}

TEST_F(FolderListingTest, ADanglingLinkWithAnImageNameIsListedAndFailsWhenRead) {
  Files({"c/a.jpg"});
  Link("nowhere.jpg", "c/broken.jpg");
  Link("loop.jpg", "c/loop.jpg");  // ELOOP when followed
  Link("nowhere", "c/broken_dir");
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_EQ((*folder)->files, (std::vector<std::string>{"c/a.jpg", "c/broken.jpg", "c/loop.jpg"}));
  LoaderOptions o;
  o.batch_size = 3;
  o.num_threads = 1;
  auto loader = Loader::Create(RawFolderPipeline(*folder, 16), o);
  ASSERT_TRUE(loader.ok());
  Batch b;
  bool end = false;
  Status st = (*loader)->Next(&b, &end);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("broken.jpg"), std::string::npos) << st;
}

TEST_F(FolderListingTest, AFifoWithAnImageNameIsAnErrorNamingIt) {
  Files({"c/a.jpg", "c/dir.jpg/inside.png"});  // a directory named like an image is walked
  ASSERT_EQ(::mkfifo((root_ / "c/other").c_str(), 0644), 0);  // no image name: not listed
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->files, (std::vector<std::string>{"c/a.jpg", "c/dir.jpg/inside.png"}));
  ASSERT_EQ(::mkfifo((root_ / "c/pipe.jpg").c_str(), 0644), 0);
  auto r = Open();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("'" + (root_ / "c/pipe.jpg").string() + "' is a FIFO"),
            std::string::npos)
      << r.status();
}

TEST_F(FolderListingTest, AnEmptyHiddenClassPointsAtSkipHiddenDirs) {
  Files({"c/a.jpg", "c/.ipynb_checkpoints/a-checkpoint.jpg", "d/.hidden/only.jpg"});
  fs::create_directories(root_ / ".ipynb_checkpoints");
  auto r = Open();
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("classes '.ipynb_checkpoints' ('" +
                                      (root_ / ".ipynb_checkpoints").string()),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("skip_hidden_dirs=True"), std::string::npos) << r.status();
  // Skipping hidden directories leaves d with no file: refused, naming d.
  ImageFolderOptions skip;
  skip.skip_hidden_dirs = true;
  r = Open(skip);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("classes 'd' ("), std::string::npos) << r.status();
  EXPECT_EQ(r.status().message().find("skip_hidden_dirs=True"), std::string::npos) << r.status();
  Files({"d/b.jpg"});
  r = Open(skip);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->classes, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ((*r)->files, (std::vector<std::string>{"c/a.jpg", "d/b.jpg"}));
  // Without the option the hidden sub-folders' files are listed, as torchvision does.
  fs::remove_all(root_ / ".ipynb_checkpoints");
  r = Open();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->files,
            (std::vector<std::string>{"c/a.jpg", "c/.ipynb_checkpoints/a-checkpoint.jpg", "d/b.jpg",
                                      "d/.hidden/only.jpg"}));
}

TEST_F(FolderListingTest, NonUtf8NamesSortAsPythonSortsTheirDecodedForm) {
  // "\xC3x" decodes (surrogateescape) to U+DCC3 'x', which Python sorts
  // after U+4E00 ("\xE4\xB8\x80"); as bytes it would come first.
  Files({"c/\xC3x.jpg", "c/\xE4\xB8\x80.jpg", "c/\xFF.png", "\xC3k/a.jpg", "\xE4\xB8\x80k/a.jpg"});
  auto folder = Open();
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->classes, (std::vector<std::string>{"c", "\xE4\xB8\x80k", "\xC3k"}));
  EXPECT_EQ((*folder)->files,
            (std::vector<std::string>{"c/\xE4\xB8\x80.jpg", "c/\xC3x.jpg", "c/\xFF.png",
                                      "\xE4\xB8\x80k/a.jpg", "\xC3k/a.jpg"}));
}

// The listing of an s3:// prefix holding the same tree: every regular
// file under root as key "pre/<rel>", in any order, plus directory markers.
std::vector<ObjectInfo> ObjectsOf(const fs::path& root, const std::string& prefix) {
  std::vector<ObjectInfo> objects;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    if (e.is_directory()) {
      objects.push_back({prefix + rel + "/", 0, "\"d41d8cd98f00b204e9800998ecf8427e\""});
    } else if (e.is_regular_file()) {
      objects.push_back({prefix + rel, fs::file_size(e.path()), "\"etag-" + rel + "\""});
    }
  }
  std::reverse(objects.begin(), objects.end());
  return objects;
}

TEST_F(FolderListingTest, AnObjectListingGivesTheSameFolderAsTheTreeOnDisk) {
  // Dashes, spaces, dots and UTF-8 around the '/' that sorts between them;
  // files at the root and non-images that are not samples.
  Files({"c/a/x/3.jpg", "c/a-b/2.jpg", "c/a b/9.png", "c/a/1.jpg", "c/z.jpg", "c/a/0.jpg",
         "b/q.png", "b/notes.txt", "b.x/k.JPG", "\xE4\xB8\x80/u.webp", "top.jpg", "c/a/.h/5.jpg"});
  auto local = Open();
  ASSERT_TRUE(local.ok()) << local.status();
  for (const char* root : {"s3://bucket/pre", "s3://bucket/pre/"}) {
    auto listed = ImageFolder::FromObjects(root, ObjectsOf(root_, "pre/"));
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ((*listed)->classes, (*local)->classes);
    EXPECT_EQ((*listed)->files, (*local)->files);
    EXPECT_EQ((*listed)->labels, (*local)->labels);
    EXPECT_EQ((*listed)->Path(0), "s3://bucket/pre/" + (*local)->files[0]);
    ASSERT_EQ((*listed)->etags.size(), (*local)->files.size());
    EXPECT_EQ((*listed)->etags[0], "\"etag-" + (*local)->files[0] + "\"");
    EXPECT_EQ((*listed)->sizes[0], 1u);
  }
  // The bucket's root as the folder.
  auto whole = ImageFolder::FromObjects("s3://bucket", ObjectsOf(root_, ""));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ((*whole)->files, (*local)->files);
  EXPECT_EQ((*whole)->Path(0), "s3://bucket/" + (*local)->files[0]);
  // Hidden directories skipped as on disk.
  ImageFolderOptions skip;
  skip.skip_hidden_dirs = true;
  auto local_skip = Open(skip);
  auto listed_skip = ImageFolder::FromObjects("s3://bucket/pre", ObjectsOf(root_, "pre/"), skip);
  ASSERT_TRUE(local_skip.ok() && listed_skip.ok()) << listed_skip.status();
  EXPECT_EQ((*listed_skip)->files, (*local_skip)->files);
}

TEST_F(FolderListingTest, AnObjectListingWithNoLocalEquivalentIsAnErrorNamingTheKey) {
  auto bad =
      ImageFolder::FromObjects("s3://b/p", {{"p/c/a.jpg", 1, "\"e\""}, {"p/c//x.jpg", 1, "\"e\""}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("key 'p/c//x.jpg'"), std::string::npos) << bad.status();
  bad = ImageFolder::FromObjects("s3://b/p", {{"p/c/../x.jpg", 1, "\"e\""}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status();
  // A class that is only a directory marker is torchvision's empty class.
  auto empty =
      ImageFolder::FromObjects("s3://b/p", {{"p/c/a.jpg", 1, "\"e\""}, {"p/d/", 0, "\"e\""}});
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("classes 'd' ('s3://b/p/d/')"), std::string::npos)
      << empty.status();
  // Only files at the root: no class directories, with the count listed.
  auto none = ImageFolder::FromObjects("s3://b/p", {{"p/a.jpg", 1, "\"e\""}});
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("has no class directories (1 objects"), std::string::npos)
      << none.status();
  EXPECT_EQ(ImageFolder::FromObjects("/local/dir", {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ImageFolderTest, ThePipelineDeliversImagesAndLabelsThroughTheLoader) {
  auto folder = *ImageFolder::Open(root_.string());
  LoaderOptions o;
  o.batch_size = 5;
  o.num_threads = 2;
  ImageTransform t = ImageNetEval(40, 32);
  auto loader = Loader::Create(ImageFolderPipeline(folder, t), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  Batch b;
  bool end = false;
  ASSERT_TRUE((*loader)->Next(&b, &end).ok());
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b.field(0).shape, (std::vector<int64_t>{3, 32, 32}));
  std::span<int64_t> labels = b.field_as<int64_t>(1);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(labels[i], folder->labels[b.sample_ids()[i]]);
}

TEST_F(ImageFolderTest, RawPipelineDeliversPaddedBytesAndLengths) {
  auto folder = *ImageFolder::Open(root_.string());
  uint64_t largest = 0;
  for (const std::string& f : folder->files)
    largest = std::max<uint64_t>(largest, fs::file_size(root_ / f));
  LoaderOptions o;
  o.batch_size = 5;
  o.num_threads = 2;
  auto loader = Loader::Create(RawFolderPipeline(folder, largest), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  Batch b;
  bool end = false;
  ASSERT_TRUE((*loader)->Next(&b, &end).ok());
  for (size_t i = 0; i < b.size(); ++i) {
    const std::string path = (root_ / folder->files[b.sample_ids()[i]]).string();
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> file(std::istreambuf_iterator<char>(in), {});
    ASSERT_EQ(b.field_as<int64_t>(1)[i], static_cast<int64_t>(file.size()));
    const uint8_t* row = b.field_as<uint8_t>(0).data() + i * largest;
    EXPECT_EQ(std::memcmp(row, file.data(), file.size()), 0);
    for (uint64_t k = file.size(); k < largest; ++k) ASSERT_EQ(row[k], 0);
  }
  // A limit below the largest file: that sample fails naming both sizes.
  auto small = Loader::Create(RawFolderPipeline(folder, 100), o);
  Status st = (*small)->Next(&b, &end);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("over max_record_bytes=100"), std::string::npos) << st;
}

TEST_F(ImageFolderTest, AFileThatVanishesIsASampleErrorNamingItsPath) {
  auto folder = *ImageFolder::Open(root_.string());
  fs::remove(root_ / "zebra/a.JPG");
  LoaderOptions o;
  o.batch_size = 5;
  o.num_threads = 2;
  auto loader = Loader::Create(ImageFolderPipeline(folder, ImageNetTrain(32)), o);
  Batch b;
  bool end = false;
  Status st = (*loader)->Next(&b, &end);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("zebra/a.JPG"), std::string::npos) << st;
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st;
  EXPECT_NE(st.message().find("op 'read'"), std::string::npos) << st;
}

TEST_F(ImageFolderTest, AHugeFileIsRefusedBeforeAllocation) {
  // A sparse 300 MiB "image": refused from its size, nothing read.
  const fs::path big = root_ / "ant" / "huge.jpg";
  const int fd = ::open(big.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{300} << 20), 0);
  ::close(fd);
  auto folder = *ImageFolder::Open(root_.string());
  LoaderOptions o;
  o.batch_size = 6;
  o.num_threads = 1;
  auto loader = Loader::Create(ImageFolderPipeline(folder, ImageNetTrain(32)), o);
  Batch b;
  bool end = false;
  Status st = (*loader)->Next(&b, &end);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("huge.jpg' is 314572800 bytes"), std::string::npos) << st;
}

}  // namespace
}  // namespace feedline
