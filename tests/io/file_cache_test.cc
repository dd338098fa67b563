// The descriptor cache (src/io/file_cache.h): at most `capacity` idle
// descriptors, reopened on demand with the same bytes; a reopen that fails
// or finds a different size is the read's error, naming the file.
// Descriptors are counted exactly through OpenFile's test seam: every file
// the cache opens passes through a wrapper that counts the live ones.
#include "src/io/file_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

// Counts the files OpenFile hands out that are still alive, and the most
// alive at once.
struct LiveFiles {
  std::atomic<int64_t> live{0}, peak{0}, opened{0};
};

class CountedFile final : public RandomAccessFile {
 public:
  CountedFile(std::unique_ptr<RandomAccessFile> inner, std::shared_ptr<LiveFiles> c)
      : inner_(std::move(inner)), c_(std::move(c)) {
    const int64_t now = ++c_->live;
    ++c_->opened;
    for (int64_t p = c_->peak.load(); now > p && !c_->peak.compare_exchange_weak(p, now);) {
    }
  }
  ~CountedFile() override { --c_->live; }
  Status Read(uint64_t offset, size_t n, void* out) const override {
    return inner_->Read(offset, n, out);
  }
  uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

 private:
  std::unique_ptr<RandomAccessFile> inner_;
  std::shared_ptr<LiveFiles> c_;
};

class FileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_file_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    counts_ = std::make_shared<LiveFiles>();
    previous_ = SetFileWrapperForTesting([c = counts_](std::unique_ptr<RandomAccessFile> f) {
      return std::unique_ptr<RandomAccessFile>(new CountedFile(std::move(f), c));
    });
  }
  void TearDown() override {
    SetFileWrapperForTesting(previous_);
    fs::remove_all(dir_);
  }

  // File i holds 100 + i bytes, each (i * 7 + offset) mod 256.
  std::string Contents(int i) const {
    std::string s(100 + i, '\0');
    for (size_t b = 0; b < s.size(); ++b) s[b] = static_cast<char>(i * 7 + b);
    return s;
  }
  std::string Write(int i) {
    const std::string path = (dir_ / ("f" + std::to_string(i))).string();
    const std::string s = Contents(i);
    std::ofstream(path, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size()));
    return path;
  }
  static std::string ReadAll(const RandomAccessFile& f, Status* st) {
    std::string s(f.size(), '\0');
    *st = f.Read(0, s.size(), s.data());
    return s;
  }

  fs::path dir_;
  std::shared_ptr<LiveFiles> counts_;
  FileWrapper previous_;
};

TEST(FileCacheCapacityTest, HalfTheSoftLimitLeavingSomeToTheRest) {
  EXPECT_EQ(io::FileCache::CapacityFor(1024), 512u);
  EXPECT_EQ(io::FileCache::CapacityFor(4096), 2048u);
  EXPECT_EQ(io::FileCache::CapacityFor(300), 44u);  // 256 left to the rest of the process
  EXPECT_EQ(io::FileCache::CapacityFor(16), io::FileCache::kMinCapacity);
  EXPECT_EQ(io::FileCache::CapacityFor(1 << 20), io::FileCache::kMaxCapacity);
  EXPECT_EQ(io::FileCache::CapacityFor(RLIM_INFINITY), io::FileCache::kMaxCapacity);
}

TEST_F(FileCacheTest, HoldsAtMostCapacityDescriptorsAndReopensWithTheSameBytes) {
  auto cache = io::FileCache::Create(3);
  std::vector<std::unique_ptr<RandomAccessFile>> files;
  for (int i = 0; i < 10; ++i) {
    auto f = cache->Open(Write(i));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->size(), 100u + i);
    files.push_back(std::move(f).value());
  }
  EXPECT_EQ(cache->open_files(), 3u);
  EXPECT_EQ(counts_->live, 3);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      Status st;
      EXPECT_EQ(ReadAll(*files[i], &st), Contents(i)) << i;
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_LE(counts_->live, 3);
    }
  }
  EXPECT_EQ(counts_->peak, 3);
  EXPECT_EQ(cache->reopens(), 30u);  // every read found its file closed (LRU, 10 files, 3 slots)
  // The most recent stay open: reading them again reopens nothing.
  Status st;
  ReadAll(*files[9], &st);
  ReadAll(*files[8], &st);
  EXPECT_EQ(cache->reopens(), 30u);
  files.clear();
  EXPECT_EQ(cache->open_files(), 0u);
  EXPECT_EQ(counts_->live, 0);
}

TEST_F(FileCacheTest, OpenErrorsAreOpenFilesErrors) {
  auto cache = io::FileCache::Create(2);
  auto missing = cache->Open((dir_ / "nope").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos) << missing.status();
  auto directory = cache->Open(dir_.string());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->open_files(), 0u);
}

TEST_F(FileCacheTest, AFileThatVanishedWhileClosedIsAReadErrorNamingIt) {
  auto cache = io::FileCache::Create(1);
  const std::string a = Write(0);
  auto fa = cache->Open(a);
  auto fb = cache->Open(Write(1));  // closes a
  ASSERT_TRUE(fa.ok() && fb.ok());
  fs::remove(a);
  Status st;
  ReadAll(**fa, &st);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st;
  EXPECT_NE(st.message().find("'" + a + "'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("reopening"), std::string::npos) << st;
  // Every read keeps saying so; the other file is unaffected.
  ReadAll(**fa, &st);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st;
  EXPECT_EQ(ReadAll(**fb, &st), Contents(1));
  EXPECT_TRUE(st.ok()) << st;
}

TEST_F(FileCacheTest, AFileThatChangedSizeWhileClosedIsAReadErrorNamingIt) {
  auto cache = io::FileCache::Create(1);
  const std::string a = Write(0);
  auto fa = cache->Open(a);
  auto fb = cache->Open(Write(1));
  ASSERT_TRUE(fa.ok() && fb.ok());
  std::ofstream(a, std::ios::binary | std::ios::app) << "more";
  Status st;
  ReadAll(**fa, &st);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st;
  EXPECT_NE(st.message().find("'" + a + "' changed size"), std::string::npos) << st;
  EXPECT_NE(st.message().find("100 bytes then, 104 now"), std::string::npos) << st;
}

// Threads x capacity: every read returns its own file's bytes, and the
// descriptors alive never exceed capacity + one per thread (a read in
// flight keeps the file it took).
TEST_F(FileCacheTest, ConcurrentReadsSeeTheirOwnBytesWithinTheBound) {
  constexpr int kFiles = 24;
  std::vector<std::string> paths;
  for (int i = 0; i < kFiles; ++i) paths.push_back(Write(i));
  for (const int threads : {2, 4, 8}) {
    for (const size_t capacity : {1, 3, 16}) {
      counts_->peak = counts_->live.load();
      auto cache = io::FileCache::Create(capacity);
      std::vector<std::unique_ptr<RandomAccessFile>> files;
      for (const std::string& p : paths) files.push_back(std::move(cache->Open(p)).value());
      std::atomic<int> bad{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          std::mt19937 rng(static_cast<uint32_t>(t * 7919 + capacity));
          for (int k = 0; k < 400; ++k) {
            const int i = static_cast<int>(rng() % kFiles);
            Status st;
            if (ReadAll(*files[i], &st) != Contents(i) || !st.ok()) ++bad;
          }
        });
      }
      for (std::thread& th : pool) th.join();
      EXPECT_EQ(bad, 0) << threads << " threads, capacity " << capacity;
      // Each reader: the file it reads, and one it reopened or dropped and
      // has not yet inserted or closed (file_cache.h).
      EXPECT_LE(counts_->peak, static_cast<int64_t>(capacity) + 2 * threads)
          << threads << " threads, capacity " << capacity;
      EXPECT_LE(cache->open_files(), capacity);
      files.clear();
      EXPECT_EQ(counts_->live, 0);
    }
  }
}

}  // namespace
}  // namespace feedline
