// `gpulab infer`: loads safetensors weights into a zoo model, runs it in eval mode on the tensor
// `input` of a safetensors file, writes `output`, and prints each row's top-5 classes.
#include <cstdio>
#include <memory>
#include <optional>

#include "commands.h"
#include "core/error.h"
#include "train/device.h"
#include "train/models/registry.h"
#include "train/run_files.h"
#include "train/weights/safetensors.h"
#include "train_flags.h"

namespace gpulab::cli {
namespace {

struct InferArgs {
  std::string model;
  int64_t num_classes = 1000;
  int64_t image_size = 0;
  std::string weights;
  std::string input;
  std::string out;
  std::string device = "cpu";
};

// The first line of a libtorch error, without its C++ backtrace.
std::string first_line(const char* what) {
  std::string s(what);
  return s.substr(0, s.find('\n'));
}

// The N×3×H×W float tensor named `input`.
torch::Tensor read_input(const InferArgs& a, const train::ModelInfo& info) {
  auto file = train::read_safetensors(a.input).value_or_throw();
  auto it = file.tensors.find("input");
  if (it == file.tensors.end()) {
    std::string names;
    for (const auto& [name, t] : file.tensors) names += (names.empty() ? "" : ", ") + name;
    throw Exception(Code::kInvalidArgument, a.input + ": no tensor named 'input' (found: " +
                                                (names.empty() ? "none" : names) + ")");
  }
  const torch::Tensor& x = it->second;
  if (x.dim() != 4 || x.size(1) != 3 || !x.is_floating_point()) {
    throw Exception(Code::kInvalidArgument,
                    a.input + ": 'input' must be a float N x 3 x H x W tensor, got " +
                        std::string(c10::toString(x.scalar_type())) + " " + c10::str(x.sizes()));
  }
  if (x.size(2) < info.min_image_size || x.size(3) < info.min_image_size) {
    throw Exception(Code::kInvalidArgument,
                    a.input + ": " + info.name + " needs images of at least " +
                        std::to_string(info.min_image_size) + " px, got " + c10::str(x.sizes()));
  }
  return x.to(torch::kFloat32);
}

void print_top5(const torch::Tensor& logits) {
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  auto [prob, idx] = torch::softmax(logits, 1).topk(k, 1);
  for (int64_t row = 0; row < logits.size(0); ++row) {
    std::printf("row %lld:", static_cast<long long>(row));
    for (int64_t j = 0; j < k; ++j) {
      std::printf("  %lld (%.4f)", static_cast<long long>(idx[row][j].item<int64_t>()),
                  prob[row][j].item<double>());
    }
    std::printf("\n");
  }
}

void run_infer(const InferArgs& a) {
  int64_t alias_size = 0;
  const train::ModelInfo& info = *train::find_model(a.model, &alias_size).value_or_throw();
  const torch::Device device = train::resolve_device(a.device);
  torch::Tensor x = read_input(a, info);
  // A safetensors file, a run folder or a checkpoint, found as export and generate find them.
  auto files = train::locate_model_files(a.weights).value_or_throw();
  const auto weights = train::read_model_weights(files).value_or_throw();

  train::ModelOptions opts;
  opts.num_classes = a.num_classes;
  opts.image_size = a.image_size;
  // A model whose weights depend on the size (ViT) takes it from the input unless told.
  if (info.image_size_fixed && opts.image_size == 0 && alias_size == 0) opts.image_size = x.size(2);
  auto model = train::create_model(a.model, opts);
  train::load_state_dict(*model, weights, files.weights.string()).value_or_throw();
  model->to(device);
  model->eval();

  torch::Tensor out;
  try {
    torch::NoGradGuard no_grad;
    out = model->forward(x.to(device)).to(torch::kCPU);
  } catch (const c10::Error& e) {
    throw Exception(Code::kInvalidArgument, info.name + " cannot run on input " +
                                                c10::str(x.sizes()) + ": " +
                                                first_line(e.what_without_backtrace()));
  }
  if (!a.out.empty()) {
    train::write_safetensors(a.out, {{"output", out}}, {{"model", info.name}}).value_or_throw();
  }
  print_top5(out);
  if (!a.out.empty())
    std::printf("wrote output %s to %s\n", c10::str(out.sizes()).c_str(), a.out.c_str());
}

}  // namespace

void add_infer_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto a = std::make_shared<InferArgs>();
  auto* cmd = app.add_subcommand(
      "infer", "run a model in eval mode on a safetensors tensor and print the top-5 classes");
  add_shared_flag(cmd, "model", a->model)->required();
  cmd->add_option("--num_classes,--num-classes", a->num_classes, "classes of the weights")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--image_size,--image-size", a->image_size,
                  "image size the model is built for (ViT: default the input's height)");
  cmd->add_option("--weights", a->weights,
                  "weights: a .safetensors file (torchvision names), a run folder or a checkpoint")
      ->required();
  cmd->add_option("--input", a->input, "safetensors file with 'input': float32 N x 3 x H x W")
      ->required();
  cmd->add_option("--out", a->out, "write the logits as 'output' to this safetensors file");
  add_shared_flag(cmd, "device", a->device);
  cmd->callback([a] { run_infer(*a); });
}

}  // namespace gpulab::cli
