#include "feedline/status.h"

#include <cstdio>
#include <cstdlib>

namespace feedline {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kUnknown: return "Unknown";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDataLoss: return "DataLoss";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string_view message) {
  // An OK code never carries a message: Status(kOk, "x") is OK.
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, msg);
}

Status CancelledError(std::string_view m) { return Status(StatusCode::kCancelled, m); }
Status InvalidArgumentError(std::string_view m) { return Status(StatusCode::kInvalidArgument, m); }
Status DeadlineExceededError(std::string_view m) {
  return Status(StatusCode::kDeadlineExceeded, m);
}
Status NotFoundError(std::string_view m) { return Status(StatusCode::kNotFound, m); }
Status ResourceExhaustedError(std::string_view m) {
  return Status(StatusCode::kResourceExhausted, m);
}
Status FailedPreconditionError(std::string_view m) {
  return Status(StatusCode::kFailedPrecondition, m);
}
Status OutOfRangeError(std::string_view m) { return Status(StatusCode::kOutOfRange, m); }
Status UnimplementedError(std::string_view m) { return Status(StatusCode::kUnimplemented, m); }
Status InternalError(std::string_view m) { return Status(StatusCode::kInternal, m); }
Status UnavailableError(std::string_view m) { return Status(StatusCode::kUnavailable, m); }
Status DataLossError(std::string_view m) { return Status(StatusCode::kDataLoss, m); }

namespace detail {

void DieBadResultAccess(const Status& status) {
  std::fprintf(stderr, "feedline: value() called on a Result holding an error: %s\n",
               status.ToString().c_str());
  std::abort();
}

void DieOkStatusInResult() {
  std::fprintf(stderr, "feedline: a Result was constructed from an OK Status\n");
  std::abort();
}

}  // namespace detail
}  // namespace feedline
