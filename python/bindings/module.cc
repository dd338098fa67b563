// The feedline._C extension module: one Register call per binding file.
#include <pybind11/pybind11.h>

#include "python/bindings/errors.h"

namespace feedline::python {
void RegisterLoader(pybind11::module_& m);
void RegisterTokens(pybind11::module_& m);
void RegisterColumnar(pybind11::module_& m);
void RegisterPixelOps(pybind11::module_& m);
}  // namespace feedline::python

PYBIND11_MODULE(_C, m) {
  m.doc() = "feedline's C++ core (use the feedline package, not this module)";
  feedline::python::RegisterErrors(m);
  feedline::python::RegisterPixelOps(m);
  feedline::python::RegisterLoader(m);
  feedline::python::RegisterTokens(m);
  feedline::python::RegisterColumnar(m);
}
