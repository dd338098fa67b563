#include "src/pipelines/npy.h"

#include <cstring>
#include <limits>
#include <string_view>

namespace feedline::pipelines {
namespace {

// The value after "'key':" in the header dict, up to (not including) the
// next top-level ',' or '}'; parentheses nest for the shape tuple.
bool FindValue(std::string_view header, std::string_view key, std::string_view* out) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t pos = header.find(quoted);
  if (pos == std::string_view::npos) {
    quoted = "\"" + std::string(key) + "\"";
    pos = header.find(quoted);
    if (pos == std::string_view::npos) return false;
  }
  pos = header.find(':', pos + quoted.size());
  if (pos == std::string_view::npos) return false;
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  if (depth != 0) return false;
  *out = header.substr(pos, end - pos);
  while (!out->empty() && out->back() == ' ') out->remove_suffix(1);
  return true;
}

Status Bad(const std::string& why) { return DataLossError("not a valid .npy array: " + why); }

}  // namespace

Result<NpyHeader> ParseNpy(std::span<const uint8_t> file) {
  static constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return Bad("no \\x93NUMPY magic (" + std::to_string(file.size()) + " bytes)");
  }
  const uint8_t major = file[6];
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = file[8] | (size_t{file[9]} << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return Bad("truncated version " + std::to_string(major) + " header");
    header_len =
        file[8] | (size_t{file[9]} << 8) | (size_t{file[10]} << 16) | (size_t{file[11]} << 24);
    prefix = 12;
  } else {
    return Bad("format version " + std::to_string(major) + "." + std::to_string(file[7]) +
               " (1.0, 2.0 and 3.0 are read)");
  }
  if (header_len > file.size() - prefix) {
    return Bad("header length " + std::to_string(header_len) + " runs past the " +
               std::to_string(file.size()) + " bytes");
  }
  const std::string_view header(reinterpret_cast<const char*>(file.data()) + prefix, header_len);
  NpyHeader h;
  h.data_offset = prefix + header_len;

  std::string_view descr, order, shape;
  if (!FindValue(header, "descr", &descr)) return Bad("no 'descr' in the header");
  if (!FindValue(header, "fortran_order", &order)) return Bad("no 'fortran_order' in the header");
  if (!FindValue(header, "shape", &shape)) return Bad("no 'shape' in the header");

  if (descr.size() < 4 || (descr.front() != '\'' && descr.front() != '"') ||
      descr.back() != descr.front()) {
    return Bad("dtype " + std::string(descr) + " (only plain dtypes such as '<f4' are read)");
  }
  h.descr = std::string(descr.substr(1, descr.size() - 2));
  const char byte_order = h.descr[0], type = h.descr[1];
  if (byte_order != '<' && byte_order != '>' && byte_order != '|' && byte_order != '=') {
    return Bad("dtype '" + h.descr + "': unknown byte order");
  }
  if (std::string_view("biufc").find(type) == std::string_view::npos) {
    return Bad("dtype '" + h.descr + "' (bool, integer, float and complex dtypes are read)");
  }
  size_t item = 0;
  for (size_t i = 2; i < h.descr.size(); ++i) {
    const char c = h.descr[i];
    if (c < '0' || c > '9' || item > 64) return Bad("dtype '" + h.descr + "': bad item size");
    item = item * 10 + static_cast<size_t>(c - '0');
  }
  if (item == 0 || item > 16) return Bad("dtype '" + h.descr + "': bad item size");
  h.item_size = item;

  if (order == "False") {
    h.fortran_order = false;
  } else if (order == "True") {
    h.fortran_order = true;
  } else {
    return Bad("fortran_order " + std::string(order));
  }

  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    return Bad("shape " + std::string(shape));
  }
  uint64_t count = 1;
  std::string_view dims = shape.substr(1, shape.size() - 2);
  while (!dims.empty()) {
    while (!dims.empty() && (dims.front() == ' ' || dims.front() == ',')) dims.remove_prefix(1);
    if (dims.empty()) break;
    uint64_t d = 0;
    size_t n = 0;
    while (n < dims.size() && dims[n] >= '0' && dims[n] <= '9') {
      if (d > (std::numeric_limits<uint64_t>::max() - 9) / 10)
        return Bad("shape dimension overflows");
      d = d * 10 + static_cast<uint64_t>(dims[n] - '0');
      ++n;
    }
    if (n == 0) return Bad("shape " + std::string(shape));
    dims.remove_prefix(n);
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && count > std::numeric_limits<uint64_t>::max() / d)) {
      return Bad("shape " + std::string(shape) + " overflows");
    }
    count *= d;
    h.shape.push_back(static_cast<int64_t>(d));
    if (h.shape.size() > 32) return Bad("shape has more than 32 dimensions");
  }
  if (count > std::numeric_limits<uint64_t>::max() / item) return Bad("array size overflows");
  h.data_bytes = count * item;
  const uint64_t have = file.size() - h.data_offset;
  if (have != h.data_bytes) {
    return Bad("the header says " + std::to_string(h.data_bytes) + " bytes of '" + h.descr +
               "' shape " + std::string(shape) + ", the file holds " + std::to_string(have));
  }
  return h;
}

}  // namespace feedline::pipelines
