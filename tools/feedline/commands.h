// The CLI's subcommands: each takes its arguments (after the subcommand
// name) and returns the process exit code (0 done, 1 failed, 2 usage error;
// --help prints the command's Usage and returns 0 without doing any work).
#ifndef FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_
#define FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_

#include <string>
#include <vector>

#include "tools/feedline/flags.h"

namespace feedline::cli {

struct Command {
  const Usage& (*usage)();  // the one help text, also what the parser accepts
  int (*run)(const std::vector<std::string>& args);
};

// Every subcommand, in the order `feedline --help` lists them.
const std::vector<Command>& Commands();

const Usage& DemoUsage();
const Usage& ImageUsage();
const Usage& GenDatasetUsage();
const Usage& BenchPipelineUsage();
const Usage& PackUsage();
const Usage& BenchReadUsage();
const Usage& VerifyUsage();
const Usage& InspectUsage();
const Usage& DoctorUsage();
const Usage& PackTextUsage();

int RunDemo(const std::vector<std::string>& args);
int RunImage(const std::vector<std::string>& args);
int RunGenDataset(const std::vector<std::string>& args);
int RunBenchPipeline(const std::vector<std::string>& args);
int RunPack(const std::vector<std::string>& args);
int RunBenchRead(const std::vector<std::string>& args);
int RunVerify(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunDoctor(const std::vector<std::string>& args);
int RunPackText(const std::vector<std::string>& args);

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_
