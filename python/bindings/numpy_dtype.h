// The numpy dtype that carries a feedline DType in the bindings. numpy has
// no bfloat16: its bytes travel as int16 and the Python side views them as
// torch.bfloat16 (as batches do). By type number, not by name: a name is
// parsed on every call, and batches make several arrays each.
#ifndef FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_
#define FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_

#include <pybind11/numpy.h>

#include "feedline/buffer.h"

namespace feedline::python {

inline pybind11::dtype NumpyDType(DType d) {
  switch (d) {
    case DType::kUInt8: return pybind11::dtype::of<uint8_t>();
    case DType::kInt8: return pybind11::dtype::of<int8_t>();
    case DType::kInt32: return pybind11::dtype::of<int32_t>();
    case DType::kInt64: return pybind11::dtype::of<int64_t>();
    case DType::kFloat16: {
      // No dtype::of for half; parsed once (leaked: never destroyed after
      // the interpreter ends).
      static const auto* half = new pybind11::dtype("float16");
      return *half;
    }
    case DType::kBFloat16: return pybind11::dtype::of<int16_t>();
    case DType::kFloat32: return pybind11::dtype::of<float>();
    case DType::kFloat64: return pybind11::dtype::of<double>();
  }
  return pybind11::dtype::of<uint8_t>();
}

}  // namespace feedline::python

#endif  // FEEDLINE_PYTHON_BINDINGS_NUMPY_DTYPE_H_
