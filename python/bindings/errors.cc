#include "python/bindings/errors.h"

#include <string>

namespace py = pybind11;

namespace feedline::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_resource_error = nullptr;
PyObject* g_cancelled_error = nullptr;
PyObject* g_invalid_argument_error = nullptr;
PyObject* g_out_of_range_error = nullptr;
PyObject* g_not_found_error = nullptr;
PyObject* g_timeout_error = nullptr;

// A class `name` in module m deriving from every one of `bases`; the
// module keeps it alive for the life of the process.
PyObject* NewError(py::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                   const char* doc) {
  py::tuple bases_tuple(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) bases_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string(PyModule_GetName(m.ptr())) + "." + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases_tuple.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) =
      py::reinterpret_borrow<py::object>(type);  // the new reference is kept: never freed
  return type;
}

}  // namespace

void RegisterErrors(py::module_& m) {
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  g_resource_error =
      NewError(m, "ResourceError", {g_error}, "A memory or descriptor budget is exhausted.");
  g_cancelled_error =
      NewError(m, "CancelledError", {g_error}, "The loader was cancelled or closed.");
  g_invalid_argument_error = NewError(m, "InvalidArgumentError", {g_error, PyExc_ValueError},
                                      "Bad options, input or state.");
  g_out_of_range_error =
      NewError(m, "OutOfRangeError", {g_error, PyExc_ValueError}, "A value out of range.");
  g_not_found_error = NewError(m, "NotFoundError", {g_error, PyExc_FileNotFoundError},
                               "A file, directory or class is missing.");
  g_timeout_error =
      NewError(m, "TimeoutError", {g_error, PyExc_TimeoutError}, "An operation took too long.");
}

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  PyObject* type = g_error;
  switch (status.code()) {
    case StatusCode::kInvalidArgument: type = g_invalid_argument_error; break;
    case StatusCode::kOutOfRange: type = g_out_of_range_error; break;
    case StatusCode::kNotFound: type = g_not_found_error; break;
    case StatusCode::kDeadlineExceeded: type = g_timeout_error; break;
    case StatusCode::kResourceExhausted: type = g_resource_error; break;
    case StatusCode::kCancelled: type = g_cancelled_error; break;
    default: break;
  }
  // PyErr_SetString would decode strictly and lose a message naming a
  // non-UTF-8 file.
  PyErr_SetObject(type, PyText(status.ToString()).ptr());
  throw py::error_already_set();
}

py::str PyText(std::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

py::str PyFsName(std::string_view name) {
  PyObject* s = PyUnicode_DecodeFSDefaultAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

}  // namespace feedline::python
