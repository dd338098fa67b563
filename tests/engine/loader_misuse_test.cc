// Misuse has defined behaviour (docs/reliability.md 37): two threads iterating one
// loader, and a forked child using its parent's loader, get a clear error;
// never duplicated samples, a hang or an abort.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "feedline/loader.h"
#include "gtest/gtest.h"
#include "tests/engine/test_pipeline.h"

namespace feedline {
namespace {

using testing::MakeTestPipeline;

std::unique_ptr<Loader> MustCreate(Pipeline p, LoaderOptions o) {
  Result<std::unique_ptr<Loader>> r = Loader::Create(std::move(p), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(r).value();
}

TEST(LoaderMisuseTest, ASecondThreadInsideNextGetsAnErrorAndNoSampleIsDuplicated) {
  std::atomic<bool> block{true};
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.ring_depth = 3;
  auto loader =
      MustCreate(MakeTestPipeline({.num_samples = 16, .block = &block, .block_id = 0}), o);
  // Thread A waits inside Next for batch 0, whose first sample is blocked.
  // It may itself be refused while this thread is inside its short NextFor:
  // then it tries again (that refusal is the behaviour under test too).
  Batch first;
  Status first_status;
  int a_refused = 0;
  std::thread a([&] {
    bool end = false;
    while ((first_status = loader->Next(&first, &end)).code() == StatusCode::kFailedPrecondition)
      ++a_refused;
  });
  // Until A is inside, a short NextFor just times out (consuming nothing);
  // once it is, it must be refused.
  Status refused;
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < guard) {
    Batch b;
    bool end = false, timed_out = false;
    refused = loader->NextFor(&b, &end, std::chrono::milliseconds(1), &timed_out);
    if (!refused.ok()) break;
    ASSERT_TRUE(timed_out);  // batch 0 cannot be ready while its sample is blocked
  }
  const bool set_epoch_refused = !loader->SetEpoch(0).ok();
  block = false;
  a.join();
  ASSERT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("another thread"), std::string::npos) << refused;
  EXPECT_TRUE(set_epoch_refused);
  std::printf("thread A was refused %d time(s) before it got in\n", a_refused);
  ASSERT_TRUE(first_status.ok()) << first_status;
  // The rest of the epoch, from this thread: every sample exactly once.
  std::map<uint64_t, int> seen;
  for (uint64_t id : first.sample_ids()) ++seen[id];
  while (true) {
    Batch b;
    bool end = false;
    ASSERT_TRUE(loader->Next(&b, &end).ok());
    if (end) break;
    for (uint64_t id : b.sample_ids()) ++seen[id];
  }
  ASSERT_EQ(seen.size(), 16u);
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "sample " << id;
}

#if defined(__SANITIZE_THREAD__)
#define FEEDLINE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FEEDLINE_TSAN 1
#endif
#endif

TEST(LoaderMisuseTest, AForkedChildGetsAClearErrorAndCanDropTheLoader) {
#ifdef FEEDLINE_TSAN
  GTEST_SKIP() << "TSan does not support fork() with live threads";
#endif
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  auto loader = MustCreate(MakeTestPipeline({.num_samples = 32}), o);
  Batch held;
  bool end = false;
  ASSERT_TRUE(loader->Next(&held, &end).ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);  // a hang kills the child with SIGALRM, which the parent sees
    Batch b;
    bool e = false;
    const Status st = loader->Next(&b, &e);
    const bool refused = st.code() == StatusCode::kFailedPrecondition &&
                         st.message().find("forked child") != std::string_view::npos &&
                         loader->SetEpoch(1).code() == StatusCode::kFailedPrecondition;
    held = Batch();  // releasing a batch in the child
    loader.reset();  // and the loader: neither joins nor locks
    _exit(refused ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child died by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's loader is untouched.
  int batches = 1;
  while (true) {
    Batch b;
    ASSERT_TRUE(loader->Next(&b, &end).ok());
    if (end) break;
    ++batches;
  }
  EXPECT_EQ(batches, 8);
}

}  // namespace
}  // namespace feedline
