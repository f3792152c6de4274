// The ordinary twin, its optimizer and the optimizer's tensors by name (see ordinary_checkpoint.h).
#include "train/parallel/ordinary_checkpoint.h"

#include <mutex>
#include <utility>

#include "core/error.h"
#include "train/models/lm_families.h"
#include "train/optim/state_key.h"

namespace gpulab::train::parallel {

namespace o = torch::optim;

namespace {

// Every field of a parameter's optimizer state shaped like the parameter, defined or not.
std::vector<std::pair<std::string, torch::Tensor*>> all_moment_fields(o::OptimizerParamState& s) {
  if (auto* a = dynamic_cast<o::AdamWParamState*>(&s))
    return {{"exp_avg", &a->exp_avg()},
            {"exp_avg_sq", &a->exp_avg_sq()},
            {"max_exp_avg_sq", &a->max_exp_avg_sq()}};
  if (auto* b = dynamic_cast<o::AdamParamState*>(&s))
    return {{"exp_avg", &b->exp_avg()},
            {"exp_avg_sq", &b->exp_avg_sq()},
            {"max_exp_avg_sq", &b->max_exp_avg_sq()}};
  if (auto* c = dynamic_cast<o::SGDParamState*>(&s))
    return {{"momentum_buffer", &c->momentum_buffer()}};
  if (auto* d = dynamic_cast<o::RMSpropParamState*>(&s))
    return {{"square_avg", &d->square_avg()},
            {"momentum_buffer", &d->momentum_buffer()},
            {"grad_avg", &d->grad_avg()}};
  throw Exception(Code::kUnsupported, "this optimizer's state has no model-parallel layout",
                  "use --optimizer adamw, adam, sgd or rmsprop with --tp or --pp");
}

}  // namespace

// The fields of a parameter's optimizer state shaped like the parameter (the ones a
// model-parallel layout splits or spreads).
std::vector<std::pair<std::string, torch::Tensor*>> moment_fields(o::OptimizerParamState& s) {
  auto f = all_moment_fields(s);
  std::erase_if(f, [](const auto& kv) { return !kv.second->defined(); });
  return f;
}

std::optional<int64_t> state_step(const o::OptimizerParamState& s) {
  if (auto* a = dynamic_cast<const o::AdamWParamState*>(&s)) return a->step();
  if (auto* b = dynamic_cast<const o::AdamParamState*>(&s)) return b->step();
  if (auto* d = dynamic_cast<const o::RMSpropParamState*>(&s)) return d->step();
  return std::nullopt;
}

std::unique_ptr<o::OptimizerParamState> make_state(const o::Optimizer& opt, int64_t step,
                                                   const std::map<std::string, torch::Tensor>& f) {
  std::unique_ptr<o::OptimizerParamState> s;
  if (dynamic_cast<const o::AdamW*>(&opt)) {
    s = std::make_unique<o::AdamWParamState>();
    static_cast<o::AdamWParamState&>(*s).step(step);
  } else if (dynamic_cast<const o::Adam*>(&opt)) {
    s = std::make_unique<o::AdamParamState>();
    static_cast<o::AdamParamState&>(*s).step(step);
  } else if (dynamic_cast<const o::SGD*>(&opt)) {
    s = std::make_unique<o::SGDParamState>();
  } else if (dynamic_cast<const o::RMSprop*>(&opt)) {
    s = std::make_unique<o::RMSpropParamState>();
    static_cast<o::RMSpropParamState&>(*s).step(step);
  } else {
    throw Exception(Code::kUnsupported, "this optimizer has no model-parallel checkpoint",
                    "use --optimizer adamw, adam, sgd or rmsprop with --tp or --pp");
  }
  size_t used = 0;
  for (auto& [field, t] : all_moment_fields(*s))
    if (auto it = f.find(field); it != f.end()) {
      *t = it->second;
      ++used;
    }
  if (used != f.size())
    throw Exception(Code::kDataError,
                    "the checkpoint's optimizer state does not fit this run's optimizer",
                    "resume with the --optimizer it was written with");
  return s;
}

std::unique_ptr<o::Optimizer> same_kind_optimizer(const o::Optimizer& opt,
                                                  std::vector<std::vector<torch::Tensor>> groups) {
  GPULAB_ASSERT(groups.size() == opt.param_groups().size(), "one parameter list per group");
  std::vector<o::OptimizerParamGroup> made;
  for (size_t i = 0; i < groups.size(); ++i)
    made.emplace_back(std::move(groups[i]), opt.param_groups()[i].options().clone());
  std::unique_ptr<o::Optimizer> out;
  if (auto* a = dynamic_cast<const o::AdamW*>(&opt))
    out = std::make_unique<o::AdamW>(std::move(made),
                                     static_cast<const o::AdamWOptions&>(a->defaults()));
  else if (auto* b = dynamic_cast<const o::Adam*>(&opt))
    out = std::make_unique<o::Adam>(std::move(made),
                                    static_cast<const o::AdamOptions&>(b->defaults()));
  else if (auto* c = dynamic_cast<const o::SGD*>(&opt))
    out =
        std::make_unique<o::SGD>(std::move(made), static_cast<const o::SGDOptions&>(c->defaults()));
  else if (auto* d = dynamic_cast<const o::RMSprop*>(&opt))
    out = std::make_unique<o::RMSprop>(std::move(made),
                                       static_cast<const o::RMSpropOptions&>(d->defaults()));
  else
    throw Exception(Code::kUnsupported, "this optimizer has no model-parallel checkpoint",
                    "use --optimizer adamw, adam, sgd or rmsprop with --tp or --pp");
  // The constructor merges group options with the defaults (optimizers.cpp): set them again.
  for (size_t i = 0; i < opt.param_groups().size(); ++i)
    out->param_groups()[i].set_options(opt.param_groups()[i].options().clone());
  return out;
}

std::shared_ptr<CausalLm> ordinary_twin(const DecoderConfig& c, torch::ScalarType dtype) {
  auto gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor rng;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng = gen.get_state();
  }
  auto twin = build_causal_lm(c);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  }
  twin->to(dtype);
  return twin;
}

Moments state_moments(torch::nn::Module& model, const o::Optimizer& opt) {
  Moments m;
  auto& state = const_cast<o::Optimizer&>(opt).state();
  for (const auto& p : model.named_parameters()) {
    if (p.value().is_meta()) continue;
    auto it = state.find(state_key(p.value()));
    if (it == state.end()) continue;
    for (auto& [field, t] : moment_fields(*it->second)) m[field][p.key()] = *t;
  }
  return m;
}

void copy_state(o::Optimizer& from, torch::nn::Module& from_model, o::Optimizer& to,
                torch::nn::Module& to_model, const Moments& moments) {
  auto from_params = from_model.named_parameters();
  for (const auto& p : to_model.named_parameters()) {
    if (p.value().is_meta()) continue;
    auto it = from.state().find(state_key(from_params[p.key()]));
    if (it == from.state().end()) continue;
    auto copy = it->second->clone();
    for (auto& [field, t] : moment_fields(*copy)) *t = moments.at(field).at(p.key()).clone();
    to.state()[state_key(p.value())] = std::move(copy);
  }
}

}  // namespace gpulab::train::parallel
