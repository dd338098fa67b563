// TokenCorpus: sources concatenated in order, each starting a document.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "feedline/tokens.h"
#include "src/core/detail/endian.h"

namespace feedline {

Result<std::shared_ptr<const TokenCorpus>> TokenCorpus::Open(const std::vector<std::string>& paths,
                                                             const TokenSourceOptions& options) {
  if (paths.empty()) return InvalidArgumentError("a token corpus needs at least one source");
  std::vector<std::shared_ptr<const TokenSource>> sources;
  for (const std::string& path : paths) {
    FEEDLINE_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> s, OpenTokenSource(path, options));
    sources.push_back(std::move(s));
  }
  return std::make_shared<const TokenCorpus>(std::move(sources));
}

TokenCorpus::TokenCorpus(std::vector<std::shared_ptr<const TokenSource>> sources)
    : sources_(std::move(sources)) {
  offsets_.push_back(0);
  for (const auto& s : sources_) offsets_.push_back(offsets_.back() + s->num_tokens());
}

uint64_t TokenCorpus::CountDocuments() const {
  uint64_t n = 0;
  for (const auto& s : sources_) n += s->CountDocuments();
  return n;
}

size_t TokenCorpus::SourceOf(uint64_t t) const {
  // The last offset <= t among the sources' first tokens.
  auto it = std::upper_bound(offsets_.begin(), offsets_.end() - 1, t);
  return static_cast<size_t>(it - offsets_.begin()) - 1;
}

void TokenCorpus::DocumentStarts(uint64_t begin, uint64_t end, std::vector<uint64_t>* out) const {
  end = std::min(end, num_tokens());
  if (begin >= end) return;
  std::vector<uint64_t> local;
  for (size_t i = SourceOf(begin); i < sources_.size() && offsets_[i] < end; ++i) {
    const uint64_t first = offsets_[i];
    local.clear();
    sources_[i]->DocumentStarts(std::max(begin, first) - first,
                                std::min(end, offsets_[i + 1]) - first, &local);
    for (uint64_t s : local) out->push_back(first + s);
  }
}

Status TokenCorpus::Read(uint64_t begin, uint64_t end, int64_t* out) const {
  if (begin > end || end > num_tokens()) {
    return OutOfRangeError("token corpus: tokens [" + std::to_string(begin) + ", " +
                           std::to_string(end) + ") past its " + std::to_string(num_tokens()) +
                           " tokens");
  }
  for (size_t i = begin < end ? SourceOf(begin) : sources_.size();
       i < sources_.size() && offsets_[i] < end; ++i) {
    const uint64_t first = offsets_[i];
    const uint64_t a = std::max(begin, first), b = std::min(end, offsets_[i + 1]);
    FEEDLINE_RETURN_IF_ERROR(sources_[i]->Read(a - first, b - first, out + (a - begin)));
  }
  return Status::OK();
}

uint64_t TokenCorpus::Fingerprint() const {
  std::string s = "corpus:";
  for (const auto& src : sources_) core::detail::PutFixed64(&s, src->Fingerprint());
  return core::detail::Fnv1a64(s.data(), s.size());
}

}  // namespace feedline
