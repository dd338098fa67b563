// Trains a small CNN with libtorch, fed by feedline from an image folder.
//
//   libtorch_train DATA_DIR [steps=20] [batch=32] [threads=0 (auto)]
//
// The batch buffers become torch tensors without a copy: torch::from_blob
// with a deleter that holds the batch's keepalive, so a buffer returns to
// feedline's ring only when libtorch is done with the tensor.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "feedline/image_folder.h"
#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"

namespace {

// A zero-copy tensor over field i of the batch.
torch::Tensor AsTensor(const feedline::Batch& batch, size_t i, torch::Dtype dtype) {
  std::vector<int64_t> shape = {static_cast<int64_t>(batch.size())};
  for (int64_t d : batch.field(i).shape) shape.push_back(d);
  auto* keep = new std::shared_ptr<void>(batch.keepalive());
  return torch::from_blob(
      batch.data(i), shape, [keep](void*) { delete keep; }, torch::TensorOptions().dtype(dtype));
}

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t classes)
      : conv1(register_module("conv1",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).stride(2)))),
        conv2(register_module("conv2",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).stride(2)))),
        fc(register_module("fc", torch::nn::Linear(32, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv1->forward(x));
    x = torch::relu(conv2->forward(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc->forward(x);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA_DIR [steps] [batch] [threads]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int batch_size = argc > 3 ? std::atoi(argv[3]) : 32;
  const uint32_t threads = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 0;

  auto folder = feedline::ImageFolder::Open(argv[1]);
  if (!folder.ok()) {
    std::fprintf(stderr, "%s\n", folder.status().ToString().c_str());
    return 1;
  }
  feedline::LoaderOptions options;
  options.batch_size = static_cast<uint64_t>(batch_size);
  options.shuffle = true;
  options.drop_last = true;
  options.num_threads = threads;
  auto loader = feedline::Loader::Create(
      feedline::ImageFolderPipeline(*folder, feedline::ImageNetTrain(64)), options);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }

  torch::manual_seed(0);
  Net net(static_cast<int64_t>((*folder)->classes.size()));
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < steps;) {
    feedline::Batch batch;
    bool end = false;
    const feedline::Status st = (*loader)->Next(&batch, &end);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    if (end) continue;  // next epoch
    const torch::Tensor images = AsTensor(batch, 0, torch::kFloat32);
    const torch::Tensor labels = AsTensor(batch, 1, torch::kInt64);
    sgd.zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(images), labels);
    loss.backward();
    sgd.step();
    last_loss = loss.item<float>();
    if (step == 0) first_loss = last_loss;
    std::printf("step %d loss %.4f\n", step, last_loss);
    ++step;
  }
  std::printf("trained %d steps: loss %.4f -> %.4f\n", steps, first_loss, last_loss);
  return std::isfinite(last_loss) ? 0 : 1;
}
