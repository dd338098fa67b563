// Concat packing: sample i = tokens [i*S, i*S + S + 1) of the corpus, as
// input_ids, labels, position_ids and document_ids (tokens.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/tokens.h"
#include "src/core/detail/endian.h"

namespace feedline {

uint64_t NumTokenWindows(uint64_t num_tokens, uint64_t seq_len) {
  if (seq_len == 0 || num_tokens <= seq_len) return 0;
  return (num_tokens - 1) / seq_len;
}

uint64_t TokenWindowTailTokens(uint64_t num_tokens, uint64_t seq_len) {
  if (num_tokens == 0) return 0;
  return num_tokens - 1 - NumTokenWindows(num_tokens, seq_len) * seq_len;
}

namespace {

// Per worker: the window's tokens and the document starts inside it.
class WindowState final : public OpState {
 public:
  explicit WindowState(uint64_t seq_len) : tokens(seq_len + 1) {}
  uint64_t ScratchBytes() const override {
    return tokens.capacity() * sizeof(int64_t) + starts.capacity() * sizeof(uint64_t);
  }
  std::vector<int64_t> tokens;
  std::vector<uint64_t> starts;
};

class TokenWindowOp final : public SampleOp {
 public:
  TokenWindowOp(std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len)
      : corpus_(std::move(corpus)), seq_len_(seq_len), fingerprint_(corpus_->Fingerprint()) {}

  std::string_view name() const override { return "tokens"; }
  std::unique_ptr<OpState> NewState() const override {
    return std::make_unique<WindowState>(seq_len_);
  }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  uint64_t ConfigFingerprint() const override {
    std::string s = "windows:";
    core::detail::PutFixed64(&s, seq_len_);
    return core::detail::Fnv1a64(s.data(), s.size());
  }

  Status Apply(Sample& sample, OpState* state) const override {
    auto& st = *static_cast<WindowState*>(state);
    const uint64_t begin = sample.id() * seq_len_;
    const size_t src = corpus_->SourceOf(begin);
    SampleLocation& loc = sample.location();
    const TokenSource& source = corpus_->source(src);
    loc.offset = static_cast<int64_t>((begin - corpus_->source_offset(src)) *
                                      TokenDTypeSize(source.dtype()));  // bytes, as everywhere
    loc.file = source.path();
    loc.key = "window " + std::to_string(sample.id());
    FEEDLINE_RETURN_IF_ERROR(corpus_->Read(begin, begin + seq_len_ + 1, st.tokens.data()));
    st.starts.clear();
    // Starts strictly inside the inputs; the window start is one anyway.
    corpus_->DocumentStarts(begin + 1, begin + seq_len_, &st.starts);

    auto* input_ids = sample.output_as<int64_t>(0);
    auto* labels = sample.output_as<int64_t>(1);
    auto* position_ids = sample.output_as<int64_t>(2);
    auto* document_ids = sample.output_as<int64_t>(3);
    size_t next_start = 0;
    int64_t position = 0, document = 0;
    for (uint64_t j = 0; j < seq_len_; ++j) {
      if (next_start < st.starts.size() && st.starts[next_start] == begin + j) {
        ++next_start;
        position = 0;
        ++document;
      }
      input_ids[j] = st.tokens[j];
      labels[j] = st.tokens[j + 1];
      position_ids[j] = position++;
      document_ids[j] = document;
    }
    return Status::OK();
  }

 private:
  std::shared_ptr<const TokenCorpus> corpus_;
  uint64_t seq_len_;
  uint64_t fingerprint_;
};

}  // namespace

Result<Pipeline> TokenWindowPipeline(std::shared_ptr<const TokenCorpus> corpus, uint64_t seq_len) {
  if (corpus == nullptr) return InvalidArgumentError("TokenWindowPipeline: no corpus");
  if (seq_len == 0) return InvalidArgumentError("seq_len must be positive");
  const uint64_t windows = NumTokenWindows(corpus->num_tokens(), seq_len);
  if (windows == 0) {
    return InvalidArgumentError("the token corpus has " + std::to_string(corpus->num_tokens()) +
                                " tokens: one window of seq_len " + std::to_string(seq_len) +
                                " needs " + std::to_string(seq_len + 1));
  }
  Pipeline p;
  p.num_samples = windows;
  const auto s = static_cast<int64_t>(seq_len);
  for (const char* name : {"input_ids", "labels", "position_ids", "document_ids"}) {
    p.fields.push_back(FieldSpec{name, DType::kInt64, {s}});
  }
  p.ops.push_back(std::make_shared<TokenWindowOp>(std::move(corpus), seq_len));
  return p;
}

}  // namespace feedline
