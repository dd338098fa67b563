// Token streams for language-model training: memory-mapped readers of
// pre-tokenised corpora and the pipeline that cuts them into training windows.
//
// Formats read (docs/tokens.md has the byte layouts):
//   - flat token files (nanoGPT's train.bin): raw little-endian uint16 or
//     uint32 ids, no header; one document unless an eos token splits it;
//   - Megatron-LM indexed datasets: `prefix.bin` (the ids) + `prefix.idx`
//     (the MMIDIDX index: dtype, sequence lengths and pointers, documents);
//   - feedline token shards (docs/token_shards.md): a directory of
//     checksummed shards (ids, document index, block checksums) and a
//     manifest.json, written by TokenShardWriter (`feedline pack-text`).
// Every file is mapped read-only (mmap): windows are read at random offsets,
// whole, so the page cache is the buffer and nothing is copied twice.
//
// A TokenCorpus concatenates sources in order. A window sample i holds the
// seq_len + 1 tokens [i * seq_len, i * seq_len + seq_len + 1) of the
// concatenation: windows overlap by one token, so every token after the
// first is a label exactly once (nanoGPT's stride).
//
// Thread safety: TokenSource and TokenCorpus are immutable after Open; all
// methods are const and safe for concurrent use. The pipeline's op is a
// SampleOp (safe for concurrent use).
#ifndef FEEDLINE_TOKENS_H_
#define FEEDLINE_TOKENS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

// How token ids are stored on disk (little-endian).
enum class TokenDType : uint8_t { kUInt8, kInt8, kInt16, kUInt16, kInt32, kUInt32, kInt64 };
FEEDLINE_EXPORT size_t TokenDTypeSize(TokenDType dtype);
FEEDLINE_EXPORT std::string_view TokenDTypeName(TokenDType dtype);  // "uint16", ...
// "uint16", "uint32", ... InvalidArgument naming the accepted names otherwise.
FEEDLINE_EXPORT Result<TokenDType> ParseTokenDType(std::string_view name);

// One token file (flat) or dataset (Megatron), mapped for its lifetime.
class FEEDLINE_EXPORT TokenSource {
 public:
  enum class Kind { kFlat, kMegatron, kTokenShards };

  virtual ~TokenSource() = default;
  virtual Kind kind() const = 0;
  // The file holding the ids (the .bin); for token shards the manifest.
  virtual const std::string& path() const = 0;
  virtual TokenDType dtype() const = 0;
  virtual uint64_t num_tokens() const = 0;
  // Documents in the source. Megatron, token shards: from the index (O(1)); a flat file:
  // 1, or with an eos token, 1 + the eos tokens before the last token
  // (a scan of the file, O(tokens)).
  virtual uint64_t CountDocuments() const = 0;
  // Appends, in increasing order, every token offset s in [begin, end) at
  // which a document starts (offset 0 always does; with an eos token, the
  // token after each eos). end <= num_tokens().
  virtual void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const = 0;
  // Tokens [begin, end) widened to int64 into out[0, end - begin).
  // OutOfRange past num_tokens(); DataLoss for a negative id (signed
  // dtypes), naming the file and the token offset. Token shards also
  // check each checksum block the first time a read touches it and every
  // id against the vocabulary size: DataLoss naming the shard, the block
  // or token, and the values.
  virtual Status Read(uint64_t begin, uint64_t end, int64_t* out) const = 0;
  // The stored ids (little-endian, dtype(), token t at t * TokenDTypeSize)
  // when all of them lie in one mapping and reading them needs no check
  // but the sign of a signed dtype: flat files and Megatron's .bin. nullptr
  // otherwise (the default; token shards verify checksums on first read).
  // The concat windows widen from it in one fused pass; Read is the
  // reference that pass is tested against, and the path that names a bad id.
  virtual const uint8_t* MappedIds() const { return nullptr; }
  // Digest of what the source is (kind, file name, dtype, sizes, and for
  // Megatron the whole index), for resume states.
  virtual uint64_t Fingerprint() const = 0;
};

struct FEEDLINE_EXPORT TokenSourceOptions {
  // The dtype of flat files (Megatron's is in its index).
  TokenDType flat_dtype = TokenDType::kUInt16;
  // In flat files: the id that ends a document (the next token starts the
  // next one). Unset: a flat file is one document. Megatron documents come
  // from the index and ignore it.
  std::optional<int64_t> eos_token;  // >= 0 (InvalidArgument otherwise)
};

// Opens a flat token file. Errors: NotFound/Unavailable naming the file;
// DataLoss when its size is not a multiple of the dtype, naming the file,
// its size and the dtype; InvalidArgument for an empty file.
FEEDLINE_EXPORT Result<std::shared_ptr<const TokenSource>> OpenFlatTokenFile(
    const std::string& path, const TokenSourceOptions& options);

// Opens a Megatron-LM indexed dataset `prefix.bin` + `prefix.idx`. Every
// field of the index is checked before use: magic, version (1), dtype code
// (integer dtypes only), the index size against its counts, each sequence
// length (>= 0) and pointer (contiguous: pointer[i] = pointer[i-1] +
// length[i-1] * itemsize, starting at 0), the document indices (0 first,
// non-decreasing, sequence count last), and the .bin size against the sum
// of the lengths. Errors name the file, the field (with its index) and the
// value: DataLoss for a corrupt index, InvalidArgument for a dtype we do not
// read, NotFound for a missing file.
FEEDLINE_EXPORT Result<std::shared_ptr<const TokenSource>> OpenMegatronDataset(
    const std::string& prefix);

// Opens a feedline token-shard dataset: `path` is its directory (holding
// manifest.json) or the manifest file itself. Checked at open, before any
// token is read (docs/token_shards.md, "What a reader checks"): the
// manifest's format, version, dtype, counts and tokenizer vocab_size; for
// every shard it lists, the file's size, every header field (magic,
// version, flags, dtype, block size, counts, vocab size, reserved, header
// CRC), the padding, the document index (its CRC, 0 first, strictly
// increasing, N last) and the block checksum table's CRC, and that the
// header agrees with the manifest entry (tokens, documents, dtype, vocab
// size, header CRC). Errors name the file, the field and the value:
// DataLoss for a corrupt shard or manifest, NotFound for a missing one.
FEEDLINE_EXPORT Result<std::shared_ptr<const TokenSource>> OpenTokenShards(const std::string& path);

// True when `manifest_text` is a token-shard dataset's manifest (a JSON
// object whose "format" is token shards'), however invalid the rest may be.
FEEDLINE_EXPORT bool IsTokenShardsManifest(std::string_view manifest_text);

// What VerifyTokenShards found.
struct FEEDLINE_EXPORT TokenShardsCheck {
  uint64_t shards = 0;
  uint64_t tokens = 0;  // ids read and checked
  uint64_t blocks = 0;  // checksum blocks read
  // One line per bad block, in shard and block order: the shard file, the
  // block, its token range and the reason (checksum mismatch with both
  // values, or an id at or above the vocab size with its offset).
  std::vector<std::string> problems;
};

// `feedline verify` for token shards: opens `path` as OpenTokenShards does
// (its error, as it is, when that fails), then reads every checksum block of
// every shard and checks its CRC and every id against the vocabulary,
// continuing past a bad block so that every bad one is listed.
FEEDLINE_EXPORT Result<TokenShardsCheck> VerifyTokenShards(const std::string& path);

// The one rule for what a path names, tried in this order:
//   1. a directory, or a regular file whose name ends in `.json`: token
//      shards (the directory's manifest.json, or that file);
//   2. a Megatron prefix when `path.idx` exists (or `path` ends in .bin and
//      the .idx beside it exists);
//   3. else a flat token file.
FEEDLINE_EXPORT Result<std::shared_ptr<const TokenSource>> OpenTokenSource(
    const std::string& path, const TokenSourceOptions& options);

// Writes a token-shard dataset into a directory, crash-safe: each shard is
// written to `NAME.partial`, fsynced and renamed when full; manifest.json
// is written last the same way, so a directory without one is unfinished.
// Thread-compatible: one thread at a time (pack-text's writer thread).
struct FEEDLINE_EXPORT TokenShardWriterOptions {
  // Every id must be < vocab_size (>= 1). The dtype is uint16 when
  // vocab_size <= 65536, else uint32.
  uint64_t vocab_size = 0;
  // A shard is closed after the first document that brings it to this many
  // tokens (documents never span shards).
  uint64_t shard_tokens = uint64_t{1} << 28;
  // JSON objects stored verbatim as the manifest's "tokenizer" (vocab_size
  // is added) and "source" fields. InvalidArgument if not objects.
  std::string tokenizer_json = "{}";
  std::string source_json = "{}";
};

class FEEDLINE_EXPORT TokenShardWriter {
 public:
  // Creates `dir` if needed. AlreadyExists when it holds a manifest.json
  // (a finished dataset is never overwritten); shard and .partial files
  // of an unfinished earlier run there are replaced.
  static Result<std::unique_ptr<TokenShardWriter>> Create(const std::string& dir,
                                                          const TokenShardWriterOptions& options);
  virtual ~TokenShardWriter() = default;
  // Appends one document (n >= 1 ids). InvalidArgument naming the document
  // number for an empty one or an id outside [0, vocab_size); I/O errors
  // name the file.
  virtual Status AddDocument(const int64_t* ids, uint64_t n) = 0;
  // Closes the last shard and writes the manifest. FailedPrecondition for
  // no documents, or when called twice.
  virtual Status Finish() = 0;
  virtual uint64_t num_tokens() const = 0;
  virtual uint64_t num_documents() const = 0;
  virtual TokenDType dtype() const = 0;
};

// Sources concatenated in order; each source starts a document.
class FEEDLINE_EXPORT TokenCorpus {
 public:
  // InvalidArgument for no sources; otherwise the first source's error.
  static Result<std::shared_ptr<const TokenCorpus>> Open(const std::vector<std::string>& paths,
                                                         const TokenSourceOptions& options);
  explicit TokenCorpus(std::vector<std::shared_ptr<const TokenSource>> sources);

  uint64_t num_tokens() const { return offsets_.back(); }
  size_t num_sources() const { return sources_.size(); }
  const TokenSource& source(size_t i) const { return *sources_[i]; }
  // The first token of source i in the concatenation.
  uint64_t source_offset(size_t i) const { return offsets_[i]; }
  // Sum of the sources' CountDocuments().
  uint64_t CountDocuments() const;
  // As TokenSource's, over the concatenation.
  void DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const;
  Status Read(uint64_t begin, uint64_t end, int64_t* out) const;
  // The source holding global token t (t < num_tokens()).
  size_t SourceOf(uint64_t t) const;
  uint64_t Fingerprint() const;

 private:
  std::vector<std::shared_ptr<const TokenSource>> sources_;
  std::vector<uint64_t> offsets_;  // num_sources + 1 entries, offsets_[0] = 0
};

// Windows of seq_len + 1 tokens at stride seq_len: floor((T - 1) / seq_len)
// for T tokens (0 if T <= seq_len). The last T - 1 - windows * seq_len
// tokens are never a label (TokenWindowTailTokens).
FEEDLINE_EXPORT uint64_t NumTokenWindows(uint64_t num_tokens, uint64_t seq_len);
FEEDLINE_EXPORT uint64_t TokenWindowTailTokens(uint64_t num_tokens, uint64_t seq_len);

// The per-token fields a token pipeline writes besides input_ids and labels
// (always written). Each costs seq_len * 8 bytes of batch memory and memory
// traffic per sequence (document_starts 4): a model without per-document
// attention needs none of them. An absent field is left out of
// Pipeline::fields; the others keep the order below (find them by name).
struct FEEDLINE_EXPORT TokenFieldSet {
  bool position_ids = true;
  bool document_ids = true;
  bool document_starts = true;  // document_starts and num_documents (cu_seqlens)
  bool operator==(const TokenFieldSet&) const = default;
};

// What a concat window's label is where the next token begins another
// document (the input there is the end of one, e.g. its eos token): kKeep,
// that token, as nanoGPT and Megatron-LM by default train to predict it;
// kIgnore, -100 (the loss's ignore_index; Megatron-LM's eod_mask_loss), so no
// loss is taken across documents. A source's first token starts a document.
enum class CrossDocumentLabels { kKeep, kIgnore };

// The concat-packing pipeline: sample i is window i, fields in this order:
//   input_ids        int64 [seq_len]  tokens [i*S, i*S + S)
//   labels           int64 [seq_len]  tokens [i*S + 1, i*S + S + 1) (input shifted by one;
//                                     -100 where such a token starts a document,
//                                     with CrossDocumentLabels::kIgnore)
//   position_ids     int64 [seq_len]  0 at the window start and at each document
//                                     start inside it, +1 per token otherwise
//   document_ids     int64 [seq_len]  0 for the window's first document, +1 at
//                                     each document start inside the window
//   document_starts  int32 [seq_len]  the positions at which a segment of the
//                                     row starts (0 first, increasing), then 0s
//   num_documents    int32 {}         how many entries of document_starts count
// document_starts/num_documents are the row's share of flash-attn's varlen
// cu_seqlens, written by the worker so that the consumer only concatenates
// them (TokenCuSeqlens).
// Its op ("tokens") fingerprints the corpus (DataFingerprint) and seq_len
// (ConfigFingerprint), so a resume state from another corpus is refused;
// `labels` changes no sample's place, so a state resumes under either.
// InvalidArgument for seq_len 0 or a corpus with fewer than seq_len + 1
// tokens (naming both).
FEEDLINE_EXPORT Result<Pipeline> TokenWindowPipeline(
    std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len, const TokenFieldSet& fields = {},
    CrossDocumentLabels labels = CrossDocumentLabels::kKeep);

// The fields of a token pipeline with every field (TokenFieldSet{}), in
// batch order (as above).
inline constexpr size_t kTokenInputIds = 0, kTokenLabels = 1, kTokenPositionIds = 2,
                        kTokenDocumentIds = 3, kTokenDocumentStarts = 4, kTokenNumDocuments = 5;

// flash-attn's cu_seqlens of a batch of `rows` rows from its document_starts
// ([rows, seq_len] int32) and num_documents ([rows] int32): row r's starts
// plus r * seq_len, concatenated, then rows * seq_len. `out` is resized.
// InvalidArgument for a count outside [1, seq_len] or starts that do not
// increase from 0 (naming the row).
FEEDLINE_EXPORT Status TokenCuSeqlens(const int32_t* document_starts, const int32_t* num_documents,
                                      uint64_t rows, uint64_t seq_len, std::vector<int32_t>* out);

// Best-fit packing (docs/tokens.md, "Best fit"): documents up to seq_len
// are never split; longer ones are cut into seq_len pieces (and a shorter
// last piece). Pieces are sorted by length, longest first (ties in corpus
// order), and each goes into the fullest sequence it fits in (ties: the
// most recently filled), or a new one. The plan is a function of the
// corpus's document lengths and seq_len only (never of threads, ranks or
// the tokens), computed once, single-threaded, in O(pieces + seq_len)
// time with O(pieces) memory (16 bytes per piece).
// Thread safety: immutable after Build; safe for concurrent use.
class FEEDLINE_EXPORT BestFitPlan {
 public:
  struct Piece {
    uint64_t begin = 0;          // first token in the corpus
    uint32_t length = 0;         // tokens, 1..seq_len
    bool ends_document = false;  // its last token is its document's last
  };
  // The document boundaries come from TokenCorpus::DocumentStarts over the
  // whole corpus: the index for Megatron and token shards; for a flat file
  // with an eos token that is a scan of the file (no index exists).
  // InvalidArgument for seq_len 0 or above 2^31 - 1.
  static Result<std::shared_ptr<const BestFitPlan>> Build(const TokenCorpus& corpus,
                                                          uint64_t seq_len);

  uint64_t seq_len() const { return seq_len_; }
  uint64_t num_sequences() const { return first_piece_.size() - 1; }
  uint64_t num_pieces() const { return pieces_.size(); }
  uint64_t num_documents() const { return num_documents_; }
  uint64_t num_tokens() const { return num_tokens_; }
  // Pad tokens over all sequences: num_sequences * seq_len - num_tokens.
  uint64_t padding_tokens() const { return num_sequences() * seq_len_ - num_tokens_; }
  double padding_share() const;
  // Sequence i's pieces, in the order they are laid out (i < num_sequences()).
  std::span<const Piece> sequence(uint64_t i) const {
    return {pieces_.data() + first_piece_[i], first_piece_[i + 1] - first_piece_[i]};
  }

 private:
  uint64_t seq_len_ = 0;
  uint64_t num_documents_ = 0;
  uint64_t num_tokens_ = 0;
  std::vector<Piece> pieces_;          // grouped by sequence
  std::vector<uint64_t> first_piece_;  // num_sequences + 1 entries
};

// The best-fit pipeline: sample i is sequence i of `plan` (built on
// `corpus`), with the fields of TokenWindowPipeline. Each piece's tokens
// are laid out in turn, then pad_token up to seq_len. labels: the next
// token of the same document, -100 at a document's last token and at
// padding (no target across documents); position_ids restart at 0 per
// piece and count 0, 1, ... over the padding; document_ids 0, 1, ... per
// piece and -1 at padding; the padding is a segment of its own in
// document_starts (flash-attn must see every position). The op's config
// fingerprint holds seq_len, "best_fit" and pad_token. InvalidArgument for
// a negative pad_token or a plan of another corpus size.
FEEDLINE_EXPORT Result<Pipeline> TokenBestFitPipeline(std::shared_ptr<const TokenCorpus> corpus,
                                                      std::shared_ptr<const BestFitPlan> plan,
                                                      int64_t pad_token,
                                                      const TokenFieldSet& fields = {});

// Mixtures (docs/tokens.md, "Mixtures"): several token pipelines (each
// TokenWindowPipeline or TokenBestFitPipeline, same seq_len), one global
// stream. Global sample g (g = epoch * num_samples + id: the engine runs
// the mixture unshuffled, and num_samples is a multiple of `window`) is
// draw g of a schedule: a function of the weights, of `window` (the global
// batch size) and of the segment start (start, counts), so that a resume
// may change the weights from its position on.
//
// The schedule, in integers: weights become u_k = round(2^20 w_k / sum w);
// window m (global samples [start + m*W, start + (m+1)*W)) holds
// floor(u_k W / U) + e_k draws of source k, e_k in {0, 1}: the r sources
// with the largest carried remainder get one more (largest remainder,
// carried across windows), so every window holds each source's share
// within one sequence, and the long-run share is exact. Inside a window
// the draws interleave (position i goes to the source furthest behind its
// share n_k (i + 1) / W). Draw j of source k is sample j mod n_k of that
// source's epoch j / n_k order: a keyed bijection of [0, n_k) per (seed,
// source, epoch) when shuffled, the identity otherwise; so a source that
// runs out starts its next epoch in a new order.
struct FEEDLINE_EXPORT TokenMixtureOptions {
  std::vector<double> weights;  // one per source, >= 0, some > 0
  uint64_t window = 0;          // the global batch size (batch_size * world_size)
  uint64_t num_samples = 0;     // per mixture epoch; a positive multiple of window
  bool shuffle = false;
  uint64_t seed = 0;
  // The segment this schedule starts: global sample `start` is its first
  // draw, and counts[k] draws of source k were made before it (empty: all
  // 0). A resume with new weights starts a segment at its position with
  // the counts the old schedule reached there (TokenMixtureCounts).
  uint64_t start = 0;
  std::vector<uint64_t> counts;
};

// The draws of each source before global sample g (g >= options.start),
// from the schedule of `options` over sources of `source_samples` samples.
// O((g - start) / window * sources). InvalidArgument as for the pipeline.
FEEDLINE_EXPORT Result<std::vector<uint64_t>> TokenMixtureCounts(
    const std::vector<uint64_t>& source_samples, const TokenMixtureOptions& options, uint64_t g);

// InvalidArgument naming the problem: no sources, a pipeline that is not a
// token pipeline, other fields (seq_len), weights of another count, a
// negative or non-finite weight, all weights 0, window 0, num_samples not
// a positive multiple of window, counts of another size. A sample before
// `start` (an epoch before the resumed one) is a FailedPrecondition error.
// Data fingerprint: the sources' (in order); config: theirs, window, shuffle.
FEEDLINE_EXPORT Result<Pipeline> TokenMixturePipeline(const std::vector<Pipeline>& sources,
                                                      const TokenMixtureOptions& options);

}  // namespace feedline

#endif  // FEEDLINE_TOKENS_H_
