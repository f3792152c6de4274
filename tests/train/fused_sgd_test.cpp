// The one-pass SGD step against libtorch's SGD (the same kernels torch.optim.SGD runs): the same
// parameters after several steps with weight decay, momentum, dampening and Nesterov, on
// parameters in both layouts and large enough to be split between threads; the same state, so
// the two can take turns and a checkpoint of one restores into the other.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "train/optim/fused_sgd.h"
#include "train/optim/optimizers.h"

namespace gpulab::train {
namespace {

// Parameters of the shapes a ConvNet has: a channels-last conv weight, a plain one, a matrix
// (with it more than 2 x 2^16 elements in all, so two threads share the step), a vector and an
// odd-sized vector.
std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> ps = {
      torch::randn({16, 8, 3, 3}).contiguous(torch::MemoryFormat::ChannelsLast),
      torch::randn({8, 3, 5, 5}), torch::randn({400, 401}), torch::randn({64}), torch::randn({13})};
  for (auto& p : ps) p.requires_grad_(true);
  return ps;
}

std::vector<torch::Tensor> clone_params(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps)
    out.push_back(p.detach().clone(torch::MemoryFormat::Preserve).requires_grad_(true));
  return out;
}

// The same random gradients (in each parameter's layout) on both sets.
void set_grads(std::vector<torch::Tensor>& a, std::vector<torch::Tensor>& b, int step) {
  torch::manual_seed(1000 + step);
  for (size_t i = 0; i < a.size(); ++i) {
    auto g = torch::empty_like(a[i]).normal_();
    a[i].mutable_grad() = g.clone(torch::MemoryFormat::Preserve);
    b[i].mutable_grad() = g.clone(torch::MemoryFormat::Preserve);
  }
}

// Two groups as make_optimizer builds them: the first decays, the second does not.
std::vector<torch::optim::OptimizerParamGroup> groups(const std::vector<torch::Tensor>& ps,
                                                      const torch::optim::SGDOptions& o) {
  auto no_decay = std::make_unique<torch::optim::SGDOptions>(o);
  no_decay->weight_decay(0);
  std::vector<torch::optim::OptimizerParamGroup> g;
  g.emplace_back(std::vector<torch::Tensor>(ps.begin(), ps.begin() + 3),
                 std::make_unique<torch::optim::SGDOptions>(o));
  g.emplace_back(std::vector<torch::Tensor>(ps.begin() + 3, ps.end()), std::move(no_decay));
  return g;
}

// Largest difference in units of the parameter's magnitude.
double worst_relative(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].strides(), b[i].strides()) << "parameter " << i << " changed layout";
    auto d = (a[i] - b[i]).abs() / (b[i].abs() + 1e-3);
    worst = std::max(worst, d.max().item<double>());
  }
  return worst;
}

// The op (at::_fused_sgd_) updated `n` parameters.
void expect_one_pass(const FusedSgd& fused, int64_t n) {
  EXPECT_EQ(fused.fused_params(), n) << "at::_fused_sgd_ did not run";
}

TEST(FusedSgd, MatchesLibtorchSgdOverSteps) {
  struct Case {
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  for (const Case c : {Case{0.9, 0, 5e-4, false}, Case{0.9, 0, 1e-2, true},
                       Case{0.8, 0.1, 1e-3, false}, Case{0, 0, 1e-3, false}}) {
    auto ref = make_params(7), ours = clone_params(ref);
    auto o = torch::optim::SGDOptions(0.05)
                 .momentum(c.momentum)
                 .dampening(c.dampening)
                 .weight_decay(c.weight_decay)
                 .nesterov(c.nesterov);
    torch::optim::SGD sgd(groups(ref, o), o);
    FusedSgd fused(groups(ours, o), o);
    for (int step = 0; step < 6; ++step) {
      set_grads(ref, ours, step);
      sgd.step();
      fused.step();
    }
    expect_one_pass(fused, 5);
    // float32, six steps: the op and libtorch's sequence round differently (a fused multiply-add
    // or not) by at most an ulp or two per step; measured up to 1.1e-7, and 1e-6 relative is a
    // few ulp. A lost momentum or decay term moves a parameter by 1e-3 or more.
    EXPECT_LT(worst_relative(ours, ref), 1e-6)
        << "momentum " << c.momentum << " nesterov " << c.nesterov;
  }
}

// A 1x1 conv weight whose gradient carries channels-last strides over its size-1 dims (as the
// conv paths hand it over) is in the parameter's memory order: the one-pass kernel takes it.
TEST(FusedSgd, TakesGradientsThatDifferOnlyInSizeOneStrides) {
  torch::manual_seed(5);
  auto ref = std::vector<torch::Tensor>{torch::randn({64, 32, 1, 1}).requires_grad_(true)};
  auto ours = clone_params(ref);
  const auto o = torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3).nesterov(true);
  torch::optim::SGD sgd(ref, o);
  FusedSgd fused(ours, o);
  for (int step = 0; step < 3; ++step) {
    auto g =
        torch::empty_strided({64, 32, 1, 1}, {32, 1, 32, 32}).copy_(torch::randn({64, 32, 1, 1}));
    ASSERT_NE(g.strides(), ours[0].strides());
    ref[0].mutable_grad() = g.clone();
    ours[0].mutable_grad() = g.clone(torch::MemoryFormat::Preserve);
    sgd.step();
    fused.step();
  }
  expect_one_pass(fused, 1);
  EXPECT_LT(worst_relative(ours, ref), 1e-6);  // as above: measured 0
}

TEST(FusedSgd, SharesStateWithLibtorchSgdAndItsCheckpoints) {
  const auto o = torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3).nesterov(true);
  auto ref = make_params(3), ours = clone_params(ref);
  torch::optim::SGD sgd(groups(ref, o), o);
  FusedSgd fused(groups(ours, o), o);
  for (int step = 0; step < 2; ++step) {
    set_grads(ref, ours, step);
    sgd.step();
    fused.step();
  }
  // The fused optimizer's momentum buffers are where libtorch's SGD looks for them: a step of
  // the base class continues from them (a missing buffer would restart momentum from zero).
  set_grads(ref, ours, 2);
  sgd.step();
  fused.torch::optim::SGD::step();
  EXPECT_LT(worst_relative(ours, ref), 1e-6);  // as above: measured 0

  // Saved by one, loaded by the other, the run goes on the same.
  std::stringstream bytes;
  {
    torch::serialize::OutputArchive ar;
    fused.save(ar);
    ar.save_to(bytes);
  }
  auto restored = clone_params(ours);
  torch::optim::SGD plain(groups(restored, o), o);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  plain.load(in);
  set_grads(ours, restored, 3);
  fused.step();
  plain.step();
  EXPECT_LT(worst_relative(ours, restored), 1e-6);  // measured 0; a restarted momentum: 1e-3
  EXPECT_GT(worst_relative(ours, ref), 1e-4) << "the step did not change the parameters";
}

TEST(FusedSgd, MakeOptimizerUsesItForSgdUnlessAsked) {
  torch::nn::Linear fc(4, 3);
  OptimizerSpec s{"sgd", 0.1, 1e-4, 0.9, false};
  EXPECT_NE(dynamic_cast<FusedSgd*>(make_optimizer(s, *fc).get()), nullptr);
  s.fused = false;
  auto plain = make_optimizer(s, *fc);
  EXPECT_EQ(dynamic_cast<FusedSgd*>(plain.get()), nullptr);
  EXPECT_NE(dynamic_cast<torch::optim::SGD*>(plain.get()), nullptr);
}

}  // namespace
}  // namespace gpulab::train
