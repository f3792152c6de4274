// Device-against-CPU numerics of one forward and backward pass (device_parity.h).
#include "bench/device_parity.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "train/device.h"
#include "train/models/decoder_config.h"
#include "train/models/lm_families.h"
#include "train/models/registry.h"

namespace gpulab::bench {

namespace {

constexpr int64_t kVocab = 256;  // language models: the byte vocabulary of synthetic text

train::ClassifierPtr build(const ParityOptions& o) {
  torch::manual_seed(o.seed);
  if (train::is_language_model(o.model)) {
    train::DecoderConfig cfg = train::find_decoder_config(o.model).value_or_throw();
    if (cfg.vocab_from_data) cfg.vocab_size = kVocab;
    return train::build_causal_lm(cfg);
  }
  train::ModelOptions mo;
  mo.num_classes = 10;
  mo.image_size = 32;
  mo.dropout = 0.0;  // the same function on both sides: no random masks
  mo.stochastic_depth = 0.0;
  return train::create_model(o.model, mo);
}

struct Pass {
  torch::Tensor logits;
  std::map<std::string, torch::Tensor> grads;
};

// One training-mode forward pass and its backward, on the model's device and dtype; results
// come back to the CPU in float64.
Pass run_pass(train::Classifier& model, const torch::Tensor& x, const torch::Tensor& y,
              bool language) {
  model.train();
  model.zero_grad();
  const auto device = model.parameters().front().device();
  auto logits = model.forward(x.to(device));
  if (language) logits = logits.reshape({-1, logits.size(-1)});
  torch::nn::functional::cross_entropy(logits, y.to(device)).backward();
  Pass p;
  p.logits = logits.detach().to(torch::kCPU, torch::kDouble);
  for (const auto& kv : model.named_parameters())
    if (kv.value().grad().defined())
      p.grads[kv.key()] = kv.value().grad().to(torch::kCPU, torch::kDouble);
  return p;
}

double relative(const torch::Tensor& a, const torch::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  const double diff = (a - ref).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

ParityErrors compare(const Pass& got, const Pass& oracle) {
  ParityErrors e;
  e.logits = relative(got.logits, oracle.logits);
  for (const auto& [name, g] : oracle.grads) {
    auto it = got.grads.find(name);
    const double err = it == got.grads.end() ? 1.0 : relative(it->second, g);
    if (err >= e.gradients) {
      e.gradients = err;
      e.worst_parameter = name;
    }
  }
  return e;
}

}  // namespace

ParityReport run_parity(const ParityOptions& o) {
  const torch::Device device = train::resolve_device(o.device, 0);
  const bool language = train::is_language_model(o.model);
  if (!language) (void)train::find_model(o.model).value_or_throw();  // an unknown name: its error
  // Training-mode BatchNorm over 2-3 images divides by nearly nothing: float32 and float64 then
  // disagree by percents in the first layers' gradients, whatever the device.
  if (!language && o.batch_size < 4)
    throw Exception(Code::kInvalidArgument,
                    "--batch_size " + std::to_string(o.batch_size) +
                        " is too small to compare an image model (BatchNorm over fewer than 4 "
                        "images is ill-conditioned)",
                    "use --batch_size 4 or more");
  // Float32 on the device means float32: no TF32 products, no autotuned algorithm choice.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);

  torch::manual_seed(o.seed + 1);
  torch::Tensor x, y;
  if (language) {
    x = torch::randint(0, kVocab, {o.batch_size, o.seq_len}, torch::kLong);
    y = torch::randint(0, kVocab, {o.batch_size * o.seq_len}, torch::kLong);
  } else {
    x = torch::randn({o.batch_size, 3, 32, 32});
    y = torch::randint(0, 10, {o.batch_size}, torch::kLong);
  }
  auto oracle_model = build(o);
  oracle_model->to(torch::kDouble);
  const Pass oracle =
      run_pass(*oracle_model, x.is_floating_point() ? x.to(torch::kDouble) : x, y, language);
  auto cpu_model = build(o);
  const Pass cpu = run_pass(*cpu_model, x, y, language);
  auto dev_model = build(o);
  dev_model->to(device);
  const Pass dev = run_pass(*dev_model, x, y, language);

  ParityReport r;
  r.model = o.model;
  r.device = device.str();
  for (const auto& p : cpu_model->parameters()) r.parameters += p.numel();
  r.device_error = compare(dev, oracle);
  r.cpu_error = compare(cpu, oracle);
  r.tolerance = o.tolerance;
  return r;
}

Json ParityReport::to_json() const {
  const auto errors = [](const ParityErrors& e) {
    return Json{{"logits_relative_error", e.logits},
                {"gradients_relative_error", e.gradients},
                {"worst_parameter", e.worst_parameter}};
  };
  return Json{{"model", model},
              {"device", device},
              {"parameters", parameters},
              {"reference", "cpu float64"},
              {"device_fp32", errors(device_error)},
              {"cpu_fp32", errors(cpu_error)},
              {"tolerance", tolerance},
              {"passed", passed()}};
}

std::string ParityReport::summary() const {
  return fmt::format(
      "{} ({} parameters), one forward and backward pass against the CPU in float64:\n"
      "  {} float32: logits {:.3g}, gradients {:.3g} (worst: {})\n"
      "  cpu float32: logits {:.3g}, gradients {:.3g} (worst: {})\n"
      "{} (tolerance {:.3g})\n",
      model, parameters, device, device_error.logits, device_error.gradients,
      device_error.worst_parameter, cpu_error.logits, cpu_error.gradients,
      cpu_error.worst_parameter, passed() ? "PASS" : "FAIL", tolerance);
}

}  // namespace gpulab::bench
