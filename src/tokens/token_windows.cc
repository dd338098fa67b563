// Concat packing: sample i = tokens [i*S, i*S + S + 1) of the corpus, as
// the six fields of tokens.h; and TokenCuSeqlens, the consumer's half of
// cu_seqlens.
#include <algorithm>
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

uint64_t NumTokenWindows(uint64_t num_tokens, uint64_t seq_len) {
  if (seq_len == 0 || num_tokens <= seq_len) return 0;
  return (num_tokens - 1) / seq_len;
}

uint64_t TokenWindowTailTokens(uint64_t num_tokens, uint64_t seq_len) {
  if (num_tokens == 0) return 0;
  return num_tokens - 1 - NumTokenWindows(num_tokens, seq_len) * seq_len;
}

Status TokenCuSeqlens(const int32_t* document_starts, const int32_t* num_documents, uint64_t rows,
                      uint64_t seq_len, std::vector<int32_t>* out) {
  uint64_t total = 1;
  for (uint64_t r = 0; r < rows; ++r) {
    const int32_t n = num_documents[r];
    if (n < 1 || static_cast<uint64_t>(n) > seq_len) {
      return InvalidArgumentError("cu_seqlens: row " + std::to_string(r) + " has num_documents " +
                                  std::to_string(n) + ", not in [1, " + std::to_string(seq_len) +
                                  "]");
    }
    total += static_cast<uint64_t>(n);
  }
  if (rows * seq_len > static_cast<uint64_t>(INT32_MAX)) {
    return InvalidArgumentError("cu_seqlens: " + std::to_string(rows * seq_len) +
                                " tokens in a batch do not fit int32");
  }
  out->resize(total);
  int32_t* o = out->data();
  for (uint64_t r = 0; r < rows; ++r) {
    const int32_t* s = document_starts + r * seq_len;
    const auto base = static_cast<int32_t>(r * seq_len);
    const int32_t n = num_documents[r];
    int32_t prev = -1;
    for (int32_t i = 0; i < n; ++i) {
      if (s[i] <= prev || s[i] >= static_cast<int32_t>(seq_len) || (i == 0 && s[i] != 0)) {
        return InvalidArgumentError("cu_seqlens: row " + std::to_string(r) +
                                    " has document_starts that do not increase from 0 (entry " +
                                    std::to_string(i) + " is " + std::to_string(s[i]) + ")");
      }
      prev = s[i];
      *o++ = base + s[i];
    }
  }
  *o = static_cast<int32_t>(rows * seq_len);
  return Status::OK();
}

namespace {

// Per worker: the document starts inside the window.
class WindowState final : public OpState {
 public:
  explicit WindowState(uint64_t seq_len) : row_starts(seq_len) {}
  uint64_t ScratchBytes() const override {
    return starts.capacity() * sizeof(uint64_t) + row_starts.capacity() * sizeof(int32_t);
  }
  std::vector<uint64_t> starts;
  std::vector<int32_t> row_starts;
  bool next_starts = false;              // the token after the window starts a document (Segments)
  uint64_t bad_start = 0, previous = 0;  // what Segments found out of place
};

class TokenWindowOp final : public tokens::detail::TokenSequenceOp {
 public:
  TokenWindowOp(std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len,
                const TokenFieldSet& fields, CrossDocumentLabels labels)
      : corpus_(std::move(corpus)),
        seq_len_(seq_len),
        index_(fields),
        ignore_cross_(labels == CrossDocumentLabels::kIgnore),
        windows_(NumTokenWindows(corpus_->num_tokens(), seq_len)),
        fingerprint_(corpus_->Fingerprint()),
        mapped_(tokens::detail::FusedSources(*corpus_)) {}

  std::unique_ptr<OpState> NewState() const override {
    return std::make_unique<WindowState>(seq_len_);
  }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  uint64_t ConfigFingerprint() const override {
    std::string s = "windows:";
    core::detail::PutFixed64(&s, seq_len_);
    return core::detail::Fnv1a64(s.data(), s.size());
  }
  uint64_t num_sequences() const override { return windows_; }
  uint64_t seq_len() const override { return seq_len_; }

  Status Fill(uint64_t index, Sample& sample, OpState* state) const override {
    auto& st = *static_cast<WindowState*>(state);
    const uint64_t begin = index * seq_len_;
    const size_t src = corpus_->SourceOf(begin);
    SampleLocation& loc = sample.location();
    const TokenSource& source = corpus_->source(src);
    loc.offset = static_cast<int64_t>((begin - corpus_->source_offset(src)) *
                                      TokenDTypeSize(source.dtype()));  // bytes, as everywhere
    loc.file = source.path();
    loc.key = "window " + std::to_string(index);
    const tokens::detail::TokenOutputs out = index_.Get(sample);
    const bool boundaries = out.position_ids != nullptr || out.document_ids != nullptr ||
                            out.document_starts != nullptr || ignore_cross_;
    const uint64_t first = begin - corpus_->source_offset(src);
    if (mapped_[src] != nullptr && first + seq_len_ + 1 <= source.num_tokens()) {
      // The window lies in one mapped source: one fused pass per segment
      // writes every field (token_window_hwy.h). A negative id sends it
      // to the checked path below, which names it.
      st.row_starts[0] = 0;
      const size_t segments = boundaries ? Segments(begin, st) : 1;
      if (segments == 0) return SegmentError(index, begin, st);
      const uint8_t* ids = mapped_[src] + first * TokenDTypeSize(source.dtype());
      bool ok = true;
      for (size_t k = 0; k < segments && ok; ++k) {
        const auto a = static_cast<uint64_t>(st.row_starts[k]);
        const uint64_t b =
            k + 1 < segments ? static_cast<uint64_t>(st.row_starts[k + 1]) : seq_len_;
        ok = tokens::detail::WindowSegment(source.dtype(), ids, a, b, out.input_ids, out.labels,
                                           out.position_ids, out.document_ids,
                                           static_cast<int64_t>(k));
      }
      if (ok) {
        tokens::detail::WriteDocumentStarts(out, st.row_starts.data(), segments, seq_len_);
        IgnoreCrossLabels(out.labels, segments, st);
        return Status::OK();
      }
    }
    // The window's tokens straight into input_ids, its last into labels;
    // labels are input_ids shifted by one (one copy, no second widening).
    FEEDLINE_RETURN_IF_ERROR(corpus_->Read(begin, begin + seq_len_, out.input_ids));
    FEEDLINE_RETURN_IF_ERROR(
        corpus_->Read(begin + seq_len_, begin + seq_len_ + 1, out.labels + seq_len_ - 1));
    std::memcpy(out.labels, out.input_ids + 1, (seq_len_ - 1) * sizeof(int64_t));
    if (!boundaries) return Status::OK();  // no document boundary asked for: none looked up
    const size_t segments = Segments(begin, st);
    if (segments == 0) return SegmentError(index, begin, st);
    // Segment by segment: positions count from 0, the document id is constant.
    for (size_t k = 0; k < segments; ++k) {
      const auto a = static_cast<uint64_t>(st.row_starts[k]);
      const uint64_t b = k + 1 < segments ? static_cast<uint64_t>(st.row_starts[k + 1]) : seq_len_;
      if (out.position_ids != nullptr) {
        for (uint64_t j = a; j < b; ++j) out.position_ids[j] = static_cast<int64_t>(j - a);
      }
      if (out.document_ids != nullptr) {
        std::fill(out.document_ids + a, out.document_ids + b, static_cast<int64_t>(k));
      }
    }
    tokens::detail::WriteDocumentStarts(out, st.row_starts.data(), segments, seq_len_);
    IgnoreCrossLabels(out.labels, segments, st);
    return Status::OK();
  }

 private:
  // With kIgnore, -100 at each label that is a document's first token: the
  // one before each segment start after the first, and the last one when
  // the token after the window starts a document. O(documents), after the
  // fields are written, so the fused pass stays as it is.
  void IgnoreCrossLabels(int64_t* labels, size_t segments, const WindowState& st) const {
    using tokens::detail::kIgnoreIndex;
    if (!ignore_cross_) return;
    for (size_t k = 1; k < segments; ++k) labels[st.row_starts[k] - 1] = kIgnoreIndex;
    if (st.next_starts) labels[seq_len_ - 1] = kIgnoreIndex;
  }

  // The window's segments (row_starts[0, n), the first 0), or 0 when the
  // source broke TokenSource's contract (SegmentError says how).
  size_t Segments(uint64_t begin, WindowState& st) const {
    st.starts.clear();
    // Starts strictly inside the inputs (the window start is one anyway),
    // and with kIgnore the last label's token too (begin + seq_len + 1 <=
    // num_tokens: a window's labels are in the corpus).
    const uint64_t end = begin + seq_len_;
    corpus_->DocumentStarts(begin + 1, end + (ignore_cross_ ? 1 : 0), &st.starts);
    st.next_starts = false;
    if (ignore_cross_ && !st.starts.empty() && st.starts.back() == end) {
      st.next_starts = true;
      st.starts.pop_back();
    }
    st.row_starts[0] = 0;
    size_t segments = 1;
    for (uint64_t start : st.starts) {
      // TokenSource's contract, checked: a start out of place would write
      // past row_starts.
      const uint64_t previous = begin + static_cast<uint64_t>(st.row_starts[segments - 1]);
      if (start <= previous || start >= begin + seq_len_) {
        st.bad_start = start;
        st.previous = previous;
        return 0;
      }
      st.row_starts[segments++] = static_cast<int32_t>(start - begin);
    }
    return segments;
  }

  Status SegmentError(uint64_t index, uint64_t begin, const WindowState& st) const {
    return InternalError("token window " + std::to_string(index) + ": document start " +
                         std::to_string(st.bad_start) + " is not inside (" +
                         std::to_string(st.previous) + ", " + std::to_string(begin + seq_len_) +
                         ")");
  }

  std::shared_ptr<const TokenCorpus> corpus_;
  uint64_t seq_len_;
  tokens::detail::TokenFieldIndex index_;
  bool ignore_cross_;  // CrossDocumentLabels::kIgnore
  uint64_t windows_;
  uint64_t fingerprint_;
  std::vector<const uint8_t*> mapped_;  // FusedSources
};

}  // namespace

namespace tokens::detail {

// The fields of a token pipeline (tokens.h).
std::vector<FieldSpec> TokenFields(uint64_t seq_len, const TokenFieldSet& set) {
  const auto s = static_cast<int64_t>(seq_len);
  std::vector<FieldSpec> fields = {FieldSpec{"input_ids", DType::kInt64, {s}},
                                   FieldSpec{"labels", DType::kInt64, {s}}};
  if (set.position_ids) fields.push_back(FieldSpec{"position_ids", DType::kInt64, {s}});
  if (set.document_ids) fields.push_back(FieldSpec{"document_ids", DType::kInt64, {s}});
  if (set.document_starts) {
    fields.push_back(FieldSpec{"document_starts", DType::kInt32, {s}});
    fields.push_back(FieldSpec{"num_documents", DType::kInt32, {}});
  }
  return fields;
}

}  // namespace tokens::detail

Result<Pipeline> TokenWindowPipeline(std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len,
                                     const TokenFieldSet& fields, CrossDocumentLabels labels) {
  if (corpus == nullptr) return InvalidArgumentError("TokenWindowPipeline: no corpus");
  if (seq_len == 0) return InvalidArgumentError("seq_len must be positive");
  if (seq_len > static_cast<uint64_t>(INT32_MAX)) {
    return InvalidArgumentError("seq_len " + std::to_string(seq_len) + " is above 2^31 - 1");
  }
  const uint64_t windows = NumTokenWindows(corpus->num_tokens(), seq_len);
  if (windows == 0) {
    return InvalidArgumentError("the token corpus has " + std::to_string(corpus->num_tokens()) +
                                " tokens: one window of seq_len " + std::to_string(seq_len) +
                                " needs " + std::to_string(seq_len + 1));
  }
  Pipeline p;
  p.num_samples = windows;
  p.fields = tokens::detail::TokenFields(seq_len, fields);
  p.ops.push_back(std::make_shared<TokenWindowOp>(std::move(corpus), seq_len, fields, labels));
  return p;
}

}  // namespace feedline
