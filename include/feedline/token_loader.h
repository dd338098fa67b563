// TokenLoader: the C++ counterpart of feedline.TokenLoader, for libtorch
// programs (docs/tokens.md, "C++"). It opens token sources (flat files,
// Megatron indexed datasets, feedline token shards), packs them (concat
// windows or best fit), mixes several by weight, runs the engine (Loader)
// over the result and joins each batch's cu_seqlens; its resume state
// carries a mixture's schedule, so a job may resume with other weights.
//
//   feedline::TokenLoaderOptions o;
//   o.seq_len = 2048;
//   o.loader.batch_size = 8;
//   o.loader.shuffle = true;
//   auto loader = feedline::TokenLoader::Open({{"train.bin"}}, o);  // Result<unique_ptr<...>>
//   feedline::TokenBatch batch;
//   bool end = false;
//   while (true) {
//     FEEDLINE_RETURN_IF_ERROR((*loader)->Next(&batch, &end));
//     if (end) break;
//     Step(batch.input_ids, batch.labels, batch.cu_seqlens);  // [rows, seq_len] row-major
//   }
//
// The batches, the order and the resume semantics are the Python class's:
// both compose the same pipelines (tokens.h) with the same engine options;
// tests/tokens/token_loader_test.cc checks the batches against that
// composition, bytes included.
//
// Thread safety: as Loader's. Next, SetEpoch and RestoreState from one
// thread at a time; SaveState, Metrics and the accessors from any thread
// between those calls.
#ifndef FEEDLINE_TOKEN_LOADER_H_
#define FEEDLINE_TOKEN_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/batch.h"
#include "feedline/export.h"
#include "feedline/loader.h"
#include "feedline/metrics.h"
#include "feedline/status.h"
#include "feedline/tokens.h"

namespace feedline {

enum class TokenPacking {
  kConcat,   // TokenWindowPipeline: windows of seq_len + 1 consecutive tokens
  kBestFit,  // TokenBestFitPipeline: documents kept whole, sequences padded
};

struct FEEDLINE_EXPORT TokenLoaderOptions {
  uint64_t seq_len = 0;       // tokens per sequence, > 0
  TokenSourceOptions source;  // flat files' dtype and end-of-document token
  TokenPacking packing = TokenPacking::kConcat;
  std::optional<int64_t> pad_token;  // required by kBestFit, >= 0
  // Empty: one group of sources, concatenated. Otherwise one weight per
  // group: a mixture (TokenMixturePipeline, docs/tokens.md "Mixtures") whose
  // window is the global batch (batch_size * world_size) and whose epoch is
  // the groups' sequences summed, rounded down to whole global batches (at
  // least one); the mixture orders each group itself, so the engine runs it
  // unshuffled and drop_last has no effect.
  std::vector<double> weights;
  TokenFieldSet fields;  // which fields besides input_ids and labels
  // kConcat's label where the next token starts another document
  // (tokens.h); kBestFit never labels across documents.
  CrossDocumentLabels cross_document_labels = CrossDocumentLabels::kKeep;
  // The engine's options: batch_size (per rank), shuffle, seed, rank,
  // world_size, elastic, threads, memory, error policy.
  LoaderOptions loader;
};

// One batch. The spans view the engine's ring buffer, which stays reserved
// while `batch` (or a keepalive taken from it) lives; a field left out by
// TokenFieldSet is an empty span.
struct FEEDLINE_EXPORT TokenBatch {
  Batch batch;
  uint64_t rows = 0;  // sequences in this batch (batch.size())
  uint64_t seq_len = 0;
  std::span<const int64_t> input_ids;     // [rows, seq_len]
  std::span<const int64_t> labels;        // [rows, seq_len]
  std::span<const int64_t> position_ids;  // [rows, seq_len]
  std::span<const int64_t> document_ids;  // [rows, seq_len]
  // flash-attn's varlen boundaries over the flattened batch (TokenCuSeqlens):
  // rows * seq_len last. Empty when fields.document_starts is false.
  std::vector<int32_t> cu_seqlens;
};

class FEEDLINE_EXPORT TokenLoader {
 public:
  // `sources`: one group of paths (each a flat file, a Megatron prefix or
  // its .bin, or a token-shard directory or manifest) concatenated in
  // order, or with options.weights one group per weight. Errors:
  // InvalidArgument naming the option (seq_len 0, no sources, groups and
  // weights of other counts, bad weights, best fit without a pad token);
  // the sources' own errors (NotFound, DataLoss naming the file); the
  // engine's (Loader::Create).
  static Result<std::unique_ptr<TokenLoader>> Open(
      const std::vector<std::vector<std::string>>& sources, TokenLoaderOptions options);

  ~TokenLoader();
  TokenLoader(const TokenLoader&) = delete;
  TokenLoader& operator=(const TokenLoader&) = delete;

  // As Loader::Next; the batch's cu_seqlens are joined here. A row whose
  // segment starts are inconsistent is InvalidArgument naming it (never
  // seen from feedline's own pipelines: they are checked when written).
  Status Next(TokenBatch* batch, bool* end_of_epoch);
  Status SetEpoch(uint64_t epoch);

  // The position before the next batch, with a mixture's segment (its
  // start, each group's draws before it, its weights) and the groups'
  // fingerprints. Small, versioned and checksummed (docs/tokens.md, "C++").
  std::string SaveState() const;
  // Continues from a SaveState blob. Errors: DataLoss for a truncated or
  // corrupt blob; InvalidArgument for another kind of blob, a mixture state
  // on a loader without weights or the reverse, other sources (their
  // fingerprints) or other options (the engine's checks, naming the field).
  // A mixture state saved with other weights continues with this loader's
  // weights from the saved position on, each group's draws carrying over.
  // On error nothing changes.
  Status RestoreState(std::string_view state);

  uint64_t num_sequences() const;  // per epoch, over all ranks
  uint64_t num_batches() const;    // per epoch, on every rank
  uint64_t num_tokens() const;     // in all sources
  uint64_t epoch() const;          // the epoch of the next batch
  // Pad tokens over all tokens of the planned sequences (kBestFit; 0 for kConcat).
  double padding_share() const;
  // The weights in effect (empty without a mixture).
  const std::vector<double>& weights() const;
  MetricsSnapshot Metrics() const;
  const Loader& loader() const;

  class Impl;

 private:
  explicit TokenLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedline

#endif  // FEEDLINE_TOKEN_LOADER_H_
