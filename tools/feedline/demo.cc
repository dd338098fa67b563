// `feedline demo [--data DIR]`: the loader at work on an image folder (the
// built-in dataset under make demo) with the ImageNet train recipe, or on a
// synthetic pipeline without --data. Shows throughput by thread count,
// bit-identical output across thread counts, exact mid-epoch resume, the
// metrics snapshot, and starvation against simulated accelerators.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "feedline/image_folder.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/flags.h"

namespace feedline::cli {
namespace {

constexpr int kSource = 96;  // synthetic "decoded" image side
constexpr int kCrop = 64;    // output side

// Sample i's "decoded image": deterministic pixels, with some work per pixel
// so the pipeline has a realistic shape (produce, then crop/flip/normalise).
class SynthesizeOp final : public SampleOp {
 public:
  struct State : OpState {
    std::vector<uint8_t> pixels;
  };
  std::string_view name() const override { return "synthesize"; }
  std::unique_ptr<OpState> NewState() const override { return std::make_unique<State>(); }
  Status Apply(Sample& s, OpState* state) const override {
    auto& px = static_cast<State*>(state)->pixels;
    px.resize(3 * kSource * kSource);
    uint64_t h = Mix64(s.id() + 1);
    for (auto& p : px) {
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      p = static_cast<uint8_t>(h >> 56);
    }
    s.set_data(px);
    s.label = static_cast<int64_t>(s.id() % 1000);
    return Status::OK();
  }
};

// Random crop + horizontal flip + normalise to float32 CHW, written straight
// into the batch slot; the random choices come from the sample's rng.
Status CropFlipNormalize(Sample& s) {
  SampleRng rng = s.rng();
  const int x0 = static_cast<int>(rng.UniformInt(kSource - kCrop + 1));
  const int y0 = static_cast<int>(rng.UniformInt(kSource - kCrop + 1));
  const bool flip = rng.Bernoulli(0.5);
  const uint8_t* src = s.data().data();
  float* out = s.output_as<float>(0);
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * kStd[c]), bias = -kMean[c] / kStd[c];
    for (int y = 0; y < kCrop; ++y) {
      const uint8_t* row = src + (static_cast<size_t>(c) * kSource + y0 + y) * kSource + x0;
      float* dst = out + (static_cast<size_t>(c) * kCrop + y) * kCrop;
      for (int x = 0; x < kCrop; ++x) dst[x] = row[flip ? kCrop - 1 - x : x] * scale + bias;
    }
  }
  *s.output_as<int64_t>(1) = s.label;
  return Status::OK();
}

Pipeline DemoPipeline(uint64_t n) {
  Pipeline p;
  p.num_samples = n;
  p.fields = {{"image", DType::kFloat32, {3, kCrop, kCrop}}, {"label", DType::kInt64, {}}};
  p.ops = {std::make_shared<SynthesizeOp>(), MakeOp("crop_flip_normalize", CropFlipNormalize)};
  return p;
}

// Order-sensitive hash of a batch's bytes, 8 bytes at a time (every field
// size here is a multiple of 8).
uint64_t HashBytes(uint64_t h, const void* p, size_t n) {
  const auto* w = static_cast<const uint64_t*>(p);
  for (size_t i = 0; i < n / 8; ++i) h = Mix64(h ^ w[i]);
  return h;
}

struct RunResult {
  uint64_t checksum = 0xCBF29CE484222325ull;
  uint64_t samples = 0;
  double seconds = 0;
  MetricsSnapshot metrics;
  std::string state_at_half;
};

enum class Consumer { kCount, kChecksum, kSimulatedStep };

// The pipeline the demo runs: the real image path over `data`, or synthetic.
std::shared_ptr<const ImageFolder> g_folder;

Pipeline MakePipeline(uint64_t n) {
  if (g_folder) return ImageFolderPipeline(g_folder, ImageNetTrain(224));
  return DemoPipeline(n);
}

// Reads one epoch. The consumer only counts (to measure the loader's
// capacity), hashes every byte (to compare streams), or sleeps `step` per
// batch like an accelerator of known speed.
Result<RunResult> RunEpoch(uint64_t n, uint32_t threads, const std::string& resume,
                           Consumer consumer, std::chrono::microseconds step = {}) {
  LoaderOptions o;
  o.batch_size = 64;
  o.shuffle = true;
  o.seed = 2026;
  o.num_threads = threads;
  FEEDLINE_ASSIGN_OR_RETURN(auto loader, Loader::Create(MakePipeline(n), o));
  if (!resume.empty()) FEEDLINE_RETURN_IF_ERROR(loader->RestoreState(resume));
  RunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  Batch b;
  bool end = false;
  for (uint64_t i = 0;; ++i) {
    if (i == loader->num_batches() / 2) r.state_at_half = loader->SaveState();
    FEEDLINE_RETURN_IF_ERROR(loader->Next(&b, &end));
    if (end) break;
    r.samples += b.size();
    if (consumer == Consumer::kChecksum) {
      for (size_t f = 0; f < b.num_fields(); ++f) {
        r.checksum = HashBytes(r.checksum, b.data(f), b.field_bytes(f));
      }
    } else if (consumer == Consumer::kSimulatedStep) {
      std::this_thread::sleep_for(step);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.metrics = loader->Metrics();
  return r;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "feedline demo: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

const Usage& DemoUsage() {
  static const Usage u = {
      "demo",
      {"[--data DIR] [--samples N] [--threads N]"},
      "run the engine demonstration",
      "The loader at work: throughput by thread count, bit-identical output across thread counts,\n"
      "exact mid-epoch resume, the metrics snapshot, and starvation against simulated "
      "accelerators\n"
      "(sleeps of a fixed time per batch, not a real device). With --data, on an image folder with "
      "the\n"
      "ImageNet train recipe; without, on a synthetic pipeline.",
      {},
      {{"data", "DIR", "none: a synthetic pipeline", "an ImageFolder tree to load"},
       {"samples", "N", "8192", "synthetic samples per epoch (ignored with --data)"},
       {"threads", "N", "the available cores",
        "the largest thread count measured (1, 2, 4, ... up to N)"}},
  };
  return u;
}

int RunDemo(const std::vector<std::string>& args) {
  Flags f;
  if (auto rc = ParseOrExit(args, DemoUsage(), &f)) return *rc;
  if (!f.positional().empty())
    return UsageError(DemoUsage(), "unexpected argument '" + f.positional()[0] + "'");
  auto samples = f.GetUint("samples", 8192), threads = f.GetUint("threads", AvailableCores());
  if (!samples.ok()) return Fail(samples.status());
  if (!threads.ok()) return Fail(threads.status());
  if (*samples == 0 || *threads == 0 || *threads > 4096) {
    return Fail(InvalidArgumentError("--samples must be > 0 and --threads in 1..4096"));
  }
  uint64_t n = *samples;
  const uint32_t max_threads = static_cast<uint32_t>(*threads);
  const std::string data = f.Get("data");
  if (!data.empty()) {
    auto folder = ImageFolder::Open(data);
    if (!folder.ok()) return Fail(folder.status());
    g_folder = *folder;
    n = g_folder->files.size();
    std::printf(
        "feedline demo: %llu images in %zu classes from %s\n"
        "ImageNet train recipe: RandomResizedCrop(224) + flip + normalise, decoded only\n"
        "where the crop needs it, into float32 CHW batches of 64\n\n",
        static_cast<unsigned long long>(n), g_folder->classes.size(), data.c_str());
  } else {
    std::printf(
        "feedline engine demo: %llu synthetic samples, %dx%d crop + flip + normalise to\n"
        "float32 CHW batches of 64\n\n",
        static_cast<unsigned long long>(n), kCrop, kCrop);
  }

  std::printf("%-8s %12s %10s  %s\n", "threads", "samples/s", "speedup", "stream checksum");
  double base_rate = 0;
  uint64_t base_sum = 0;
  bool identical = true;
  std::vector<uint32_t> counts = {1};
  for (uint32_t t = 2; t <= std::max<uint32_t>(max_threads, 2); t *= 2) counts.push_back(t);
  std::string half_state;
  for (uint32_t t : counts) {
    Result<RunResult> timed = RunEpoch(n, t, "", Consumer::kCount);
    Result<RunResult> hashed = RunEpoch(n, t, "", Consumer::kChecksum);
    if (!timed.ok()) return Fail(timed.status());
    if (!hashed.ok()) return Fail(hashed.status());
    const double rate = static_cast<double>(timed->samples) / timed->seconds;
    if (t == 1) {
      base_rate = rate;
      base_sum = hashed->checksum;
      half_state = hashed->state_at_half;
    }
    identical &= hashed->checksum == base_sum;
    std::printf("%-8u %12.0f %9.2fx  %016llx\n", t, rate, rate / base_rate,
                static_cast<unsigned long long>(hashed->checksum));
  }
  std::printf("output identical for every thread count: %s\n\n", identical ? "yes" : "NO");

  // Resume: fresh loaders restored from the state saved half way through
  // produce the same second half whatever their thread count.
  Result<RunResult> resumed = RunEpoch(n, counts.back(), half_state, Consumer::kChecksum);
  Result<RunResult> reference = RunEpoch(n, 1, half_state, Consumer::kChecksum);
  if (!resumed.ok()) return Fail(resumed.status());
  if (!reference.ok()) return Fail(reference.status());
  const bool resume_ok = resumed->checksum == reference->checksum;
  std::printf(
      "resume from a %zu-byte state saved half way: %llu samples, checksum %016llx,\n"
      "identical with 1 and %u threads: %s\n\n",
      half_state.size(), static_cast<unsigned long long>(resumed->samples),
      static_cast<unsigned long long>(resumed->checksum), counts.back(), resume_ok ? "yes" : "NO");

  Result<RunResult> full = RunEpoch(n, counts.back(), "", Consumer::kCount);
  if (!full.ok()) return Fail(full.status());
  std::printf("metrics of a %u-thread epoch:\n%s\n", counts.back(),
              full->metrics.ToString().c_str());

  // Simulated accelerators (sleeps of a fixed time per batch; not a real
  // device): one slower than the loader, one faster.
  std::printf("simulated accelerator (fixed time per batch of 64; not a real device):\n");
  const double capacity = static_cast<double>(full->samples) / full->seconds;
  for (double demand : {capacity * 0.5, capacity * 2.0}) {
    const auto step = std::chrono::microseconds(static_cast<int64_t>(64e6 / demand));
    Result<RunResult> fed = RunEpoch(n, counts.back(), "", Consumer::kSimulatedStep, step);
    if (!fed.ok()) return Fail(fed.status());
    const double wait_s = static_cast<double>(fed->metrics.consumer.wait_ns) / 1e9;
    std::printf("  consumes %6.0f samples/s: got %6.0f samples/s, starved %4.1f%% of the time\n",
                demand, static_cast<double>(fed->samples) / fed->seconds,
                100.0 * wait_s / fed->seconds);
  }
  return identical && resume_ok ? 0 : 1;
}

}  // namespace feedline::cli
