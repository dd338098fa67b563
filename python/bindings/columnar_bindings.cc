// Parquet / Arrow IPC datasets and Arrow C streams for the Python face
// (docs/columnar.md): the schema the fields are resolved against, and a
// pyarrow Table or datasets.Dataset taken over through __arrow_c_stream__.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "feedline/columnar.h"
#include "feedline/file.h"
#include "python/bindings/errors.h"

namespace feedline::python {

namespace py = pybind11;

namespace {

std::vector<std::tuple<std::string, std::string, std::string>> Columns(
    const std::vector<ColumnInfo>& cols) {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const ColumnInfo& c : cols) out.emplace_back(c.name, c.type, ColumnKindName(c.kind));
  return out;
}

}  // namespace

void RegisterColumnar(py::module_& m) {
  // One file opened once (local, URL or s3:// object) for ranged reads from
  // Python: pyarrow's Parquet reader over a bucket (feedline.pack_text),
  // through our client, its retries and statistics.
  py::class_<RandomAccessFile>(m, "OpenedFile")
      .def(py::init([](const std::string& name, const HttpOptions& http) {
             Result<std::unique_ptr<RandomAccessFile>> f = [&] {
               py::gil_scoped_release release;
               return OpenFile(name, http);
             }();
             return ValueOrThrow(std::move(f));
           }),
           py::arg("name"), py::arg("http") = HttpOptions())
      .def_property_readonly("size", &RandomAccessFile::size)
      .def_property_readonly("name", &RandomAccessFile::name)
      .def(
          "pread",
          [](const RandomAccessFile& f, uint64_t offset, uint64_t n) {
            const uint64_t len = offset >= f.size() ? 0 : std::min<uint64_t>(n, f.size() - offset);
            std::string out(len, '\0');
            Status st;
            {
              py::gil_scoped_release release;
              if (len > 0) st = f.Read(offset, len, out.data());
            }
            ThrowIfError(st);
            return py::bytes(out);
          },
          py::arg("offset"), py::arg("n"), "Up to n bytes at offset (fewer at the end).");

  m.def("columnar_supported", &ColumnarSupported);
  m.def("columnar_library", &ColumnarLibraryVersion);

  py::class_<ColumnarOptions>(m, "ColumnarOptions")
      .def(py::init<>())
      .def_readwrite("columns", &ColumnarOptions::columns)
      .def_readwrite("parts", &ColumnarOptions::parts)
      .def_readwrite("http", &ColumnarOptions::http)
      .def_readwrite("cache_bytes", &ColumnarOptions::cache_bytes)
      .def_readwrite("read_ahead_threads", &ColumnarOptions::read_ahead_threads)
      .def_readwrite("shuffle_window", &ColumnarOptions::shuffle_window);

  py::class_<ColumnarDataset, std::shared_ptr<ColumnarDataset>>(m, "ColumnarDataset")
      .def_property_readonly("files", &ColumnarDataset::files)
      .def_property_readonly("num_rows", &ColumnarDataset::num_rows)
      .def_property_readonly("schema", [](const ColumnarDataset& d) { return Columns(d.schema()); })
      .def_property_readonly("columns",
                             [](const ColumnarDataset& d) { return Columns(d.columns()); })
      .def_property_readonly("group_sizes", &ColumnarDataset::group_sizes)
      .def_property_readonly("shuffle_window", &ColumnarDataset::shuffle_window)
      .def_property_readonly("classes", &ColumnarDataset::classes);

  // The files `path` names (a file, a folder, a pattern, an s3:// prefix).
  m.def(
      "columnar_files",
      [](const std::string& path, const HttpOptions& http) {
        Result<std::vector<std::string>> r = [&] {
          py::gil_scoped_release release;
          return ColumnarDataset::ListFiles(path, http);
        }();
        return ValueOrThrow(std::move(r));
      },
      py::arg("path"), py::arg("http") = HttpOptions());
  m.def(
      "columnar_open",
      [](const std::vector<std::string>& files, const ColumnarOptions& options) {
        Result<std::shared_ptr<const ColumnarDataset>> r = [&] {
          py::gil_scoped_release release;
          return ColumnarDataset::Open(files, options);
        }();
        return std::const_pointer_cast<ColumnarDataset>(ValueOrThrow(std::move(r)));
      },
      py::arg("files"), py::arg("options") = ColumnarOptions());
  // `capsule`: what obj.__arrow_c_stream__() returns (a PyCapsule named
  // "arrow_array_stream"); the stream is taken over and released.
  m.def(
      "columnar_from_stream",
      [](py::capsule capsule, const std::string& name, const ColumnarOptions& options) {
        if (std::string(capsule.name() == nullptr ? "" : capsule.name()) != "arrow_array_stream") {
          throw py::type_error(
              "expected the PyCapsule of __arrow_c_stream__() (named 'arrow_array_stream')");
        }
        auto* stream = capsule.get_pointer<ArrowArrayStream>();
        Result<std::shared_ptr<const ColumnarDataset>> r = [&] {
          py::gil_scoped_release release;
          return ColumnarDataset::FromArrowStream(stream, name, options);
        }();
        return std::const_pointer_cast<ColumnarDataset>(ValueOrThrow(std::move(r)));
      },
      py::arg("capsule"), py::arg("name"), py::arg("options") = ColumnarOptions());
}

}  // namespace feedline::python
