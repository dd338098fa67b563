// The op behind every token pipeline: it fills one training sequence, named
// by its index, into a sample's six fields (tokens.h). Concat windows and
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

// The six fields of every token pipeline (tokens.h), for seq_len.
std::vector<FieldSpec> TokenFields(uint64_t seq_len);

// Writes document_starts (the first `n` of `starts`, the rest 0) and
// num_documents for one row.
inline void WriteDocumentStarts(const Sample& sample, const int32_t* starts, size_t n,
                                uint64_t seq_len) {
  auto* out = sample.output_as<int32_t>(kTokenDocumentStarts);
  for (size_t i = 0; i < n; ++i) out[i] = starts[i];
  for (size_t i = n; i < seq_len; ++i) out[i] = 0;
  *sample.output_as<int32_t>(kTokenNumDocuments) = static_cast<int32_t>(n);
}

}  // namespace feedline::tokens::detail

#endif  // FEEDLINE_SRC_TOKENS_TOKEN_SEQUENCE_OP_H_
