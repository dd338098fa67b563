// Fuzzes Sampler::RestoreState, the parser of resume-state blobs users load
// from checkpoints. Properties: never crashes or reads out of bounds; any
// accepted state names a position inside the epoch; re-saving an accepted
// state (no resharding) reproduces the input byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "feedline/sampler.h"

namespace {

// Options from the first bytes, so the fuzzer explores matching and
// mismatching configurations.
feedline::SamplerOptions OptionsFrom(const uint8_t* data, size_t size) {
  feedline::SamplerOptions o;
  uint8_t b[4] = {1, 1, 1, 0};
  std::memcpy(b, data, size < 4 ? size : 4);
  o.num_samples = 1 + b[0];
  o.batch_size = 1 + b[1] % 16;
  o.world_size = 1 + b[2] % 8;
  o.rank = 0;
  o.shuffle = b[3] & 1;
  o.drop_last = b[3] & 2;
  o.seed = b[3] >> 2;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const feedline::SamplerOptions o = OptionsFrom(data, size);
  auto sampler = feedline::Sampler::Create(o);
  if (!sampler.ok()) __builtin_trap();
  const size_t skip = size < 4 ? size : 4;
  const std::string_view blob(reinterpret_cast<const char*>(data) + skip, size - skip);
  for (bool elastic : {false, true}) {
    auto pos = sampler->RestoreState(blob, elastic);
    if (!pos.ok()) continue;
    if (pos->batch > sampler->num_batches()) __builtin_trap();
    if (!elastic && sampler->SaveState(*pos) != blob) __builtin_trap();
  }
  // Also a valid blob for these options, mutated by the fuzzer's bytes.
  std::string valid = sampler->SaveState({size, size % (sampler->num_batches() + 1)});
  for (size_t i = skip; i < size; ++i) valid[(i * 7) % valid.size()] ^= static_cast<char>(data[i]);
  (void)sampler->RestoreState(valid, true);
  return 0;
}
