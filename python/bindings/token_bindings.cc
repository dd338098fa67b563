// Binds the token readers, the token-shard writer and the windows recipe
// (feedline/tokens.h). Type conversion only: which sources, dtype and seq_len
// come from feedline.TokenLoader, the documents from feedline.pack_text; the
// pipeline goes to _C.Loader like any other.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "feedline/pipeline_builder.h"
#include "feedline/tokens.h"
#include "python/bindings/errors.h"

namespace py = pybind11;

namespace feedline::python {
namespace {

// Shares an immutable corpus (its maps live as long as any holder).
struct PyTokenCorpus {
  std::shared_ptr<const TokenCorpus> corpus;
};

PyTokenCorpus OpenCorpus(const std::vector<std::string>& paths, const std::string& dtype,
                         std::optional<int64_t> eos_token, const HttpOptions& http) {
  Result<std::shared_ptr<const TokenCorpus>> corpus = [&]() {
    py::gil_scoped_release release;
    Result<TokenDType> d = ParseTokenDType(dtype);
    if (!d.ok()) return Result<std::shared_ptr<const TokenCorpus>>(d.status());
    TokenSourceOptions o;
    o.flat_dtype = *d;
    o.eos_token = eos_token;
    return OpenTokenCorpus(paths, o, http);
  }();
  return PyTokenCorpus{ValueOrThrow(std::move(corpus))};
}

const char* KindName(TokenSource::Kind kind) {
  switch (kind) {
    case TokenSource::Kind::kFlat: return "flat";
    case TokenSource::Kind::kMegatron: return "megatron";
    case TokenSource::Kind::kTokenShards: return "token_shards";
  }
  return "?";
}

// Owns the writer; add_documents takes a batch of documents as one flat
// int64 array and their lengths, and writes them without the GIL.
struct PyTokenShardWriter {
  std::unique_ptr<TokenShardWriter> writer;

  void AddDocuments(
      const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& ids,
      const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& lengths) {
    if (ids.ndim() != 1 || lengths.ndim() != 1)
      throw py::value_error("add_documents takes 1-d ids and lengths");
    int64_t total = 0;
    for (py::ssize_t i = 0; i < lengths.size(); ++i) {
      if (lengths.data()[i] < 0) throw py::value_error("add_documents: a negative length");
      total += lengths.data()[i];
    }
    if (total != ids.size())
      throw py::value_error("add_documents: the lengths sum to " + std::to_string(total) +
                            ", the ids are " + std::to_string(ids.size()));
    Status s;
    {
      py::gil_scoped_release release;
      const int64_t* p = ids.data();
      for (py::ssize_t i = 0; i < lengths.size() && s.ok(); ++i) {
        const auto n = static_cast<uint64_t>(lengths.data()[i]);
        s = writer->AddDocument(p, n);
        p += n;
      }
    }
    ThrowIfError(s);
  }
};

struct PyBestFitPlan {
  std::shared_ptr<const BestFitPlan> plan;
};

TokenMixtureOptions MixtureOptions(const std::vector<double>& weights, uint64_t window,
                                   uint64_t num_samples, bool shuffle, uint64_t seed,
                                   uint64_t start, const std::vector<uint64_t>& counts) {
  TokenMixtureOptions o;
  o.weights = weights;
  o.window = window;
  o.num_samples = num_samples;
  o.shuffle = shuffle;
  o.seed = seed;
  o.start = start;
  o.counts = counts;
  return o;
}

py::list Sources(const PyTokenCorpus& c) {
  py::list out;
  for (size_t i = 0; i < c.corpus->num_sources(); ++i) {
    const TokenSource& s = c.corpus->source(i);
    out.append(py::dict(py::arg("path") = PyFsName(s.path()), py::arg("kind") = KindName(s.kind()),
                        py::arg("dtype") = PyText(TokenDTypeName(s.dtype())),
                        py::arg("num_tokens") = s.num_tokens(),
                        py::arg("offset") = c.corpus->source_offset(i)));
  }
  return out;
}

}  // namespace

void RegisterTokens(py::module_& m) {
  py::class_<PyTokenCorpus>(m, "TokenCorpus")
      .def_property_readonly("num_tokens",
                             [](const PyTokenCorpus& c) { return c.corpus->num_tokens(); })
      .def_property_readonly("sources", &Sources)
      .def("count_documents",
           [](const PyTokenCorpus& c) {
             py::gil_scoped_release release;
             return c.corpus->CountDocuments();
           })
      .def_property_readonly("fingerprint",
                             [](const PyTokenCorpus& c) { return c.corpus->Fingerprint(); });
  m.def("open_token_corpus", &OpenCorpus, py::arg("paths"), py::arg("dtype"),
        py::arg("eos_token") = py::none(), py::arg("http") = HttpOptions());
  m.def(
      "token_window_pipeline",
      [](const PyTokenCorpus& c, uint64_t seq_len, bool position_ids, bool document_ids,
         bool document_starts, bool mask_cross_document_labels) {
        return ValueOrThrow(TokenWindowPipeline(
            c.corpus, seq_len, TokenFieldSet{position_ids, document_ids, document_starts},
            mask_cross_document_labels ? CrossDocumentLabels::kIgnore
                                       : CrossDocumentLabels::kKeep));
      },
      py::arg("corpus"), py::arg("seq_len"), py::arg("position_ids") = true,
      py::arg("document_ids") = true, py::arg("document_starts") = true,
      py::arg("mask_cross_document_labels") = false);
  py::class_<PyBestFitPlan>(m, "BestFitPlan")
      .def_property_readonly("num_sequences",
                             [](const PyBestFitPlan& p) { return p.plan->num_sequences(); })
      .def_property_readonly("num_pieces",
                             [](const PyBestFitPlan& p) { return p.plan->num_pieces(); })
      .def_property_readonly("num_documents",
                             [](const PyBestFitPlan& p) { return p.plan->num_documents(); })
      .def_property_readonly("num_tokens",
                             [](const PyBestFitPlan& p) { return p.plan->num_tokens(); })
      .def_property_readonly("padding_tokens",
                             [](const PyBestFitPlan& p) { return p.plan->padding_tokens(); })
      .def_property_readonly("padding_share",
                             [](const PyBestFitPlan& p) { return p.plan->padding_share(); })
      .def("sequence", [](const PyBestFitPlan& p, uint64_t i) {
        if (i >= p.plan->num_sequences()) throw py::index_error("no such sequence");
        py::list out;
        for (const BestFitPlan::Piece& piece : p.plan->sequence(i)) {
          out.append(py::make_tuple(piece.begin, piece.length, piece.ends_document));
        }
        return out;
      });
  m.def(
      "best_fit_plan",
      [](const PyTokenCorpus& c, uint64_t seq_len) {
        Result<std::shared_ptr<const BestFitPlan>> plan = [&]() {
          py::gil_scoped_release release;
          return BestFitPlan::Build(*c.corpus, seq_len);
        }();
        return PyBestFitPlan{ValueOrThrow(std::move(plan))};
      },
      py::arg("corpus"), py::arg("seq_len"));
  m.def(
      "token_best_fit_pipeline",
      [](const PyTokenCorpus& c, const PyBestFitPlan& plan, int64_t pad_token, bool position_ids,
         bool document_ids, bool document_starts) {
        return ValueOrThrow(
            TokenBestFitPipeline(c.corpus, plan.plan, pad_token,
                                 TokenFieldSet{position_ids, document_ids, document_starts}));
      },
      py::arg("corpus"), py::arg("plan"), py::arg("pad_token"), py::arg("position_ids") = true,
      py::arg("document_ids") = true, py::arg("document_starts") = true);
  m.def(
      "token_mixture_pipeline",
      [](const std::vector<Pipeline>& sources, const std::vector<double>& weights, uint64_t window,
         uint64_t num_samples, bool shuffle, uint64_t seed, uint64_t start,
         const std::vector<uint64_t>& counts) {
        return ValueOrThrow(TokenMixturePipeline(
            sources, MixtureOptions(weights, window, num_samples, shuffle, seed, start, counts)));
      },
      py::arg("sources"), py::arg("weights"), py::arg("window"), py::arg("num_samples"),
      py::arg("shuffle"), py::arg("seed"), py::arg("start") = 0,
      py::arg("counts") = std::vector<uint64_t>());
  m.def(
      "token_mixture_counts",
      [](const std::vector<uint64_t>& source_samples, const std::vector<double>& weights,
         uint64_t window, uint64_t num_samples, uint64_t start, const std::vector<uint64_t>& counts,
         uint64_t position) {
        Result<std::vector<uint64_t>> r = [&]() {
          py::gil_scoped_release release;
          return TokenMixtureCounts(
              source_samples, MixtureOptions(weights, window, num_samples, false, 0, start, counts),
              position);
        }();
        return ValueOrThrow(std::move(r));
      },
      py::arg("source_samples"), py::arg("weights"), py::arg("window"), py::arg("num_samples"),
      py::arg("start"), py::arg("counts"), py::arg("position"));
  py::class_<PyTokenShardWriter>(m, "TokenShardWriter")
      .def(py::init([](const std::string& dir, uint64_t vocab_size, uint64_t shard_tokens,
                       const std::string& tokenizer_json, const std::string& source_json) {
             TokenShardWriterOptions o;
             o.vocab_size = vocab_size;
             o.shard_tokens = shard_tokens;
             o.tokenizer_json = tokenizer_json;
             o.source_json = source_json;
             return PyTokenShardWriter{ValueOrThrow(TokenShardWriter::Create(dir, o))};
           }),
           py::arg("dir"), py::arg("vocab_size"), py::arg("shard_tokens"),
           py::arg("tokenizer_json"), py::arg("source_json"))
      .def("add_documents", &PyTokenShardWriter::AddDocuments, py::arg("ids"), py::arg("lengths"))
      .def("finish",
           [](PyTokenShardWriter& w) {
             Status s;
             {
               py::gil_scoped_release release;
               s = w.writer->Finish();
             }
             ThrowIfError(s);
           })
      .def_property_readonly("num_tokens",
                             [](const PyTokenShardWriter& w) { return w.writer->num_tokens(); })
      .def_property_readonly("num_documents",
                             [](const PyTokenShardWriter& w) { return w.writer->num_documents(); })
      .def_property_readonly("dtype", [](const PyTokenShardWriter& w) {
        return std::string(TokenDTypeName(w.writer->dtype()));
      });
  // cu_seqlens of a batch from the workers' per-row document starts: one
  // pass over the starts (not the tokens), without the GIL.
  m.def(
      "token_cu_seqlens",
      [](const py::array_t<int32_t, py::array::c_style>& starts,
         const py::array_t<int32_t, py::array::c_style>& counts) {
        if (starts.ndim() != 2 || counts.ndim() != 1 || counts.shape(0) != starts.shape(0))
          throw py::value_error(
              "token_cu_seqlens takes document_starts [batch, seq_len] and "
              "num_documents [batch]");
        std::vector<int32_t> out;
        Status s;
        {
          py::gil_scoped_release release;
          s = TokenCuSeqlens(starts.data(), counts.data(), static_cast<uint64_t>(starts.shape(0)),
                             static_cast<uint64_t>(starts.shape(1)), &out);
        }
        ThrowIfError(s);
        py::array_t<int32_t> a(static_cast<py::ssize_t>(out.size()));
        std::copy(out.begin(), out.end(), a.mutable_data());
        return a;
      },
      py::arg("document_starts"), py::arg("num_documents"));
  m.def("num_token_windows", &NumTokenWindows, py::arg("num_tokens"), py::arg("seq_len"));
  m.def("token_window_tail_tokens", &TokenWindowTailTokens, py::arg("num_tokens"),
        py::arg("seq_len"));
}

}  // namespace feedline::python
