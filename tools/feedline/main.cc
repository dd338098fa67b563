// feedline: command-line entry point. Dispatches to one file per subcommand;
// the list `feedline --help` prints is built from each command's Usage.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tools/feedline/commands.h"

namespace feedline::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {DemoUsage, RunDemo},
      {ImageUsage, RunImage},
      {GenDatasetUsage, RunGenDataset},
      {BenchPipelineUsage, RunBenchPipeline},
      {PackUsage, RunPack},
      {PackTextUsage, RunPackText},
      {VerifyUsage, RunVerify},
      {InspectUsage, RunInspect},
      {BenchReadUsage, RunBenchRead},
      {DoctorUsage, RunDoctor},
  };
  return commands;
}

}  // namespace feedline::cli

namespace {

using feedline::cli::Command;
using feedline::cli::Commands;

void PrintUsage(std::FILE* out) {
  std::fprintf(
      out, "usage: feedline <command> [options]\n       feedline <command> --help\n\ncommands:\n");
  for (const Command& c : Commands()) {
    const feedline::cli::Usage& u = c.usage();
    std::fprintf(out, "  %-16s %s\n", u.command.c_str(), u.summary.c_str());
  }
}

const Command* Find(const std::string& name) {
  for (const Command& c : Commands()) {
    if (c.usage().command == name) return &c;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    if (command != "help" || args.empty()) {
      PrintUsage(stdout);
      return 0;
    }
    command = args[0];  // `feedline help CMD` is `feedline CMD --help`
    args = {"--help"};
  }
  const Command* c = Find(command);
  if (c == nullptr) {
    std::fprintf(stderr, "feedline: unknown command '%s'\n\n", command.c_str());
    PrintUsage(stderr);
    return 2;
  }
  // Commands report errors as Status; this is the edge where anything that
  // still escapes (a library throwing) becomes a message instead of abort().
  try {
    return c->run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "feedline %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
