// The CLI's one description of each subcommand (Usage) and the --name value /
// --flag parser driven by it: the options a command accepts and the help text
// it prints come from the same table, so they cannot drift apart.
#ifndef FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_
#define FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::cli {

struct Option {
  std::string name;      // without the leading "--"
  std::string value;     // the value's placeholder ("N", "DIR"); empty for a switch
  std::string fallback;  // what the default is, in words ("0 = all cores"); empty for a switch
  std::string help;
};

struct Argument {
  std::string name;  // "SRC"
  std::string help;
};

// Everything `feedline CMD --help` prints, and what the parser accepts.
struct Usage {
  std::string command;                // "pack", as typed after `feedline`
  std::vector<std::string> synopses;  // "SRC OUT [options]", one per form
  std::string summary;                // one line, for `feedline --help`
  std::string description;            // a paragraph; may be empty
  std::vector<Argument> arguments;
  std::vector<Option> options;

  // The help text: synopses, description, arguments, options with defaults.
  std::string ToString() const;
};

class Flags {
 public:
  // Options named in `usage` are accepted; any other "--x" or "-x" is an
  // error naming it; "--help" and "-h" set help(); after "--" everything is
  // positional; the rest are positionals.
  static Result<Flags> Parse(const std::vector<std::string>& args, const Usage& usage);

  bool help() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  Result<uint64_t> GetUint(const std::string& name, uint64_t fallback) const;
  Result<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  bool help_ = false;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// The front door of every subcommand: parses `args` into *flags. On --help
// prints the usage to stdout and returns 0; on a bad option prints the error
// and the usage to stderr and returns 2; otherwise returns nullopt and the
// command runs.
std::optional<int> ParseOrExit(const std::vector<std::string>& args, const Usage& usage,
                               Flags* flags);

// A usage error found after parsing (wrong number of positionals, options
// that exclude each other): "feedline CMD: MESSAGE" and the usage on stderr;
// returns 2.
int UsageError(const Usage& usage, const std::string& message);

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_FLAGS_H_
