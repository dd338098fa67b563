// Trains a small next-token model with libtorch, fed by feedline::TokenLoader
// from a flat token file (nanoGPT's train.bin: raw uint16 ids, eos-ended
// documents), and resumes the loader mid-epoch from its saved state.
//
//   libtorch_tokens --write-corpus PATH   writes a small synthetic corpus
//   libtorch_tokens PATH [steps=40] [batch=8] [seq_len=64] [threads=0 (auto)]
//
// The batch's spans become int64 tensors without a copy: torch::from_blob
// with a deleter that holds the batch's keepalive, so the ring buffer goes
// back to feedline only when libtorch is done with the tensor.
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "feedline/token_loader.h"

namespace {

constexpr int64_t kVocab = 512;
constexpr int64_t kEos = 0;

// Documents of 20 to 200 tokens; inside one, each id follows from the one
// before (t -> 1 + (5t + 3) mod 511), so a bigram model can learn them.
int WriteCorpus(const char* path) {
  std::vector<uint16_t> ids;
  uint64_t x = 12345;
  while (ids.size() < 200000) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t length = 20 + (x >> 33) % 181;
    int64_t t = 1 + static_cast<int64_t>((x >> 20) % (kVocab - 1));
    for (uint64_t i = 0; i < length; ++i) {
      ids.push_back(static_cast<uint16_t>(t));
      t = 1 + (5 * t + 3) % (kVocab - 1);
    }
    ids.push_back(static_cast<uint16_t>(kEos));
  }
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr || std::fwrite(ids.data(), sizeof(uint16_t), ids.size(), f) != ids.size()) {
    std::fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  std::fclose(f);
  std::printf("wrote %zu tokens to %s\n", ids.size(), path);
  return 0;
}

// A zero-copy [rows, seq_len] int64 tensor over one field of the batch.
torch::Tensor AsTensor(const feedline::TokenBatch& batch, std::span<const int64_t> field) {
  auto* keep = new std::shared_ptr<void>(batch.batch.keepalive());
  return torch::from_blob(
      const_cast<int64_t*>(field.data()),
      {static_cast<int64_t>(batch.rows), static_cast<int64_t>(batch.seq_len)},
      [keep](void*) { delete keep; }, torch::TensorOptions().dtype(torch::kInt64));
}

struct BigramImpl : torch::nn::Module {
  BigramImpl()
      : embed(register_module("embed", torch::nn::Embedding(kVocab, 32))),
        out(register_module("out", torch::nn::Linear(32, kVocab))) {}
  torch::Tensor forward(torch::Tensor ids) { return out->forward(embed->forward(ids)); }
  torch::nn::Embedding embed;
  torch::nn::Linear out;
};
TORCH_MODULE(Bigram);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-corpus") return WriteCorpus(argv[2]);
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s --write-corpus PATH | %s PATH [steps] [batch] [seq_len] [threads]\n",
                 argv[0], argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 40;
  feedline::TokenLoaderOptions options;
  options.loader.batch_size = argc > 3 ? static_cast<uint64_t>(std::atoi(argv[3])) : 8;
  options.seq_len = argc > 4 ? static_cast<uint64_t>(std::atoi(argv[4])) : 64;
  options.loader.num_threads = argc > 5 ? static_cast<uint32_t>(std::atoi(argv[5])) : 0;
  options.loader.shuffle = true;
  options.loader.seed = 1;
  options.source.eos_token = kEos;
  auto loader = feedline::TokenLoader::Open({{argv[1]}}, options);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }
  std::printf("%llu tokens, %llu sequences of %llu per epoch\n",
              static_cast<unsigned long long>((*loader)->num_tokens()),
              static_cast<unsigned long long>((*loader)->num_sequences()),
              static_cast<unsigned long long>(options.seq_len));

  torch::manual_seed(0);
  Bigram model;
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.05));
  float first_loss = 0, last_loss = 0;
  std::string state;  // saved half-way, checked after the loop
  torch::Tensor next_after_state;
  for (int step = 0; step < steps;) {
    feedline::TokenBatch batch;
    bool end = false;
    const feedline::Status st = (*loader)->Next(&batch, &end);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    if (end) continue;  // the next epoch starts in a new order
    const torch::Tensor input_ids = AsTensor(batch, batch.input_ids);
    const torch::Tensor labels = AsTensor(batch, batch.labels);
    if (step == steps / 2 + 1) next_after_state = input_ids.clone();
    adam.zero_grad();
    const torch::Tensor logits = model->forward(input_ids);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        logits.view({-1, kVocab}), labels.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    loss.backward();
    adam.step();
    last_loss = loss.item<float>();
    if (step == 0) first_loss = last_loss;
    if (step % 10 == 0) {
      std::printf("step %d loss %.4f documents in the batch %zu\n", step, last_loss,
                  batch.cu_seqlens.size() - 1);
    }
    if (step == steps / 2) state = (*loader)->SaveState();
    ++step;
  }
  // A new loader resumed from the half-way state gives the batch that came
  // after it.
  auto resumed = feedline::TokenLoader::Open({{argv[1]}}, options);
  if (!resumed.ok() || !(*resumed)->RestoreState(state).ok()) {
    std::fprintf(stderr, "resume failed\n");
    return 1;
  }
  feedline::TokenBatch batch;
  bool end = false;
  if (!(*resumed)->Next(&batch, &end).ok() || end ||
      !torch::equal(AsTensor(batch, batch.input_ids), next_after_state)) {
    std::fprintf(stderr, "the resumed loader gave another batch\n");
    return 1;
  }
  std::printf("resumed: the same batch\n");
  std::printf("trained %d steps: loss %.4f -> %.4f\n", steps, first_loss, last_loss);
  return std::isfinite(last_loss) && last_loss < first_loss ? 0 : 1;
}
