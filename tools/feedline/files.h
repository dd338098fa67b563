// File-system helpers of the CLI. Every std::filesystem call here uses the
// std::error_code overloads, so a symlink loop, a vanished file or a
// permission problem becomes a Status naming the path, never an exception;
// and nothing is opened for reading before it is known to be a regular file
// (opening a FIFO would block until a writer came).
#ifndef FEEDLINE_TOOLS_FEEDLINE_FILES_H_
#define FEEDLINE_TOOLS_FEEDLINE_FILES_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::cli {

// OK if `path` is (or is a symlink to) a regular file; otherwise an error
// naming the path and what it is instead ("a fifo", "a directory", "a
// symlink loop", "missing").
Status RequireRegularFile(const std::filesystem::path& path);

// The whole of a regular file, through OpenFile (the loader's file seam).
Result<std::vector<uint8_t>> ReadRegularFile(const std::string& path);

// The entries of `dir` (not recursive), in directory order; an error naming
// `dir` if it cannot be listed.
Result<std::vector<std::filesystem::path>> ListDirectory(const std::filesystem::path& dir);

}  // namespace feedline::cli

#endif  // FEEDLINE_TOOLS_FEEDLINE_FILES_H_
