// Status -> Python exception, in one place (STYLE.md: exceptions only at the
// edges). InvalidArgument -> ValueError, NotFound -> FileNotFoundError,
// DeadlineExceeded -> TimeoutError, ResourceExhausted -> MemoryError-like
// feedline.ResourceError, Cancelled -> feedline.CancelledError, anything else
// -> feedline.Error; every one carries the full message.
#ifndef FEEDLINE_PYTHON_BINDINGS_ERRORS_H_
#define FEEDLINE_PYTHON_BINDINGS_ERRORS_H_

#include <pybind11/pybind11.h>

#include "feedline/status.h"

namespace feedline::python {

void RegisterErrors(pybind11::module_& m);

// Throws the Python exception for a non-OK status; returns for OK.
void ThrowIfError(const Status& status);

template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_ERRORS_H_
