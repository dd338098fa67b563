// Datasets of more files than the descriptor limit (src/io/file_cache.h):
// 100,000 one-sample WebDataset tars, and a packed dataset of 1,500 shards,
// each read in shuffled order through a real Loader under a soft and hard
// RLIMIT_NOFILE of 1,024, every record delivered once with its bytes.
//
// Its own binary: lowering the hard limit cannot be undone, and the default
// descriptor cache is sized from the limit when first used, so the limit is
// set before anything here opens a dataset.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "feedline/batch.h"
#include "feedline/dataset.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "feedline/shard.h"
#include "feedline/webdataset.h"
#include "gtest/gtest.h"
#include "src/io/file_cache.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

constexpr rlim_t kLimit = 1024;
constexpr uint32_t kThreads = 2;
constexpr uint64_t kMaxBytes = 32;

// Files OpenFile has handed out that are still alive, and the most at once.
struct LiveFiles {
  std::atomic<int64_t> live{0}, peak{0};
};

class CountedFile final : public RandomAccessFile {
 public:
  CountedFile(std::unique_ptr<RandomAccessFile> inner, LiveFiles* c)
      : inner_(std::move(inner)), c_(c) {
    const int64_t now = ++c_->live;
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
  LiveFiles* c_;
};

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n - 1;  // the iterator's own
}

std::string Payload(uint64_t i) { return "record-" + std::to_string(i); }

class FileLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rlimit now{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
    if (now.rlim_max < kLimit)
      GTEST_SKIP() << "hard RLIMIT_NOFILE " << now.rlim_max << " < " << kLimit;
    // Soft and hard: OpenFile raises the soft limit to the hard one on
    // EMFILE, which must not rescue a reader that holds too many files.
    const rlimit low{kLimit, kLimit};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    // Shards are fsynced when written: on tmpfs that costs nothing.
    const bool shm = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())
                             .find("Shards") != std::string::npos &&
                     fs::is_directory("/dev/shm");
    dir_ = (shm ? fs::path("/dev/shm") : fs::temp_directory_path()) /
           ("feedline_file_limit_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    previous_ = SetFileWrapperForTesting([c = &counts_](std::unique_ptr<RandomAccessFile> f) {
      return std::unique_ptr<RandomAccessFile>(new CountedFile(std::move(f), c));
    });
  }
  void TearDown() override {
    SetFileWrapperForTesting(previous_);
    fs::remove_all(dir_);
  }

  // One shuffled epoch through a Loader: every id once, with Payload(id)
  // and label id % 1000; the descriptors stay within the cache's bound.
  void ReadEveryRecordOnce(std::shared_ptr<const SampleOp> read_op, uint64_t n) {
    const size_t capacity = io::FileCache::Default()->capacity();
    EXPECT_EQ(capacity, io::FileCache::CapacityFor(kLimit));  // sized from the lowered limit
    LoaderOptions o;
    o.batch_size = 256;
    o.shuffle = true;
    o.seed = 7;
    o.num_threads = kThreads;
    auto loader = Loader::Create(MakeRawPipeline(std::move(read_op), n, kMaxBytes), o);
    ASSERT_TRUE(loader.ok()) << loader.status();
    std::vector<uint8_t> seen(n, 0);
    size_t max_fds = 0;
    Batch b;
    bool end = false;
    while (true) {
      const Status st = (*loader)->Next(&b, &end);
      ASSERT_TRUE(st.ok()) << st;
      if (end) break;
      max_fds = std::max(max_fds, OpenDescriptors());
      const auto bytes = b.field_as<const uint8_t>(0);
      const auto length = b.field_as<const int64_t>(1), label = b.field_as<const int64_t>(2);
      for (size_t i = 0; i < b.size(); ++i) {
        const uint64_t id = b.sample_ids()[i];
        ASSERT_LT(id, n);
        ++seen[id];
        const auto* p = reinterpret_cast<const char*>(bytes.data() + i * kMaxBytes);
        ASSERT_EQ(std::string(p, static_cast<size_t>(length[i])), Payload(id)) << id;
        ASSERT_EQ(label[i], static_cast<int64_t>(id % 1000)) << id;
      }
    }
    for (uint64_t id = 0; id < n; ++id) ASSERT_EQ(seen[id], 1) << "record " << id;
    // Exact, through the seam: the cache's files plus one per read in flight.
    EXPECT_LE(counts_.peak, static_cast<int64_t>(capacity + 2 * kThreads));  // file_cache.h
    // And what the kernel says, whatever else the process holds.
    EXPECT_LT(max_fds, kLimit);
    EXPECT_LE(max_fds, capacity + 2 * kThreads + 64);
    EXPECT_GT(io::FileCache::Default()->reopens(), 0u);
  }

  fs::path dir_;
  LiveFiles counts_;
  FileWrapper previous_;
};

TEST_F(FileLimitTest, HundredThousandTarsUnderADescriptorLimitOf1024) {
  constexpr uint64_t kTars = 100000;
  for (uint64_t i = 0; i < kTars; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "t%06llu", static_cast<unsigned long long>(i));
    testing::TarWriter w;
    w.Add(std::string(name) + ".jpg", Payload(i));
    w.Add(std::string(name) + ".cls", std::to_string(i % 1000));
    const std::string tar = w.Finish();
    std::ofstream((dir_ / (std::string(name) + ".tar")).string(), std::ios::binary)
        .write(tar.data(), static_cast<std::streamsize>(tar.size()));
  }
  auto ds = TarDataset::OpenPath(dir_.string());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->num_samples(), kTars);
  EXPECT_LE(counts_.live, static_cast<int64_t>(io::FileCache::Default()->capacity()));
  ReadEveryRecordOnce(MakeTarReadOp(*ds), kTars);
  ds->reset();
  EXPECT_EQ(counts_.live, 0);  // the dataset gone, its descriptors are too
}

TEST_F(FileLimitTest, FifteenHundredShardsUnderADescriptorLimitOf1024) {
  constexpr uint64_t kShards = 1500, kPerShard = 2;
  DatasetManifest m;
  for (uint64_t s = 0; s < kShards; ++s) {
    const std::string name = "shard-" + std::to_string(s) + ".fls";
    auto w = ShardWriter::Create((dir_ / name).string());
    ASSERT_TRUE(w.ok()) << w.status();
    std::vector<std::string> keys, data;
    for (uint64_t r = 0; r < kPerShard; ++r) {
      const uint64_t id = s * kPerShard + r;
      const std::string key = "k" + std::to_string(id), payload = Payload(id);
      ShardRecord rec;
      rec.label = static_cast<int64_t>(id % 1000);
      rec.key = key;
      rec.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()),
                                          payload.size());
      ASSERT_TRUE((*w)->Add(rec).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    m.shards.push_back({name, kPerShard, (*w)->bytes(), (*w)->file_crc32c()});
    m.records += kPerShard;
  }
  std::ofstream((dir_ / kManifestName).string()) << m.ToJson();
  auto ds = ShardDataset::Open(dir_.string());
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->num_records(), kShards * kPerShard);
  ReadEveryRecordOnce(MakeShardReadOp(*ds), kShards * kPerShard);
}

}  // namespace
}  // namespace feedline
