// Sampler: which sample ids a rank reads, in which order, for an epoch.
//
// The global order of epoch e is a pure function of (seed, e): a uniformly
// random permutation of [0, num_samples) when shuffling (Fisher-Yates driven
// by SampleRng), the identity otherwise. It does not depend on the world size.
// Rank r of w takes the global positions p with p mod w == r. A rank's
// stream is cut into batches of batch_size, and local batch b of every rank
// together covers global positions [b*G, (b+1)*G) with G = w * batch_size,
// the global batch: so a job that keeps G can resume on another world size
// and see the same global batches (the "elastic" restore below).
//
// Uneven sizes. Every rank gets the same number of batches, so no rank waits
// at a collective for another:
//   drop_last: num_batches = floor(N / G); the tail is dropped and each
//              sample goes to at most one rank.
//   otherwise: the global order is padded to a multiple of w by repeating it
//              from the start (positions p >= N read order[(p - N) mod N],
//              as torch's DistributedSampler does), every rank gets
//              ceil(N / w) samples, and the last batch may be short (the same
//              length on every rank). Padding duplicates are counted
//              (num_padding()).
//
// Position. The only state needed to resume is (epoch, next batch); it saves
// to a small versioned, checksummed blob that records the options it was made
// with, and restoring refuses a blob whose seed, dataset size or options
// differ, naming the field and both values.
//
// Thread safety: a Sampler is immutable after Create; all methods are const
// and may be called concurrently.
#ifndef FEEDLINE_SAMPLER_H_
#define FEEDLINE_SAMPLER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT SamplerOptions {
  uint64_t num_samples = 0;  // dataset size N, > 0
  uint64_t batch_size = 1;   // per rank, > 0
  bool shuffle = false;
  uint64_t seed = 0;
  uint32_t rank = 0;        // in [0, world_size)
  uint32_t world_size = 1;  // > 0
  bool drop_last = false;
  // Saved in states and compared on restore (0: not checked). The loader
  // fills them from the pipeline's ops (SampleOp::DataFingerprint).
  uint64_t data_fingerprint = 0;
  uint64_t config_fingerprint = 0;
  // Grouped shuffle (sources read a group of rows at a time: a Parquet row
  // group). Sizes of consecutive id ranges [0, s0), [s0, s0+s1), ... adding
  // up to num_samples; with shuffle, the epoch's global order is the groups
  // in a random order, and within each window of group_window consecutive
  // groups of it (the last may be smaller), their rows in a random order.
  // Every id once per epoch, each group's rows within one window's span, so
  // a reader holding about a window decodes each group once. Still a pure
  // function of (seed, epoch): ranks, padding and elastic resume as above.
  // Empty: a uniform permutation. The window is not saved in states: the
  // source's op fingerprints it (SampleOp::ConfigFingerprint).
  std::vector<uint64_t> group_sizes;
  uint64_t group_window = 1;
};

// One rank's stream for one epoch.
struct FEEDLINE_EXPORT EpochPlan {
  uint64_t epoch = 0;
  std::vector<uint64_t> ids;  // sample ids in read order; batch b is ids[b*B, min((b+1)*B, size))
  uint64_t num_batches = 0;
  uint64_t batch_size = 0;
  uint64_t first_padding = 0;  // positions >= this in `ids` are padding duplicates

  uint64_t BatchBegin(uint64_t b) const { return b * batch_size; }
  uint64_t BatchEnd(uint64_t b) const;
};

// Where a stream stands: the next batch to deliver.
struct FEEDLINE_EXPORT SamplerPosition {
  uint64_t epoch = 0;
  uint64_t batch = 0;  // in [0, num_batches]; num_batches means "epoch done"
  friend bool operator==(const SamplerPosition&, const SamplerPosition&) = default;
};

class FEEDLINE_EXPORT Sampler {
 public:
  // Validates the options (InvalidArgument naming the field).
  static Result<Sampler> Create(const SamplerOptions& options);

  const SamplerOptions& options() const { return options_; }
  uint64_t global_batch_size() const { return options_.batch_size * options_.world_size; }
  // Batches per epoch, identical on every rank.
  uint64_t num_batches() const { return num_batches_; }
  // Samples per epoch on this rank (counting padding).
  uint64_t samples_per_rank() const { return samples_per_rank_; }
  // Padding duplicates per epoch across all ranks (0 with drop_last).
  uint64_t num_padding() const { return num_padding_; }

  // The global order of `epoch` (length N). O(N) time and memory.
  std::vector<uint64_t> GlobalOrder(uint64_t epoch) const;
  // This rank's stream for `epoch`.
  EpochPlan Plan(uint64_t epoch) const;

  // The resumable state at `pos`, as a self-describing blob (docs/engine.md).
  std::string SaveState(SamplerPosition pos) const;

  // Decodes a blob made by SaveState. Errors: DataLoss for a truncated or
  // corrupt blob; InvalidArgument for a wrong magic or unknown version, or
  // when the blob's data or config fingerprint, seed, num_samples, shuffle,
  // drop_last, batch_size or world_size differ from this sampler's (message
  // names the field and both values). With `elastic`, a different world_size is accepted when the
  // global batch size is the same; the position then means the same global
  // batch.
  Result<SamplerPosition> RestoreState(std::string_view blob, bool elastic = false) const;

 private:
  explicit Sampler(const SamplerOptions& options);

  SamplerOptions options_;
  uint64_t num_batches_ = 0;
  uint64_t samples_per_rank_ = 0;
  uint64_t num_padding_ = 0;
};

}  // namespace feedline

#endif  // FEEDLINE_SAMPLER_H_
