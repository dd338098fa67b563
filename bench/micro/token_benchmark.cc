// The token loader's own cost per sequence (issue 18's target: under 5 us
// per 2048-token sequence on one core): TokenWindowPipeline over a flat
// uint16 file through the engine, one worker thread, batches of 16, with
// and without an eos token (one document per window, or the document
// boundaries looked up and written per token), with every field or with
// input_ids and labels only (TokenFieldSet). The file (4M random tokens,
// ids below 50257, eos = 0 about every 500 tokens) is made in /tmp once and
// stays page-cached; the consumer only takes batches, so
// wall time per sequence is the worker's time when it has a core to itself;
// cpu_us/seq (the process's CPU: worker and consumer) is the figure to read
// on a shared machine. Python's share (the dict of tensors,
// cu_seqlens joined) is in bench/e2e/tokens_bench.py.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "feedline/loader.h"
#include "feedline/tokens.h"

namespace feedline {
namespace {

constexpr uint64_t kSeqLen = 2048;

const std::string& TokenFile() {
  static const std::string path = [] {
    const std::string p = "/tmp/feedline_token_benchmark_" + std::to_string(::getpid()) + ".bin";
    std::vector<uint16_t> ids(uint64_t{4} << 20);
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> id(1, 50256), eos(0, 499);
    for (uint16_t& t : ids) t = eos(rng) == 0 ? 0 : static_cast<uint16_t>(id(rng));
    FILE* f = std::fopen(p.c_str(), "wb");
    if (f != nullptr) {
      std::fwrite(ids.data(), sizeof(uint16_t), ids.size(), f);
      std::fclose(f);
    }
    return p;
  }();
  return path;
}

// CPU of every thread of the process (the worker's and the consumer's): on a
// busy machine wall time per sequence includes waiting for a core.
uint64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void BM_TokenWindows(benchmark::State& state) {
  TokenSourceOptions so;
  if (state.range(0) != 0) so.eos_token = 0;
  auto corpus = TokenCorpus::Open({TokenFile()}, so);
  if (!corpus.ok()) {
    state.SkipWithError(corpus.status().ToString().c_str());
    return;
  }
  TokenFieldSet fields;
  if (state.range(1) == 0) fields = TokenFieldSet{false, false, false};  // input_ids, labels
  auto pipeline = TokenWindowPipeline(*corpus, kSeqLen, fields);
  if (!pipeline.ok()) {
    state.SkipWithError(pipeline.status().ToString().c_str());
    return;
  }
  LoaderOptions o;
  o.batch_size = 16;
  o.shuffle = true;
  o.drop_last = true;
  o.num_threads = 1;
  o.ring_depth = 4;
  auto loader = Loader::Create(*std::move(pipeline), o);
  if (!loader.ok()) {
    state.SkipWithError(loader.status().ToString().c_str());
    return;
  }
  uint64_t sequences = 0;
  const uint64_t cpu0 = ProcessCpuNs();
  for (auto _ : state) {
    Batch b;
    bool end = false;
    const Status st = (*loader)->Next(&b, &end);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
    if (end) continue;
    sequences += b.size();
    benchmark::DoNotOptimize(b.data(0));
  }
  state.SetItemsProcessed(static_cast<int64_t>(sequences));
  const double cpu_us = static_cast<double>(ProcessCpuNs() - cpu0) / 1e3;
  state.counters["cpu_us/seq"] = cpu_us / static_cast<double>(sequences);
}
BENCHMARK(BM_TokenWindows)
    ->ArgNames({"eos", "all_fields"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The floor under BM_TokenWindows: plain stores of what one sequence's
// fields hold (input_ids and labels widened from uint16, position_ids,
// document_ids: 64 KB; with all_fields = 0, the first two: 32 KB) into a
// ring the size of the loader's (4 batches of 16 sequences, about 4 MB
// with every field), from a source already in cache. No engine, no file:
// what this machine's memory writes cost per sequence.
void BM_StoreFloor(benchmark::State& state) {
  const uint64_t fields = state.range(0) != 0 ? 4 : 2, ring = 4 * 16;
  std::vector<int64_t> buffers(ring * fields * kSeqLen);
  std::vector<uint16_t> src(kSeqLen + 1, 7);
  uint64_t s = 0;
  for (auto _ : state) {
    int64_t* out = buffers.data() + (s++ % ring) * fields * kSeqLen;
    for (uint64_t i = 0; i < kSeqLen; ++i) out[i] = src[i];
    for (uint64_t i = 0; i < kSeqLen; ++i) out[kSeqLen + i] = src[i + 1];
    if (fields == 4) {
      for (uint64_t i = 0; i < kSeqLen; ++i) out[2 * kSeqLen + i] = static_cast<int64_t>(i);
      std::fill(out + 3 * kSeqLen, out + 4 * kSeqLen, 0);
    }
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StoreFloor)->ArgName("all_fields")->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace feedline

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::remove(feedline::TokenFile().c_str());
  return 0;
}
