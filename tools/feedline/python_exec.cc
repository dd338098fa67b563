#include "tools/feedline/python_exec.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace feedline::cli {

int ExecPythonModule(const std::string& command, const std::string& module,
                     const std::vector<std::string>& args, const std::string& hint) {
  const char* python = std::getenv("FEEDLINE_PYTHON");
  if (python == nullptr) python = FEEDLINE_PYTHON_EXECUTABLE;
  std::string path = FEEDLINE_PYTHON_DIR;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0')
    path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> argv = {python, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  execv(python, c.data());
  std::fprintf(stderr, "feedline %s: cannot run %s: %s (%s)\n", command.c_str(), python,
               std::strerror(errno), hint.c_str());
  return 1;
}

}  // namespace feedline::cli
