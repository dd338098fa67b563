#include "src/io/read_ahead.h"

#include <algorithm>
#include <chrono>

namespace feedline::io {

ReadAhead::ReadAhead(FetchFn fetch, SizeFn size, uint64_t max_bytes, uint32_t threads,
                     Coalescing coalescing)
    : fetch_(std::move(fetch)),
      size_(std::move(size)),
      coalescing_(std::move(coalescing)),
      max_bytes_(max_bytes),
      num_threads_(std::max(1u, threads)),
      in_flight_limit_(num_threads_),
      bytes_limit_(max_bytes) {}

void ReadAhead::SetLimits(uint32_t in_flight, uint64_t bytes) {
  {
    core::MutexLock l(&mu_);
    in_flight_limit_ = std::clamp<uint32_t>(in_flight, 1, num_threads_);
    bytes_limit_ = std::clamp<uint64_t>(bytes, 1, std::max<uint64_t>(1, max_bytes_));
  }
  cv_.SignalAll();
}

ReadAheadMetrics ReadAhead::Metrics() const {
  core::MutexLock l(&mu_);
  ReadAheadMetrics m;
  m.in_flight_limit = in_flight_limit_;
  m.max_in_flight = num_threads_;
  m.bytes_limit = bytes_limit_;
  m.max_bytes = max_bytes_;
  m.fetches = fetches_;
  m.fetch_ns = fetch_ns_;
  m.fetched_bytes = fetched_bytes_;
  m.peak_bytes = peak_bytes_;
  return m;
}

ReadAhead::~ReadAhead() { SetPlan(nullptr, 0); }

void ReadAhead::StartThreads() {
  for (uint32_t i = 0; i < num_threads_; ++i) threads_.emplace_back([this] { FetchLoop(); });
}

void ReadAhead::SetPlan(std::shared_ptr<const EpochPlan> plan, uint64_t first) {
  if (plan == nullptr) {  // closing: stop and join the fetchers
    {
      core::MutexLock l(&mu_);
      stop_ = true;
      ++generation_;
      plan_ = nullptr;
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.ready) bytes_ -= it->second.reserved;
        it = entries_.erase(it);
      }
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    return;
  }
  if (threads_.empty()) {  // the first plan, or one after a close
    {
      core::MutexLock l(&mu_);
      stop_ = false;
    }
    StartThreads();
  }
  {
    core::MutexLock l(&mu_);
    // The workers plan the next epoch once every record of this one is
    // claimed, not taken: the records fetched (or in flight) for claims
    // still being worked on are the ones they are about to Take. Dropping
    // them made each of those workers read its record again itself, at
    // every epoch boundary (issue 34). So the next epoch from its start
    // keeps them (still inside the byte budget, which the new plan's
    // fetches wait on), placed before the new plan's first position, where
    // CatchUp's staleness rule ends any that nobody takes.
    const bool next_epoch = plan_ != nullptr && first == 0 && plan->epoch == plan_->epoch + 1;
    plan_ = std::move(plan);
    next_ = first;
    if (next_epoch) {
      for (auto& [id, e] : entries_) e.position = 0;
    } else {
      // Another order (SetEpoch, a restore): ready records of the old plan
      // are dropped now; in-flight ones release their reservation when
      // their fetch returns (they see the generation).
      ++generation_;
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.ready) bytes_ -= it->second.reserved;
        it = entries_.erase(it);
      }
    }
  }
  cv_.SignalAll();
}

void ReadAhead::FetchLoop() {
  core::MutexLock l(&mu_);
  while (!stop_) {
    if (plan_ == nullptr || next_ >= plan_->ids.size()) {
      cv_.Wait(&l);
      continue;
    }
    const uint64_t id = plan_->ids[next_];
    const uint64_t need = size_(id);
    if (entries_.count(id) || need > max_bytes_) {  // a padding duplicate, or never fits
      ++next_;
      continue;
    }
    if (in_flight_ >= in_flight_limit_ || (bytes_ + need > bytes_limit_ && bytes_ > 0)) {
      cv_.Wait(&l);  // wait for a fetch or a Take to free room (or new limits, or a new plan)
      continue;
    }
    // The run: this record, then the plan's next ones while they follow it
    // in the same file, fit the budget and are not held already.
    std::vector<uint64_t> ids{id};
    std::vector<uint64_t> needs{need};
    uint64_t run_bytes = need;
    if (coalescing_.span) {
      Span last = coalescing_.span(id);
      for (uint64_t q = next_ + 1; q < plan_->ids.size() && ids.size() < Coalescing::kMaxRun; ++q) {
        const uint64_t next_id = plan_->ids[q];
        const Span sp = coalescing_.span(next_id);
        const uint64_t n = size_(next_id);
        if (sp.file != last.file || sp.begin < last.end ||
            sp.begin - last.end > Coalescing::kMaxGap || entries_.count(next_id) ||
            std::find(ids.begin(), ids.end(), next_id) != ids.end() ||
            run_bytes + n > Coalescing::kMaxRunBytes || bytes_ + run_bytes + n > bytes_limit_) {
          break;
        }
        ids.push_back(next_id);
        needs.push_back(n);
        run_bytes += n;
        last = sp;
      }
    }
    next_ += ids.size();
    bytes_ += run_bytes;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    peak_in_flight_ = std::max(peak_in_flight_, ++in_flight_);
    for (size_t k = 0; k < ids.size(); ++k) {
      Entry& e = entries_[ids[k]];
      e.reserved = needs[k];
      e.position = next_ - ids.size() + k;
    }
    const uint64_t generation = generation_;

    l.Unlock();  // the fetch (I/O) runs without the lock
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Fetched> fetched(ids.size());
    Status status;
    if (ids.size() == 1) {
      status = fetch_(id, &fetched[0]);
    } else {
      status = coalescing_.fetch_run(ids, &fetched);
    }
    const auto dt = std::chrono::steady_clock::now() - t0;
    l.Lock();

    --in_flight_;
    ++fetches_;
    runs_ += ids.size() > 1 ? 1 : 0;
    fetch_ns_ +=
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
    fetched_bytes_ += run_bytes;
    for (size_t k = 0; k < ids.size(); ++k) {
      auto it = entries_.find(ids[k]);
      const bool stale = generation != generation_ || it == entries_.end() || it->second.ready;
      if (stale || (ids.size() > 1 && !status.ok())) {
        // The plan changed under us, or a failed run: dropped (a failed
        // run's records are read by the workers, each with its own error).
        bytes_ -= needs[k];
        if (!stale) entries_.erase(it);
        continue;
      }
      it->second.ready = true;
      it->second.status = status;
      it->second.fetched = std::move(fetched[k]);
    }
    cv_.SignalAll();
  }
}

void ReadAhead::CatchUp(uint64_t id) {
  // Bounded look-ahead for the missed id's position.
  constexpr uint64_t kScan = 4096;
  // Entries this far behind the workers are stale (more than any number of
  // workers can still be about to take).
  constexpr uint64_t kSlack = 1024;
  if (plan_ == nullptr) return;
  const uint64_t end = std::min<uint64_t>(plan_->ids.size(), next_ + kScan);
  uint64_t q = next_;
  while (q < end && plan_->ids[q] != id) ++q;
  if (q == end) return;  // not ahead of the fetchers
  next_ = q + 1;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.ready && it->second.position + kSlack < q) {
      bytes_ -= it->second.reserved;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

bool ReadAhead::Take(uint64_t id, Fetched* out, Status* status) {
  core::MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    CatchUp(id);
    l.Unlock();
    cv_.SignalAll();
    return false;
  }
  const uint64_t generation = generation_;
  while (true) {
    it = entries_.find(id);
    if (stop_ || generation != generation_ || it == entries_.end() || it->second.ready) break;
    cv_.Wait(&l);
  }
  if (stop_ || generation != generation_ || it == entries_.end()) return false;
  *status = std::move(it->second.status);
  *out = std::move(it->second.fetched);
  bytes_ -= it->second.reserved;
  entries_.erase(it);
  l.Unlock();
  cv_.SignalAll();
  return true;
}

uint64_t ReadAhead::peak_bytes() const {
  core::MutexLock l(&mu_);
  return peak_bytes_;
}

uint64_t ReadAhead::coalesced_runs() const {
  core::MutexLock l(&mu_);
  return runs_;
}

uint32_t ReadAhead::peak_in_flight() const {
  core::MutexLock l(&mu_);
  return peak_in_flight_;
}

}  // namespace feedline::io
