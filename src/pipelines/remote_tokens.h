// Flat (nanoGPT) token files that are not on a local disk: an s3:// object
// or an http(s):// URL, read by ranged requests through a block cache
// instead of a memory map (docs/object_stores.md, "Token files"). Here, in
// the layer that knows both io (the bytes) and tokens (the format).
#ifndef FEEDLINE_SRC_PIPELINES_REMOTE_TOKENS_H_
#define FEEDLINE_SRC_PIPELINES_REMOTE_TOKENS_H_

#include <memory>
#include <string>

#include "feedline/file.h"
#include "feedline/tokens.h"

namespace feedline::pipelines::detail {

// Block size and cache bound: a window of a few thousand tokens is one
// block's read; sequential windows reuse it.
constexpr uint64_t kRemoteBlockBytes = 1u << 20;
constexpr uint64_t kRemoteCacheBytes = 64u << 20;

// The same checks and fingerprint as OpenFlatTokenFile's, so a local file
// and its copy in a bucket resume each other's loader state.
Result<std::shared_ptr<const TokenSource>> OpenRemoteFlatTokenFile(
    const std::string& url, const TokenSourceOptions& options, const HttpOptions& http);

}  // namespace feedline::pipelines::detail

#endif  // FEEDLINE_SRC_PIPELINES_REMOTE_TOKENS_H_
