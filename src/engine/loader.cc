// Loader, the public face (loader.h): validates the pipeline and options,
// plans parallelism, starts the threads, and guards the consumer calls. The
// engine itself is detail::LoaderCore (loader_core.h).
#include "feedline/loader.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "src/core/clock.h"
#include "src/core/cpu.h"
#include "src/core/detail/fingerprint.h"
#include "src/core/process.h"
#include "src/engine/detail/loader_core.h"
#include "src/engine/detail/parallelism.h"

namespace feedline {

using core::NowNs;

uint32_t AvailableCores() { return core::AvailableCores(); }

class Loader::Impl {
 public:
  // Rejects a second consumer call while one runs, and any call from a
  // forked child (docs/reliability.md 37). Not a lock: the misuse is an error,
  // never a wait.
  class ConsumerScope {
   public:
    ConsumerScope(Impl* impl, const char* what) : impl_(impl) {
      if (core::CurrentPid() != impl->core->creator_pid_) {
        status_ = FailedPreconditionError(
            std::string("Loader::") + what + " in a forked child: this loader belongs to process " +
            std::to_string(impl->core->creator_pid_) +
            " and its worker threads do not exist here; create a new loader in the child");
        return;
      }
      if (impl->consumer_busy.exchange(true, std::memory_order_acquire)) {
        status_ = FailedPreconditionError(
            std::string("Loader::") + what +
            " while another thread is inside Next/SetEpoch/RestoreState of the same loader: a "
            "loader "
            "has one consumer; iterate it from one thread, or give each thread its own loader");
        return;
      }
      owns_ = true;
    }
    ~ConsumerScope() {
      if (owns_) impl_->consumer_busy.store(false, std::memory_order_release);
    }
    const Status& status() const { return status_; }

   private:
    Impl* impl_;
    Status status_;
    bool owns_ = false;
  };

  std::shared_ptr<LoaderCore> core;
  std::vector<std::thread> threads;
  std::thread tuner;
  std::atomic<bool> consumer_busy{false};
};

Result<std::unique_ptr<Loader>> Loader::Create(Pipeline pipeline, LoaderOptions options) {
  if (pipeline.ops.empty()) return InvalidArgumentError("pipeline has no ops");
  for (const auto& op : pipeline.ops) {
    if (op == nullptr) return InvalidArgumentError("pipeline has a null op");
  }
  if (pipeline.fields.empty()) return InvalidArgumentError("pipeline has no output fields");
  for (const FieldSpec& f : pipeline.fields) {
    if (f.kind == FieldKind::kTensor && f.SampleBytes() == 0) {
      return InvalidArgumentError("field '" + f.name + "' has a non-positive dimension");
    }
  }
  SamplerOptions so;
  so.num_samples = pipeline.num_samples;
  so.batch_size = options.batch_size;
  so.shuffle = options.shuffle;
  so.seed = options.seed;
  so.rank = options.rank;
  so.world_size = options.world_size;
  so.drop_last = options.drop_last;
  so.group_sizes = pipeline.sample_groups;
  so.group_window = pipeline.group_window;
  {
    core::detail::Fingerprint data, config;
    bool any_data = false, any_config = false;
    for (const auto& op : pipeline.ops) {
      if (const uint64_t d = op->DataFingerprint(); d != 0) {
        data.Add(d);
        any_data = true;
      }
      if (const uint64_t c = op->ConfigFingerprint(); c != 0) {
        config.Add(c);
        any_config = true;
      }
    }
    so.data_fingerprint = any_data ? data.value() : 0;
    so.config_fingerprint = any_config ? config.value() : 0;
  }
  FEEDLINE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(so));

  if (options.max_bytes == 0) options.max_bytes = core::DefaultRamBudget(kDefaultRamFraction);
  // An auto CPU budget is every core available: the tuner measures how much
  // of a core the training loop uses and keeps that for it (docs/tuner.md).
  const bool cpu_budget_auto = options.cpu_budget == 0;
  if (cpu_budget_auto) options.cpu_budget = core::AvailableCores();
  detail::PipelineDemand demand;
  {
    const detail::BatchLayout layout =
        detail::BatchLayout::Make(options.batch_size, pipeline.fields);
    demand.batch_bytes = layout.total_bytes;
    for (size_t i = 0; i < layout.fields.size(); ++i) {
      demand.batch_detail += (i ? ", " : "") + layout.fields[i].name + " " +
                             std::string(DTypeName(layout.fields[i].dtype)) + " " +
                             std::to_string(layout.sample_bytes[i]) + " bytes/sample";
    }
  }
  for (const auto& op : pipeline.ops) {
    if (BackgroundWork* work = op->background()) {
      demand.reserved_bytes += work->ReservedBytes();
      ++demand.read_aheads;
    }
    demand.charges_scratch |= op->ChargesScratch();
  }
  FEEDLINE_ASSIGN_OR_RETURN(detail::Parallelism par, detail::PlanParallelism(demand, options));
  par.lend_trainer_cores = cpu_budget_auto && par.threads_auto;
  const uint32_t threads = par.max_threads;
  if (options.allocator == nullptr) options.allocator = NewHostAllocator();

  auto impl = std::make_unique<Impl>();
  impl->core = std::make_shared<LoaderCore>(std::move(pipeline), std::move(options),
                                            std::move(sampler), par);
  impl->core->NotifyPlan();  // before the workers start: read-ahead can begin with them
  impl->threads.reserve(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    impl->threads.emplace_back([core = impl->core.get(), i] { core->WorkerLoop(i); });
  }
  if (par.threads_auto || par.ring_auto || par.read_ahead) {
    impl->tuner = std::thread([core = impl->core.get()] { core->TunerLoop(); });
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() {
  if (core::CurrentPid() != impl_->core->creator_pid_) {
    // A forked child's copy: the threads to join and whoever held the locks
    // at the fork exist only in the parent. Leak it rather than join
    // threads that are not there or touch a lock that may be held forever.
    (void)impl_.release();
    return;
  }
  impl_->core->Cancel();
  for (std::thread& t : impl_->threads) t.join();
  if (impl_->tuner.joinable()) impl_->tuner.join();
  // Ops' background work (read-ahead) stops now, even if delivered batches
  // keep the core alive.
  for (const auto& op : impl_->core->pipeline_.ops) {
    if (op->background() != nullptr) op->background()->OnPlan(nullptr, 0);
  }
  impl_->core->closed_.store(true);
  impl_->core->ReleaseAfterJoin();
}

Status Loader::Next(Batch* batch, bool* end_of_epoch) {
  Impl::ConsumerScope scope(impl_.get(), "Next");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  return impl_->core->Next(batch, end_of_epoch, 0, nullptr);
}

Status Loader::NextFor(Batch* batch, bool* end_of_epoch, std::chrono::nanoseconds timeout,
                       bool* timed_out) {
  Impl::ConsumerScope scope(impl_.get(), "NextFor");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  // At least 1 ns, so that 0 never means "forever" here.
  const int64_t deadline = NowNs() + std::max<int64_t>(1, timeout.count());
  return impl_->core->Next(batch, end_of_epoch, deadline, timed_out);
}

Status Loader::SetEpoch(uint64_t epoch) {
  Impl::ConsumerScope scope(impl_.get(), "SetEpoch");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  impl_->core->Reset(epoch, 0);
  return Status::OK();
}

std::string Loader::SaveState() const { return impl_->core->SaveState(); }

Status Loader::RestoreState(std::string_view state) {
  Impl::ConsumerScope scope(impl_.get(), "RestoreState");
  FEEDLINE_RETURN_IF_ERROR(scope.status());
  FEEDLINE_ASSIGN_OR_RETURN(SamplerPosition pos, impl_->core->sampler_.RestoreState(
                                                     state, impl_->core->options_.elastic));
  impl_->core->Reset(pos.epoch, pos.batch);
  return Status::OK();
}

void Loader::Cancel() { impl_->core->Cancel(); }
MetricsSnapshot Loader::Metrics() const { return impl_->core->Metrics(); }
const Sampler& Loader::sampler() const { return impl_->core->sampler_; }
uint64_t Loader::num_batches() const { return impl_->core->sampler_.num_batches(); }
uint64_t Loader::epoch() const { return impl_->core->epoch(); }
SamplerPosition Loader::position() const { return impl_->core->position(); }
uint32_t Loader::num_threads() const { return impl_->core->active_threads(); }

}  // namespace feedline
