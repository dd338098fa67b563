// `feedline pack-text IN [IN ...] OUT --tokenizer tokenizer.json [options]`: text into
// feedline token shards. Tokenising lives in the Python package
// (feedline/pack_text.py) because the Hugging Face tokenizers library is a
// Rust crate with Python bindings and no C API packaged in Debian; the shards
// themselves are written by the C++ TokenShardWriter through the binding.
// So this command runs `python3 -m feedline.pack_text`, as `doctor` does,
// with the feedline package this CLI was built with.
#include <string>
#include <vector>

#include "tools/feedline/commands.h"
#include "tools/feedline/python_exec.h"

namespace feedline::cli {

// Only the line `feedline --help` lists: the options and the --help text are
// argparse's, in feedline/pack_text.py; every argument goes to it unchanged.
const Usage& PackTextUsage() {
  static const Usage u = {
      "pack-text",
      {"IN [IN ...] OUT --tokenizer tokenizer.json [options]"},
      "JSONL/Parquet text into token shards (python3 -m feedline.pack_text)",
      "",
      {},
      {},
  };
  return u;
}

int RunPackText(const std::vector<std::string>& args) {
  return ExecPythonModule(
      "pack-text", "feedline.pack_text", args,
      "set FEEDLINE_PYTHON to a Python with the tokenizers library: pip install tokenizers");
}

}  // namespace feedline::cli
