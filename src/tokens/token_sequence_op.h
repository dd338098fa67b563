// The op behind every token pipeline: it fills one training sequence, named
// by its index, into a sample's fields (tokens.h: input_ids, labels and
// those of its TokenFieldSet). Concat windows and
// best-fit sequences implement Fill; the mixture op calls the Fill of the
// source a global sample maps to, with that source's index.
#ifndef FEEDLINE_SRC_TOKENS_TOKEN_SEQUENCE_OP_H_
#define FEEDLINE_SRC_TOKENS_TOKEN_SEQUENCE_OP_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "feedline/sample.h"
#include "feedline/tokens.h"

namespace feedline::tokens::detail {

// A label no loss is taken on: torch's cross_entropy ignore_index.
inline constexpr int64_t kIgnoreIndex = -100;

class TokenSequenceOp : public SampleOp {
 public:
  std::string_view name() const override { return "tokens"; }
  // Sequence `index` (< num_sequences()) into sample's outputs; `state`
  // from this op's NewState(). Sets the sample's location.
  virtual Status Fill(uint64_t index, Sample& sample, OpState* state) const = 0;
  virtual uint64_t num_sequences() const = 0;
  virtual uint64_t seq_len() const = 0;
  Status Apply(Sample& sample, OpState* state) const override {
    return Fill(sample.id(), sample, state);
  }
};

// The fields of a token pipeline (tokens.h) for seq_len: input_ids,
// labels, then those `set` holds, in that order.
std::vector<FieldSpec> TokenFields(uint64_t seq_len, const TokenFieldSet& set);

// One sample's outputs; a field the set leaves out is null.
struct TokenOutputs {
  int64_t* input_ids = nullptr;
  int64_t* labels = nullptr;
  int64_t* position_ids = nullptr;
  int64_t* document_ids = nullptr;
  int32_t* document_starts = nullptr;
  int32_t* num_documents = nullptr;
};

// Where each field of a set is in the sample: looked up by name in
// TokenFields, the one place that orders them.
class TokenFieldIndex {
 public:
  explicit TokenFieldIndex(const TokenFieldSet& set) {
    const std::vector<FieldSpec> fields = TokenFields(1, set);
    auto at = [&fields](std::string_view name) {
      for (size_t i = 0; i < fields.size(); ++i) {
        if (fields[i].name == name) return i;
      }
      return kNone;
    };
    position_ids_ = at("position_ids");
    document_ids_ = at("document_ids");
    document_starts_ = at("document_starts");
    num_documents_ = at("num_documents");
  }
  TokenOutputs Get(const Sample& sample) const {
    TokenOutputs o;
    o.input_ids = sample.output_as<int64_t>(0);
    o.labels = sample.output_as<int64_t>(1);
    if (position_ids_ != kNone) o.position_ids = sample.output_as<int64_t>(position_ids_);
    if (document_ids_ != kNone) o.document_ids = sample.output_as<int64_t>(document_ids_);
    if (document_starts_ != kNone) {
      o.document_starts = sample.output_as<int32_t>(document_starts_);
      o.num_documents = sample.output_as<int32_t>(num_documents_);
    }
    return o;
  }

 private:
  static constexpr size_t kNone = ~size_t{0};
  size_t position_ids_, document_ids_, document_starts_, num_documents_;
};

// Writes document_starts (the first `n` of `starts`, the rest 0) and
// num_documents for one row, when the set has them.
inline void WriteDocumentStarts(const TokenOutputs& out, const int32_t* starts, size_t n,
                                uint64_t seq_len) {
  if (out.document_starts == nullptr) return;
  for (size_t i = 0; i < n; ++i) out.document_starts[i] = starts[i];
  for (size_t i = n; i < seq_len; ++i) out.document_starts[i] = 0;
  *out.num_documents = static_cast<int32_t>(n);
}

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_SEQUENCE_OP_H_
