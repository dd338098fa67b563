// Best-fit packing: the plan (documents into sequences, from the document
// index only) and the op that lays a planned sequence out (tokens.h).
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/tokens.h"
#include "src/core/detail/endian.h"
#include "src/tokens/token_sequence_op.h"
#include "src/tokens/token_window_hwy.h"

namespace feedline {

namespace {

// Bins (sequences being filled) by free space, to find the fullest bin a
// piece fits in: the smallest free space >= its length. One stack of bins
// per free space and a bitset of the non-empty ones, so a lookup scans at
// most seq_len / 64 words.
class FreeSpaceIndex {
 public:
  explicit FreeSpaceIndex(uint64_t seq_len) : stacks_(seq_len + 1), words_(seq_len / 64 + 1, 0) {}

  // A bin with free space >= need, taken out of the index; false if none.
  bool TakeSmallestFitting(uint64_t need, uint64_t* bin, uint64_t* space) {
    for (uint64_t w = need / 64; w < words_.size(); ++w) {
      uint64_t bits = words_[w];
      if (w == need / 64) bits &= ~uint64_t{0} << (need % 64);
      if (bits == 0) continue;
      const uint64_t c = w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      *space = c;
      *bin = stacks_[c].back();
      stacks_[c].pop_back();
      if (stacks_[c].empty()) words_[c / 64] &= ~(uint64_t{1} << (c % 64));
      return true;
    }
    return false;
  }
  void Put(uint64_t bin, uint64_t space) {
    if (space == 0) return;  // full: never a candidate again
    stacks_[space].push_back(bin);
    words_[space / 64] |= uint64_t{1} << (space % 64);
  }

 private:
  std::vector<std::vector<uint64_t>> stacks_;
  std::vector<uint64_t> words_;
};

}  // namespace

double BestFitPlan::padding_share() const {
  const uint64_t slots = num_sequences() * seq_len_;
  return slots == 0 ? 0.0 : static_cast<double>(padding_tokens()) / static_cast<double>(slots);
}

Result<std::shared_ptr<const BestFitPlan>> BestFitPlan::Build(const TokenCorpus& corpus,
                                                              uint64_t seq_len) {
  if (seq_len == 0) return InvalidArgumentError("seq_len must be positive");
  if (seq_len > static_cast<uint64_t>(INT32_MAX)) {
    return InvalidArgumentError("seq_len " + std::to_string(seq_len) + " is above 2^31 - 1");
  }
  auto plan = std::make_shared<BestFitPlan>();
  plan->seq_len_ = seq_len;
  plan->num_tokens_ = corpus.num_tokens();

  // Pieces in corpus order: each document cut into seq_len pieces and a
  // shorter last one.
  std::vector<Piece> pieces;
  {
    std::vector<uint64_t> starts;
    corpus.DocumentStarts(0, corpus.num_tokens(), &starts);
    plan->num_documents_ = starts.size();
    starts.push_back(corpus.num_tokens());
    for (size_t d = 0; d + 1 < starts.size(); ++d) {
      for (uint64_t b = starts[d]; b < starts[d + 1]; b += seq_len) {
        const uint64_t n = std::min(seq_len, starts[d + 1] - b);
        pieces.push_back(Piece{b, static_cast<uint32_t>(n), b + n == starts[d + 1]});
      }
    }
  }
  // Longest first, ties in corpus order: a counting sort by length.
  std::vector<uint64_t> by_length(seq_len + 2, 0);
  for (const Piece& p : pieces) ++by_length[seq_len - p.length + 1];
  for (size_t i = 1; i < by_length.size(); ++i) by_length[i] += by_length[i - 1];
  std::vector<uint64_t> order(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) order[by_length[seq_len - pieces[i].length]++] = i;

  // Each piece into the fullest bin it fits in, or a new bin.
  FreeSpaceIndex index(seq_len);
  std::vector<uint64_t> bin_of(pieces.size());
  uint64_t bins = 0;
  for (uint64_t i : order) {
    const uint64_t n = pieces[i].length;
    uint64_t bin = 0, space = 0;
    if (!index.TakeSmallestFitting(n, &bin, &space)) {
      bin = bins++;
      space = seq_len;
    }
    bin_of[i] = bin;
    index.Put(bin, space - n);
  }
  // Group by bin, in placement order inside each.
  plan->first_piece_.assign(bins + 1, 0);
  for (uint64_t b : bin_of) ++plan->first_piece_[b + 1];
  for (uint64_t b = 0; b < bins; ++b) plan->first_piece_[b + 1] += plan->first_piece_[b];
  std::vector<uint64_t> fill(plan->first_piece_.begin(), plan->first_piece_.end() - 1);
  plan->pieces_.resize(pieces.size());
  for (uint64_t i : order) plan->pieces_[fill[bin_of[i]]++] = pieces[i];
  return std::shared_ptr<const BestFitPlan>(std::move(plan));
}

namespace {

class BestFitState final : public OpState {
 public:
  explicit BestFitState(uint64_t seq_len) : tokens(seq_len + 1), row_starts(seq_len) {}
  uint64_t ScratchBytes() const override {
    return tokens.capacity() * sizeof(int64_t) + row_starts.capacity() * sizeof(int32_t);
  }
  std::vector<int64_t> tokens;
  std::vector<int32_t> row_starts;
};

using tokens::detail::kIgnoreIndex;

class BestFitOp final : public tokens::detail::TokenSequenceOp {
 public:
  BestFitOp(std::shared_ptr<const TokenCorpus> corpus, std::shared_ptr<const BestFitPlan> plan,
            int64_t pad_token, const TokenFieldSet& fields)
      : corpus_(std::move(corpus)),
        plan_(std::move(plan)),
        pad_token_(pad_token),
        seq_len_(plan_->seq_len()),
        index_(fields),
        fingerprint_(corpus_->Fingerprint()),
        mapped_(tokens::detail::FusedSources(*corpus_)) {}

  std::unique_ptr<OpState> NewState() const override {
    return std::make_unique<BestFitState>(seq_len_);
  }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  uint64_t ConfigFingerprint() const override {
    std::string s = "best_fit:";
    core::detail::PutFixed64(&s, seq_len_);
    core::detail::PutFixed64(&s, static_cast<uint64_t>(pad_token_));
    return core::detail::Fnv1a64(s.data(), s.size());
  }
  uint64_t num_sequences() const override { return plan_->num_sequences(); }
  uint64_t seq_len() const override { return seq_len_; }

  Status Fill(uint64_t index, Sample& sample, OpState* state) const override {
    auto& st = *static_cast<BestFitState*>(state);
    const std::span<const BestFitPlan::Piece> pieces = plan_->sequence(index);
    SampleLocation& loc = sample.location();
    const uint64_t first = pieces.front().begin;
    const size_t src = corpus_->SourceOf(first);
    const TokenSource& source = corpus_->source(src);
    loc.file = source.path();
    loc.offset = static_cast<int64_t>((first - corpus_->source_offset(src)) *
                                      TokenDTypeSize(source.dtype()));
    loc.key = "sequence " + std::to_string(index);

    const tokens::detail::TokenOutputs out = index_.Get(sample);
    PrefetchPieces(pieces);
    uint64_t j = 0;
    size_t segments = 0;
    for (const BestFitPlan::Piece& p : pieces) {
      // A piece that does not end its document has its next token as the
      // last label.
      const uint64_t n = p.length, read = n + (p.ends_document ? 0 : 1);
      st.row_starts[segments] = static_cast<int32_t>(j);
      const auto doc = static_cast<int64_t>(segments++);
      if (FusedPiece(p, n, read, j, doc, out)) {
        j += n;
        continue;
      }
      FEEDLINE_RETURN_IF_ERROR(corpus_->Read(p.begin, p.begin + read, st.tokens.data()));
      std::memcpy(out.input_ids + j, st.tokens.data(), n * sizeof(int64_t));
      std::memcpy(out.labels + j, st.tokens.data() + 1, (read - 1) * sizeof(int64_t));
      if (read == n) out.labels[j + n - 1] = kIgnoreIndex;
      if (out.position_ids != nullptr) {
        for (uint64_t k = 0; k < n; ++k) out.position_ids[j + k] = static_cast<int64_t>(k);
      }
      if (out.document_ids != nullptr)
        std::fill(out.document_ids + j, out.document_ids + j + n, doc);
      j += n;
    }
    if (j < seq_len_) st.row_starts[segments++] = static_cast<int32_t>(j);
    const uint64_t padded = j;
    std::fill(out.input_ids + padded, out.input_ids + seq_len_, pad_token_);
    std::fill(out.labels + padded, out.labels + seq_len_, kIgnoreIndex);
    if (out.position_ids != nullptr) {
      for (uint64_t k = padded; k < seq_len_; ++k) {
        out.position_ids[k] = static_cast<int64_t>(k - padded);
      }
    }
    if (out.document_ids != nullptr) {
      std::fill(out.document_ids + padded, out.document_ids + seq_len_, int64_t{-1});
    }
    tokens::detail::WriteDocumentStarts(out, st.row_starts.data(), segments, seq_len_);
    return Status::OK();
  }

 private:
  // A sequence's pieces lie anywhere in the corpus (best fit packs
  // documents from all over it), so each starts with a cache miss the
  // hardware prefetcher cannot foresee: ask for every line of the pieces
  // after the first before the pass starts on it.
  void PrefetchPieces(std::span<const BestFitPlan::Piece> pieces) const {
    for (size_t i = 1; i < pieces.size(); ++i) {
      const BestFitPlan::Piece& p = pieces[i];
      const size_t src = corpus_->SourceOf(p.begin);
      if (mapped_[src] == nullptr) continue;
      const size_t item = TokenDTypeSize(corpus_->source(src).dtype());
      const uint8_t* begin = mapped_[src] + (p.begin - corpus_->source_offset(src)) * item;
      const uint8_t* end = begin + (p.length + (p.ends_document ? 0 : 1)) * item;
      for (const uint8_t* line = begin; line < end; line += 64) __builtin_prefetch(line);
    }
  }

  // The piece's fields at row offset j in the window's fused pass
  // (token_window_hwy.h) when its tokens lie in one mapped source: the
  // pass writes ids [0, read - 1) with their next id as label, and a piece
  // that ends its document gets its last token and the masked label here.
  // false (nothing to keep) for other sources or a negative id: the
  // checked path reads the piece and names the id.
  bool FusedPiece(const BestFitPlan::Piece& p, uint64_t n, uint64_t read, uint64_t j, int64_t doc,
                  const tokens::detail::TokenOutputs& out) const {
    const size_t src = corpus_->SourceOf(p.begin);
    const uint64_t first = p.begin - corpus_->source_offset(src);
    const TokenSource& source = corpus_->source(src);
    if (mapped_[src] == nullptr || first + read > source.num_tokens()) return false;
    const uint8_t* ids = mapped_[src] + first * TokenDTypeSize(source.dtype());
    const uint64_t paired = read - 1;  // ids with their label beside them
    int64_t* positions = out.position_ids != nullptr ? out.position_ids + j : nullptr;
    int64_t* documents = out.document_ids != nullptr ? out.document_ids + j : nullptr;
    if (!tokens::detail::WindowSegment(source.dtype(), ids, 0, paired, out.input_ids + j,
                                       out.labels + j, positions, documents, doc)) {
      return false;
    }
    if (read == n) {  // the document's last token: no label
      int64_t last = 0;
      if (!corpus_->Read(p.begin + n - 1, p.begin + n, &last).ok()) return false;
      out.input_ids[j + n - 1] = last;
      out.labels[j + n - 1] = kIgnoreIndex;
      if (positions != nullptr) positions[n - 1] = static_cast<int64_t>(n - 1);
      if (documents != nullptr) documents[n - 1] = doc;
    }
    return true;
  }

  std::shared_ptr<const TokenCorpus> corpus_;
  std::shared_ptr<const BestFitPlan> plan_;
  int64_t pad_token_;
  uint64_t seq_len_;
  tokens::detail::TokenFieldIndex index_;
  uint64_t fingerprint_;
  std::vector<const uint8_t*> mapped_;  // FusedSources
};

}  // namespace

Result<Pipeline> TokenBestFitPipeline(std::shared_ptr<const TokenCorpus> corpus,
                                      std::shared_ptr<const BestFitPlan> plan, int64_t pad_token,
                                      const TokenFieldSet& fields) {
  if (corpus == nullptr || plan == nullptr) {
    return InvalidArgumentError("TokenBestFitPipeline: no corpus or no plan");
  }
  if (pad_token < 0) {
    return InvalidArgumentError("pad_token must be a token id >= 0, got " +
                                std::to_string(pad_token));
  }
  if (plan->num_tokens() != corpus->num_tokens()) {
    return InvalidArgumentError("the best-fit plan covers " + std::to_string(plan->num_tokens()) +
                                " tokens, the corpus has " + std::to_string(corpus->num_tokens()));
  }
  if (plan->num_sequences() == 0) return InvalidArgumentError("the token corpus is empty");
  Pipeline p;
  p.num_samples = plan->num_sequences();
  p.fields = tokens::detail::TokenFields(plan->seq_len(), fields);
  p.ops.push_back(
      std::make_shared<BestFitOp>(std::move(corpus), std::move(plan), pad_token, fields));
  return p;
}

}  // namespace feedline
