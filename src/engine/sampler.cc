#include "feedline/sampler.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>

#include "feedline/random.h"
#include "src/core/detail/endian.h"

namespace feedline {
namespace {

using core::detail::DecodeFixed16;
using core::detail::DecodeFixed64;
using core::detail::Fnv1a64;
using core::detail::PutFixed16;
using core::detail::PutFixed64;

// The shuffle's stream: an id and op index that no sample uses (op indices
// count a pipeline's ops from 0), so it never coincides with a sample's.
constexpr uint64_t kShuffleStreamId = ~uint64_t{0};
constexpr uint32_t kShuffleStreamOp = ~uint32_t{0};

// State blob layout (little-endian), version 2, 80 bytes:
//   0 magic "FLSS" | 4 u16 version | 6 u16 flags (bit0 shuffle, bit1 drop_last)
//   8 seed | 16 num_samples | 24 batch_size | 32 world_size | 40 epoch
//   48 next batch | 56 data fingerprint | 64 config fingerprint
//   72 FNV-1a-64 of bytes [0, 72)
// Version 1 (64 bytes: no fingerprints, the checksum at 56) is still read;
// its dataset cannot be checked beyond num_samples.
constexpr char kStateMagic[4] = {'F', 'L', 'S', 'S'};
constexpr uint16_t kStateVersion = 2;
constexpr size_t kStateSize = 80;
constexpr size_t kStateSizeV1 = 64;
constexpr uint16_t kFlagShuffle = 1, kFlagDropLast = 2;

std::string Mismatch(std::string_view field, const std::string& in_state, const std::string& here) {
  return "sampler state does not match this loader: " + std::string(field) + " is " + in_state +
         " in the saved state but " + here + " here";
}
std::string Bool(bool b) { return b ? "true" : "false"; }
std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t EpochPlan::BatchEnd(uint64_t b) const {
  return std::min<uint64_t>((b + 1) * batch_size, ids.size());
}

Result<Sampler> Sampler::Create(const SamplerOptions& o) {
  if (o.num_samples == 0) return InvalidArgumentError("num_samples must be > 0 (empty dataset)");
  if (o.batch_size == 0) return InvalidArgumentError("batch_size must be > 0");
  if (o.world_size == 0) return InvalidArgumentError("world_size must be > 0");
  if (o.rank >= o.world_size) {
    return InvalidArgumentError("rank " + std::to_string(o.rank) +
                                " is not in [0, world_size=" + std::to_string(o.world_size) + ")");
  }
  if (!o.group_sizes.empty()) {
    uint64_t sum = 0;
    for (size_t g = 0; g < o.group_sizes.size(); ++g) {
      if (o.group_sizes[g] == 0)
        return InvalidArgumentError("group_sizes[" + std::to_string(g) + "] is 0");
      sum += o.group_sizes[g];
    }
    if (sum != o.num_samples) {
      return InvalidArgumentError("group_sizes add up to " + std::to_string(sum) +
                                  ", num_samples is " + std::to_string(o.num_samples));
    }
  }
  return Sampler(o);
}

Sampler::Sampler(const SamplerOptions& o) : options_(o) {
  const uint64_t n = o.num_samples, w = o.world_size, b = o.batch_size;
  if (o.drop_last) {
    num_batches_ = n / (w * b);
    samples_per_rank_ = num_batches_ * b;
    num_padding_ = 0;
  } else {
    samples_per_rank_ = (n + w - 1) / w;
    num_batches_ = (samples_per_rank_ + b - 1) / b;
    num_padding_ = samples_per_rank_ * w - n;
  }
}

std::vector<uint64_t> Sampler::GlobalOrder(uint64_t epoch) const {
  std::vector<uint64_t> order(options_.num_samples);
  std::iota(order.begin(), order.end(), uint64_t{0});
  if (options_.shuffle && !options_.group_sizes.empty()) {
    // Grouped: the groups in a random order, then the rows of each window of
    // group_window consecutive groups (in that order) in a random order.
    const std::vector<uint64_t>& sizes = options_.group_sizes;
    std::vector<uint64_t> first(sizes.size());
    for (size_t g = 1; g < sizes.size(); ++g) first[g] = first[g - 1] + sizes[g - 1];
    std::vector<uint64_t> groups(sizes.size());
    std::iota(groups.begin(), groups.end(), uint64_t{0});
    SampleRng rng(EpochKey(options_.seed, epoch), kShuffleStreamId, kShuffleStreamOp);
    for (uint64_t i = groups.size() - 1; i > 0; --i)
      std::swap(groups[i], groups[rng.UniformInt(i + 1)]);
    const uint64_t window = std::max<uint64_t>(1, options_.group_window);
    size_t at = 0;
    for (size_t w = 0; w < groups.size(); w += window) {
      const size_t begin = at;
      for (size_t g = w; g < std::min<size_t>(groups.size(), w + window); ++g) {
        for (uint64_t k = 0; k < sizes[groups[g]]; ++k) order[at++] = first[groups[g]] + k;
      }
      for (size_t i = at - 1; i > begin; --i)
        std::swap(order[i], order[begin + rng.UniformInt(i - begin + 1)]);
    }
    return order;
  }
  if (options_.shuffle) {
    SampleRng rng(EpochKey(options_.seed, epoch), kShuffleStreamId, kShuffleStreamOp);
    for (uint64_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[rng.UniformInt(i + 1)]);
    }
  }
  return order;
}

EpochPlan Sampler::Plan(uint64_t epoch) const {
  const uint64_t n = options_.num_samples, w = options_.world_size, r = options_.rank;
  EpochPlan plan;
  plan.epoch = epoch;
  plan.num_batches = num_batches_;
  plan.batch_size = options_.batch_size;
  plan.ids.resize(samples_per_rank_);
  // Local position k is global position r + k*w; padding starts where that
  // reaches n.
  plan.first_padding = n > r ? std::min<uint64_t>(samples_per_rank_, (n - r + w - 1) / w) : 0;
  if (options_.shuffle) {
    const std::vector<uint64_t> order = GlobalOrder(epoch);
    for (uint64_t k = 0; k < samples_per_rank_; ++k) {
      const uint64_t p = r + k * w;
      plan.ids[k] = p < n ? order[p] : order[(p - n) % n];
    }
  } else {
    for (uint64_t k = 0; k < samples_per_rank_; ++k) {
      const uint64_t p = r + k * w;
      plan.ids[k] = p < n ? p : (p - n) % n;
    }
  }
  return plan;
}

std::string Sampler::SaveState(SamplerPosition pos) const {
  std::string s(kStateMagic, sizeof(kStateMagic));
  PutFixed16(&s, kStateVersion);
  PutFixed16(&s, static_cast<uint16_t>((options_.shuffle ? kFlagShuffle : 0) |
                                       (options_.drop_last ? kFlagDropLast : 0)));
  PutFixed64(&s, options_.seed);
  PutFixed64(&s, options_.num_samples);
  PutFixed64(&s, options_.batch_size);
  PutFixed64(&s, options_.world_size);
  PutFixed64(&s, pos.epoch);
  PutFixed64(&s, pos.batch);
  PutFixed64(&s, options_.data_fingerprint);
  PutFixed64(&s, options_.config_fingerprint);
  PutFixed64(&s, Fnv1a64(s.data(), s.size()));
  return s;
}

Result<SamplerPosition> Sampler::RestoreState(std::string_view blob, bool elastic) const {
  if (blob.size() < 8) {
    return DataLossError("sampler state is truncated: " + std::to_string(blob.size()) +
                         " bytes, expected " + std::to_string(kStateSize));
  }
  const char* p = blob.data();
  if (!std::equal(kStateMagic, kStateMagic + 4, p)) {
    return InvalidArgumentError("not a feedline sampler state (bad magic)");
  }
  const uint16_t version = DecodeFixed16(p + 4);
  if (version != kStateVersion && version != 1) {
    return InvalidArgumentError("sampler state version " + std::to_string(version) +
                                " is not supported (this build reads versions 1 and " +
                                std::to_string(kStateVersion) + ")");
  }
  const size_t size = version == 1 ? kStateSizeV1 : kStateSize;
  if (blob.size() != size) {
    return DataLossError("sampler state has " + std::to_string(blob.size()) + " bytes, expected " +
                         std::to_string(size));
  }
  if (DecodeFixed64(p + size - 8) != Fnv1a64(p, size - 8)) {
    return DataLossError("sampler state checksum mismatch (corrupt state)");
  }
  const uint16_t flags = DecodeFixed16(p + 6);
  const uint64_t seed = DecodeFixed64(p + 8), num_samples = DecodeFixed64(p + 16);
  const uint64_t batch_size = DecodeFixed64(p + 24), world_size = DecodeFixed64(p + 32);
  SamplerPosition pos{DecodeFixed64(p + 40), DecodeFixed64(p + 48)};

  const SamplerOptions& o = options_;
  if (version >= 2) {
    // 0 on either side: nothing to compare (a pipeline whose ops give none).
    const uint64_t data = DecodeFixed64(p + 56), config = DecodeFixed64(p + 64);
    if (data != 0 && o.data_fingerprint != 0 && data != o.data_fingerprint) {
      return InvalidArgumentError(Mismatch("the dataset fingerprint (sample keys, sizes, labels)",
                                           Hex(data), Hex(o.data_fingerprint)) +
                                  ": the state was saved on another dataset");
    }
    if (config != 0 && o.config_fingerprint != 0 && config != o.config_fingerprint) {
      return InvalidArgumentError(
          Mismatch("the transform fingerprint", Hex(config), Hex(o.config_fingerprint)) +
          ": the state was saved with another transform");
    }
  }
  if (seed != o.seed)
    return InvalidArgumentError(Mismatch("seed", std::to_string(seed), std::to_string(o.seed)));
  if (num_samples != o.num_samples) {
    return InvalidArgumentError(
        Mismatch("num_samples", std::to_string(num_samples), std::to_string(o.num_samples)));
  }
  if (((flags & kFlagShuffle) != 0) != o.shuffle) {
    return InvalidArgumentError(Mismatch("shuffle", Bool(flags & kFlagShuffle), Bool(o.shuffle)));
  }
  if (((flags & kFlagDropLast) != 0) != o.drop_last) {
    return InvalidArgumentError(
        Mismatch("drop_last", Bool(flags & kFlagDropLast), Bool(o.drop_last)));
  }
  const bool same_global = batch_size * world_size == global_batch_size();
  if (world_size != o.world_size && !(elastic && same_global)) {
    std::string msg =
        Mismatch("world_size", std::to_string(world_size), std::to_string(o.world_size));
    msg += elastic ? "; elastic restore needs the same global batch size (" +
                         std::to_string(batch_size * world_size) + " saved, " +
                         std::to_string(global_batch_size()) + " here)"
                   : "; re-sharding needs elastic restore with the same global batch size";
    return InvalidArgumentError(msg);
  }
  if (batch_size != o.batch_size && !(elastic && same_global)) {
    return InvalidArgumentError(
        Mismatch("batch_size", std::to_string(batch_size), std::to_string(o.batch_size)));
  }
  if (pos.batch > num_batches_) {
    // Possible only when resharding changed the padded tail; the saved
    // position is then past our last batch, which means "epoch done".
    if (!elastic || world_size == o.world_size) {
      return DataLossError("sampler state position batch " + std::to_string(pos.batch) +
                           " is past the epoch's " + std::to_string(num_batches_) + " batches");
    }
    pos.batch = num_batches_;
  }
  return pos;
}

}  // namespace feedline
