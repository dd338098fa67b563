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

namespace feedline::cli {

const Usage& BenchReadUsage() {
  static const Usage u = {
      "bench-read",
      {"SRC [options]"},
      "read throughput of a source, no decode (JSON)",
      "Reads every sample's bytes through the engine in shuffled order, K passes, and prints one\n"
      "JSON line: samples/s and MB/s.",
      {{"SRC", "packed shards, WebDataset tars, an ImageFolder tree, or an http(s):// URL"}},
      {{"threads", "N", "0 = auto", "loader threads"},
       {"passes", "K", "3", "passes over the whole source"},
       {"read-ahead-bytes", "N", "64 MiB for a URL, 0 otherwise",
        "bytes of shard data read ahead"}},
  };
  return u;
}

int RunBenchRead(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, BenchReadUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->positional().size() != 1) return UsageError(BenchReadUsage(), "expected one SRC");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "feedline bench-read: %s\n", st.ToString().c_str());
    return 1;
  };
  auto threads = f->GetUint("threads", 0), passes = f->GetUint("passes", 3);
  auto ra = f->GetUint("read-ahead-bytes", ~uint64_t{0});
  for (const Status& st : {threads.status(), passes.status(), ra.status()}) {
    if (!st.ok()) return fail(st);
  }
  SourceOptions so;
  so.read_ahead_bytes = *ra;
  auto source = OpenSource(f->positional()[0], so);
  if (!source.ok()) return fail(source.status());
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
  if (!loader.ok()) return fail(loader.status());
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t samples = 0, bytes = 0;
  for (uint64_t pass = 0; pass < *passes;) {
    Batch b;
    bool end = false;
    Status st = (*loader)->Next(&b, &end);
    if (!st.ok()) return fail(st);
    if (end) {
      ++pass;
      continue;
    }
    for (int64_t n : b.field_as<int64_t>(0)) bytes += static_cast<uint64_t>(n);
    samples += b.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"source\": \"%s\", \"threads\": %u, \"samples\": %llu, \"seconds\": %.4f, "
      "\"samples_per_s\": %.1f, \"mb_per_s\": %.1f}\n",
      SourceKindName(source->kind), (*loader)->num_threads(),
      static_cast<unsigned long long>(samples), s, samples / s, bytes / 1e6 / s);
  return 0;
}

}  // namespace feedline::cli
