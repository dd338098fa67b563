// Mutex, MutexLock and clang thread-safety annotations.
//
// libstdc++'s std::mutex carries no capability attributes, so clang's
// -Wthread-safety cannot check GUARDED_BY members that it protects. This thin
// wrapper adds them; under g++ the annotations compile to nothing. CondVar
// waits on a MutexLock so a wait is written the same way everywhere.
//
// Thread safety: Mutex is safe for concurrent use (that is its purpose).
#ifndef FEEDLINE_SRC_CORE_MUTEX_H_
#define FEEDLINE_SRC_CORE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define FEEDLINE_TSA(x) __attribute__((x))
#else
#define FEEDLINE_TSA(x)
#endif

#define CAPABILITY(x) FEEDLINE_TSA(capability(x))
#define SCOPED_CAPABILITY FEEDLINE_TSA(scoped_lockable)
#define GUARDED_BY(x) FEEDLINE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) FEEDLINE_TSA(pt_guarded_by(x))
#define REQUIRES(...) FEEDLINE_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) FEEDLINE_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) FEEDLINE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) FEEDLINE_TSA(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS FEEDLINE_TSA(no_thread_safety_analysis)

namespace feedline::core {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` for its scope. Unlock()/Lock() allow a scoped release, e.g. to
// run user code without holding our lock.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->mu_) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

class CondVar {
 public:
  void Wait(MutexLock* lock) { cv_.wait(lock->lock_); }
  // Returns false on timeout.
  bool WaitFor(MutexLock* lock, std::chrono::nanoseconds timeout) {
    return cv_.wait_for(lock->lock_, timeout) == std::cv_status::no_timeout;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace feedline::core

#endif  // FEEDLINE_SRC_CORE_MUTEX_H_
