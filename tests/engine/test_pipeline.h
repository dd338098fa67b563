// Synthetic pipelines for engine tests: real ops with known outputs, optional
// timing jitter, failures and stalls.
#ifndef FEEDLINE_TESTS_ENGINE_TEST_PIPELINE_H_
#define FEEDLINE_TESTS_ENGINE_TEST_PIPELINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "feedline/loader.h"
#include "gtest/gtest.h"

namespace feedline::testing {

struct TestPipelineOptions {
  uint64_t num_samples = 100;
  size_t num_floats = 16;       // size of the "noise" field
  std::set<uint64_t> fail_ids;  // "read" fails on these ids...
  StatusCode fail_code = StatusCode::kDataLoss;
  uint32_t max_jitter_us = 0;          // ...and sleeps a random 0..max us
  std::atomic<bool>* block = nullptr;  // "read" spins (polling cancelled()) while *block
  uint64_t block_id = ~uint64_t{0};    // ...only for this id (all ids if ~0)
};

// Fields: "meta" int64 {3} = {id, label, is_padding}; "noise" float32 {n}
// drawn from the sample's rng in op "augment". Op "read" sets label = 3*id+1
// and a location, with optional jitter / failure / blocking.
inline Pipeline MakeTestPipeline(const TestPipelineOptions& o) {
  Pipeline p;
  p.num_samples = o.num_samples;
  p.fields = {{"meta", DType::kInt64, {3}},
              {"noise", DType::kFloat32, {static_cast<int64_t>(o.num_floats)}}};
  p.ops.push_back(MakeOp("read", [o](Sample& s) -> Status {
    s.label = static_cast<int64_t>(3 * s.id() + 1);
    s.location().file = "synthetic.fls";
    s.location().record = static_cast<int64_t>(s.id());
    s.location().offset = static_cast<int64_t>(s.id() * 100);
    s.location().key = "s" + std::to_string(s.id());
    if (o.max_jitter_us > 0) {
      // Timing jitter from a thread-local source, so that completion order
      // varies run to run while outputs must not.
      thread_local uint64_t state = std::hash<std::thread::id>()(std::this_thread::get_id());
      state = Mix64(state + 1);
      std::this_thread::sleep_for(std::chrono::microseconds(state % (o.max_jitter_us + 1)));
    }
    if (o.block != nullptr && (o.block_id == ~uint64_t{0} || o.block_id == s.id())) {
      while (o.block->load() && !s.cancelled()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (s.cancelled()) return CancelledError("read cancelled");
    }
    if (o.fail_ids.count(s.id())) return Status(o.fail_code, "checksum mismatch");
    return Status::OK();
  }));
  const size_t n = o.num_floats;
  p.ops.push_back(MakeOp("augment", [n](Sample& s) -> Status {
    int64_t* meta = s.output_as<int64_t>(0);
    meta[0] = static_cast<int64_t>(s.id());
    meta[1] = s.label;
    meta[2] = s.is_padding() ? 1 : 0;
    float* noise = s.output_as<float>(1);
    SampleRng rng = s.rng();
    for (size_t i = 0; i < n; ++i) noise[i] = static_cast<float>(rng.Uniform());
    return Status::OK();
  }));
  return p;
}

// A delivered batch, copied out.
struct BatchCopy {
  uint64_t epoch = 0, index = 0;
  std::vector<uint64_t> ids;
  std::vector<char> bytes;  // every field's valid bytes, concatenated
  size_t num_padding = 0;
  bool operator==(const BatchCopy&) const = default;
};

inline BatchCopy Copy(const Batch& b) {
  BatchCopy c;
  c.epoch = b.epoch();
  c.index = b.index();
  c.ids.assign(b.sample_ids().begin(), b.sample_ids().end());
  c.num_padding = b.num_padding();
  for (size_t f = 0; f < b.num_fields(); ++f) {
    const char* p = static_cast<const char*>(b.data(f));
    c.bytes.insert(c.bytes.end(), p, p + b.field_bytes(f));
  }
  return c;
}

// Reads up to `max_batches` batches or to the end of the current epoch.
inline std::vector<BatchCopy> DrainEpoch(Loader& loader, size_t max_batches = SIZE_MAX) {
  std::vector<BatchCopy> out;
  while (out.size() < max_batches) {
    Batch b;
    bool end = false;
    Status st = loader.Next(&b, &end);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok() || end) break;
    out.push_back(Copy(b));
  }
  return out;
}

inline std::unique_ptr<Loader> MustCreate(Pipeline p, LoaderOptions o) {
  auto r = Loader::Create(std::move(p), std::move(o));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Threads in this process, from /proc.
inline int CountThreads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// The thread count once it reaches `expected`, or after `timeout_ms`: a
// joined thread can still be counted in /proc for a moment (pthread_join
// returns when the kernel clears the thread id, before the task is reaped).
inline int CountThreadsSettled(int expected, int timeout_ms = 2000) {
  int n = CountThreads();
  for (int waited = 0; n != expected && waited < timeout_ms; waited += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = CountThreads();
  }
  return n;
}

// The thread count once it has held still for 25 ms (at most `timeout_ms`):
// a baseline read right after a join can still count the joined thread
// (see CountThreadsSettled), and would then wait for one thread too many.
inline int CountThreadsStable(int timeout_ms = 1000) {
  int n = CountThreads(), still_ms = 0;
  for (int waited = 0; still_ms < 25 && waited < timeout_ms; waited += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int now = CountThreads();
    still_ms = now == n ? still_ms + 5 : 0;
    n = now;
  }
  return n;
}

// The thread count to compare against after loaders are gone, taken after
// one loader has come and gone: sanitizer runtimes start helper threads
// lazily, and those are not ours.
inline int ThreadBaseline() {
  {
    auto warm = Loader::Create(MakeTestPipeline({.num_samples = 8}), LoaderOptions{});
    Batch b;
    bool end = false;
    if (warm.ok()) (void)(*warm)->Next(&b, &end);
  }
  return CountThreadsStable();
}

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_ENGINE_TEST_PIPELINE_H_
