// `feedline doctor DATA [options]`: the doctor's pipeline mode. The
// diagnosis rules live in one place, the Python package feedline.doctor
// (docs/doctor.md says why), so this command runs `python3 -m
// feedline.doctor` with the feedline package this CLI was built with; the
// pipeline it measures is the same C++ engine, driven through the binding.
#include <string>
#include <vector>

#include "tools/feedline/commands.h"
#include "tools/feedline/python_exec.h"

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
  return ExecPythonModule("doctor", "feedline.doctor", args,
                          "set FEEDLINE_PYTHON to a Python with torch");
}

}  // namespace feedline::cli
