#include "feedline/list_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "feedline/file.h"
#include "src/core/detail/fingerprint.h"

namespace feedline {
namespace {

// A part file larger than this is refused before any allocation (as image
// folders do).
constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

Status ReadFileText(const std::string& path, const HttpOptions& http, std::string* out) {
  FEEDLINE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenFile(path, http));
  if (file->size() >= std::numeric_limits<uint32_t>::max()) {
    return InvalidArgumentError("list '" + path + "' is over 4 GiB (" +
                                std::to_string(file->size()) + " bytes)");
  }
  out->resize(file->size());
  return file->Read(0, out->size(), out->data());
}

Status BadLine(const std::string& list, uint64_t line, const std::string& why) {
  return InvalidArgumentError("list '" + list + "' line " + std::to_string(line) + ": " + why);
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool ListDataset::Has(uint64_t r, size_t c) const {
  return cells_[r * columns_.size() + c].offset != Cell::kAbsent;
}

std::string_view ListDataset::Value(uint64_t r, size_t c) const {
  const Cell& cell = cells_[r * columns_.size() + c];
  if (cell.offset == Cell::kAbsent) return {};
  return std::string_view(arena_).substr(cell.offset, cell.size);
}

std::string ListDataset::FilePath(uint64_t r, size_t c) const {
  std::string value(Value(r, c));
  if (value.empty() || value.front() == '/' || IsRemote(value)) return value;
  return base_ + value;
}

Result<std::shared_ptr<const ListDataset>> ListDataset::Open(const std::string& path,
                                                             const ListOptions& options) {
  const bool jsonl = EndsWith(path, ".jsonl");
  if (!jsonl && !EndsWith(path, ".csv")) {
    return InvalidArgumentError("list '" + path + "': a list is a .csv or a .jsonl file");
  }
  std::string text;
  FEEDLINE_RETURN_IF_ERROR(ReadFileText(path, options.http, &text).WithContext("list"));
  // A list is text. A NUL byte would end a JSON line early in the parser (the
  // rest of the line silently dropped), so it is refused wherever it stands.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const uint64_t line =
        1 + static_cast<uint64_t>(
                std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n'));
    return BadLine(path, line,
                   "a NUL byte at offset " + std::to_string(nul) + " (a list is a text file)");
  }
  auto ds = std::shared_ptr<ListDataset>(new ListDataset());
  ds->path_ = path;
  ds->http_ = options.http;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  ds->base_ = parent.empty() ? std::string() : parent.string() + "/";
  ds->arena_.reserve(text.size());
  auto add = [&ds](std::string_view v) {
    Cell cell{static_cast<uint32_t>(ds->arena_.size()), static_cast<uint32_t>(v.size())};
    ds->arena_.append(v);
    ds->cells_.push_back(cell);
  };

  if (jsonl) {
    uint64_t line = 0;
    size_t pos = 0;
    std::vector<std::pair<uint64_t, nlohmann::json>> parsed;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      ++line;
      std::string_view l(text.data() + pos, end - pos);
      pos = end + 1;
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      if (l.find_first_not_of(" \t") == std::string_view::npos) continue;
      nlohmann::json j = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return BadLine(path, line, "not valid JSON");
      if (!j.is_object()) return BadLine(path, line, "expected a JSON object per line");
      for (const auto& [key, value] : j.items()) {
        bool known = false;
        for (const std::string& c : ds->columns_) known |= c == key;
        if (!known) ds->columns_.push_back(key);
      }
      parsed.emplace_back(line, std::move(j));
    }
    for (const auto& [l, j] : parsed) {
      ds->lines_.push_back(l);
      for (const std::string& c : ds->columns_) {
        const auto it = j.find(c);
        if (it == j.end() || it->is_null()) {
          ds->cells_.push_back({Cell::kAbsent, 0});
        } else if (it->is_string()) {
          add(it->get_ref<const std::string&>());
        } else {
          add(it->dump());
        }
      }
    }
    if (!parsed.empty() && ds->columns_.empty()) {
      return InvalidArgumentError("list '" + path + "': its " + std::to_string(parsed.size()) +
                                  " rows are empty objects (no column anywhere)");
    }
    ds->rows_ = parsed.size();
  } else {
    // RFC 4180, one pass: cells are unquoted into the arena as they end.
    std::string cell;
    std::vector<std::string> header;
    bool in_header = true, quoted = false, cell_was_quoted = false;
    uint64_t line = 1, row_line = 1;
    size_t cells_in_row = 0;
    auto end_cell = [&]() -> Status {
      if (in_header) {
        header.push_back(cell);
      } else {
        if (cells_in_row >= ds->columns_.size()) {
          return BadLine(path, row_line,
                         "more cells than the header's " + std::to_string(ds->columns_.size()));
        }
        add(cell);
      }
      ++cells_in_row;
      cell.clear();
      cell_was_quoted = false;
      return Status::OK();
    };
    auto end_row = [&]() -> Status {
      if (in_header) {
        if (header.empty() || (header.size() == 1 && header[0].empty())) {
          return BadLine(path, row_line, "the header row names no columns");
        }
        ds->columns_ = header;
        in_header = false;
      } else {
        if (cells_in_row == 1 && ds->cells_.back().size == 0 && ds->columns_.size() > 1) {
          ds->cells_.pop_back();  // a blank line
        } else if (cells_in_row != ds->columns_.size()) {
          return BadLine(path, row_line,
                         std::to_string(cells_in_row) + " cells where the header has " +
                             std::to_string(ds->columns_.size()));
        } else {
          ds->lines_.push_back(row_line);
          ++ds->rows_;
        }
      }
      cells_in_row = 0;
      row_line = line;
      return Status::OK();
    };
    for (size_t i = 0; i < text.size(); ++i) {
      const char ch = text[i];
      if (quoted) {
        if (ch == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            cell += '"';
            ++i;
          } else {
            quoted = false;
          }
        } else {
          if (ch == '\n') ++line;
          cell += ch;
        }
        continue;
      }
      if (ch == '"') {
        if (!cell.empty() || cell_was_quoted) {
          return BadLine(path, line, "a quote inside an unquoted cell (quote the whole cell)");
        }
        quoted = cell_was_quoted = true;
      } else if (ch == ',') {
        FEEDLINE_RETURN_IF_ERROR(end_cell());
      } else if (ch == '\n' || ch == '\r') {
        if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        ++line;
        FEEDLINE_RETURN_IF_ERROR(end_cell());
        FEEDLINE_RETURN_IF_ERROR(end_row());
      } else {
        if (cell_was_quoted) {
          return BadLine(path, line, "text after a quoted cell's closing quote");
        }
        cell += ch;
      }
    }
    if (quoted) return BadLine(path, row_line, "a quoted cell is never closed");
    if (!cell.empty() || cells_in_row > 0 || cell_was_quoted) {
      FEEDLINE_RETURN_IF_ERROR(end_cell());
      FEEDLINE_RETURN_IF_ERROR(end_row());
    }
    if (in_header) return InvalidArgumentError("list '" + path + "' is empty (no header row)");
  }
  FEEDLINE_RETURN_IF_ERROR(ds->Finish(options));
  return std::shared_ptr<const ListDataset>(std::move(ds));
}

Status ListDataset::Finish(const ListOptions& options) {
  if (rows_ == 0) return InvalidArgumentError("list '" + path_ + "' holds no rows");
  is_file_.assign(columns_.size(), false);
  auto column = [this](std::string_view name) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c] == name) return c;
    }
    return ~size_t{0};
  };
  auto names = [this] {
    std::string s;
    for (const std::string& c : columns_) s += (s.empty() ? "'" : ", '") + c + "'";
    return s;
  };
  if (arena_.size() >= Cell::kAbsent) {
    return InvalidArgumentError("list '" + path_ + "': its values are over 4 GiB");
  }
  // A file column the list does not have is no error here: a field may name
  // alternatives ("jpg;png"), and the field's op names what a row lacks.
  for (const std::string& f : options.file_columns) {
    const size_t c = column(f);
    if (c != ~size_t{0}) is_file_[c] = true;
  }
  if (options.path_label) {
    const size_t c = column("path");
    if (c == ~size_t{0}) {
      return InvalidArgumentError("list '" + path_ + "' has no \"path\" column (its columns: " +
                                  names() + "); with fields, any columns may be used");
    }
    is_file_[c] = true;
  }
  key_column_ = column("key");
  if (options.path_label) {
    path_column_ = column("path");
    const size_t label = column("label");
    labels_.assign(rows_, -1);
    for (uint64_t r = 0; r < rows_; ++r) {
      if (!Has(r, path_column_) || Value(r, path_column_).empty()) {
        return BadLine(path_, lines_[r], "no \"path\"");
      }
      if (label == ~size_t{0} || !Has(r, label)) continue;
      const std::string v(Value(r, label));
      char* end = nullptr;
      errno = 0;
      labels_[r] = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno == ERANGE) {
        return BadLine(path_, lines_[r], "label '" + v + "' is not an integer in the int64 range");
      }
    }
  }
  return Status::OK();
}

Status ListDataset::ReadParts(uint64_t r, Sample& s) const {
  // File columns first, appended to scratch; the spans are taken once
  // scratch no longer grows.
  std::vector<uint8_t>& buf = s.scratch();
  buf.clear();
  struct Range {
    size_t column, begin, size;
  };
  Range ranges[64];
  size_t n = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (!is_file_[c] || !Has(r, c)) continue;
    const size_t begin = buf.size();
    FEEDLINE_RETURN_IF_ERROR(ReadWholeFile(FilePath(r, c), kMaxFileBytes, &buf, http_)
                                 .WithContext("column '" + columns_[c] + "'"));
    const size_t size = buf.size() - begin;
    if (n == std::size(ranges)) return InvalidArgumentError("more than 64 file columns");
    ranges[n++] = {c, begin, size};
  }
  size_t next = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (!Has(r, c)) continue;
    if (is_file_[c]) {
      const Range& range = ranges[next++];
      s.AddPart(columns_[c], std::span<const uint8_t>(buf).subspan(range.begin, range.size));
    } else {
      const std::string_view v = Value(r, c);
      s.AddPart(columns_[c], {reinterpret_cast<const uint8_t*>(v.data()), v.size()});
    }
  }
  return Status::OK();
}

Status ListDataset::ReadPathLabel(uint64_t r, Sample& s) const {
  s.scratch().clear();
  FEEDLINE_RETURN_IF_ERROR(
      ReadWholeFile(FilePath(r, path_column_), kMaxFileBytes, &s.scratch(), http_));
  s.set_data(s.scratch());
  s.label = labels_[r];
  return Status::OK();
}

std::string ListDataset::Key(uint64_t r) const {
  if (key_column_ != ~size_t{0} && Has(r, key_column_)) return std::string(Value(r, key_column_));
  return "line " + std::to_string(lines_[r]);
}

uint64_t ListDataset::Fingerprint() const {
  core::detail::Fingerprint fp;
  fp.Add(std::string_view("list"));
  for (const std::string& c : columns_) fp.Add(c);
  fp.Add(rows_).Add(std::string_view(arena_));
  return fp.value();
}

namespace {

class ListReadOp final : public SampleOp {
 public:
  ListReadOp(std::shared_ptr<const ListDataset> ds, bool parts)
      : ds_(std::move(ds)), parts_(parts), fingerprint_(ds_->Fingerprint()) {}
  std::string_view name() const override { return "read"; }
  uint64_t DataFingerprint() const override { return fingerprint_; }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const uint64_t r = s.id();
    s.location().file = ds_->path();
    s.location().record = static_cast<int64_t>(r);
    s.location().key = ds_->Key(r);
    return parts_ ? ds_->ReadParts(r, s) : ds_->ReadPathLabel(r, s);
  }

 private:
  std::shared_ptr<const ListDataset> ds_;
  const bool parts_;
  const uint64_t fingerprint_;
};

}  // namespace

std::shared_ptr<const SampleOp> MakeListReadOp(std::shared_ptr<const ListDataset> dataset,
                                               bool parts) {
  return std::make_shared<ListReadOp>(std::move(dataset), parts);
}

}  // namespace feedline
