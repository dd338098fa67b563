// Status and Result<T>: how every fallible feedline call reports failure.
//
// A Status is either OK or a canonical error code (abseil's vocabulary) with a
// message that names the place and the reason ("shard a.fls record 17 at
// offset 4096: checksum mismatch"). Result<T> holds a T or a non-OK Status.
// End of stream is never an error: iterators report it separately.
//
// Thread safety: values; const methods may be called concurrently, non-const
// methods need external synchronisation.
#ifndef FEEDLINE_STATUS_H_
#define FEEDLINE_STATUS_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "feedline/export.h"

namespace feedline {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// "InvalidArgument", "DataLoss", ... ; stable, used in logs and error counts.
FEEDLINE_EXPORT std::string_view StatusCodeName(StatusCode code);

class FEEDLINE_EXPORT Status {
 public:
  // OK. Cheap: an OK status holds no allocation.
  Status() = default;
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status OK() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty for OK.
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : ""; }

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // A copy with `context + ": "` prepended to the message; OK stays OK.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

FEEDLINE_EXPORT Status CancelledError(std::string_view message);
FEEDLINE_EXPORT Status InvalidArgumentError(std::string_view message);
FEEDLINE_EXPORT Status DeadlineExceededError(std::string_view message);
FEEDLINE_EXPORT Status NotFoundError(std::string_view message);
FEEDLINE_EXPORT Status ResourceExhaustedError(std::string_view message);
FEEDLINE_EXPORT Status FailedPreconditionError(std::string_view message);
FEEDLINE_EXPORT Status OutOfRangeError(std::string_view message);
FEEDLINE_EXPORT Status UnimplementedError(std::string_view message);
FEEDLINE_EXPORT Status InternalError(std::string_view message);
FEEDLINE_EXPORT Status UnavailableError(std::string_view message);
FEEDLINE_EXPORT Status DataLossError(std::string_view message);

// Holds either a value or a non-OK Status. Accessing value() of an error
// Result is a bug and aborts.
template <typename T>
class Result {
 public:
  // Implicit on purpose: `return value;` and `return status;` both build a Result.
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor): see above
  Result(Status status);                     // NOLINT(google-explicit-constructor): see above

  bool ok() const { return v_.index() == 0; }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }

  T& value() & {
    CheckOk();
    return std::get<0>(v_);
  }
  const T& value() const& {
    CheckOk();
    return std::get<0>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const;
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] FEEDLINE_EXPORT void DieBadResultAccess(const Status& status);
[[noreturn]] FEEDLINE_EXPORT void DieOkStatusInResult();
}  // namespace detail

template <typename T>
Result<T>::Result(Status status) : v_(std::move(status)) {
  if (std::get<1>(v_).ok()) detail::DieOkStatusInResult();
}

template <typename T>
void Result<T>::CheckOk() const {
  if (!ok()) detail::DieBadResultAccess(std::get<1>(v_));
}

}  // namespace feedline

// Returns early from the enclosing function if `expr` (a Status) is not OK.
#define FEEDLINE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::feedline::Status feedline_status_ = (expr);        \
    if (!feedline_status_.ok()) return feedline_status_; \
  } while (0)

#define FEEDLINE_CONCAT_INNER_(a, b) a##b
#define FEEDLINE_CONCAT_(a, b) FEEDLINE_CONCAT_INNER_(a, b)

// FEEDLINE_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error if MakeX failed.
#define FEEDLINE_ASSIGN_OR_RETURN(lhs, expr) \
  FEEDLINE_ASSIGN_OR_RETURN_IMPL_(FEEDLINE_CONCAT_(feedline_result_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): lhs is a declaration ("auto x")
// and tmp a fresh identifier; parentheses around either would not compile.
#define FEEDLINE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // FEEDLINE_STATUS_H_
