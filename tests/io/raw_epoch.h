// One epoch of raw bytes through a real Loader, collected by sample id, so
// fault tests can compare a faulty run with a clean one byte for byte. Built
// on the engine alone (raw_ops.h): io's tests link io, not the recipes
// layer above it (which knows images).
#ifndef FEEDLINE_TESTS_IO_RAW_EPOCH_H_
#define FEEDLINE_TESTS_IO_RAW_EPOCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "feedline/batch.h"
#include "feedline/loader.h"
#include "feedline/raw_ops.h"

namespace feedline::testing {

struct RawEpoch {
  Status status;  // what stopped the epoch, OK if it ended
  std::map<uint64_t, std::pair<int64_t, std::vector<uint8_t>>> samples;  // id -> (label, bytes)
  std::vector<SampleError> skipped;
};

// `read_op` over `num_samples` records of at most `max_bytes`, unshuffled.
inline RawEpoch RunRawEpoch(std::shared_ptr<const SampleOp> read_op, uint64_t num_samples,
                            uint64_t max_bytes, uint32_t threads,
                            ErrorPolicy policy = ErrorPolicy::kRaise, uint64_t max_errors = 0) {
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.num_threads = threads;
  o.error_policy = policy;
  o.max_errors = max_errors;
  RawEpoch out;
  Result<std::unique_ptr<Loader>> loader =
      Loader::Create(MakeRawPipeline(std::move(read_op), num_samples, max_bytes), o);
  if (!loader.ok()) {
    out.status = loader.status();
    return out;
  }
  Batch b;
  bool end = false;
  while (true) {
    out.status = (*loader)->Next(&b, &end);
    if (!out.status.ok() || end) break;
    const std::span<const uint8_t> bytes = b.field_as<const uint8_t>(0);
    const std::span<const int64_t> length = b.field_as<const int64_t>(1),
                                   label = b.field_as<const int64_t>(2);
    for (size_t i = 0; i < b.size(); ++i) {
      const uint8_t* p = bytes.data() + i * max_bytes;
      out.samples[b.sample_ids()[i]] = {label[i], std::vector<uint8_t>(p, p + length[i])};
    }
    out.skipped.insert(out.skipped.end(), b.skipped().begin(), b.skipped().end());
  }
  return out;
}

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_IO_RAW_EPOCH_H_
