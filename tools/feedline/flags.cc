#include "tools/feedline/flags.h"

#include <cstdlib>

namespace feedline::cli {

Result<Flags> Flags::Parse(const std::vector<std::string>& args,
                           const std::set<std::string>& valued,
                           const std::set<std::string>& switches) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      f.positional_.push_back(a);
      continue;
    }
    const std::string name = a.substr(2);
    if (switches.count(name)) {
      f.values_[name] = "1";
    } else if (valued.count(name)) {
      if (i + 1 >= args.size()) return InvalidArgumentError("--" + name + " needs a value");
      f.values_[name] = args[++i];
    } else {
      return InvalidArgumentError("unknown option " + a);
    }
  }
  return f;
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Result<uint64_t> Flags::GetUint(const std::string& name, uint64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || it->second[0] == '-') {
    return InvalidArgumentError("--" + name + " wants a non-negative integer, got '" + it->second + "'");
  }
  return static_cast<uint64_t>(v);
}

Result<double> Flags::GetDouble(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') {
    return InvalidArgumentError("--" + name + " wants a number, got '" + it->second + "'");
  }
  return v;
}

}  // namespace feedline::cli
