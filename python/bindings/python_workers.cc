// The C++ end of the Python-op worker processes (python_workers.h). The
// wire format is fixed here and in python/feedline/_procworker.py:
//   request (32 bytes):  u32 op (1 = run), u32 h, u32 w, u32 c, u64 nbytes, u64 seed
//   reply (120 bytes):   u32 status (0 ok, 1 error), u32 is_pil, u32 ndim, u32 pad,
//                        char dtype[16], i64 shape[8], u64 nbytes, u64 text_len, u64 run_ns
//                        then text_len bytes of error text
// all little-endian; pixels and the output travel in the two memfds.
#include "python/bindings/python_workers.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include "src/core/clock.h"

namespace feedline::python {
namespace {

constexpr size_t kRequestBytes = 32;
constexpr size_t kReplyBytes = 120;
constexpr size_t kMaxDims = 8;
constexpr size_t kMaxErrorText = 1 << 20;
// How long a blocked call sleeps between checks for Shutdown().
constexpr int kPollMs = 100;

template <typename T>
void Put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

size_t Grown(size_t need, size_t have) {
  size_t n = have < 4096 ? 4096 : have;
  while (n < need) n *= 2;
  return n;
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

WorkerPool::WorkerPool(std::vector<Worker> workers) {
  for (size_t i = 0; i < workers.size(); ++i) {
    Slot s;
    s.w = workers[i];
    workers_.push_back(s);
    free_.push_back(i);
  }
}

WorkerPool::~WorkerPool() { Close(); }

void WorkerPool::Shutdown() {
  shutdown_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void WorkerPool::Close() {
  Shutdown();
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  // Calls in flight see shutdown_ at their next poll slice and give their
  // worker back.
  while (free_.size() + abandoned_ < workers_.size()) {
    cv_.wait_for(lock, std::chrono::milliseconds(kPollMs));
  }
  closed_ = true;
  for (Slot& s : workers_) {
    if (s.in_map != nullptr) munmap(s.in_map, s.in_len);
    if (s.out_map != nullptr) munmap(const_cast<uint8_t*>(s.out_map), s.out_len);
    s.in_map = nullptr;
    s.out_map = nullptr;
    s.in_len = s.out_len = 0;
    for (int* fd : {&s.w.sock, &s.w.in_fd, &s.w.out_fd}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
}

Status WorkerPool::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::vector<int> WorkerPool::pids() const {
  std::vector<int> out;
  for (const Slot& s : workers_) out.push_back(s.w.pid);
  return out;
}

Status WorkerPool::Died(const Slot& s, const std::string& what) {
  // The worker's exit status, without reaping it (WNOWAIT): multiprocessing
  // owns the child and reaps it at close. A worker that just closed its
  // socket may take a moment to become waitable.
  std::string how = "its exit status is unknown";
  for (int i = 0; i < 200; ++i) {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    if (waitid(P_PID, static_cast<id_t>(s.w.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == ECHILD) how = "its exit status is unknown (not a child of this process)";
      break;
    }
    if (info.si_pid == s.w.pid) {
      if (info.si_code == CLD_EXITED) {
        how = "it exited with status " + std::to_string(info.si_status);
      } else {
        const char* name = strsignal(info.si_status);
        how = "it was killed by signal " + std::to_string(info.si_status) + " (" +
              (name ? name : "?") + ")";
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Status st = UnavailableError("Python-op worker process " + std::to_string(s.w.pid) + " died (" +
                               how + ") " + what + "; the loader cannot go on without it");
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.ok() && !shutdown_.load()) broken_ = st;
  return st;
}

Status WorkerPool::WriteExact(Slot& s, const void* src, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const ssize_t k = send(s.w.sock, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return Died(s, "while sending it a sample (" + Errno("send") + ")");
    p += k;
    n -= static_cast<size_t>(k);
  }
  return Status::OK();
}

Status WorkerPool::ReadExact(Slot& s, void* dst, size_t n, const std::function<bool()>& cancelled) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    pollfd pfd{s.w.sock, POLLIN, 0};
    const int r = poll(&pfd, 1, kPollMs);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (shutdown_.load()) return CancelledError("the loader is closing");
      if (cancelled && cancelled()) {
        // The worker is still running this sample: its reply would be read
        // as the next sample's, so it is not used again.
        s.abandoned = true;
        return CancelledError("the loader was cancelled while a Python-op worker ran the sample");
      }
      continue;
    }
    const ssize_t k = recv(s.w.sock, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k == 0) return Died(s, "while running a sample");
    if (k < 0) return Died(s, "while running a sample (" + Errno("recv") + ")");
    p += k;
    n -= static_cast<size_t>(k);
  }
  return Status::OK();
}

Status WorkerPool::Run(const std::string& op, const uint8_t* pixels, uint32_t h, uint32_t w,
                       uint32_t c, uint64_t seed, const std::function<bool()>& cancelled,
                       WorkerReply* reply, std::vector<uint8_t>* out) {
  const int64_t t0 = core::NowNs();
  size_t index = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (!broken_.ok()) return broken_;
      if (shutdown_.load() || (cancelled && cancelled())) {
        return CancelledError("the loader is closing");
      }
      if (!free_.empty()) break;
      if (abandoned_ == workers_.size()) {
        // Each is still running a sample that was cancelled (its reply would
        // be read as another sample's): nothing can run this one.
        return UnavailableError(
            "every Python-op worker (" + std::to_string(abandoned_) +
            ") is still running a sample that was cancelled mid-call (a member that hangs?); "
            "the loader cannot go on");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(kPollMs));
    }
    index = free_.back();
    free_.pop_back();
  }
  const int64_t t1 = core::NowNs();
  Status st = Call(workers_[index], op, pixels, h, w, c, seed, cancelled, reply, out);
  const int64_t t2 = core::NowNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (workers_[index].abandoned) {
      ++abandoned_;
    } else {
      free_.push_back(index);
    }
    cv_.notify_all();  // a waiting Run() or Close()
  }
  stats_.calls.fetch_add(1, std::memory_order_relaxed);
  stats_.wait_ns.fetch_add(static_cast<uint64_t>(t1 - t0), std::memory_order_relaxed);
  stats_.call_ns.fetch_add(static_cast<uint64_t>(t2 - t1), std::memory_order_relaxed);
  return st;
}

Status WorkerPool::Call(Slot& s, const std::string& op, const uint8_t* pixels, uint32_t h,
                        uint32_t w, uint32_t c, uint64_t seed,
                        const std::function<bool()>& cancelled, WorkerReply* reply,
                        std::vector<uint8_t>* out) {
  const size_t nbytes = size_t{h} * w * c;
  if (nbytes > s.in_len) {  // grow the input file, then map all of it
    const size_t len = Grown(nbytes, s.in_len);
    if (ftruncate(s.w.in_fd, static_cast<off_t>(len)) != 0) {
      return ResourceExhaustedError(Errno("growing the Python-op worker's shared memory"));
    }
    if (s.in_map != nullptr) munmap(s.in_map, s.in_len);
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, s.w.in_fd, 0);
    s.in_map = nullptr;
    s.in_len = 0;
    if (m == MAP_FAILED) return ResourceExhaustedError(Errno("mapping shared memory"));
    s.in_map = static_cast<uint8_t*>(m);
    s.in_len = len;
  }
  if (nbytes > 0) std::memcpy(s.in_map, pixels, nbytes);
  uint8_t req[kRequestBytes] = {};
  Put<uint32_t>(req, 0, 1);
  Put<uint32_t>(req, 4, h);
  Put<uint32_t>(req, 8, w);
  Put<uint32_t>(req, 12, c);
  Put<uint64_t>(req, 16, nbytes);
  Put<uint64_t>(req, 24, seed);
  FEEDLINE_RETURN_IF_ERROR(WriteExact(s, req, sizeof(req)));
  uint8_t rep[kReplyBytes];
  FEEDLINE_RETURN_IF_ERROR(ReadExact(s, rep, sizeof(rep), cancelled));
  const uint32_t status = Get<uint32_t>(rep, 0);
  const uint32_t ndim = Get<uint32_t>(rep, 8);
  const uint64_t out_bytes = Get<uint64_t>(rep, 96);
  const uint64_t text_len = Get<uint64_t>(rep, 104);
  stats_.run_ns.fetch_add(Get<uint64_t>(rep, 112), std::memory_order_relaxed);
  if (status > 1 || ndim > kMaxDims || text_len > kMaxErrorText) {
    // Alive but out of step with the protocol: killed, and the pool broken
    // with what was wrong (not reported as a death).
    kill(s.w.pid, SIGKILL);
    Status st = InternalError(
        "Python-op worker process " + std::to_string(s.w.pid) + " sent a malformed reply (status " +
        std::to_string(status) + ", ndim " + std::to_string(ndim) + " of at most " +
        std::to_string(kMaxDims) + ", error text " + std::to_string(text_len) +
        " bytes of at most " + std::to_string(kMaxErrorText) +
        "); it was killed and the loader cannot go on");
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok() && !shutdown_.load()) broken_ = st;
    return st;
  }
  if (status == 1) {
    std::string text(text_len, '\0');
    FEEDLINE_RETURN_IF_ERROR(ReadExact(s, text.data(), text.size(), cancelled));
    return Status(StatusCode::kUnknown, op + " raised " + text);
  }
  reply->pil = Get<uint32_t>(rep, 4) != 0;
  const char* name = reinterpret_cast<const char*>(rep + 16);
  reply->dtype.assign(name, strnlen(name, 16));
  reply->shape.resize(ndim);
  for (size_t i = 0; i < ndim; ++i) reply->shape[i] = Get<int64_t>(rep, 32 + 8 * i);
  if (out_bytes > s.out_len) {  // the worker grew its output file: map all of it
    struct stat sb;
    if (fstat(s.w.out_fd, &sb) != 0 || static_cast<uint64_t>(sb.st_size) < out_bytes) {
      return InternalError("the Python-op worker's output is larger than its shared memory");
    }
    if (s.out_map != nullptr) munmap(const_cast<uint8_t*>(s.out_map), s.out_len);
    s.out_map = nullptr;
    s.out_len = 0;
    const size_t len = static_cast<size_t>(sb.st_size);
    void* m = mmap(nullptr, len, PROT_READ, MAP_SHARED, s.w.out_fd, 0);
    if (m == MAP_FAILED) return ResourceExhaustedError(Errno("mapping shared memory"));
    s.out_map = static_cast<const uint8_t*>(m);
    s.out_len = len;
  }
  out->resize(static_cast<size_t>(out_bytes));
  if (out_bytes > 0) std::memcpy(out->data(), s.out_map, out->size());
  return Status::OK();
}

}  // namespace feedline::python
