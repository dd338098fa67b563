// Fuzzes the feedline token-shard parser and reader (src/tokens/,
// ParseTokenShard and OpenTokenShards) over arbitrary shard and manifest
// bytes: header fields, sizes, padding, the document index, both index
// CRCs, the manifest's fields and its agreement with the header. Input
// layout: a little-endian uint32 m, then m bytes of manifest.json (m = 0:
// a manifest is derived from the shard's own header, so mutations reach
// every shard check), then the rest as the shard `tokens-00000.flt`. An
// accepted shard must be self-consistent: its layout fits the bytes, every
// token reads back (or fails a block checksum with a reason), document
// starts increase inside the corpus, and a sub-range's starts are those
// of the whole that lie in it. A refusal always says why.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "feedline/tokens.h"
#include "src/tokens/token_shards.h"

namespace {

bool WriteAll(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::filesystem::path base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    const std::filesystem::path d =
        base / ("feedline_token_shard_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  static const struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup;
  if (size < 4) return 0;
  uint32_t m = 0;
  std::memcpy(&m, data, 4);
  if (m > size - 4) m = static_cast<uint32_t>(size - 4);
  const uint8_t* shard = data + 4 + m;
  const size_t shard_size = size - 4 - m;

  // The parser alone, on a heap copy of exactly the shard's bytes.
  std::vector<uint8_t> copy(shard, shard + shard_size);
  auto layout = feedline::tokens::detail::ParseTokenShard(copy.data(), copy.size(), "fuzz.flt");
  if (!layout.ok()) {
    if (layout.status().message().empty()) __builtin_trap();
  } else {
    const auto& l = *layout;
    if (l.block_crcs_at + 4 * l.num_blocks != shard_size) __builtin_trap();
    if (l.num_documents == 0 || l.num_documents > l.num_tokens) __builtin_trap();
  }

  std::string manifest(reinterpret_cast<const char*>(data + 4), m);
  if (m == 0) {
    if (shard_size < 64) return 0;
    char crc[9];
    uint32_t stored;
    std::memcpy(&stored, shard + 60, 4);
    std::snprintf(crc, sizeof(crc), "%08x", stored);
    uint32_t width;
    std::memcpy(&width, shard + 16, 4);
    const std::string n = std::to_string(Load64(shard + 24));
    const std::string d = std::to_string(Load64(shard + 32));
    manifest = std::string(R"({"format": "feedline-tokens", "version": 1, "dtype": ")") +
               (width == 4 ? "uint32" : "uint16") + R"(", "tokens": )" + n + R"(, "documents": )" +
               d + R"(, "tokenizer": {"vocab_size": )" + std::to_string(Load64(shard + 40)) +
               R"(}, "shards": [{"name": "tokens-00000.flt", "tokens": )" + n +
               R"(, "documents": )" + d + R"(, "bytes": )" + std::to_string(shard_size) +
               R"(, "header_crc32c": ")" + crc + R"("}]})";
  }
  if (!WriteAll(dir + "/manifest.json", reinterpret_cast<const uint8_t*>(manifest.data()),
                manifest.size()) ||
      !WriteAll(dir + "/tokens-00000.flt", shard, shard_size))
    return 0;
  auto src = feedline::OpenTokenSource(dir, feedline::TokenSourceOptions{});
  if (!src.ok()) {
    if (src.status().message().empty()) __builtin_trap();
    return 0;
  }
  const feedline::TokenSource& s = **src;
  const uint64_t tokens = s.num_tokens();
  if (tokens * feedline::TokenDTypeSize(s.dtype()) > shard_size) __builtin_trap();
  std::vector<int64_t> out(256);
  for (uint64_t a = 0; a < tokens; a += out.size()) {
    const uint64_t b = std::min<uint64_t>(tokens, a + out.size());
    const feedline::Status st = s.Read(a, b, out.data());  // a block mismatch is allowed
    if (!st.ok() && st.message().empty()) __builtin_trap();
  }
  std::vector<uint64_t> starts;
  s.DocumentStarts(0, tokens, &starts);
  if (starts.size() != s.CountDocuments()) __builtin_trap();
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] >= tokens || (i > 0 && starts[i] <= starts[i - 1])) __builtin_trap();
  }
  // Sub-ranges give exactly the starts inside them (in each shard's part).
  for (uint64_t b = 0; b < tokens; b += 1 + tokens / 7) {
    for (uint64_t e = b; e <= tokens; e += 1 + tokens / 5) {
      std::vector<uint64_t> part, want;
      s.DocumentStarts(b, e, &part);
      for (uint64_t t : starts) {
        if (t >= b && t < e) want.push_back(t);
      }
      if (part != want) __builtin_trap();
    }
  }
  (void)s.Fingerprint();
  return 0;
}
