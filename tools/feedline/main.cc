// feedline: command-line entry point. Dispatches to one file per subcommand.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/feedline/commands.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: feedline <command> [options]\n"
               "commands:\n"
               "  demo [--samples N] [--threads N]   run the engine demonstration\n"
               "  image info|transform|crops ...     inspect the image path on one file\n"
               "  gen-dataset OUT --images N ...     make the built-in ImageNet-like dataset\n"
               "  bench-pipeline DIR [options]       measure one loader configuration (JSON)\n"
               "  pack SRC OUT [options]             pack an image folder or list into shards\n"
               "  verify DIR                         check every checksum of a packed dataset\n"
               "  inspect DIR                        summarise a packed dataset\n"
               "  bench-read SRC [options]           read throughput of a source, no decode (JSON)\n"
               "  doctor DATA [options]              per-stage costs, bottleneck and scaling of a pipeline\n"
               "                                     (--help for options; python3 -m feedline.doctor)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    Usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "demo") return feedline::cli::RunDemo(args);
  if (command == "image") return feedline::cli::RunImage(args);
  if (command == "gen-dataset") return feedline::cli::RunGenDataset(args);
  if (command == "bench-pipeline") return feedline::cli::RunBenchPipeline(args);
  if (command == "pack") return feedline::cli::RunPack(args);
  if (command == "verify") return feedline::cli::RunVerify(args);
  if (command == "inspect") return feedline::cli::RunInspect(args);
  if (command == "bench-read") return feedline::cli::RunBenchRead(args);
  if (command == "doctor") return feedline::cli::RunDoctor(args);
  std::fprintf(stderr, "feedline: unknown command '%s'\n", command.c_str());
  Usage();
  return 2;
}
