// Binds the token readers and the windows recipe (feedline/tokens.h). Type
// conversion only: which sources, dtype and seq_len come from
// feedline.TokenLoader; the pipeline goes to _C.Loader like any other.
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

py::list Sources(const PyTokenCorpus& c) {
  py::list out;
  for (size_t i = 0; i < c.corpus->num_sources(); ++i) {
    const TokenSource& s = c.corpus->source(i);
    out.append(py::dict(
        py::arg("path") = PyFsName(s.path()),
        py::arg("kind") = s.kind() == TokenSource::Kind::kFlat ? "flat" : "megatron",
        py::arg("dtype") = PyText(TokenDTypeName(s.dtype())),
        py::arg("num_tokens") = s.num_tokens(), py::arg("offset") = c.corpus->source_offset(i)));
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
  m.def("num_token_windows", &NumTokenWindows, py::arg("num_tokens"), py::arg("seq_len"));
  m.def("token_window_tail_tokens", &TokenWindowTailTokens, py::arg("num_tokens"),
        py::arg("seq_len"));
}

}  // namespace feedline::python
