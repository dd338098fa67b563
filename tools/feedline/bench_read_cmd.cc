// `feedline bench-read SRC [--threads N] [--passes K]`: reads every sample's
// bytes (no decode) through the engine in shuffled order, K passes, and
// prints one JSON line: samples/s and MB/s. SRC is anything OpenSource
// takes (shards, tars, a folder of loose files), so bench/e2e can compare
// the same images stored three ways.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "feedline/loader.h"
#include "feedline/source.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/flags.h"

namespace feedline::cli {

int RunBenchRead(const std::vector<std::string>& args) {
  auto f = Flags::Parse(args, {"threads", "passes", "read-ahead-bytes"}, {});
  if (!f.ok() || f->positional().size() != 1) {
    std::fprintf(stderr, "usage: feedline bench-read SRC [--threads N] [--passes K]\n");
    return 2;
  }
  auto threads = f->GetUint("threads", 0), passes = f->GetUint("passes", 3);
  SourceOptions so;
  auto ra = f->GetUint("read-ahead-bytes", ~uint64_t{0});
  if (ra.ok()) so.read_ahead_bytes = *ra;
  auto source = OpenSource(f->positional()[0], so);
  if (!threads.ok() || !passes.ok() || !source.ok()) {
    std::fprintf(stderr, "feedline bench-read: %s\n",
                 (!source.ok() ? source.status() : InvalidArgumentError("bad number")).ToString().c_str());
    return 1;
  }
  Pipeline p;
  p.num_samples = source->num_samples;
  p.fields = {{"bytes", DType::kInt64, {}}};
  p.ops = {source->read_op, MakeOp("size", [](Sample& s) {
             *s.output_as<int64_t>(0) = static_cast<int64_t>(s.data().size());
             return Status::OK();
           })};
  LoaderOptions o;
  o.batch_size = 64;
  o.shuffle = true;
  o.num_threads = static_cast<uint32_t>(*threads);
  auto loader = Loader::Create(p, o);
  if (!loader.ok()) {
    std::fprintf(stderr, "feedline bench-read: %s\n", loader.status().ToString().c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t samples = 0, bytes = 0;
  for (uint64_t pass = 0; pass < *passes;) {
    Batch b;
    bool end = false;
    Status st = (*loader)->Next(&b, &end);
    if (!st.ok()) {
      std::fprintf(stderr, "feedline bench-read: %s\n", st.ToString().c_str());
      return 1;
    }
    if (end) {
      ++pass;
      continue;
    }
    for (int64_t n : b.field_as<int64_t>(0)) bytes += static_cast<uint64_t>(n);
    samples += b.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"source\": \"%s\", \"threads\": %u, \"samples\": %llu, \"seconds\": %.4f, "
              "\"samples_per_s\": %.1f, \"mb_per_s\": %.1f}\n",
              SourceKindName(source->kind), (*loader)->num_threads(), static_cast<unsigned long long>(samples), s,
              samples / s, bytes / 1e6 / s);
  return 0;
}

}  // namespace feedline::cli
