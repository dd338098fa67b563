// ImageFolder: layout, labels, read errors with their path, size cap, and
// the whole image pipeline through the loader on real files.
#include "feedline/image_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "feedline/loader.h"
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
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

  fs::path root_;
};

TEST_F(ImageFolderTest, SortedClassesGiveLabelsAndFilesAreSorted) {
  auto folder = ImageFolder::Open(root_.string());
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ((*folder)->classes, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ((*folder)->files, (std::vector<std::string>{"ant/c.jpg", "ant/x/deep.jpeg", "zebra/a.JPG",
                                                        "zebra/b.jpg", "zebra/p.png"}));
  EXPECT_EQ((*folder)->labels, (std::vector<int64_t>{0, 0, 1, 1, 1}));
}

TEST_F(ImageFolderTest, MissingOrEmptyFoldersAreClearErrors) {
  EXPECT_EQ(ImageFolder::Open((root_ / "nope").string()).status().code(), StatusCode::kNotFound);
  fs::create_directories(root_ / "empty" / "class");
  Result<std::shared_ptr<const ImageFolder>> r = ImageFolder::Open((root_ / "empty").string());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no .jpg/.jpeg/.png files"), std::string::npos);
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
  for (const std::string& f : folder->files) largest = std::max<uint64_t>(largest, fs::file_size(root_ / f));
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
