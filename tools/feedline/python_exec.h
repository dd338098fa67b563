// Running a module of the feedline Python package from the CLI. The
// commands whose work lives in Python (doctor, pack-text) replace this
// process with `python3 -m <module> ARGS...`, with the package this CLI was
// built with first on PYTHONPATH.
#ifndef FEEDLINE_TOOLS_FEEDLINE_PYTHON_EXEC_H_
#define FEEDLINE_TOOLS_FEEDLINE_PYTHON_EXEC_H_

#include <string>
#include <vector>

namespace feedline::cli {

// Execs FEEDLINE_PYTHON (else the interpreter found at configure time) with
// `-m module args...`. Returns only if the exec failed: it then prints
// "feedline <command>: cannot run <python>: <reason> (<hint>)" and returns 1.
int ExecPythonModule(const std::string& command, const std::string& module,
                     const std::vector<std::string>& args, const std::string& hint);

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_PYTHON_EXEC_H_
