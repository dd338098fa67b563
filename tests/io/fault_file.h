// Fault injection through the RandomAccessFile seam (include/feedline/
// file.h), in the manner of leveldb's db/fault_injection_test.cc: a
// FaultFile wraps a real file and makes chosen reads fail with EIO, come
// back short, or take longer, reporting each fault exactly as the local
// file implementation reports the real thing. A FaultInjector installs
// itself as OpenFile's wrapper, so code that opens files by name (shard
// datasets, tars, manifests) reads through the faults without knowing.
//
// Thread safety: FaultFile::Read is safe for concurrent use; the counters
// of a FaultInjector may be read while files are being read.
#ifndef FEEDLINE_TESTS_IO_FAULT_FILE_H_
#define FEEDLINE_TESTS_IO_FAULT_FILE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "feedline/file.h"

namespace feedline::testing {

struct Faults {
  static constexpr uint64_t kNever = ~uint64_t{0};

  // A read whose range covers this byte fails as EIO there (Unavailable,
  // "read at offset X failed: Input/output error"), every time.
  uint64_t eio_at_offset = kNever;
  // The Nth read (1-based, counted over the matching files) fails with EIO
  // at its first byte; 0: never.
  uint64_t eio_on_read = 0;
  // A read whose range covers this byte comes back short: the bytes before
  // it are delivered, the rest of the buffer is poisoned (0xA5) and the
  // read is DataLoss "truncated: no data at offset X", as when a file
  // shrinks under a reader. The first `short_reads_left` such reads do so
  // (kNever: all of them); after that the range reads whole again.
  uint64_t short_at_offset = kNever;
  uint64_t short_reads_left = kNever;
  // Slept before every read: changes timing, never bytes.
  std::chrono::microseconds latency{0};
  // Only files whose name contains this are affected (empty: every file).
  std::string only_name;
};

// What a set of faults has done so far, shared by the files it wraps.
struct FaultCounters {
  std::atomic<uint64_t> reads{0};     // of matching files
  std::atomic<uint64_t> injected{0};  // reads that failed or came back short
  std::atomic<uint64_t> short_reads_left{0};
};

class FaultFile final : public RandomAccessFile {
 public:
  FaultFile(std::unique_ptr<RandomAccessFile> inner, Faults faults,
            std::shared_ptr<FaultCounters> counters);
  Status Read(uint64_t offset, size_t n, void* out) const override;
  uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

 private:
  const std::unique_ptr<RandomAccessFile> inner_;
  const Faults faults_;
  const bool matches_;
  const std::shared_ptr<FaultCounters> counters_;
};

// Wraps one file (for readers that take a RandomAccessFile).
std::unique_ptr<RandomAccessFile> WithFaults(std::unique_ptr<RandomAccessFile> file,
                                             const Faults& faults,
                                             std::shared_ptr<FaultCounters> counters = nullptr);

// While alive, every file OpenFile opens reads through `faults`; the
// destructor restores the previous wrapper. Files opened meanwhile keep
// their faults after it is gone.
class FaultInjector {
 public:
  explicit FaultInjector(Faults faults);
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  uint64_t reads() const { return counters_->reads.load(); }
  uint64_t injected() const { return counters_->injected.load(); }

 private:
  const std::shared_ptr<FaultCounters> counters_;
  FileWrapper previous_;
};

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_IO_FAULT_FILE_H_
