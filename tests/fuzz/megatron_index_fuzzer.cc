// Fuzzes the Megatron-LM index reader (src/tokens/, OpenMegatronDataset)
// over arbitrary index and token bytes: magic, version, dtype code, counts
// against the index size, every length, pointer and document index, the
// .bin size. Input layout: a little-endian uint32 n, then n bytes of
// prefix.idx, then the rest as prefix.bin (both written under /dev/shm or
// the temp dir). An accepted dataset must be self-consistent: its tokens
// read back in chunks, its document starts increase inside the corpus,
// and its size matches the .bin. A refusal always says why.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "feedline/tokens.h"

namespace {

bool WriteAll(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string prefix = [] {
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (dir / ("feedline_megatron_fuzz_" + std::to_string(::getpid()))).string();
  }();
  // The two files go when the fuzzer exits.
  static const struct Cleanup {
    ~Cleanup() {
      std::remove((prefix + ".idx").c_str());
      std::remove((prefix + ".bin").c_str());
    }
  } cleanup;
  if (size < 4) return 0;
  uint32_t n = 0;
  std::memcpy(&n, data, 4);
  if (n > size - 4) n = static_cast<uint32_t>(size - 4);
  if (!WriteAll(prefix + ".idx", data + 4, n) ||
      !WriteAll(prefix + ".bin", data + 4 + n, size - 4 - n))
    return 0;
  auto src = feedline::OpenMegatronDataset(prefix);
  if (!src.ok()) {
    if (src.status().message().empty()) __builtin_trap();  // errors always say why
    return 0;
  }
  const feedline::TokenSource& s = **src;
  const uint64_t tokens = s.num_tokens();
  if (tokens * feedline::TokenDTypeSize(s.dtype()) != size - 4 - n) __builtin_trap();
  std::vector<int64_t> out(256);
  for (uint64_t a = 0; a < tokens; a += out.size()) {
    const uint64_t b = std::min<uint64_t>(tokens, a + out.size());
    (void)s.Read(a, b, out.data());  // DataLoss for a negative id is allowed; never a crash
  }
  std::vector<uint64_t> starts;
  s.DocumentStarts(0, tokens, &starts);
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] >= tokens || (i > 0 && starts[i] <= starts[i - 1])) __builtin_trap();
  }
  (void)s.CountDocuments();
  (void)s.Fingerprint();
  return 0;
}
