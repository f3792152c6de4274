// `gpulab models [--json]`: every model of the zoo with its family, parameter count, input size
// and the recommended hyperparameters (the seed's --show_recommendations rows).
#include <cstdio>
#include <memory>
#include <sstream>

#include "commands.h"
#include "core/json.h"
#include "core/strings.h"
#include "core/table.h"
#include "json_stdout.h"
#include "train/models/decoder_config.h"
#include "train/models/layers.h"
#include "train/models/parameter_counts.h"
#include "train/models/recommendations.h"
#include "train/models/registry.h"

namespace gpulab::cli {
namespace {

// "sgd lr=0.001 bs=256 epochs=10": the recommendation in one table cell.
std::string summary(const train::Recommendation& r) {
  std::ostringstream s;
  s << r.optimizer << " lr=" << r.learning_rate << " bs=" << r.batch_size;
  if (r.num_epochs) s << " epochs=" << *r.num_epochs;
  if (r.weight_decay) s << " wd=" << *r.weight_decay;
  if (r.normalize) s << " normalize=" << *r.normalize;
  return s.str();
}

OrderedJson recommendation_json(const train::Recommendation& r, bool from_seed) {
  OrderedJson j = {
      {"learning_rate", r.learning_rate}, {"optimizer", r.optimizer}, {"batch_size", r.batch_size}};
  if (r.num_epochs) j["num_epochs"] = *r.num_epochs;
  if (r.weight_decay) j["weight_decay"] = *r.weight_decay;
  if (r.normalize) j["normalize"] = *r.normalize;
  j["source"] = from_seed ? "seed: " + r.use_case : "family default (seed: " + r.use_case + ")";
  j["args"] = r.args();
  return j;
}

// Language models: counted from their shape, never built (llama3-70b would need 280 GB).
constexpr int64_t kFlopsSeqLen = 2048;

OrderedJson language_models_json() {
  OrderedJson list = OrderedJson::array();
  for (const auto& c : train::decoder_shapes())
    list.push_back({{"name", c.name},
                    {"family", c.family},
                    {"params", c.num_parameters()},
                    {"train_flops_per_token", c.train_flops_per_token(kFlopsSeqLen)},
                    {"flops_seq_len", kFlopsSeqLen},
                    {"vocab_from_data", c.vocab_from_data},
                    {"config", c.to_json()}});
  return list;
}

// Three significant figures: a tiny shape's 0.0123 GFLOPs/token is not "0".
std::string gflops_text(double gflops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, gflops >= 100 ? "%.0f" : "%.3g", gflops);
  return buf;
}

std::string language_models_table() {
  TextTable table({"model", "family", "params", "layers", "hidden", "heads/kv", "ffn", "vocab",
                   "positions", "GFLOPs/token"});
  for (const auto& c : train::decoder_shapes())
    table.add_row({c.name, c.family, with_thousands(static_cast<double>(c.num_parameters()), 0),
                   std::to_string(c.num_layers), std::to_string(c.hidden_size),
                   std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads),
                   std::to_string(c.intermediate_size),
                   std::to_string(c.vocab_size) + (c.vocab_from_data ? " (data's)" : ""),
                   std::to_string(c.max_positions),
                   gflops_text(c.train_flops_per_token(kFlopsSeqLen) / 1e9)});
  return table.render();
}

// From the table (parameter_counts.h: no model is built, so the listing answers at once); a model
// the table lacks is built and counted, so the figure is always what training sees.
int64_t parameters_of(const train::ModelInfo& info, int64_t num_classes) {
  if (auto listed = train::listed_parameters(info.name, num_classes)) return *listed;
  torch::NoGradGuard no_grad;
  train::ModelOptions opts;
  opts.num_classes = num_classes;
  return train::count_parameters(*info.make(opts));
}

void run_models(bool as_json, int64_t num_classes) {
  JsonStdout out(as_json);
  OrderedJson list = OrderedJson::array();
  TextTable table({"model", "family", "params", "input", "recommended"});
  for (const auto& info : train::model_table()) {
    const int64_t params = parameters_of(info, num_classes);
    bool from_seed = false;
    const auto rec = train::recommendation_for(info.name, info.family, &from_seed);
    const std::string input = std::to_string(info.default_image_size) +
                              (info.image_size_fixed ? " (fixed by weights)" : "") + ", min " +
                              std::to_string(info.min_image_size);
    if (as_json) {
      list.push_back({{"name", info.name},
                      {"family", info.family},
                      {"params", params},
                      {"num_classes", num_classes},
                      {"default_image_size", info.default_image_size},
                      {"min_image_size", info.min_image_size},
                      {"image_size_fixed", info.image_size_fixed},
                      {"recommended", recommendation_json(rec, from_seed)}});
    } else {
      table.add_row({info.name, info.family, with_thousands(static_cast<double>(params), 0), input,
                     summary(rec) + (from_seed ? " (seed)" : "")});
    }
  }
  if (as_json) {
    OrderedJson seed = OrderedJson::array();
    for (const auto& r : train::recommendations()) {
      seed.push_back({{"use_case", r.use_case}, {"model", r.model}, {"args", r.args()}});
    }
    out.emit(OrderedJson({{"models", list},
                          {"language_models", language_models_json()},
                          {"recommendations", seed}})
                 .dump(2));
    return;
  }
  std::printf("%s", table.render().c_str());
  std::printf(
      "\nparams for %lld classes; `gpulab train --model NAME` accepts these names and "
      "the seed's aliases (vit_base_patch16_224 = vit_b_16 at 224).\n",
      static_cast<long long>(num_classes));
  std::printf(
      "\nLanguage models (`gpulab train --model NAME --dataset text`, or a Hugging Face "
      "config.json):\n%s",
      language_models_table().c_str());
  std::printf(
      "training FLOPs per token at seq %lld: 6 x (parameters in matrix products) + 12 x layers x "
      "heads x head_dim x seq; \"data's\" vocabularies follow the token data.\n",
      static_cast<long long>(kFlopsSeqLen));
  std::printf("\nModel Recommendations (the seed's --show_recommendations):\n");
  for (const auto& r : train::recommendations()) {
    std::printf("  %-24s %s\n", (r.use_case + ":").c_str(), r.args().c_str());
  }
}

}  // namespace

void add_models_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto as_json = std::make_shared<bool>(false);
  auto num_classes = std::make_shared<int64_t>(1000);
  auto* cmd = app.add_subcommand(
      "models", "list the model zoo: family, parameters, input size, recommended settings");
  cmd->add_flag("--json", *as_json, "print JSON instead of a table");
  cmd->add_option("--num_classes,--num-classes", *num_classes, "classes the counts assume")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([as_json, num_classes] { run_models(*as_json, *num_classes); });
}

}  // namespace gpulab::cli
