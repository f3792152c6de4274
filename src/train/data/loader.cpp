// DataLoader (see loader.h): worker threads take whole batches in order of a shared counter,
// at most a few ahead of the consumer, and hand them over by batch number, so the order and the
// content of batches never depend on how many workers there are or how they are scheduled.
#include "train/data/loader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "train/data/gpu_pipeline.h"

// OpenMP's per-thread team size: when libtorch runs on OpenMP (the usual build), a worker sets
// it to 1 so its small per-image ops stay on its own thread, as PyTorch's worker processes do.
extern "C" void omp_set_num_threads(int) __attribute__((weak));

namespace gpulab::train {

int auto_num_workers(int local_ranks) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores / std::max(1, local_ranks), 1, 16);
}

class DataLoader::Impl {
 public:
  ~Impl() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    space_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    ready_.clear();
    stopping_ = false;
  }

  // Per-epoch state.
  int64_t epoch = 0;
  std::vector<int64_t> indices;
  int64_t num_batches = 0;
  int64_t next_deliver = 0;

  struct Slot {
    torch::Tensor images, labels;
    std::exception_ptr error;
  };
  std::mutex mu_;
  std::condition_variable space_, filled_;
  std::map<int64_t, Slot> ready_;
  int64_t next_take_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<GpuPipeline> gpu;
};

DataLoader::DataLoader(DatasetPtr dataset, std::shared_ptr<Sampler> sampler, LoaderOptions options)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
  GPULAB_ASSERT(dataset_ && sampler_, "DataLoader needs a data set and a sampler");
  if (options_.batch_size <= 0)
    throw Exception(Code::kInvalidArgument, "batch size must be positive");
  if (options_.transform.input_size <= 0)
    throw Exception(Code::kInvalidArgument, "input size must be positive");
  const auto shape = dataset_->image_shape();
  if (options_.transform.out_channels > 0 && shape[0] != options_.transform.out_channels &&
      shape[0] != 1)
    throw Exception(Code::kInvalidArgument, dataset_->name() + " has " + std::to_string(shape[0]) +
                                                "-channel images; the model takes " +
                                                std::to_string(options_.transform.out_channels));
  on_device_ = options_.mode == PipelineMode::kDevice ||
               (options_.mode == PipelineMode::kAuto && options_.device.is_cuda() &&
                GpuPipeline::suitable(*dataset_));
  if (on_device_) {
    impl_->gpu = std::make_unique<GpuPipeline>(*dataset_, options_.device, options_.transform,
                                               options_.seed);
  } else {
    workers_ = options_.num_workers < 0 ? auto_num_workers() : options_.num_workers;
  }
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::batches_per_epoch() const {
  return impl_->num_batches;
}
int64_t DataLoader::samples_per_epoch() const {
  return std::min<int64_t>(static_cast<int64_t>(impl_->indices.size()),
                           impl_->num_batches * options_.batch_size);
}

namespace {

// Builds one batch on the CPU: get, transform, and labels, into (pinned) host tensors.
void build_batch(const Dataset& ds, const LoaderOptions& o, const std::vector<int64_t>& indices,
                 int64_t begin, int64_t end, int64_t epoch, torch::Tensor& images,
                 torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  const auto shape = ds.image_shape();
  const int64_t n = end - begin;
  const int64_t oc = o.transform.out_channels > 0 ? o.transform.out_channels : shape[0];
  const int64_t s = o.transform.input_size;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  const bool pin = o.pin_memory && o.device.is_cuda();
  images = torch::empty({n, oc, s, s}, opts.pinned_memory(pin));
  labels = torch::empty({n}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(pin));
  auto scratch = torch::empty(shape, torch::kUInt8);
  auto* lab = labels.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t idx = indices[static_cast<size_t>(begin + k)];
    lab[k] = ds.get(idx, scratch);
    const auto d = draw_augment(o.transform, o.seed, epoch, idx, shape[1], shape[2]);
    transform_image(scratch, d, o.transform, images[k]);
  }
}

}  // namespace

void DataLoader::start_epoch(int64_t epoch) {
  Impl& m = *impl_;
  m.stop();
  m.epoch = epoch;
  m.indices = sampler_->epoch_indices(epoch);
  const auto total = static_cast<int64_t>(m.indices.size());
  m.num_batches = options_.drop_last ? total / options_.batch_size
                                     : (total + options_.batch_size - 1) / options_.batch_size;
  m.next_deliver = 0;
  m.next_take_ = 0;
  if (on_device_ || workers_ == 0) return;
  const int64_t ahead = std::max(1, workers_ * std::max(1, options_.prefetch_per_worker));
  for (int w = 0; w < workers_; ++w) {
    m.threads_.emplace_back([this, &m, ahead] {
      if (omp_set_num_threads) omp_set_num_threads(1);
      while (true) {
        int64_t b = 0;
        {
          std::unique_lock lock(m.mu_);
          m.space_.wait(lock, [&] {
            return m.stopping_ || m.next_take_ >= m.num_batches ||
                   m.next_take_ < m.next_deliver + ahead;
          });
          if (m.stopping_ || m.next_take_ >= m.num_batches) return;
          b = m.next_take_++;
        }
        Impl::Slot slot;
        try {
          const int64_t begin = b * options_.batch_size;
          const int64_t end = std::min<int64_t>(begin + options_.batch_size,
                                                static_cast<int64_t>(m.indices.size()));
          build_batch(*dataset_, options_, m.indices, begin, end, m.epoch, slot.images,
                      slot.labels);
        } catch (...) {
          slot.error = std::current_exception();
        }
        {
          std::lock_guard lock(m.mu_);
          m.ready_[b] = std::move(slot);
        }
        m.filled_.notify_all();
      }
    });
  }
}

void DataLoader::abandon_epoch() {
  impl_->stop();
  impl_->next_deliver = impl_->num_batches;
}

std::optional<Batch> DataLoader::next() {
  Impl& m = *impl_;
  if (m.next_deliver >= m.num_batches) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t b = m.next_deliver;
  const int64_t begin = b * options_.batch_size;
  const int64_t end =
      std::min<int64_t>(begin + options_.batch_size, static_cast<int64_t>(m.indices.size()));
  Batch out;
  out.index = b;
  if (on_device_) {
    std::vector<int64_t> idx(m.indices.begin() + begin, m.indices.begin() + end);
    std::tie(out.images, out.labels) = m.gpu->batch(idx, m.epoch);
    ++m.next_deliver;
  } else if (workers_ == 0) {
    ++m.next_deliver;
    build_batch(*dataset_, options_, m.indices, begin, end, m.epoch, out.images, out.labels);
  } else {
    Impl::Slot slot;
    {
      std::unique_lock lock(m.mu_);
      m.filled_.wait(lock, [&] { return m.ready_.count(b) > 0; });
      slot = std::move(m.ready_[b]);
      m.ready_.erase(b);
      ++m.next_deliver;
    }
    m.space_.notify_all();
    if (slot.error) {
      abandon_epoch();
      try {
        std::rethrow_exception(slot.error);
      } catch (const Exception&) {
        throw;
      } catch (const std::exception& e) {
        throw Exception(Code::kDataError, std::string("loading a batch failed: ") + e.what());
      }
    }
    out.images = std::move(slot.images);
    out.labels = std::move(slot.labels);
  }
  if (!on_device_ && options_.device != torch::kCPU) {
    out.images = out.images.to(options_.device, /*non_blocking=*/true);
    out.labels = out.labels.to(options_.device, /*non_blocking=*/true);
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++delivered_;
  return out;
}

}  // namespace gpulab::train
