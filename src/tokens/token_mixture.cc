// Mixtures of token pipelines: the deterministic schedule (global sample ->
// source and draw), each source's per-epoch order, and the op (tokens.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "feedline/tokens.h"
#include "src/core/detail/endian.h"
#include "src/tokens/token_sequence_op.h"

namespace feedline {

namespace {

using tokens::detail::TokenSequenceOp;

constexpr double kWeightUnits = 1 << 20;  // weights are rounded to 2^-20 of their sum

uint64_t Mix64(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A keyed bijection of [0, n): a balanced Feistel network on the smallest
// even power of two >= n (>= 4), walked until the value falls below n.
// Each step is a bijection of the power-of-two domain, so the walk ends and
// the map is a permutation; the domain is < 4n, so a walk takes < 4 steps
// on average. O(1) memory: no per-epoch table.
uint64_t Permute(uint64_t x, uint64_t n, uint64_t key) {
  unsigned bits = 2;
  while ((uint64_t{1} << bits) < n) bits += 2;
  const unsigned half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = Mix64(r ^ Mix64(key + round)) & mask;
      const uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

// The schedule of one segment, in integers (tokens.h, "Mixtures").
class Schedule {
 public:
  static Result<Schedule> Make(const std::vector<uint64_t>& source_samples,
                               const TokenMixtureOptions& o) {
    const size_t k = source_samples.size();
    if (k == 0) return InvalidArgumentError("a token mixture needs at least one source");
    if (o.weights.size() != k) {
      return InvalidArgumentError("a token mixture of " + std::to_string(k) + " sources got " +
                                  std::to_string(o.weights.size()) + " weights");
    }
    if (o.window == 0) return InvalidArgumentError("a token mixture needs a window (global batch)");
    if (o.window > (uint64_t{1} << 31)) {
      return InvalidArgumentError("token mixture window " + std::to_string(o.window) +
                                  " is above 2^31");
    }
    if (o.num_samples == 0 || o.num_samples % o.window != 0) {
      return InvalidArgumentError("a token mixture's num_samples " + std::to_string(o.num_samples) +
                                  " is not a positive multiple of its window " +
                                  std::to_string(o.window));
    }
    if (!o.counts.empty() && o.counts.size() != k) {
      return InvalidArgumentError("a token mixture of " + std::to_string(k) + " sources got " +
                                  std::to_string(o.counts.size()) + " counts");
    }
    double sum = 0;
    for (size_t i = 0; i < k; ++i) {
      if (!std::isfinite(o.weights[i]) || o.weights[i] < 0) {
        return InvalidArgumentError("token mixture weight " + std::to_string(i) + " is " +
                                    std::to_string(o.weights[i]) + ": weights must be >= 0");
      }
      if (source_samples[i] == 0) {
        return InvalidArgumentError("token mixture source " + std::to_string(i) +
                                    " has no samples");
      }
      sum += o.weights[i];
    }
    Schedule s;
    s.window_ = o.window;
    s.start_ = o.start;
    s.counts_ = o.counts.empty() ? std::vector<uint64_t>(k, 0) : o.counts;
    for (double w : o.weights) {
      s.units_.push_back(sum > 0 ? static_cast<uint64_t>(std::llround(w / sum * kWeightUnits)) : 0);
    }
    uint64_t total = 0;
    for (uint64_t u : s.units_) total += u;
    if (total == 0) return InvalidArgumentError("token mixture weights are all 0");
    s.total_ = total;
    uint64_t extra_units = 0;
    for (uint64_t u : s.units_) {
      s.base_.push_back(u * o.window / total);
      s.frac_.push_back(u * o.window % total);
      extra_units += s.frac_.back();
    }
    s.extras_ = extra_units / total;  // exact: sum base + extras = window
    return s;
  }

  size_t num_sources() const { return units_.size(); }
  uint64_t window() const { return window_; }
  uint64_t start() const { return start_; }
  uint64_t start_count(size_t k) const { return counts_[k]; }

  // The walk over windows: cumulative draws at the start of window m and
  // the carried remainders before it.
  struct Cursor {
    uint64_t window = 0;
    std::vector<uint64_t> drawn;   // per source, since the segment start
    std::vector<int64_t> carried;  // in 1/total units
  };
  Cursor Begin() const {
    return Cursor{0, std::vector<uint64_t>(num_sources(), 0),
                  std::vector<int64_t>(num_sources(), 0)};
  }
  // The draws of each source in the cursor's window, and the remainders
  // after it.
  void WindowCounts(const Cursor& c, std::vector<uint64_t>* n, std::vector<int64_t>* carried,
                    std::vector<size_t>* scratch) const {
    const size_t k = num_sources();
    n->assign(base_.begin(), base_.end());
    *carried = c.carried;
    for (size_t i = 0; i < k; ++i) (*carried)[i] += static_cast<int64_t>(frac_[i]);
    // The `extras_` largest remainders (ties: the lower source) get one more.
    scratch->resize(k);
    for (size_t i = 0; i < k; ++i) (*scratch)[i] = i;
    std::partial_sort(scratch->begin(), scratch->begin() + static_cast<ptrdiff_t>(extras_),
                      scratch->end(), [&](size_t a, size_t b) {
                        return (*carried)[a] != (*carried)[b] ? (*carried)[a] > (*carried)[b]
                                                              : a < b;
                      });
    for (uint64_t e = 0; e < extras_; ++e) {
      const size_t i = (*scratch)[e];
      ++(*n)[i];
      (*carried)[i] -= static_cast<int64_t>(total_);
    }
  }
  void Advance(Cursor* c, std::vector<uint64_t>* n, std::vector<int64_t>* carried,
               std::vector<size_t>* scratch) const {
    WindowCounts(*c, n, carried, scratch);
    for (size_t i = 0; i < num_sources(); ++i) c->drawn[i] += (*n)[i];
    c->carried.swap(*carried);
    ++c->window;
  }
  // Position i of a window of counts n goes to the source furthest behind
  // its share n_k (i + 1) / W (ties: the lower source); `source` and `rank`
  // (the draw's number among that source's in the window) get W entries.
  void Layout(const std::vector<uint64_t>& n, std::vector<uint32_t>* source,
              std::vector<uint32_t>* rank) const {
    const size_t k = num_sources();
    std::vector<uint64_t> placed(k, 0);
    source->resize(window_);
    rank->resize(window_);
    for (uint64_t i = 0; i < window_; ++i) {
      size_t best = k;
      int64_t best_lag = 0;
      for (size_t s = 0; s < k; ++s) {
        if (placed[s] == n[s]) continue;
        const auto lag =
            static_cast<int64_t>(n[s] * (i + 1)) - static_cast<int64_t>(placed[s] * window_);
        if (best == k || lag > best_lag) {
          best = s;
          best_lag = lag;
        }
      }
      (*source)[i] = static_cast<uint32_t>(best);
      (*rank)[i] = static_cast<uint32_t>(placed[best]++);
    }
  }

 private:
  uint64_t window_ = 0;
  uint64_t start_ = 0;
  std::vector<uint64_t> counts_;
  std::vector<uint64_t> units_;
  uint64_t total_ = 0;
  std::vector<uint64_t> base_;
  std::vector<uint64_t> frac_;
  uint64_t extras_ = 0;
};

// Per worker: each source's op state and the schedule walked to the last
// window it saw (workers claim in increasing order, so a walk moves
// forward a window at a time; a jump back restarts it from the segment).
class MixtureState final : public OpState {
 public:
  std::vector<std::unique_ptr<OpState>> sources;
  Schedule::Cursor cursor;
  bool laid_out = false;  // source/rank hold cursor.window's layout
  std::vector<uint64_t> n;
  std::vector<int64_t> carried;
  std::vector<size_t> scratch;
  std::vector<uint32_t> source, rank;
  uint64_t ScratchBytes() const override {
    uint64_t b = (source.capacity() + rank.capacity()) * sizeof(uint32_t);
    for (const auto& s : sources) b += s ? s->ScratchBytes() : 0;
    return b;
  }
};

class MixtureOp final : public SampleOp {
 public:
  MixtureOp(std::vector<std::shared_ptr<const TokenSequenceOp>> sources, Schedule schedule,
            const TokenMixtureOptions& o)
      : sources_(std::move(sources)),
        schedule_(std::move(schedule)),
        num_samples_(o.num_samples),
        shuffle_(o.shuffle),
        seed_(o.seed) {}

  std::string_view name() const override { return "tokens"; }
  std::unique_ptr<OpState> NewState() const override {
    auto st = std::make_unique<MixtureState>();
    for (const auto& s : sources_) st->sources.push_back(s->NewState());
    st->cursor = schedule_.Begin();
    return st;
  }
  uint64_t DataFingerprint() const override {
    std::string s = "mixture:";
    for (const auto& op : sources_) core::detail::PutFixed64(&s, op->DataFingerprint());
    return core::detail::Fnv1a64(s.data(), s.size());
  }
  uint64_t ConfigFingerprint() const override {
    std::string s = "mixture:";
    for (const auto& op : sources_) core::detail::PutFixed64(&s, op->ConfigFingerprint());
    core::detail::PutFixed64(&s, schedule_.window());
    core::detail::PutFixed64(&s, shuffle_ ? 1 : 0);
    return core::detail::Fnv1a64(s.data(), s.size());
  }

  Status Apply(Sample& sample, OpState* state) const override {
    auto& st = *static_cast<MixtureState*>(state);
    const uint64_t g = sample.epoch() * num_samples_ + sample.id();
    if (g < schedule_.start()) {
      return FailedPreconditionError("token mixture: global sample " + std::to_string(g) +
                                     " is before the resumed schedule's start " +
                                     std::to_string(schedule_.start()) +
                                     " (an epoch before the resumed one)");
    }
    const uint64_t w = (g - schedule_.start()) / schedule_.window();
    const uint64_t i = (g - schedule_.start()) % schedule_.window();
    if (w < st.cursor.window) {
      st.cursor = schedule_.Begin();
      st.laid_out = false;
    }
    while (st.cursor.window < w) {
      schedule_.Advance(&st.cursor, &st.n, &st.carried, &st.scratch);
      st.laid_out = false;
    }
    if (!st.laid_out) {
      schedule_.WindowCounts(st.cursor, &st.n, &st.carried, &st.scratch);
      schedule_.Layout(st.n, &st.source, &st.rank);
      st.laid_out = true;
    }
    const size_t k = st.source[i];
    const uint64_t draw = schedule_.start_count(k) + st.cursor.drawn[k] + st.rank[i];
    const TokenSequenceOp& op = *sources_[k];
    const uint64_t n = op.num_sequences();
    const uint64_t epoch = draw / n;
    uint64_t index = draw % n;
    if (shuffle_) index = Permute(index, n, Mix64(seed_ ^ Mix64(k ^ Mix64(epoch))));
    return op.Fill(index, sample, st.sources[k].get());
  }

 private:
  std::vector<std::shared_ptr<const TokenSequenceOp>> sources_;
  Schedule schedule_;
  uint64_t num_samples_;
  bool shuffle_;
  uint64_t seed_;
};

}  // namespace

Result<std::vector<uint64_t>> TokenMixtureCounts(const std::vector<uint64_t>& source_samples,
                                                 const TokenMixtureOptions& options, uint64_t g) {
  FEEDLINE_ASSIGN_OR_RETURN(Schedule s, Schedule::Make(source_samples, options));
  if (g < s.start()) {
    return InvalidArgumentError("token mixture: position " + std::to_string(g) +
                                " is before the schedule's start " + std::to_string(s.start()));
  }
  const uint64_t windows = (g - s.start()) / s.window();
  const uint64_t rest = (g - s.start()) % s.window();
  Schedule::Cursor c = s.Begin();
  std::vector<uint64_t> n;
  std::vector<int64_t> carried;
  std::vector<size_t> scratch;
  while (c.window < windows) s.Advance(&c, &n, &carried, &scratch);
  std::vector<uint64_t> out(s.num_sources());
  for (size_t k = 0; k < out.size(); ++k) out[k] = s.start_count(k) + c.drawn[k];
  if (rest > 0) {
    s.WindowCounts(c, &n, &carried, &scratch);
    std::vector<uint32_t> source, rank;
    s.Layout(n, &source, &rank);
    for (uint64_t i = 0; i < rest; ++i) ++out[source[i]];
  }
  return out;
}

namespace {

bool SameFields(const std::vector<FieldSpec>& a, const std::vector<FieldSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].shape != b[i].shape)
      return false;
  }
  return true;
}

std::string FieldNames(const std::vector<FieldSpec>& fields) {
  std::string s;
  for (const FieldSpec& f : fields) s += (s.empty() ? "" : ", ") + f.name;
  return s;
}

}  // namespace

Result<Pipeline> TokenMixturePipeline(const std::vector<Pipeline>& sources,
                                      const TokenMixtureOptions& options) {
  if (sources.empty()) return InvalidArgumentError("a token mixture needs at least one source");
  std::vector<std::shared_ptr<const TokenSequenceOp>> ops;
  std::vector<uint64_t> samples;
  for (size_t k = 0; k < sources.size(); ++k) {
    const Pipeline& p = sources[k];
    auto op =
        p.ops.size() == 1 ? std::dynamic_pointer_cast<const TokenSequenceOp>(p.ops[0]) : nullptr;
    if (op == nullptr) {
      return InvalidArgumentError("token mixture source " + std::to_string(k) +
                                  " is not a token pipeline (TokenWindowPipeline or "
                                  "TokenBestFitPipeline)");
    }
    if (!ops.empty() && op->seq_len() != ops.front()->seq_len()) {
      return InvalidArgumentError("token mixture source " + std::to_string(k) + " has seq_len " +
                                  std::to_string(op->seq_len()) + ", source 0 " +
                                  std::to_string(ops.front()->seq_len()));
    }
    if (k > 0 && !SameFields(p.fields, sources.front().fields)) {
      return InvalidArgumentError("token mixture source " + std::to_string(k) +
                                  " writes other fields than source 0 (" + FieldNames(p.fields) +
                                  " vs " + FieldNames(sources.front().fields) + ")");
    }
    samples.push_back(op->num_sequences());
    ops.push_back(std::move(op));
  }
  FEEDLINE_ASSIGN_OR_RETURN(Schedule schedule, Schedule::Make(samples, options));
  Pipeline out;
  out.num_samples = options.num_samples;
  out.fields = sources.front().fields;
  out.ops.push_back(std::make_shared<MixtureOp>(std::move(ops), std::move(schedule), options));
  return out;
}

}  // namespace feedline
