#include "python/bindings/errors.h"

#include <string>

namespace py = pybind11;

namespace feedline::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_resource_error = nullptr;
PyObject* g_cancelled_error = nullptr;

}  // namespace

void RegisterErrors(py::module_& m) {
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<std::runtime_error> resource(m, "ResourceError", error.ptr());
  static py::exception<std::runtime_error> cancelled(m, "CancelledError", error.ptr());
  g_error = error.ptr();
  g_resource_error = resource.ptr();
  g_cancelled_error = cancelled.ptr();
}

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  PyObject* type = g_error;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      type = PyExc_ValueError;
      break;
    case StatusCode::kNotFound: type = PyExc_FileNotFoundError; break;
    case StatusCode::kDeadlineExceeded: type = PyExc_TimeoutError; break;
    case StatusCode::kResourceExhausted: type = g_resource_error; break;
    case StatusCode::kCancelled: type = g_cancelled_error; break;
    default: break;
  }
  PyErr_SetString(type, status.ToString().c_str());
  throw py::error_already_set();
}

}  // namespace feedline::python
