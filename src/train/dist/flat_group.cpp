// FlatGroup: building the flat buffer, pointing the parameters into it, release and allocation
// of its storage, and flat gradients.
#include "train/dist/flat_group.h"

#include "core/error.h"

namespace gpulab::train::dist {

FlatGroup::FlatGroup(std::vector<torch::Tensor> params, int rank, int world,
                     std::optional<torch::ScalarType> compute)
    : params_(std::move(params)), rank_(rank), world_(world) {
  GPULAB_ASSERT(!params_.empty(), "a flat group needs parameters");
  for (auto& p : params_) {
    GPULAB_ASSERT(p.is_non_overlapping_and_dense(), "sharded parameters must be dense");
    GPULAB_ASSERT(p.scalar_type() == params_[0].scalar_type() && p.device() == params_[0].device(),
                  "a flat group holds one dtype on one device");
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  shard_ = (numel_ + world_ - 1) / world_;
  padded_ = shard_ * world_;
  torch::NoGradGuard no_grad;
  auto master = torch::zeros({padded_}, params_[0].options().requires_grad(false));
  for (size_t i = 0; i < params_.size(); ++i) param_view(master, i).copy_(params_[i]);
  shard_tensor_ = master.narrow(0, shard_ * rank_, shard_).clone();
  full_ = compute && *compute != master.scalar_type() ? master.to(*compute) : master;
  master = torch::Tensor();
  // The parameter keeps its identity (modules, autograd and optimizers hold it) and its own
  // version counter; only its storage (and, with compute copies, its dtype) becomes the buffer's.
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(param_view(full_, i));
}

torch::Tensor FlatGroup::param_view(const torch::Tensor& full, size_t i) const {
  const auto& p = params_[i];
  return full.as_strided(p.sizes(), p.strides(), full.storage_offset() + offsets_[i]);
}

void FlatGroup::release(BufferPool* pool) {
  auto* impl = full_.storage().unsafeGetStorageImpl();
  const size_t nbytes = impl->nbytes();
  c10::DataPtr old = impl->set_data_ptr(c10::DataPtr(nullptr, full_.device()));
  impl->set_nbytes(0);
  gathered_ = false;
  if (pool && nbytes > 0) pool->give(std::move(old), nbytes);
}

void FlatGroup::allocate(BufferPool* pool) {
  auto* impl = full_.storage().unsafeGetStorageImpl();
  const auto nbytes = static_cast<size_t>(padded_) * full_.element_size();
  if (impl->nbytes() == nbytes) return;
  c10::DataPtr kept = pool ? pool->take(nbytes, full_.device()) : c10::DataPtr();
  if (kept) {
    impl->set_data_ptr_noswap(std::move(kept));
  } else {
    GPULAB_ASSERT(impl->allocator(), "the flat buffer's storage has no allocator");
    impl->set_data_ptr_noswap(impl->allocator()->allocate(nbytes));
  }
  impl->set_nbytes(nbytes);
}

torch::Tensor FlatGroup::flat_grad(torch::ScalarType dtype) const {
  torch::NoGradGuard no_grad;
  // Every element is written once: the gradients, zeros where a parameter has none, and the
  // padding (torch::zeros first would write the whole buffer twice).
  auto flat = torch::empty({padded_}, shard_tensor_.options().dtype(dtype).requires_grad(false));
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& g = params_[i].grad();
    if (g.defined())
      param_view(flat, i).copy_(g);
    else
      param_view(flat, i).zero_();
  }
  if (padded_ > numel_) flat.narrow(0, numel_, padded_ - numel_).zero_();
  return flat;
}

void FlatGroup::adopt_master(const torch::Tensor& full_master) {
  GPULAB_ASSERT(full_master.numel() == padded_ && full_master.scalar_type() == master_dtype(),
                "adopt_master takes the gathered master values");
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(param_view(full_master, i));
  full_ = full_master;
  gathered_ = true;
}

int64_t FlatGroup::full_bytes() const {
  return padded_ * static_cast<int64_t>(full_.element_size());
}

int64_t FlatGroup::shard_bytes() const {
  return shard_ * static_cast<int64_t>(shard_tensor_.element_size());
}

}  // namespace gpulab::train::dist
