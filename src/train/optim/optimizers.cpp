// Optimizer construction with decay / no-decay parameter groups.
#include "train/optim/optimizers.h"

#include "core/error.h"
#include "train/models/causal_lm.h"
#include "train/optim/fused_adamw.h"
#include "train/optim/fused_sgd.h"

namespace gpulab::train {

OptimizerSpec optimizer_spec(const TrainOptions& opts) {
  OptimizerSpec s;
  s.name = opts.optimizer;
  s.lr = opts.learning_rate;
  s.weight_decay = opts.weight_decay;
  s.momentum = opts.momentum;
  s.nesterov = opts.nesterov;
  return s;
}

namespace {

template <typename Opt, typename O>
std::unique_ptr<torch::optim::Optimizer> build(const O& base, std::vector<torch::Tensor> decay,
                                               std::vector<torch::Tensor> no_decay) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), std::make_unique<O>(base));
  groups.emplace_back(std::move(no_decay), std::make_unique<O>(base));
  auto opt = std::make_unique<Opt>(std::move(groups), base);
  // libtorch 2.x merges a group's options with the optimizer's defaults field by field, taking
  // the defaults' value wherever the group's equals the options type's constructor default: the
  // no-decay group's weight_decay(0) is SGDOptions' default, so it got the decay back (and a
  // decay group at AdamWOptions' default 1e-2 would lose it). Each group's decay is set after
  // construction, where no merge follows.
  for (size_t i = 0; i < 2; ++i)
    static_cast<O&>(opt->param_groups()[i].options())
        .weight_decay(i == 0 ? base.weight_decay() : 0.0);
  return opt;
}

}  // namespace

bool takes_weight_decay(const torch::nn::Module& model, const std::string& name,
                        const torch::Tensor& p) {
  if (p.dim() <= 1) return false;
  const auto* lm = dynamic_cast<const CausalLm*>(&model);
  if (lm == nullptr) return true;
  const auto& traits = lm->config().traits();
  return name != traits.token_embedding && name != traits.position_embedding;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& s,
                                                        torch::nn::Module& model) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    (takes_weight_decay(model, item.key(), p) ? decay : no_decay).push_back(p);
  }
  return make_optimizer(s, std::move(decay), std::move(no_decay));
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& s,
                                                        std::vector<torch::Tensor> decay,
                                                        std::vector<torch::Tensor> no_decay) {
  namespace o = torch::optim;
  if (s.name == "sgd") {
    auto base = o::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay);
    base.nesterov(s.nesterov && s.momentum > 0);
    if (s.fused) return build<FusedSgd>(base, std::move(decay), std::move(no_decay));
    return build<o::SGD>(base, std::move(decay), std::move(no_decay));
  }
  if (s.name == "adam")
    return build<o::Adam>(o::AdamOptions(s.lr).weight_decay(s.weight_decay), std::move(decay),
                          std::move(no_decay));
  if (s.name == "adamw")
    return build<FusedAdamW>(o::AdamWOptions(s.lr).weight_decay(s.weight_decay), std::move(decay),
                             std::move(no_decay));
  if (s.name == "rmsprop")
    return build<o::RMSprop>(
        o::RMSpropOptions(s.lr).weight_decay(s.weight_decay).momentum(s.momentum), std::move(decay),
        std::move(no_decay));
  throw Exception(Code::kInvalidArgument, "unknown optimizer '" + s.name + "'",
                  "valid values: sgd, adam, adamw, rmsprop");
}

void set_learning_rate(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) g.options().set_lr(lr);
}

double learning_rate(const torch::optim::Optimizer& opt) {
  return opt.param_groups().empty() ? 0.0 : opt.param_groups().front().options().get_lr();
}

}  // namespace gpulab::train
