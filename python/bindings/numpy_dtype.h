// The numpy dtype that carries a feedline DType in the bindings. numpy has
// no bfloat16: its bytes travel as int16 and the Python side views them as
// torch.bfloat16 (as batches do).
#ifndef FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_
#define FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_

#include <pybind11/numpy.h>

#include "feedline/buffer.h"

namespace feedline::python {

inline pybind11::dtype NumpyDType(DType d) {
  switch (d) {
    case DType::kUInt8: return pybind11::dtype("uint8");
    case DType::kInt8: return pybind11::dtype("int8");
    case DType::kInt32: return pybind11::dtype("int32");
    case DType::kInt64: return pybind11::dtype("int64");
    case DType::kFloat16: return pybind11::dtype("float16");
    case DType::kBFloat16: return pybind11::dtype("int16");
    case DType::kFloat32: return pybind11::dtype("float32");
    case DType::kFloat64: return pybind11::dtype("float64");
  }
  return pybind11::dtype("uint8");
}

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_
