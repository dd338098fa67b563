// Fuzzes the dataset manifest parser; an accepted manifest re-serialises to
// one that parses to the same shards and counts.
#include <cstdint>
#include <string_view>

#include "feedline/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m =
      feedline::DatasetManifest::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!m.ok()) return 0;
  auto again = feedline::DatasetManifest::Parse(m->ToJson());
  if (!again.ok() || again->records != m->records || again->shards.size() != m->shards.size() ||
      again->classes != m->classes) {
    __builtin_trap();
  }
  for (size_t i = 0; i < m->shards.size(); ++i) {
    if (again->shards[i].name != m->shards[i].name ||
        again->shards[i].crc32c != m->shards[i].crc32c)
      __builtin_trap();
  }
  return 0;
}
