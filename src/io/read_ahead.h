// ReadAhead: fetches records ahead of the workers, in the loader's plan
// order, within a byte budget. The budget is reserved with each record's
// exact size before the fetch starts, so the bytes held never exceed it.
// Workers Take() a record when they reach it (waiting if it is in flight);
// a record that was not read ahead is simply fetched by the worker.
// A new plan (epoch, SetEpoch, restore) drops what was read for the old one.
//
// Thread safety: all methods are safe for concurrent use.
#ifndef FEEDLINE_SRC_IO_READ_AHEAD_H_
#define FEEDLINE_SRC_IO_READ_AHEAD_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "feedline/sample.h"
#include "feedline/sampler.h"
#include "feedline/status.h"
#include "src/core/mutex.h"

namespace feedline::io {

struct Fetched {
  std::vector<uint8_t> buffer;  // what the fetch read into
  size_t data_offset = 0;       // where the sample's data starts in `buffer`
  size_t data_size = 0;
  int64_t label = -1;
  std::string key;
  // Named parts (version-2 shard records): name, offset in `buffer`, size.
  struct Part {
    std::string name;
    size_t offset = 0, size = 0;
  };
  std::vector<Part> parts;
};

// Where a record's bytes lie, for coalescing: records of the same file whose
// spans follow each other (gaps up to kMaxGap) are read as one run.
struct Span {
  uint64_t file = 0;
  uint64_t begin = 0, end = 0;
};

// Reads runs of records: ids (in plan order, adjacent in one file) into
// outs[i], typically with one read of [span(ids.front()).begin,
// span(ids.back()).end). A failed run's records are fetched by the workers
// one by one, so its error is reported for the record it belongs to.
struct Coalescing {
  std::function<Span(uint64_t id)> span;
  std::function<Status(const std::vector<uint64_t>& ids, std::vector<Fetched>* outs)> fetch_run;
  static constexpr uint64_t kMaxGap = 64 << 10;       // bytes read and thrown away, at most
  static constexpr uint64_t kMaxRunBytes = 8u << 20;  // one request's body, at most
  static constexpr size_t kMaxRun = 256;              // records per run
};

class ReadAhead final : public BackgroundWork {
 public:
  using FetchFn = std::function<Status(uint64_t id, Fetched* out)>;
  using SizeFn = std::function<uint64_t(uint64_t id)>;

  // With `coalescing` (optional), consecutive records of the plan that are
  // adjacent in storage are fetched as one run: in storage order (no
  // shuffle) a remote shard is then one request per run of records, not
  // one per record.
  ReadAhead(FetchFn fetch, SizeFn size, uint64_t max_bytes, uint32_t threads,
            Coalescing coalescing = {});
  ~ReadAhead() override;  // stops the fetchers and joins them
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // A new plan; null stops and joins the fetchers (a later plan restarts them).
  void SetPlan(std::shared_ptr<const EpochPlan> plan, uint64_t first);

  // True if `id` was read ahead (or is in flight, then it waits): *out and
  // *status are its result. False: fetch it yourself.
  bool Take(uint64_t id, Fetched* out, Status* status);

  // Limits within (threads, max_bytes), set by the tuner: fetches in flight
  // and bytes held at most. A record larger than the byte limit (but within
  // max_bytes) is still fetched when nothing else is held.
  void SetLimits(uint32_t in_flight, uint64_t bytes) override;
  ReadAheadMetrics Metrics() const override;

  // BackgroundWork: the loader's plans, and the whole budget as reserved.
  void OnPlan(std::shared_ptr<const EpochPlan> plan, uint64_t first) override {
    SetPlan(std::move(plan), first);
  }
  uint64_t ReservedBytes() const override { return max_bytes_; }

  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t peak_bytes() const;
  uint64_t coalesced_runs() const;
  uint32_t peak_in_flight() const;

 private:
  struct Entry {
    uint64_t position = 0;  // in the plan
    bool ready = false;
    Status status;
    Fetched fetched;
    uint64_t reserved = 0;
  };
  void FetchLoop();
  void StartThreads();  // REQUIRES mu_ not held
  // After a miss at `id`: if the workers are ahead of the fetchers, move the
  // fetchers past them and drop what they read that nobody will take.
  void CatchUp(uint64_t id) REQUIRES(mu_);

  const FetchFn fetch_;
  const SizeFn size_;
  const Coalescing coalescing_;
  const uint64_t max_bytes_;
  const uint32_t num_threads_;

  mutable core::Mutex mu_;
  core::CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<const EpochPlan> plan_ GUARDED_BY(mu_);
  uint64_t next_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t peak_bytes_ GUARDED_BY(mu_) = 0;
  uint32_t in_flight_ GUARDED_BY(mu_) = 0;
  uint32_t peak_in_flight_ GUARDED_BY(mu_) = 0;
  uint32_t in_flight_limit_ GUARDED_BY(mu_) = 0;  // the tuner's limits
  uint64_t bytes_limit_ GUARDED_BY(mu_) = 0;
  uint64_t fetches_ GUARDED_BY(mu_) = 0;
  uint64_t fetch_ns_ GUARDED_BY(mu_) = 0;
  uint64_t fetched_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t runs_ GUARDED_BY(mu_) = 0;  // coalesced fetches of two or more records
  std::unordered_map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
  // Only SetPlan touches it, and its calls are serialised (SampleOp::OnPlan).
  std::vector<std::thread> threads_;
};

}  // namespace feedline::io

#endif  // FEEDLINE_SRC_IO_READ_AHEAD_H_
