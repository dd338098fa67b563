// Fuzzes the checks of the field ops (src/pipelines/field_ops.cc,
// src/pipelines/npy.cc) over arbitrary part bytes: the .npy header parser
// (magic, version, header length, descr, fortran_order, shape, size), the
// label, UTF-8 and JSON checks, and the CSV / JSON Lines list parser
// (src/io/list_dataset.cc). The first input byte picks the case; the rest
// is the part (or the list file). An accepted .npy must be self-consistent
// (its data offset plus its data bytes is the part's size); an accepted
// list has rows of the header's width; every refusal says why.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "feedline/list_dataset.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "src/pipelines/npy.h"

namespace {

// One sample through the field op of `kind`, outside a loader.
void RunFieldOp(feedline::FieldRequest::Kind kind, std::span<const uint8_t> part) {
  using feedline::FieldRequest;
  FieldRequest r;
  r.name = "f";
  r.kind = kind;
  r.parts = {"p"};
  auto read = feedline::MakeOp("read", [part](feedline::Sample& s) {
    s.AddPart("p", part);
    return feedline::Status::OK();
  });
  feedline::Pipeline p;
  p.num_samples = 1;
  p.fields = {feedline::FieldSpecOf(r)};
  p.ops = {read, feedline::MakeFieldOp(r, 0, false)};
  feedline::LoaderOptions o;
  o.batch_size = 1;
  o.num_threads = 1;
  o.ring_depth = 2;
  auto loader = feedline::Loader::Create(std::move(p), o);
  if (!loader.ok()) std::abort();
  feedline::Batch b;
  bool end = false;
  const feedline::Status st = (*loader)->Next(&b, &end);
  if (st.ok()) {
    if (end || b.size() != 1) std::abort();
    if (kind != FieldRequest::Kind::kLabel) {
      const std::span<const uint8_t> out = b.bytes(0, 0);
      if (out.size() != part.size()) std::abort();  // accepted parts pass through whole
      if (kind == FieldRequest::Kind::kJson &&
          std::find(out.begin(), out.end(), uint8_t{0}) != out.end()) {
        std::abort();  // the JSON parser stops at a NUL: such a part is never JSON
      }
    }
  } else if (st.message().empty()) {
    std::abort();
  }
}

void ParseList(std::span<const uint8_t> text, bool jsonl) {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("field_parts_fuzzer_" + std::to_string(::getpid())))
                                      .string();
  const std::string file = path + (jsonl ? ".jsonl" : ".csv");
  FILE* f = std::fopen(file.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::abort();
  std::fclose(f);
  feedline::ListOptions o;
  o.file_columns = {"path"};
  auto ds = feedline::ListDataset::Open(file, o);
  if (ds.ok()) {
    const auto& d = **ds;
    if (d.num_rows() == 0 || d.columns().empty()) std::abort();
    for (uint64_t r = 0; r < d.num_rows(); ++r) {
      for (size_t c = 0; c < d.columns().size(); ++c) {
        if (!d.Has(r, c) && !d.Value(r, c).empty()) std::abort();
      }
      if (r > 0 && d.line(r) <= d.line(r - 1)) std::abort();
    }
  } else if (ds.status().message().empty()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> part(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0: {
      auto h = feedline::pipelines::ParseNpy(part);
      if (h.ok()) {
        if (h->data_offset + h->data_bytes != part.size() || h->item_size == 0) std::abort();
      } else if (h.status().message().empty()) {
        std::abort();
      }
      RunFieldOp(feedline::FieldRequest::Kind::kNdarray, part);
      break;
    }
    case 1: RunFieldOp(feedline::FieldRequest::Kind::kLabel, part); break;
    case 2: RunFieldOp(feedline::FieldRequest::Kind::kText, part); break;
    case 3: RunFieldOp(feedline::FieldRequest::Kind::kJson, part); break;
    case 4: ParseList(part, /*jsonl=*/false); break;
    default: ParseList(part, /*jsonl=*/true); break;
  }
  return 0;
}
