#include "tools/feedline/flags.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace feedline::cli {

namespace {

const Option* Find(const Usage& usage, const std::string& name) {
  for (const Option& o : usage.options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// "-x" and "--x" are options; "-" alone and negative numbers ("-1") are not.
bool LooksLikeOption(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1])) &&
         a[1] != '.';
}

}  // namespace

std::string Usage::ToString() const {
  std::string s;
  for (size_t i = 0; i < synopses.size(); ++i) {
    s += (i == 0 ? "usage: " : "       ") + std::string("feedline ") + command;
    if (!synopses[i].empty()) s += " " + synopses[i];
    s += "\n";
  }
  if (synopses.empty()) s += "usage: feedline " + command + " [options]\n";
  s += "\n" + summary + "\n";
  if (!description.empty()) s += "\n" + description + "\n";
  auto column = [&s](const std::string& left, const std::string& right, size_t width) {
    s += "  " + left;
    if (left.size() + 2 < width) {
      s += std::string(width - left.size() - 2, ' ');
    } else {
      s += "\n" + std::string(width, ' ');
    }
    // Continuation lines of a multi-line help line up under its first.
    for (char c : right) s += c == '\n' ? "\n" + std::string(width, ' ') : std::string(1, c);
    s += "\n";
  };
  size_t width = 8;
  for (const Argument& a : arguments) width = std::max(width, a.name.size() + 4);
  for (const Option& o : options) width = std::max(width, o.name.size() + o.value.size() + 7);
  width = std::min<size_t>(width, 28);
  if (!arguments.empty()) {
    s += "\narguments:\n";
    for (const Argument& a : arguments) column(a.name, a.help, width);
  }
  s += "\noptions:\n";
  for (const Option& o : options) {
    std::string help = o.help;
    if (!o.value.empty())
      help += " (default: " + (o.fallback.empty() ? std::string("none") : o.fallback) + ")";
    column("--" + o.name + (o.value.empty() ? "" : " " + o.value), help, width);
  }
  column("-h, --help", "print this help and exit", width);
  return s;
}

Result<Flags> Flags::Parse(const std::vector<std::string>& args, const Usage& usage) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      f.positional_.insert(f.positional_.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                           args.end());
      break;
    }
    if (a == "--help" || a == "-h") {
      f.help_ = true;
      return f;
    }
    if (!LooksLikeOption(a)) {
      f.positional_.push_back(a);
      continue;
    }
    const Option* o = a.rfind("--", 0) == 0 ? Find(usage, a.substr(2)) : nullptr;
    if (o == nullptr) return InvalidArgumentError("unknown option " + a);
    if (o->value.empty()) {
      f.values_[o->name] = "1";
    } else {
      if (i + 1 >= args.size())
        return InvalidArgumentError(a + " needs a value (" + o->value + ")");
      f.values_[o->name] = args[++i];
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
  errno = 0;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || it->second[0] == '-' || errno == ERANGE) {
    return InvalidArgumentError("--" + name + " wants a non-negative integer, got '" + it->second +
                                "'");
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

std::optional<int> ParseOrExit(const std::vector<std::string>& args, const Usage& usage,
                               Flags* flags) {
  Result<Flags> f = Flags::Parse(args, usage);
  if (!f.ok()) return UsageError(usage, std::string(f.status().message()));
  if (f->help()) {
    std::fputs(usage.ToString().c_str(), stdout);
    return 0;
  }
  *flags = std::move(f).value();
  return std::nullopt;
}

int UsageError(const Usage& usage, const std::string& message) {
  std::fprintf(stderr, "feedline %s: %s\n\n%s", usage.command.c_str(), message.c_str(),
               usage.ToString().c_str());
  return 2;
}

}  // namespace feedline::cli
