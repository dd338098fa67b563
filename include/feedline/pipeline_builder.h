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
#include <string>
#include <string_view>
#include <vector>

#include "feedline/dataset.h"
#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/image.h"
#include "feedline/image_folder.h"
#include "feedline/op_registry.h"
#include "feedline/raw_ops.h"
#include "feedline/sample.h"
#include "feedline/source.h"
#include "feedline/status.h"
#include "feedline/tokens.h"

namespace feedline {

// One named, typed field of a sample with several fields (docs/fields.md).
struct FEEDLINE_EXPORT FieldRequest {
  enum class Kind {
    kImage,    // an encoded image, decoded and transformed: a kTensor field (ImageField(transform))
    kLabel,    // a decimal integer: int64 scalar
    kText,     // UTF-8 text, checked: kBytes
    kJson,     // a JSON document, checked: kBytes (parsed by the consumer)
    kNdarray,  // a .npy array, its header checked against its size: kBytes (the whole .npy)
    kBytes,    // anything, as it is: kBytes
    kOp,       // what the registered op `op` makes of its parts (op_registry.h): the
               // FieldSpec(s) its Plan declares
  };
  std::string name;  // the batch field's name
  Kind kind = Kind::kBytes;
  // The sample parts that may hold the field, in order of preference (the
  // first the sample has is used): WebDataset member extensions ("jpg",
  // "png", "cls", "txt"). Empty: DefaultParts(kind). For sources of one
  // image and a label per sample (image folders, packed shards), an image
  // field with no matching part takes the sample's image and a label field
  // its label.
  std::vector<std::string> parts;
  ImageTransform transform;  // kImage
  std::string op;            // kOp: the registered op's name
  OpParams params;           // kOp: its parameters
};

// "jpg jpeg png webp ..." for kImage, "cls" kLabel, "txt" kText, "json"
// kJson, "npy" kNdarray, none for kBytes and kOp (an op's parts must be given).
FEEDLINE_EXPORT std::vector<std::string> DefaultParts(FieldRequest::Kind kind);
// The kind WebDataset's naming gives a part: image extensions kImage, "cls"
// kLabel, "txt" kText, "json" kJson, "npy" kNdarray, anything else kBytes.
FEEDLINE_EXPORT FieldRequest::Kind KindOfPart(std::string_view part);
FEEDLINE_EXPORT std::string_view FieldKindName(FieldRequest::Kind kind);  // "image", "label", ...

// What each sample of a source becomes.
struct FEEDLINE_EXPORT SampleSpec {
  enum class Output {
    kImage,     // decode + transform: fields {"image" (ImageField(transform)), "label" int64}
    kRawBytes,  // the record as read: fields {"bytes" uint8 [max_record_bytes], "length" int64,
                // "label" int64}, for non-image data or decoding elsewhere
    kFields,    // the named fields of `fields`, in that order (open the source with
                // SourceOptions::parts)
  };
  Output output = Output::kImage;
  ImageTransform transform;          // kImage
  uint64_t max_record_bytes = 0;     // kRawBytes: the "bytes" field's capacity, > 0
  std::vector<FieldRequest> fields;  // kFields: at least one, names unique
};

// The pipeline for `source` (OpenSource) and `spec`: the source's read op
// (bytes, label, location), then the spec's ops. InvalidArgument for
// kRawBytes with max_record_bytes 0, kFields with no field or a repeated
// name, or a source without a read op.
FEEDLINE_EXPORT Result<Pipeline> BuildPipeline(const Source& source, const SampleSpec& spec);

// Field ops any recipe may use (and MakeLabelOp, MakeRawBytesOp: raw_ops.h).
// The op that fills field `field` (of FieldSpecOf(request)) from the
// sample's parts. A sample without any of the request's parts fails with
// NotFound naming the field, the parts looked for and the parts it has;
// content that is not what the kind says (a label that is not an integer,
// text that is not UTF-8, JSON that does not parse, a .npy whose header
// disagrees with its size) fails with DataLoss naming the field, the part
// and the reason. `source_has_labels`: the source gives one image and a
// label per sample (the fallbacks of FieldRequest::parts).
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeFieldOp(const FieldRequest& request,
                                                            size_t field, bool source_has_labels);
// What an image field's op decodes: points the sample's data at the first
// of request.parts (DefaultParts(kImage) when empty) the sample has; with
// none of them, keeps the sample's own image when `source_has_labels`
// (folders, shards), else fails with MakeFieldOp's NotFound. For ops that
// decode an image field themselves (the Python chain of fields=).
FEEDLINE_EXPORT Status SelectImagePart(Sample& sample, const FieldRequest& request,
                                       bool source_has_labels);
// The batch field a request fills (not for kOp: its op's Plan says).
FEEDLINE_EXPORT FieldSpec FieldSpecOf(const FieldRequest& request);
// What a field adds to the resume fingerprint besides its op's transform:
// its name, kind and parts, so that a state saved by a loader whose fields
// read other parts, or fill other names, is refused (docs/fields.md).
FEEDLINE_EXPORT uint64_t FieldRequestFingerprint(const FieldRequest& request);

// Appends the fields and ops of `requests` to `pipeline`: MakeFieldOp for
// each kind, PlanOp (op_registry.h) for kOp. Field j of `pipeline` is the
// batch's field output_offset + j (an offset when the pipeline's fields sit
// after others, as a map= recipe's do). InvalidArgument for an empty or repeated field name (an
// op's outputs included), a bytes or op field with no parts; a kOp request's planning errors name
// the op and the field (unknown op, bad parameter).
FEEDLINE_EXPORT Status AppendFieldOps(const std::vector<FieldRequest>& requests,
                                      bool source_has_labels, Pipeline* pipeline,
                                      size_t output_offset = 0);

// The same recipes over any read op (MakeReadFileOp, MakeShardReadOp,
// MakeTarReadOp, ...) that fills each sample's bytes, label and location.
// read -> decode_transform -> label, fields {"image", "label"}.
FEEDLINE_EXPORT Pipeline MakeImagePipeline(std::shared_ptr<const SampleOp> read_op,
                                           uint64_t num_samples, const ImageTransform& transform);

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

// A token corpus (tokens.h) whose sources may be remote: an s3:// object or
// an http(s):// URL is a flat (nanoGPT) token file read by ranged requests
// through a block cache (1 MiB blocks, 64 MiB per file) instead of a memory
// map, with the local reader's checks and fingerprint (a state saved on the
// local file resumes on its copy in a bucket); local paths are
// OpenTokenSource's. A remote token-shard manifest or Megatron prefix is
// Unimplemented, naming it (copy it to local disk).
FEEDLINE_EXPORT Result<std::shared_ptr<const TokenCorpus>> OpenTokenCorpus(
    const std::vector<std::string>& paths, const TokenSourceOptions& options,
    const HttpOptions& http = {});

}  // namespace feedline

#endif  // FEEDLINE_PIPELINE_BUILDER_H_
