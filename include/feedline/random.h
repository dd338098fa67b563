// Counter-based random numbers: the source of every random choice feedline
// makes for a sample.
//
// A SampleRng is a pure function of (seed, epoch, sample id, op index): it
// holds no state shared with any other sample, so the augmentations of a
// sample are the same whichever worker thread runs it, in whatever order, and
// a resumed run needs no saved generator state.
//
// Derivation (pinned by golden values in tests/core/random_test.cc; changing
// it changes every augmentation users have ever seen, so don't):
//   key     = Mix64(Mix64(seed) ^ epoch), split into two 32-bit words
//   counter = { id lo32, id hi32, op index, block index }
//   block   = Philox4x32-10(counter, key)  (Salmon et al., SC'11)
// Draws consume the 4 words of a block in order, then the block index
// advances. Distinct (id, op) pairs under one key have distinct counters, and
// Philox is a bijection of the counter for a fixed key, so their streams never
// coincide; distinct (seed, epoch) pairs get distinct keys unless Mix64
// collides (probability ~2^-64).
//
// Thread safety: a SampleRng is a small value owned by one thread; the free
// functions are pure.
#ifndef FEEDLINE_RANDOM_H_
#define FEEDLINE_RANDOM_H_

#include <array>
#include <cstdint>

namespace feedline {

namespace detail {
__extension__ typedef unsigned __int128
    Uint128;  // GCC/Clang builtin; __extension__ keeps -pedantic quiet
}  // namespace detail

// One Philox4x32-10 block: the published algorithm, checked against the
// Random123 known-answer vectors.
inline std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// SplitMix64's finaliser: a bijective 64-bit mixer.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// The 64-bit Philox key for (seed, epoch).
inline uint64_t EpochKey(uint64_t seed, uint64_t epoch) { return Mix64(Mix64(seed) ^ epoch); }

class SampleRng {
 public:
  // The stream for one op of one sample. `key` is EpochKey(seed, epoch).
  SampleRng(uint64_t key, uint64_t sample_id, uint32_t op_index)
      : key_{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)},
        ctr_{static_cast<uint32_t>(sample_id), static_cast<uint32_t>(sample_id >> 32), op_index,
             0} {}

  static SampleRng ForSample(uint64_t seed, uint64_t epoch, uint64_t sample_id, uint32_t op_index) {
    return SampleRng(EpochKey(seed, epoch), sample_id, op_index);
  }

  uint32_t NextU32() {
    if (pos_ == 4) {
      block_ = Philox4x32_10(ctr_, key_);
      ++ctr_[3];  // 2^32 blocks (64 GiB) per stream; wraps after that.
      pos_ = 0;
    }
    return block_[pos_++];
  }

  uint64_t NextU64() {
    const uint64_t lo = NextU32();
    return lo | (uint64_t{NextU32()} << 32);
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // Uniform integer in [0, n), exactly unbiased (Lemire's multiply-and-reject).
  // n == 0 returns 0.
  uint64_t UniformInt(uint64_t n) {
    if (n == 0) return 0;
    detail::Uint128 m = static_cast<detail::Uint128>(NextU64()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<detail::Uint128>(NextU64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // True with probability p.
  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> ctr_;
  std::array<uint32_t, 4> block_{};
  int pos_ = 4;
};

}  // namespace feedline

#endif  // FEEDLINE_RANDOM_H_
