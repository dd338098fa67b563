// The recipes layer: which ops run over which source to make which fields.
// It is the one part of feedline that knows both where bytes come from
// (io: source.h, image_folder.h, dataset.h, webdataset.h) and what is done
// with them (image.h); io carries bytes and knows no codec, the engine runs
// whatever Pipeline this layer assembles (docs/pipelines.md).
//
// Thread safety: the builders are pure functions; the ops they return are
// SampleOps (safe for concurrent use).
#ifndef FEEDLINE_PIPELINE_BUILDER_H_
#define FEEDLINE_PIPELINE_BUILDER_H_

#include <cstdint>
#include <memory>

#include "feedline/dataset.h"
#include "feedline/export.h"
#include "feedline/image.h"
#include "feedline/image_folder.h"
#include "feedline/sample.h"
#include "feedline/source.h"
#include "feedline/status.h"

namespace feedline {

// What each sample of a source becomes.
struct FEEDLINE_EXPORT SampleSpec {
  enum class Output {
    kImage,     // decode + transform: fields {"image" (ImageField(transform)), "label" int64}
    kRawBytes,  // the record as read: fields {"bytes" uint8 [max_record_bytes], "length" int64,
                // "label" int64}, for non-image data or decoding elsewhere
  };
  Output output = Output::kImage;
  ImageTransform transform;       // kImage
  uint64_t max_record_bytes = 0;  // kRawBytes: the "bytes" field's capacity, > 0
};

// The pipeline for `source` (OpenSource) and `spec`: the source's read op
// (bytes, label, location), then the spec's ops. InvalidArgument for
// kRawBytes with max_record_bytes 0, or a source without a read op.
FEEDLINE_EXPORT Result<Pipeline> BuildPipeline(const Source& source, const SampleSpec& spec);

// Field ops any recipe may use.
// Writes the sample's label into int64 field `field`.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeLabelOp(size_t field);
// Writes the sample's bytes into uint8 field `bytes_field` (capacity
// max_bytes, zero padded) and their length into int64 field `length_field`.
// A record longer than max_bytes is a sample error naming its size and the
// limit.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeRawBytesOp(size_t bytes_field,
                                                               size_t length_field,
                                                               uint64_t max_bytes);

// The same recipes over any read op (MakeReadFileOp, MakeShardReadOp,
// MakeTarReadOp, ...) that fills each sample's bytes, label and location.
// read -> decode_transform -> label, fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline MakeImagePipeline(std::shared_ptr<const SampleOp> read_op,
                                           uint64_t num_samples, const ImageTransform& transform);
// read -> raw bytes -> label, fields {"bytes" uint8 [max_bytes], "length", "label"}.
FEEDLINE_EXPORT Pipeline MakeRawPipeline(std::shared_ptr<const SampleOp> read_op,
                                         uint64_t num_samples, uint64_t max_bytes);

// Shorthands for the common cases.
// The standard image pipeline over a folder, fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline ImageFolderPipeline(std::shared_ptr<const ImageFolder> folder,
                                             const ImageTransform& transform);
// Raw records of a folder, fields {"bytes", "length", "label"}.
FEEDLINE_EXPORT Pipeline RawFolderPipeline(std::shared_ptr<const ImageFolder> folder,
                                           uint64_t max_bytes);
// The standard image pipeline over a packed dataset, fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline ShardImagePipeline(std::shared_ptr<const ShardDataset> dataset,
                                            const ImageTransform& transform);

}  // namespace feedline

#endif  // FEEDLINE_PIPELINE_BUILDER_H_
