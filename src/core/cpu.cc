#include "src/core/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// The process's cgroup v2 directory (from "0::/path" in /proc/self/cgroup)
// and its parents up to the mount root: a limit on any of them applies.
std::vector<std::string> CgroupV2Dirs() {
  std::vector<std::string> dirs;
  const std::string text = ReadSmallFile("/proc/self/cgroup");
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    if (line.rfind("0::", 0) != 0) continue;
    std::string path(line.substr(3));
    while (true) {
      dirs.push_back("/sys/fs/cgroup" + (path == "/" ? std::string() : path));
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  if (dirs.empty()) dirs.push_back("/sys/fs/cgroup");
  return dirs;
}

// The tightest cgroup quota in cores (fractional), 0 if none.
double CpuQuotaCores() {
  double q = 0;
  for (const std::string& dir : CgroupV2Dirs()) {
    const double d = detail::ParseCgroupV2CpuMax(ReadSmallFile((dir + "/cpu.max").c_str()));
    if (d > 0 && (q == 0 || d < q)) q = d;
  }
  if (q > 0) return q;
  uint64_t quota = 0, period = 0;  // cgroup v1
  std::string qs = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::string ps = ReadSmallFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  std::string_view qv(qs), pv(ps);
  if (ParseU64(NextToken(&qv), &quota) && ParseU64(NextToken(&pv), &period) && period > 0) {
    return static_cast<double>(quota) / static_cast<double>(period);
  }
  return 0;  // "-1" (no quota) fails to parse as unsigned
}

// Bytes the cgroups still allow (the tightest), 0 if no limit.
uint64_t CgroupMemoryLeft() {
  uint64_t left = 0;
  bool limited = false;
  auto consider = [&](uint64_t limit, uint64_t used) {
    // cgroup v1 writes "no limit" as a huge number.
    if (limit == 0 || limit >= (uint64_t{1} << 60)) return;
    const uint64_t l = limit > used ? limit - used : 0;
    if (!limited || l < left) left = l;
    limited = true;
  };
  for (const std::string& dir : CgroupV2Dirs()) {
    consider(detail::ParseCgroupMemoryValue(ReadSmallFile((dir + "/memory.max").c_str())),
             detail::ParseCgroupMemoryValue(ReadSmallFile((dir + "/memory.current").c_str())));
  }
  consider(
      detail::ParseCgroupMemoryValue(ReadSmallFile("/sys/fs/cgroup/memory/memory.limit_in_bytes")),
      detail::ParseCgroupMemoryValue(ReadSmallFile("/sys/fs/cgroup/memory/memory.usage_in_bytes")));
  return limited ? std::max<uint64_t>(left, 1) : 0;
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

namespace {
uint64_t ReadClockNs(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

uint64_t ProcessCpuNs() { return ReadClockNs(CLOCK_PROCESS_CPUTIME_ID); }
uint64_t ThreadCpuNs() { return ReadClockNs(CLOCK_THREAD_CPUTIME_ID); }

ThreadCpuClock ThreadCpuClock::Current() {
  ThreadCpuClock c;
  c.valid_ = pthread_getcpuclockid(pthread_self(), &c.id_) == 0;
  return c;
}

uint64_t ThreadCpuClock::ReadNs() const { return valid_ ? ReadClockNs(id_) : 0; }

uint64_t AvailableMemoryBytes() {
  uint64_t avail = detail::ParseMeminfoAvailable(ReadSmallFile("/proc/meminfo"));
  const uint64_t left = CgroupMemoryLeft();
  if (left > 0) avail = avail == 0 ? left : std::min(avail, left);
  return avail;
}

uint64_t DefaultRamBudget(double fraction) {
  constexpr uint64_t kFloor = uint64_t{64} << 20;
  const auto b = static_cast<uint64_t>(static_cast<double>(AvailableMemoryBytes()) * fraction);
  return std::max(kFloor, b);
}

}  // namespace feedline::core
