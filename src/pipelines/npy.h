// The header of a NumPy .npy file (format versions 1.0, 2.0, 3.0), parsed
// and checked against the bytes that follow it. Only what a batch field can
// hold is accepted: a plain dtype ('<f4', '|u1', '<i8', '|b1', ...), C or
// Fortran order, any shape; structured and object dtypes are refused.
#ifndef FEEDLINE_SRC_PIPELINES_NPY_H_
#define FEEDLINE_SRC_PIPELINES_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::pipelines {

struct NpyHeader {
  std::string descr;  // e.g. "<f4"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t item_size = 0;
  size_t data_offset = 0;   // where the array's bytes start
  uint64_t data_bytes = 0;  // item_size * prod(shape)
};

// DataLoss naming what is wrong (magic, version, header length, a key, the
// dtype, the shape, or the size against the header).
Result<NpyHeader> ParseNpy(std::span<const uint8_t> file);

}  // namespace feedline::pipelines

#endif  // FEEDLINE_SRC_PIPELINES_NPY_H_
