// Ops that copy what a read op put in a sample into the batch, as bytes:
// no codec, no format, so any layer's pipeline may use them (the recipes
// layer's kRawBytes output, io's own tests of its readers).
//
// Thread safety: the ops they return are SampleOps (safe for concurrent use).
#ifndef FEEDLINE_RAW_OPS_H_
#define FEEDLINE_RAW_OPS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "feedline/export.h"
#include "feedline/sample.h"

namespace feedline {

// Writes the sample's label into int64 field `field`.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeLabelOp(size_t field);

// Writes the sample's bytes into uint8 field `bytes_field` (capacity
// max_bytes, zero padded) and their length into int64 field `length_field`.
// A record longer than max_bytes is a sample error naming its size and the
// limit.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeRawBytesOp(size_t bytes_field,
                                                               size_t length_field,
                                                               uint64_t max_bytes);

// read -> raw bytes -> label over any read op that fills each sample's
// bytes, label and location: fields {"bytes" uint8 [max_bytes], "length",
// "label"}.
FEEDLINE_EXPORT Pipeline MakeRawPipeline(std::shared_ptr<const SampleOp> read_op,
                                         uint64_t num_samples, uint64_t max_bytes);

}  // namespace feedline

#endif  // FEEDLINE_RAW_OPS_H_
