// `feedline doctor DATA [options]`: the doctor's pipeline mode. The
// diagnosis rules live in one place, the Python package feedline.doctor
// (docs/doctor.md says why), so this command runs `python3 -m
// feedline.doctor` with the feedline package this CLI was built with; the
// pipeline it measures is the same C++ engine, driven through the binding.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/feedline/commands.h"

namespace feedline::cli {

// Only the line `feedline --help` lists: the doctor's options and its
// --help text are argparse's, in feedline/doctor/__main__.py, so they live in
// one place; every argument, --help included, goes to it unchanged.
const Usage& DoctorUsage() {
  static const Usage u = {
      "doctor",
      {"DATA [options]"},
      "per-stage costs, bottleneck and scaling of a pipeline (python3 -m feedline.doctor)",
      "",
      {},
      {},
  };
  return u;
}

int RunDoctor(const std::vector<std::string>& args) {
  const char* python = std::getenv("FEEDLINE_PYTHON");
  if (python == nullptr) python = FEEDLINE_PYTHON_EXECUTABLE;
  std::string path = FEEDLINE_PYTHON_DIR;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0')
    path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> argv = {python, "-m", "feedline.doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  execv(python, c.data());
  std::fprintf(stderr,
               "feedline doctor: cannot run %s: %s (set FEEDLINE_PYTHON to a Python with torch)\n",
               python, std::strerror(errno));
  return 1;
}

}  // namespace feedline::cli
