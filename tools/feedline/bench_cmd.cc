// `feedline bench-pipeline DIR [--recipe train|eval] [--threads N]
//     [--batch B] [--batches K] [--warmup W] [--mode pipeline|decode]
//     [--cpu-budget C] [--ring-depth D] [--ram-budget BYTES]`
// (threads, ring depth and budgets default to auto: the tuner decides)
//
// Measures one configuration and prints one JSON line; bench/e2e/ runs it
// beside the torch DataLoader peer and computes ratios.
//   pipeline: the feedline loader over an ImageFolder (read, decode only the
//             crop at reduced DCT scale, resample, flip, normalise, float32
//             CHW batches); images/s over K batches after W warm-up batches.
//   decode:   the baseline the image path must beat per core: read each file
//             and decode it whole at full size with libjpeg-turbo/libspng, on
//             one thread.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "feedline/image_folder.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/files.h"

namespace feedline::cli {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const Status& st) {
  std::fprintf(stderr, "feedline bench-pipeline: %s\n", st.ToString().c_str());
  return 1;
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of the whole process (all threads), user + system.
double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int Decode(const ImageFolder& folder, uint64_t count) {
  const auto t0 = Clock::now();
  const double cpu0 = CpuSeconds();
  uint64_t done = 0, checksum = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string path = folder.root + "/" + folder.files[i % folder.files.size()];
    // One sized read through the file seam, as the loader does.
    Result<std::vector<uint8_t>> bytes = ReadRegularFile(path);
    if (!bytes.ok()) return Fail(bytes.status());
    Result<RgbImage> img = DecodeImage(*bytes);
    if (!img.ok()) return Fail(img.status().WithContext(path));
    checksum += img->pixels[img->pixels.size() / 2];
    ++done;
  }
  const double s = Since(t0);
  std::printf(
      "{\"mode\": \"decode\", \"threads\": 1, \"images\": %llu, \"seconds\": %.4f, "
      "\"images_per_s\": %.1f, \"cpu_s\": %.3f, \"checksum\": %llu}\n",
      static_cast<unsigned long long>(done), s, done / s, CpuSeconds() - cpu0,
      static_cast<unsigned long long>(checksum));
  return 0;
}

}  // namespace

const Usage& BenchPipelineUsage() {
  static const Usage u = {
      "bench-pipeline",
      {"DIR [options]"},
      "measure one loader configuration (JSON)",
      "pipeline mode: the feedline loader over an ImageFolder (read, decode only the crop at "
      "reduced\n"
      "DCT scale, resample, flip, normalise, float32 CHW batches); images/s over K batches after "
      "W\n"
      "warm-up batches. decode mode: the per-core baseline, each file read and decoded whole at "
      "full\n"
      "size on one thread. Prints one JSON line.",
      {{"DIR", "an ImageFolder tree"}},
      {{"mode", "M", "pipeline", "pipeline or decode"},
       {"recipe", "R", "train", "train or eval (the ImageNet recipes at 224)"},
       {"threads", "N", "0 = auto (the tuner)", "loader threads"},
       {"batch", "B", "256", "batch size"},
       {"batches", "K", "20", "batches timed"},
       {"warmup", "W", "2", "batches not timed at the start"},
       {"images", "N", "every image in DIR", "decode mode: how many images to decode"},
       {"cpu-budget", "C", "0 = auto", "cores the loader may use"},
       {"ring-depth", "D", "0 = auto", "batches in flight"},
       {"ram-budget", "BYTES", "0 = auto", "bytes the loader may hold"}},
  };
  return u;
}

int RunBenchPipeline(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, BenchPipelineUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->positional().size() != 1) return UsageError(BenchPipelineUsage(), "expected one DIR");
  const std::string mode = f->Get("mode", "pipeline");
  if (mode != "pipeline" && mode != "decode")
    return UsageError(BenchPipelineUsage(), "--mode pipeline|decode");
  auto folder = ImageFolder::Open(f->positional()[0]);
  if (!folder.ok()) return Fail(folder.status());
  // 0 = auto (the tuner) for threads, ring depth, CPU and RAM budgets.
  auto threads = f->GetUint("threads", 0), batch = f->GetUint("batch", 256);
  auto budget = f->GetUint("cpu-budget", 0), ring = f->GetUint("ring-depth", 0),
       ram = f->GetUint("ram-budget", 0);
  auto batches = f->GetUint("batches", 20), warmup = f->GetUint("warmup", 2);
  auto images = f->GetUint("images", (*folder)->files.size());
  for (const Status& st : {threads.status(), batch.status(), batches.status(), warmup.status(),
                           images.status(), budget.status(), ring.status(), ram.status()}) {
    if (!st.ok()) return Fail(st);
  }
  if (mode == "decode") return Decode(**folder, *images);

  const std::string recipe = f->Get("recipe", "train");
  if (recipe != "train" && recipe != "eval")
    return Fail(InvalidArgumentError("--recipe train|eval"));
  const ImageTransform t = recipe == "train" ? ImageNetTrain(224) : ImageNetEval(256, 224);
  LoaderOptions o;
  o.batch_size = *batch;
  o.shuffle = recipe == "train";
  o.drop_last = true;
  o.seed = 1;
  o.num_threads = static_cast<uint32_t>(*threads);
  o.cpu_budget = static_cast<uint32_t>(*budget);
  o.ring_depth = static_cast<uint32_t>(*ring);
  o.max_bytes = *ram;
  const auto t_create = Clock::now();
  auto loader = Loader::Create(ImageFolderPipeline(*folder, t), o);
  if (!loader.ok()) return Fail(loader.status());
  Batch b;
  bool end = false;
  double first_batch_s = 0;
  uint64_t samples = 0, got = 0;
  Clock::time_point t0;
  double cpu0 = 0;
  while (got < *warmup + *batches) {
    Status st = (*loader)->Next(&b, &end);
    if (!st.ok()) return Fail(st);
    if (end) continue;
    if (got == 0) first_batch_s = Since(t_create);
    if (++got == *warmup) {
      t0 = Clock::now();
      cpu0 = CpuSeconds();
    }
    if (got > *warmup) samples += b.size();
  }
  const double s = Since(t0);
  const double cpu = CpuSeconds() - cpu0;
  const MetricsSnapshot m = (*loader)->Metrics();
  std::printf(
      "{\"mode\": \"pipeline\", \"recipe\": \"%s\", \"threads\": %u, \"batch\": %llu, "
      "\"images\": %llu, \"seconds\": %.4f, \"images_per_s\": %.1f, \"cpu_s\": %.3f, "
      "\"first_batch_s\": %.4f, \"consumer_wait_s\": %.4f, \"decode_ns_per_image\": %.0f}\n",
      recipe.c_str(), (*loader)->num_threads(), static_cast<unsigned long long>(*batch),
      static_cast<unsigned long long>(samples), s, samples / s, cpu, first_batch_s,
      m.consumer.wait_ns / 1e9,
      m.ops.size() > 1 && m.ops[1].items ? double(m.ops[1].busy_ns) / m.ops[1].items : 0.0);
  return 0;
}

}  // namespace feedline::cli
