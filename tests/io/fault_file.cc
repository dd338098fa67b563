#include "tests/io/fault_file.h"

#include <cstring>
#include <thread>

namespace feedline::testing {

FaultFile::FaultFile(std::unique_ptr<RandomAccessFile> inner, Faults faults,
                     std::shared_ptr<FaultCounters> counters)
    : inner_(std::move(inner)),
      faults_(std::move(faults)),
      matches_(faults_.only_name.empty() ||
               inner_->name().find(faults_.only_name) != std::string::npos),
      counters_(std::move(counters)) {}

Status FaultFile::Read(uint64_t offset, size_t n, void* out) const {
  if (!matches_) return inner_->Read(offset, n, out);
  if (faults_.latency.count() > 0) std::this_thread::sleep_for(faults_.latency);
  const uint64_t nth = ++counters_->reads;
  auto covers = [&](uint64_t at) {
    return at != Faults::kNever && at >= offset && at < offset + n;
  };
  // The words PosixFile uses for the real faults, so tests see what users see.
  auto eio = [&](uint64_t at) {
    ++counters_->injected;
    return UnavailableError("'" + name() + "': read at offset " + std::to_string(at) +
                            " failed: " + std::strerror(EIO));
  };
  if (faults_.eio_on_read != 0 && nth == faults_.eio_on_read) return eio(offset);
  if (covers(faults_.eio_at_offset)) return eio(faults_.eio_at_offset);
  if (covers(faults_.short_at_offset)) {
    uint64_t left = counters_->short_reads_left.load();
    while (left > 0 && !counters_->short_reads_left.compare_exchange_weak(left, left - 1)) {
    }
    if (left > 0) {
      ++counters_->injected;
      const size_t got = static_cast<size_t>(faults_.short_at_offset - offset);
      Status st = inner_->Read(offset, got, out);
      if (!st.ok()) return st;
      std::memset(static_cast<char*>(out) + got, 0xA5, n - got);
      return DataLossError("'" + name() + "': truncated: no data at offset " +
                           std::to_string(faults_.short_at_offset) + " (the file shrank?)");
    }
  }
  return inner_->Read(offset, n, out);
}

std::unique_ptr<RandomAccessFile> WithFaults(std::unique_ptr<RandomAccessFile> file,
                                             const Faults& faults,
                                             std::shared_ptr<FaultCounters> counters) {
  if (counters == nullptr) {
    counters = std::make_shared<FaultCounters>();
    counters->short_reads_left = faults.short_reads_left;
  }
  return std::make_unique<FaultFile>(std::move(file), faults, std::move(counters));
}

FaultInjector::FaultInjector(Faults faults) : counters_(std::make_shared<FaultCounters>()) {
  counters_->short_reads_left = faults.short_reads_left;
  previous_ = SetFileWrapperForTesting(
      [faults = std::move(faults), counters = counters_](std::unique_ptr<RandomAccessFile> file) {
        return WithFaults(std::move(file), faults, counters);
      });
}

FaultInjector::~FaultInjector() { SetFileWrapperForTesting(std::move(previous_)); }

}  // namespace feedline::testing
