// Writes ustar archives in memory, for tests and fuzz seeds: regular files,
// GNU long names ('L') and PAX headers ('x'), then the end-of-archive marker.
#ifndef FEEDLINE_TESTS_IO_TAR_WRITER_H_
#define FEEDLINE_TESTS_IO_TAR_WRITER_H_

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace feedline::testing {

class TarWriter {
 public:
  // Appends a member; returns the offset of its data.
  size_t Add(const std::string& name, const std::string& data, char type = '0') {
    char h[512] = {};
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = type;
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, space
    h[155] = ' ';
    tar_.append(h, sizeof(h));
    const size_t offset = tar_.size();
    tar_ += data;
    tar_.append((512 - data.size() % 512) % 512, '\0');
    return offset;
  }
  // The archive with its end-of-archive marker (two zero blocks).
  std::string Finish() const { return tar_ + std::string(1024, '\0'); }

 private:
  std::string tar_;
};

}  // namespace feedline::testing

#endif  // FEEDLINE_TESTS_IO_TAR_WRITER_H_
