// TokenLoader (feedline/token_loader.h): sources -> corpora -> token
// pipelines -> (mixture) -> Loader, and the resume state that carries a
// mixture's schedule segment. The state blob (little-endian):
//   "FLTKLDR" 0x01          magic and format version (8 bytes)
//   u64 n, n bytes          the engine's state (Loader::SaveState)
//   u64 k                   mixture groups (0: no mixture)
//   k x u64                 the groups' data fingerprints, in order
//   u64                     the segment's start (a global sample index)
//   k x u64                 each group's draws before the start
//   k x u64                 the segment's weights (IEEE-754 double bits)
//   u64                     FNV-1a 64 of everything before it
#include "feedline/token_loader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include "src/core/detail/endian.h"

namespace feedline {

namespace {

using core::detail::DecodeFixed64;
using core::detail::Fnv1a64;
using core::detail::PutFixed64;

constexpr std::string_view kMagic("FLTKLDR\x01", 8);

// A mixture's schedule segment (TokenMixtureOptions' start, counts, weights).
struct Segment {
  uint64_t start = 0;
  std::vector<uint64_t> counts;
  std::vector<double> weights;
  bool operator==(const Segment&) const = default;
};

struct ParsedState {
  std::string engine;
  bool mixture = false;
  std::vector<uint64_t> fingerprints;
  Segment segment;
};

Result<ParsedState> ParseState(std::string_view blob) {
  if (blob.size() < kMagic.size() || blob.substr(0, 7) != kMagic.substr(0, 7)) {
    return InvalidArgumentError("not a feedline TokenLoader state (no FLTKLDR magic)");
  }
  if (blob[7] != kMagic[7]) {
    return InvalidArgumentError("TokenLoader state format " +
                                std::to_string(static_cast<uint8_t>(blob[7])) +
                                ", this build reads format 1");
  }
  if (blob.size() < kMagic.size() + 8 + 8 + 8) {
    return DataLossError("TokenLoader state truncated: " + std::to_string(blob.size()) + " bytes");
  }
  const size_t body = blob.size() - 8;
  if (DecodeFixed64(blob.data() + body) != Fnv1a64(blob.data(), body)) {
    return DataLossError("TokenLoader state corrupt: its checksum does not match");
  }
  size_t at = kMagic.size();
  auto u64 = [&](uint64_t* v) {
    if (body - at < 8) return false;
    *v = DecodeFixed64(blob.data() + at);
    at += 8;
    return true;
  };
  ParsedState s;
  uint64_t n = 0, k = 0;
  if (!u64(&n) || n > body - at) return DataLossError("TokenLoader state: bad engine state length");
  s.engine.assign(blob.data() + at, n);
  at += n;
  if (!u64(&k) || k > (body - at) / 8) return DataLossError("TokenLoader state: bad group count");
  s.mixture = k > 0;
  if (s.mixture) {
    s.fingerprints.resize(k);
    s.segment.counts.resize(k);
    s.segment.weights.resize(k);
    bool ok = true;
    for (uint64_t& f : s.fingerprints) ok = ok && u64(&f);
    ok = ok && u64(&s.segment.start);
    for (uint64_t& c : s.segment.counts) ok = ok && u64(&c);
    for (double& w : s.segment.weights) {
      uint64_t bits = 0;
      ok = ok && u64(&bits);
      w = std::bit_cast<double>(bits);
    }
    if (!ok) return DataLossError("TokenLoader state: the mixture segment is truncated");
  }
  if (at != body) {
    return DataLossError("TokenLoader state: " + std::to_string(body - at) + " bytes left over");
  }
  return s;
}

std::string Join(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

class TokenLoader::Impl {
 public:
  TokenLoaderOptions options;
  std::vector<std::shared_ptr<const TokenCorpus>> corpora;
  std::vector<std::shared_ptr<const BestFitPlan>> plans;  // kBestFit: one per corpus
  std::vector<Pipeline> pipelines;                        // one per group
  LoaderOptions engine;                                   // options.loader as the engine runs it
  uint64_t mixture_samples = 0;
  Segment segment;  // in effect (mixture only)
  std::unique_ptr<Loader> loader;
  size_t starts_field = 0, counts_field = 0;  // document_starts / num_documents
  size_t field_index[4] = {};                 // input_ids, labels, position_ids, document_ids
  bool has_field[4] = {};

  bool mixture() const { return !options.weights.empty(); }

  // The mixture's schedule for segment `s` (its pipeline, or the draws
  // the segment reached at a position: TokenMixtureCounts).
  TokenMixtureOptions MixtureOptions(const Segment& s) const {
    TokenMixtureOptions m;
    m.weights = s.weights;
    m.window = options.loader.batch_size * options.loader.world_size;
    m.num_samples = mixture_samples;
    m.shuffle = options.loader.shuffle;
    m.seed = options.loader.seed;
    m.start = s.start;
    m.counts = s.counts;
    return m;
  }

  Result<std::unique_ptr<Loader>> NewLoader(const Segment& s) const {
    if (!mixture()) return Loader::Create(pipelines[0], engine);
    Result<Pipeline> p = TokenMixturePipeline(pipelines, MixtureOptions(s));
    if (!p.ok()) return p.status();
    return Loader::Create(*std::move(p), engine);
  }

  std::vector<uint64_t> Fingerprints() const {
    std::vector<uint64_t> out;
    for (const auto& c : corpora) out.push_back(c->Fingerprint());
    return out;
  }
};

Result<std::unique_ptr<TokenLoader>> TokenLoader::Open(
    const std::vector<std::vector<std::string>>& sources, TokenLoaderOptions options) {
  if (options.seq_len == 0) return InvalidArgumentError("TokenLoader: seq_len must be positive");
  if (sources.empty()) return InvalidArgumentError("TokenLoader: no sources");
  if (options.weights.empty() && sources.size() != 1) {
    return InvalidArgumentError("TokenLoader: " + std::to_string(sources.size()) +
                                " source groups and no weights (one group is concatenated; "
                                "several are a mixture and need one weight each)");
  }
  if (!options.weights.empty() && options.weights.size() != sources.size()) {
    return InvalidArgumentError("TokenLoader: " + std::to_string(sources.size()) +
                                " source groups but " + std::to_string(options.weights.size()) +
                                " weights");
  }
  if (options.packing == TokenPacking::kBestFit &&
      (!options.pad_token.has_value() || *options.pad_token < 0)) {
    return InvalidArgumentError("TokenLoader: best-fit packing needs pad_token, a token id >= 0");
  }
  if (options.loader.batch_size == 0 || options.loader.world_size == 0) {
    return InvalidArgumentError("TokenLoader: batch_size and world_size must be positive");
  }
  auto impl = std::make_unique<Impl>();
  for (const auto& group : sources) {
    if (group.empty()) return InvalidArgumentError("TokenLoader: a source group without paths");
    Result<std::shared_ptr<const TokenCorpus>> corpus = TokenCorpus::Open(group, options.source);
    if (!corpus.ok()) return corpus.status();
    Result<Pipeline> pipeline = InternalError("unset");
    if (options.packing == TokenPacking::kBestFit) {
      Result<std::shared_ptr<const BestFitPlan>> plan =
          BestFitPlan::Build(**corpus, options.seq_len);
      if (!plan.ok()) return plan.status();
      impl->plans.push_back(*plan);
      pipeline = TokenBestFitPipeline(*corpus, *plan, *options.pad_token, options.fields);
    } else {
      pipeline = TokenWindowPipeline(*corpus, options.seq_len, options.fields,
                                     options.cross_document_labels);
    }
    if (!pipeline.ok()) return pipeline.status();
    impl->corpora.push_back(*std::move(corpus));
    impl->pipelines.push_back(*std::move(pipeline));
  }
  impl->engine = options.loader;
  if (!options.weights.empty()) {
    const uint64_t window = options.loader.batch_size * options.loader.world_size;
    uint64_t total = 0;
    for (const Pipeline& p : impl->pipelines) total += p.num_samples;
    impl->mixture_samples = std::max<uint64_t>(1, total / window) * window;
    impl->segment = Segment{0, std::vector<uint64_t>(sources.size(), 0), options.weights};
    // The mixture orders each group itself; the engine walks the global
    // index in order (as feedline.TokenLoader).
    impl->engine.shuffle = false;
    impl->engine.drop_last = false;
  }
  // The fields by name (TokenFields orders them; a left-out one is absent).
  const std::vector<FieldSpec>& fields = impl->pipelines[0].fields;
  const char* names[] = {"input_ids", "labels", "position_ids", "document_ids"};
  for (size_t f = 0; f < fields.size(); ++f) {
    for (size_t k = 0; k < 4; ++k) {
      if (fields[f].name == names[k]) impl->field_index[k] = f, impl->has_field[k] = true;
    }
    if (fields[f].name == "document_starts") impl->starts_field = f;
    if (fields[f].name == "num_documents") impl->counts_field = f;
  }
  impl->options = std::move(options);
  Result<std::unique_ptr<Loader>> loader = impl->NewLoader(impl->segment);
  if (!loader.ok()) return loader.status();
  impl->loader = *std::move(loader);
  return std::unique_ptr<TokenLoader>(new TokenLoader(std::move(impl)));
}

TokenLoader::TokenLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenLoader::~TokenLoader() = default;

Status TokenLoader::Next(TokenBatch* out, bool* end_of_epoch) {
  Impl& m = *impl_;
  Batch b;
  FEEDLINE_RETURN_IF_ERROR(m.loader->Next(&b, end_of_epoch));
  *out = TokenBatch{};
  if (*end_of_epoch) return Status::OK();
  out->rows = b.size();
  out->seq_len = m.options.seq_len;
  std::span<const int64_t>* spans[] = {&out->input_ids, &out->labels, &out->position_ids,
                                       &out->document_ids};
  for (size_t k = 0; k < 4; ++k) {
    if (m.has_field[k]) *spans[k] = b.field_as<const int64_t>(m.field_index[k]);
  }
  if (m.options.fields.document_starts) {
    FEEDLINE_RETURN_IF_ERROR(TokenCuSeqlens(static_cast<const int32_t*>(b.data(m.starts_field)),
                                            static_cast<const int32_t*>(b.data(m.counts_field)),
                                            b.size(), m.options.seq_len, &out->cu_seqlens));
  }
  out->batch = std::move(b);
  return Status::OK();
}

Status TokenLoader::SetEpoch(uint64_t epoch) { return impl_->loader->SetEpoch(epoch); }

std::string TokenLoader::SaveState() const {
  const Impl& m = *impl_;
  std::string s(kMagic);
  const std::string engine = m.loader->SaveState();
  PutFixed64(&s, engine.size());
  s += engine;
  if (m.mixture()) {
    const std::vector<uint64_t> fingerprints = m.Fingerprints();
    PutFixed64(&s, fingerprints.size());
    for (uint64_t f : fingerprints) PutFixed64(&s, f);
    PutFixed64(&s, m.segment.start);
    for (uint64_t c : m.segment.counts) PutFixed64(&s, c);
    for (double w : m.segment.weights) PutFixed64(&s, std::bit_cast<uint64_t>(w));
  } else {
    PutFixed64(&s, 0);
  }
  PutFixed64(&s, Fnv1a64(s.data(), s.size()));
  return s;
}

Status TokenLoader::RestoreState(std::string_view state) {
  Impl& m = *impl_;
  Result<ParsedState> parsed = ParseState(state);
  if (!parsed.ok()) return parsed.status();
  if (!m.mixture()) {
    if (parsed->mixture) {
      return InvalidArgumentError("a token mixture's state, and this TokenLoader has no weights");
    }
    return m.loader->RestoreState(parsed->engine);
  }
  if (!parsed->mixture) {
    return InvalidArgumentError("not a token mixture's state, and this TokenLoader has weights");
  }
  const std::vector<uint64_t> mine = m.Fingerprints();
  if (parsed->fingerprints != mine) {
    return InvalidArgumentError("the state is of other token sources: fingerprints " +
                                Join(parsed->fingerprints) + ", these sources " + Join(mine));
  }
  // The engine's checks first (seed, sizes, options, elastic world size):
  // nothing changes when they refuse.
  Result<SamplerPosition> position =
      m.loader->sampler().RestoreState(parsed->engine, m.engine.elastic);
  if (!position.ok()) return position.status();
  Segment segment = parsed->segment;
  if (segment.weights != m.options.weights) {
    // The saved schedule up to the position, this loader's weights after it.
    const TokenMixtureOptions saved = m.MixtureOptions(segment);
    std::vector<uint64_t> samples;
    for (const Pipeline& p : m.pipelines) samples.push_back(p.num_samples);
    const uint64_t g = position->epoch * m.mixture_samples + position->batch * saved.window;
    Result<std::vector<uint64_t>> counts = TokenMixtureCounts(samples, saved, g);
    if (!counts.ok()) return counts.status();
    segment = Segment{g, *std::move(counts), m.options.weights};
  }
  if (segment != m.segment) {
    Result<std::unique_ptr<Loader>> loader = m.NewLoader(segment);
    if (!loader.ok()) return loader.status();
    FEEDLINE_RETURN_IF_ERROR((*loader)->RestoreState(parsed->engine));
    m.loader = *std::move(loader);
    m.segment = std::move(segment);
    return Status::OK();
  }
  return m.loader->RestoreState(parsed->engine);
}

uint64_t TokenLoader::num_sequences() const {
  return impl_->mixture() ? impl_->mixture_samples : impl_->pipelines[0].num_samples;
}
uint64_t TokenLoader::num_batches() const { return impl_->loader->num_batches(); }
uint64_t TokenLoader::epoch() const { return impl_->loader->epoch(); }

uint64_t TokenLoader::num_tokens() const {
  uint64_t n = 0;
  for (const auto& c : impl_->corpora) n += c->num_tokens();
  return n;
}

double TokenLoader::padding_share() const {
  uint64_t pad = 0, all = 0;
  for (const auto& p : impl_->plans) {
    pad += p->padding_tokens();
    all += p->num_sequences() * p->seq_len();
  }
  return all == 0 ? 0.0 : static_cast<double>(pad) / static_cast<double>(all);
}

const std::vector<double>& TokenLoader::weights() const { return impl_->segment.weights; }
MetricsSnapshot TokenLoader::Metrics() const { return impl_->loader->Metrics(); }
const Loader& TokenLoader::loader() const { return *impl_->loader; }

}  // namespace feedline
