#include "src/core/cpu.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace feedline::core {
namespace {

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string_view NextToken(std::string_view* text) {
  size_t b = text->find_first_not_of(" \t\n");
  if (b == std::string_view::npos) {
    *text = {};
    return {};
  }
  size_t e = text->find_first_of(" \t\n", b);
  if (e == std::string_view::npos) e = text->size();
  std::string_view tok = text->substr(b, e - b);
  text->remove_prefix(e);
  return tok;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// The cgroup quota in cores (fractional), 0 if none.
double CpuQuotaCores() {
  double q = detail::ParseCgroupV2CpuMax(ReadSmallFile("/sys/fs/cgroup/cpu.max"));
  if (q > 0) return q;
  uint64_t quota = 0, period = 0;
  std::string qs = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::string ps = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  std::string_view qv(qs), pv(ps);
  if (ParseU64(NextToken(&qv), &quota) && ParseU64(NextToken(&pv), &period) && period > 0) {
    return static_cast<double>(quota) / static_cast<double>(period);
  }
  return 0;  // "-1" (no quota) fails to parse as unsigned
}

uint32_t AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<uint32_t>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? hw : 1;
}

}  // namespace

namespace detail {

double ParseCgroupV2CpuMax(std::string_view text) {
  std::string_view quota = NextToken(&text), period = NextToken(&text);
  uint64_t q = 0, p = 0;
  if (quota == "max" || !ParseU64(quota, &q) || !ParseU64(period, &p) || p == 0) return 0;
  return static_cast<double>(q) / static_cast<double>(p);
}

uint64_t ParseMeminfoAvailable(std::string_view text) {
  // Lines of "Key:   value [kB]".
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    std::string_view key = NextToken(&line), value = NextToken(&line), unit = NextToken(&line);
    uint64_t v = 0;
    if (key == "MemAvailable:" && ParseU64(value, &v)) return unit == "kB" ? v * 1024 : v;
  }
  return 0;
}

uint64_t ParseCgroupMemoryValue(std::string_view text) {
  uint64_t v = 0;
  return ParseU64(NextToken(&text), &v) ? v : 0;
}

}  // namespace detail

uint32_t AvailableCores() {
  uint32_t n = AffinityCores();
  const double quota = CpuQuotaCores();
  if (quota > 0) n = std::min<uint32_t>(n, static_cast<uint32_t>(std::ceil(quota)));
  return std::max<uint32_t>(1, n);
}

uint32_t DefaultCpuBudget() { return std::max<uint32_t>(1, AvailableCores() - 1); }

uint64_t AvailableMemoryBytes() {
  uint64_t avail = detail::ParseMeminfoAvailable(ReadSmallFile("/proc/meminfo"));
  const uint64_t limit = detail::ParseCgroupMemoryValue(ReadSmallFile("/sys/fs/cgroup/memory.max"));
  if (limit > 0) {
    const uint64_t used =
        detail::ParseCgroupMemoryValue(ReadSmallFile("/sys/fs/cgroup/memory.current"));
    const uint64_t left = limit > used ? limit - used : 0;
    avail = avail == 0 ? left : std::min(avail, left);
  }
  return avail;
}

uint64_t DefaultRamBudget() {
  constexpr uint64_t kFloor = uint64_t{64} << 20;
  const auto b = static_cast<uint64_t>(static_cast<double>(AvailableMemoryBytes()) * kDefaultRamFraction);
  return std::max(kFloor, b);
}

}  // namespace feedline::core
