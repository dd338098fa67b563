// The Python edge, in one place (STYLE.md: exceptions only at the edges):
// Status -> Python exception, and C++ strings -> Python str.
//
// Every exception is a feedline.Error and also the builtin its code maps to:
//   InvalidArgument -> feedline.InvalidArgumentError(Error, ValueError)
//   OutOfRange      -> feedline.OutOfRangeError(Error, ValueError)
//   NotFound        -> feedline.NotFoundError(Error, FileNotFoundError)
//   DeadlineExceeded-> feedline.TimeoutError(Error, TimeoutError)
//   ResourceExhausted -> feedline.ResourceError(Error)
//   Cancelled       -> feedline.CancelledError(Error)
//   anything else   -> feedline.Error (a RuntimeError)
// each carrying the full message.
//
// Strings: the core's names are bytes (file and class names need not be
// UTF-8). Text (messages, error logs, reasons) becomes str with UTF-8
// 'replace' (U+FFFD), so it always prints and never raises; names that must
// round-trip to the file system (class names, sample paths) are decoded as
// os.fsdecode does (surrogateescape), so they equal torchvision's and
// os.fsencode() gives the bytes back.
#ifndef FEEDLINE_PYTHON_BINDINGS_ERRORS_H_
#define FEEDLINE_PYTHON_BINDINGS_ERRORS_H_

#include <pybind11/pybind11.h>

#include <string_view>

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

// Text for people: UTF-8 with invalid bytes replaced by U+FFFD.
pybind11::str PyText(std::string_view text);

// A file-system name as os.fsdecode() decodes it (surrogateescape).
pybind11::str PyFsName(std::string_view name);

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_ERRORS_H_
