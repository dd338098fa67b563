// ReadAhead (src/io/read_ahead.cc): bytes held never exceed the budget,
// fetches run in parallel, every record arrives intact, a plan change drops
// the old one, workers that overtake the fetchers pull them forward, and
// destruction with fetches in flight joins.
#include "src/io/read_ahead.h"

#include <atomic>
#include <fstream>
#include <string>
#include <chrono>
#include <numeric>
#include <thread>

#include "gtest/gtest.h"

namespace feedline::io {
namespace {

constexpr uint64_t kRecordBytes = 1000;

std::shared_ptr<const EpochPlan> Plan(uint64_t n, uint64_t seed) {
  auto p = std::make_shared<EpochPlan>();
  p->ids.resize(n);
  std::iota(p->ids.begin(), p->ids.end(), 0);
  for (uint64_t i = n - 1; i > 0; --i) std::swap(p->ids[i], p->ids[(i * 2654435761u + seed) % (i + 1)]);
  p->num_batches = 1;
  p->batch_size = n;
  p->first_padding = n;
  return p;
}

ReadAhead::FetchFn SlowFetch(std::atomic<int>* calls, int sleep_ms = 2) {
  return [calls, sleep_ms](uint64_t id, Fetched* f) {
    ++*calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    f->buffer.assign(kRecordBytes, static_cast<uint8_t>(id));
    f->data_offset = 10;
    f->data_size = kRecordBytes - 10;
    f->label = static_cast<int64_t>(id) * 3;
    return id == 77 ? DataLossError("record 77 is bad") : Status::OK();
  };
}

TEST(ReadAheadTest, DeliversEveryRecordWithinTheBudgetInParallel) {
  std::atomic<int> calls{0};
  ReadAhead ra(SlowFetch(&calls), [](uint64_t) { return kRecordBytes; }, 5 * kRecordBytes, 4);
  auto plan = Plan(100, 1);
  ra.SetPlan(plan, 0);
  int hits = 0;
  for (uint64_t id : plan->ids) {
    Fetched f;
    Status st;
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // the worker's own work
    if (!ra.Take(id, &f, &st)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a miss: it fetches the record itself
      continue;
    }
    ++hits;
    if (id == 77) {
      EXPECT_EQ(st.code(), StatusCode::kDataLoss);
      continue;
    }
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(f.label, static_cast<int64_t>(id) * 3);
    ASSERT_EQ(f.buffer.size(), kRecordBytes);
    EXPECT_EQ(f.buffer[500], static_cast<uint8_t>(id));
  }
  EXPECT_GE(hits, 90);  // the first few may be fetched by the "worker"
  EXPECT_LE(ra.peak_bytes(), 5 * kRecordBytes);
  EXPECT_GE(ra.peak_in_flight(), 2u);
  EXPECT_LE(ra.peak_in_flight(), 4u);
}

TEST(ReadAheadTest, AWorkerAheadOfTheFetchersPullsThemForward) {
  std::atomic<int> calls{0};
  ReadAhead ra(SlowFetch(&calls, 1), [](uint64_t) { return kRecordBytes; }, 8 * kRecordBytes, 2);
  auto plan = Plan(400, 2);
  ra.SetPlan(plan, 0);
  // The worker jumps to position 200 (e.g. it read positions 0-199 itself).
  Fetched f;
  Status st;
  EXPECT_FALSE(ra.Take(plan->ids[200], &f, &st));
  int hits = 0;
  for (uint64_t p = 201; p < 260; ++p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hits += ra.Take(plan->ids[p], &f, &st);
  }
  EXPECT_GE(hits, 45) << "the fetchers should have moved past position 200";
}

TEST(ReadAheadTest, ANewPlanDropsTheOldOneAndShutdownJoins) {
  std::atomic<int> calls{0};
  auto ra = std::make_unique<ReadAhead>(SlowFetch(&calls, 1), [](uint64_t) { return kRecordBytes; },
                                        20 * kRecordBytes, 4);
  ra->SetPlan(Plan(100, 3), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto other = Plan(100, 4);
  ra->SetPlan(other, 50);  // e.g. SetEpoch or a restore mid-epoch
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  int hits = 0;
  for (uint64_t p = 50; p < 100; ++p) {
    Fetched f;
    Status st;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the worker's own work
    hits += ra->Take(other->ids[p], &f, &st);
  }
  EXPECT_GE(hits, 40);
  EXPECT_LE(ra->peak_bytes(), 20 * kRecordBytes);
  ra->SetPlan(Plan(1000, 5), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ra.reset();  // fetches in flight: joins, no hang
}

int Threads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(ReadAheadTest, ANullPlanJoinsTheFetchersAndALaterPlanRestartsThem) {
  std::atomic<int> calls{0};
  const int before = Threads();
  ReadAhead ra(SlowFetch(&calls, 1), [](uint64_t) { return kRecordBytes; }, 4 * kRecordBytes, 3);
  EXPECT_EQ(Threads(), before);  // nothing runs before the first plan
  auto plan = Plan(50, 7);
  ra.SetPlan(plan, 0);
  EXPECT_EQ(Threads(), before + 3);
  ra.SetPlan(nullptr, 0);  // the loader closing
  EXPECT_EQ(Threads(), before);
  ra.SetPlan(plan, 10);
  Fetched f;
  Status st;
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(ra.Take(plan->ids[10], &f, &st));
}

TEST(ReadAheadTest, RecordsLargerThanTheBudgetAreLeftToTheWorker) {
  std::atomic<int> calls{0};
  ReadAhead ra(SlowFetch(&calls, 0), [](uint64_t id) { return id == 5 ? 100 * kRecordBytes : kRecordBytes; },
               10 * kRecordBytes, 2);
  auto plan = Plan(20, 6);
  ra.SetPlan(plan, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Fetched f;
  Status st;
  EXPECT_FALSE(ra.Take(5, &f, &st));
}

}  // namespace
}  // namespace feedline::io
