// `feedline pack-text IN OUT --tokenizer tokenizer.json [options]`: text into
// feedline token shards. Tokenising lives in the Python package
// (feedline/pack_text.py) because the Hugging Face tokenizers library is a
// Rust crate with Python bindings and no C API packaged in Debian; the shards
// themselves are written by the C++ TokenShardWriter through the binding.
// So this command runs `python3 -m feedline.pack_text`, as `doctor` does,
// with the feedline package this CLI was built with.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/feedline/commands.h"

namespace feedline::cli {

// Only the line `feedline --help` lists: the options and the --help text are
// argparse's, in feedline/pack_text.py; every argument goes to it unchanged.
const Usage& PackTextUsage() {
  static const Usage u = {
      "pack-text",
      {"IN OUT --tokenizer tokenizer.json [options]"},
      "JSONL/Parquet text into token shards (python3 -m feedline.pack_text)",
      "",
      {},
      {},
  };
  return u;
}

int RunPackText(const std::vector<std::string>& args) {
  const char* python = std::getenv("FEEDLINE_PYTHON");
  if (python == nullptr) python = FEEDLINE_PYTHON_EXECUTABLE;
  std::string path = FEEDLINE_PYTHON_DIR;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0')
    path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<std::string> argv = {python, "-m", "feedline.pack_text"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  execv(python, c.data());
  std::fprintf(stderr,
               "feedline pack-text: cannot run %s: %s (set FEEDLINE_PYTHON to a Python with "
               "the tokenizers library: pip install tokenizers)\n",
               python, std::strerror(errno));
  return 1;
}

}  // namespace feedline::cli
