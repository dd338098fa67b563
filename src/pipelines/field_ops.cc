// The ops of samples with several fields (docs/fields.md): each fills one
// batch field from the sample's parts, checking that the content is what
// the field's kind says.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "feedline/pipeline_builder.h"
#include "src/core/detail/fingerprint.h"
#include "src/pipelines/npy.h"

namespace feedline {
namespace {

std::string Quoted(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

// The first of `parts` the sample has, or null.
const Sample::Part* Find(const Sample& s, const std::vector<std::string>& parts) {
  for (const std::string& name : parts) {
    if (const Sample::Part* p = s.FindPart(name)) return p;
  }
  return nullptr;
}

Status Missing(const Sample& s, const FieldRequest& r) {
  std::string has;
  for (const Sample::Part& p : s.parts()) has += (has.empty() ? "'" : ", '") + p.name + "'";
  return NotFoundError("field '" + r.name + "' (" + std::string(FieldKindName(r.kind)) +
                       "): the sample has no " + Quoted(r.parts) + " part (it has " +
                       (has.empty() ? std::string("none") : has) + ")");
}

Status Bad(const FieldRequest& r, const Sample::Part& p, const std::string& why) {
  return DataLossError("field '" + r.name + "' (" + std::string(FieldKindName(r.kind)) +
                       "), part '" + p.name + "': " + why);
}

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
// Returns the offset of the first invalid byte, or npos.
size_t FirstInvalidUtf8(std::span<const uint8_t> b) {
  size_t i = 0;
  while (i < b.size()) {
    const uint8_t c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= b.size() || (b[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

class FieldImageOp final : public SampleOp {
 public:
  FieldImageOp(FieldRequest r, size_t field, bool source_image)
      : r_(std::move(r)),
        inner_(MakeImageOp(r_.transform, field)),
        source_image_(source_image),
        name_(r_.name == "image" ? std::string(inner_->name())
                                 : std::string(inner_->name()) + ":" + r_.name) {}
  std::string_view name() const override { return name_; }
  std::unique_ptr<OpState> NewState() const override { return inner_->NewState(); }
  uint64_t ConfigFingerprint() const override {
    return core::detail::Fingerprint()
        .Add(inner_->ConfigFingerprint())
        .Add(FieldRequestFingerprint(r_))
        .value();
  }
  bool ChargesScratch() const override { return inner_->ChargesScratch(); }
  Status Apply(Sample& s, OpState* state) const override {
    FEEDLINE_RETURN_IF_ERROR(SelectImagePart(s, r_, source_image_));
    return inner_->Apply(s, state);
  }

 private:
  const FieldRequest r_;
  const std::shared_ptr<const SampleOp> inner_;
  const bool source_image_;
  const std::string name_;  // "decode_transform", or "decode_transform:<field>" for other names
};

Status ParseLabel(const FieldRequest& r, const Sample::Part& p, int64_t* out) {
  std::string text(reinterpret_cast<const char*>(p.data.data()), p.data.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  if (text.empty() || text.size() > 24) {
    return Bad(r, p,
               "does not hold an integer label (" + std::to_string(p.data.size()) + " bytes)");
  }
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || errno == ERANGE) {
    return Bad(r, p, "does not hold an integer label ('" + text + "')");
  }
  *out = v;
  return Status::OK();
}

class FieldOp final : public SampleOp {
 public:
  FieldOp(FieldRequest r, size_t field, bool source_labels)
      : r_(std::move(r)), field_(field), source_labels_(source_labels) {}
  uint64_t ConfigFingerprint() const override { return FieldRequestFingerprint(r_); }
  std::string_view name() const override { return name_; }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const Sample::Part* p = Find(s, r_.parts);
    if (r_.kind == FieldRequest::Kind::kLabel) {
      if (p == nullptr) {
        if (!source_labels_) return Missing(s, r_);
        *s.output_as<int64_t>(field_) = s.label;
        return Status::OK();
      }
      return ParseLabel(r_, *p, s.output_as<int64_t>(field_));
    }
    if (p == nullptr) return Missing(s, r_);
    switch (r_.kind) {
      case FieldRequest::Kind::kText: {
        const size_t bad = FirstInvalidUtf8(p->data);
        if (bad != std::string_view::npos) {
          return Bad(r_, *p,
                     "is not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
        }
        break;
      }
      case FieldRequest::Kind::kJson: {
        // JSON text holds no raw NUL; the parser would stop at one and accept
        // whatever came before it.
        const auto nul = std::find(p->data.begin(), p->data.end(), uint8_t{0});
        if (nul != p->data.end()) {
          return Bad(r_, *p,
                     "is not valid JSON (a NUL byte at offset " +
                         std::to_string(nul - p->data.begin()) + ")");
        }
        if (!nlohmann::json::accept(p->data.begin(), p->data.end())) {
          return Bad(r_, *p, "is not valid JSON (" + std::to_string(p->data.size()) + " bytes)");
        }
        break;
      }
      case FieldRequest::Kind::kNdarray: {
        Result<pipelines::NpyHeader> h = pipelines::ParseNpy(p->data);
        if (!h.ok()) return Bad(r_, *p, std::string(h.status().message()));
        break;
      }
      default: break;
    }
    s.bytes_output(field_).assign(p->data.begin(), p->data.end());
    return Status::OK();
  }

 private:
  const FieldRequest r_;
  const size_t field_;
  const bool source_labels_;
  // "field:<name>": metrics and errors say which field's op ran.
  const std::string name_ = "field:" + r_.name;
};

}  // namespace

std::vector<std::string> DefaultParts(FieldRequest::Kind kind) {
  switch (kind) {
    case FieldRequest::Kind::kImage:
      return {"jpg", "jpeg", "png", "webp", "bmp", "gif",
              "tif", "tiff", "ppm", "pgm",  "pbm", "pnm"};
    case FieldRequest::Kind::kLabel: return {"cls"};
    case FieldRequest::Kind::kText: return {"txt"};
    case FieldRequest::Kind::kJson: return {"json"};
    case FieldRequest::Kind::kNdarray: return {"npy"};
    case FieldRequest::Kind::kBytes:
    case FieldRequest::Kind::kOp: return {};
  }
  return {};
}

FieldRequest::Kind KindOfPart(std::string_view part) {
  for (const std::string& e : DefaultParts(FieldRequest::Kind::kImage)) {
    if (part == e) return FieldRequest::Kind::kImage;
  }
  if (part == "cls") return FieldRequest::Kind::kLabel;
  if (part == "txt") return FieldRequest::Kind::kText;
  if (part == "json") return FieldRequest::Kind::kJson;
  if (part == "npy") return FieldRequest::Kind::kNdarray;
  return FieldRequest::Kind::kBytes;
}

std::string_view FieldKindName(FieldRequest::Kind kind) {
  switch (kind) {
    case FieldRequest::Kind::kImage: return "image";
    case FieldRequest::Kind::kLabel: return "label";
    case FieldRequest::Kind::kText: return "text";
    case FieldRequest::Kind::kJson: return "json";
    case FieldRequest::Kind::kNdarray: return "ndarray";
    case FieldRequest::Kind::kBytes: return "bytes";
    case FieldRequest::Kind::kOp: return "op";
  }
  return "?";
}

FieldSpec FieldSpecOf(const FieldRequest& request) {
  switch (request.kind) {
    case FieldRequest::Kind::kImage: return ImageField(request.transform, request.name);
    case FieldRequest::Kind::kLabel: return {request.name, DType::kInt64, {}};
    default: return FieldSpec::Bytes(request.name);
  }
}

uint64_t FieldRequestFingerprint(const FieldRequest& r) {
  core::detail::Fingerprint fp;
  fp.Add(std::string_view("field")).Add(std::string_view(r.name)).Add(uint64_t(r.kind));
  for (const std::string& p : r.parts.empty() ? DefaultParts(r.kind) : r.parts) {
    fp.Add(std::string_view(p));
  }
  return fp.value();
}

Status SelectImagePart(Sample& s, const FieldRequest& request, bool source_has_labels) {
  static const std::vector<std::string> kDefault = DefaultParts(FieldRequest::Kind::kImage);
  if (request.parts.empty()) {
    FieldRequest r = request;  // for the message only
    r.parts = kDefault;
    return SelectImagePart(s, r, source_has_labels);
  }
  if (const Sample::Part* p = Find(s, request.parts)) {
    s.set_data(p->data);
  } else if (!source_has_labels) {
    return Missing(s, request);
  }
  return Status::OK();
}

std::shared_ptr<const SampleOp> MakeFieldOp(const FieldRequest& request, size_t field,
                                            bool source_has_labels) {
  FieldRequest r = request;
  if (r.parts.empty()) r.parts = DefaultParts(r.kind);
  if (r.kind == FieldRequest::Kind::kImage) {
    return std::make_shared<FieldImageOp>(std::move(r), field, source_has_labels);
  }
  return std::make_shared<FieldOp>(std::move(r), field, source_has_labels);
}

}  // namespace feedline
