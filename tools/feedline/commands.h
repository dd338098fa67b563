// The CLI's subcommands: each takes its arguments (after the subcommand
// name) and returns the process exit code.
#ifndef FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_
#define FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_

#include <string>
#include <vector>

namespace feedline::cli {

int RunDemo(const std::vector<std::string>& args);
int RunImage(const std::vector<std::string>& args);
int RunGenDataset(const std::vector<std::string>& args);
int RunBenchPipeline(const std::vector<std::string>& args);
int RunPack(const std::vector<std::string>& args);
int RunBenchRead(const std::vector<std::string>& args);
int RunVerify(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunDoctor(const std::vector<std::string>& args);

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_COMMANDS_H_
