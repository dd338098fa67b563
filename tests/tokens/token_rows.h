// Test helper: the rows (sequences) a token pipeline's loader delivers,
// each with its fields (tokens.h) and its sample id.
#ifndef FEEDLINE_TESTS_TOKENS_TOKEN_ROWS_H_
#define FEEDLINE_TESTS_TOKENS_TOKEN_ROWS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "feedline/loader.h"
#include "feedline/tokens.h"

namespace feedline::testing_tokens {

struct Row {
  uint64_t id = 0;
  std::vector<int64_t> input_ids, labels, position_ids, document_ids;
  std::vector<int32_t> document_starts;  // the first num_documents entries
};

// Rows of one batch, in order. Fields found by name; a field the pipeline's
// TokenFieldSet leaves out stays empty in the row.
inline std::vector<Row> BatchRows(const Batch& b, uint64_t seq_len) {
  auto find = [&b](const char* name) {
    for (size_t f = 0; f < b.num_fields(); ++f) {
      if (b.field(f).name == name) return static_cast<ptrdiff_t>(f);
    }
    return ptrdiff_t{-1};
  };
  const ptrdiff_t ids[] = {find("input_ids"), find("labels"), find("position_ids"),
                           find("document_ids")};
  const ptrdiff_t starts = find("document_starts"), counts = find("num_documents");
  const auto n_seq = static_cast<ptrdiff_t>(seq_len);
  std::vector<Row> out;
  for (size_t i = 0; i < b.size(); ++i) {
    Row r;
    r.id = b.sample_ids()[i];
    std::vector<int64_t>* dst[] = {&r.input_ids, &r.labels, &r.position_ids, &r.document_ids};
    const auto row = static_cast<ptrdiff_t>(i);
    for (size_t f = 0; f < 4; ++f) {
      if (ids[f] < 0) continue;
      std::span<int64_t> v = b.field_as<int64_t>(static_cast<size_t>(ids[f]));
      dst[f]->assign(v.begin() + row * n_seq, v.begin() + (row + 1) * n_seq);
    }
    if (starts >= 0 && counts >= 0) {
      const int32_t n = b.field_as<int32_t>(static_cast<size_t>(counts))[i];
      std::span<int32_t> s = b.field_as<int32_t>(static_cast<size_t>(starts));
      r.document_starts.assign(s.begin() + row * n_seq, s.begin() + row * n_seq + n);
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Every row of `epochs` epochs (from epoch 0), in delivery order.
inline std::vector<Row> AllRows(Pipeline pipeline, LoaderOptions o, uint64_t seq_len,
                                uint64_t epochs = 1) {
  auto loader = Loader::Create(std::move(pipeline), o);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  std::vector<Row> out;
  if (!loader.ok()) return out;
  for (uint64_t e = 0; e < epochs; ++e) {
    EXPECT_TRUE((*loader)->SetEpoch(e).ok());
    while (true) {
      Batch b;
      bool end = false;
      Status st = (*loader)->Next(&b, &end);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok() || end) break;
      for (Row& r : BatchRows(b, seq_len)) out.push_back(std::move(r));
    }
  }
  return out;
}

// The segment starts document_ids imply: 0 and every change.
inline std::vector<int32_t> StartsFromDocumentIds(const std::vector<int64_t>& ids) {
  std::vector<int32_t> s{0};
  for (size_t j = 1; j < ids.size(); ++j) {
    if (ids[j] != ids[j - 1]) s.push_back(static_cast<int32_t>(j));
  }
  return s;
}

}  // namespace feedline::testing_tokens

#endif  // FEEDLINE_TESTS_TOKENS_TOKEN_ROWS_H_
