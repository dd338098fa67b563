// Binds the token readers, the token-shard writer and the windows recipe
// (feedline/tokens.h). Type conversion only: which sources, dtype and seq_len
// come from feedline.TokenLoader, the documents from feedline.pack_text; the
// pipeline goes to _C.Loader like any other.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

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
                         std::optional<int64_t> eos_token) {
  Result<std::shared_ptr<const TokenCorpus>> corpus = [&]() {
    py::gil_scoped_release release;
    Result<TokenDType> d = ParseTokenDType(dtype);
    if (!d.ok()) return Result<std::shared_ptr<const TokenCorpus>>(d.status());
    TokenSourceOptions o;
    o.flat_dtype = *d;
    o.eos_token = eos_token;
    return TokenCorpus::Open(paths, o);
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
        py::arg("eos_token") = py::none());
  m.def(
      "token_window_pipeline",
      [](const PyTokenCorpus& c, uint64_t seq_len) {
        return ValueOrThrow(TokenWindowPipeline(c.corpus, seq_len));
      },
      py::arg("corpus"), py::arg("seq_len"));
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
  m.def("num_token_windows", &NumTokenWindows, py::arg("num_tokens"), py::arg("seq_len"));
  m.def("token_window_tail_tokens", &TokenWindowTailTokens, py::arg("num_tokens"),
        py::arg("seq_len"));
}

}  // namespace feedline::python
