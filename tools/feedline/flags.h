// Minimal --name value / --flag parsing for the CLI subcommands.
#ifndef FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_
#define FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::cli {

class Flags {
 public:
  // `valued`: flags that take a value; `switches`: flags that do not.
  // Anything else starting with "--" is an error; the rest are positionals.
  static Result<Flags> Parse(const std::vector<std::string>& args,
                             const std::set<std::string>& valued,
                             const std::set<std::string>& switches);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  Result<uint64_t> GetUint(const std::string& name, uint64_t fallback) const;
  Result<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_
