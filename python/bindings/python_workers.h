// Python ops in worker processes (docs/python_ops.md, "Python ops in worker
// processes"): the C++ end of the pool that python/feedline/_procworker.py
// starts. Each worker owns a socket (fixed-size requests and replies) and
// two shared-memory files (memfd): the prefix's pixels go in, the middle's
// output comes back, never pickled.
//
// Thread safety: Run() is safe for concurrent use; each call takes a free
// worker for its whole round trip and never touches the GIL. Shutdown() may
// be called from any thread; it wakes every waiting Run().
#ifndef FEEDLINE_PYTHON_BINDINGS_PYTHON_WORKERS_H_
#define FEEDLINE_PYTHON_BINDINGS_PYTHON_WORKERS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::python {

// What one worker call returned: the middle's output as a contiguous array.
struct WorkerReply {
  bool pil = false;
  std::string dtype;  // numpy/torch dtype name ("uint8", "float32", ...)
  std::vector<int64_t> shape;
};

// Times of the pool's calls, for stats().
struct WorkerPoolStats {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> wait_ns{0};  // waiting for a free worker
  std::atomic<uint64_t> call_ns{0};  // a round trip: copy in, the worker's run, copy out
  std::atomic<uint64_t> run_ns{0};   // the workers' own time running the Python middle
};

class WorkerPool {
 public:
  // One started worker: its pid, and file descriptors this pool takes
  // ownership of (closed by the destructor).
  struct Worker {
    int pid = 0;
    int sock = -1;
    int in_fd = -1;
    int out_fd = -1;
  };
  explicit WorkerPool(std::vector<Worker> workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs the middle on `pixels` (uint8 HWC, h x w x c) with the sample's
  // seed in a free worker; its output's spec in *reply and bytes in *out.
  // A Python exception is an error "<op> raised <Type>: <value>\n<traceback>";
  // a worker that died is an error naming its pid and exit status, and
  // breaks the pool (every later call fails with the same error).
  // `cancelled` (the sample's: the loader stopping, a stall timeout) is
  // polled while waiting, as Shutdown() is.
  Status Run(const std::string& op, const uint8_t* pixels, uint32_t h, uint32_t w, uint32_t c,
             uint64_t seed, const std::function<bool()>& cancelled, WorkerReply* reply,
             std::vector<uint8_t>* out);

  // Wakes every waiting Run() with CancelledError; later calls fail too.
  void Shutdown();
  // Shutdown(), then, once no call is in flight (each notices within
  // ~100 ms), closes the sockets (the workers exit at EOF) and the shared
  // memory. Idempotent; the destructor calls it.
  void Close();

  // The first fatal error (a worker died), or OK.
  Status broken() const;
  size_t size() const { return workers_.size(); }
  std::vector<int> pids() const;
  WorkerPoolStats& stats() { return stats_; }

 private:
  struct Slot {
    Worker w;
    uint8_t* in_map = nullptr;
    size_t in_len = 0;
    const uint8_t* out_map = nullptr;
    size_t out_len = 0;
    bool abandoned = false;  // cancelled mid-call: never used again
  };
  Status Call(Slot& s, const std::string& op, const uint8_t* pixels, uint32_t h, uint32_t w,
              uint32_t c, uint64_t seed, const std::function<bool()>& cancelled, WorkerReply* reply,
              std::vector<uint8_t>* out);
  Status ReadExact(Slot& s, void* dst, size_t n, const std::function<bool()>& cancelled);
  Status WriteExact(Slot& s, const void* src, size_t n);
  Status Died(const Slot& s, const std::string& what);

  std::vector<Slot> workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> free_;  // guarded by mu_
  bool closed_ = false;       // guarded by mu_
  size_t abandoned_ = 0;      // guarded by mu_
  Status broken_;             // guarded by mu_
  std::atomic<bool> shutdown_{false};
  WorkerPoolStats stats_;
};

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_PYTHON_WORKERS_H_
