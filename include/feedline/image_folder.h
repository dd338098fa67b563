// Plain image folders in torchvision's ImageFolder layout, read as they are:
//   root/<class name>/<any path>/<file>.{jpg,jpeg,png}
// Class names sorted give labels 0..C-1 (as torchvision does); files are
// sorted, so sample i is the same file on every machine.
//
// Thread safety: an ImageFolder is immutable after Open; the read op is a
// SampleOp (safe for concurrent use).
#ifndef FEEDLINE_IMAGE_FOLDER_H_
#define FEEDLINE_IMAGE_FOLDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "feedline/export.h"
#include "feedline/image.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT ImageFolder {
  std::string root;
  std::vector<std::string> classes;  // sorted; index = label
  std::vector<std::string> files;    // relative to root, sorted
  std::vector<int64_t> labels;       // per file

  // Errors: NotFound if root is missing; InvalidArgument if it holds no class
  // folder or no image file.
  static Result<std::shared_ptr<const ImageFolder>> Open(const std::string& root);
};

// Reads sample i's file into the sample's bytes; sets label, file and key.
// A missing or unreadable file is a sample error naming the path and errno.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeReadFileOp(
    std::shared_ptr<const ImageFolder> folder);

// Writes the sample's label into int64 field `field`.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeLabelOp(size_t field);

// Source-agnostic pipelines: `read_op` fills each sample's bytes, label and
// location (MakeReadFileOp, MakeShardReadOp, ...).
// read -> decode_transform -> label, fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline MakeImagePipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                                           const ImageTransform& transform);
// read -> raw bytes -> label, fields {"bytes" uint8 [max_bytes], "length", "label"}.
FEEDLINE_EXPORT Pipeline MakeRawPipeline(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                                         uint64_t max_bytes);

// Raw records for non-image data (or for decoding elsewhere): writes the
// sample's bytes into uint8 field `bytes_field` (capacity max_bytes, zero
// padded) and their length into int64 field `length_field`. A record longer
// than max_bytes is a sample error naming its size and the limit.
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeRawBytesOp(size_t bytes_field, size_t length_field,
                                                               uint64_t max_bytes);

// Read -> raw bytes -> label, fields {"bytes" uint8 [max_bytes], "length"
// int64, "label" int64}.
FEEDLINE_EXPORT Pipeline RawFolderPipeline(std::shared_ptr<const ImageFolder> folder,
                                           uint64_t max_bytes);

// The standard image pipeline over a folder: read -> decode_transform ->
// label, with fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline ImageFolderPipeline(std::shared_ptr<const ImageFolder> folder,
                                             const ImageTransform& transform);

}  // namespace feedline

#endif  // FEEDLINE_IMAGE_FOLDER_H_
