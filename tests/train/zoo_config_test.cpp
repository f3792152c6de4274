// What weight parity cannot see, checked against torchvision for EfficientNet, MobileNet, ViT
// and ConvNeXt: BatchNorm eps/momentum, LayerNorm eps, dropout and the per-block stochastic depth
// schedule (module by module), and the initial weights' statistics (so training from scratch
// starts where torchvision's would).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/json.h"
#include "core/subprocess.h"
#include "train/models/batch_norm.h"
#include "train/models/registry.h"
#include "train/torchvision_python.h"

namespace gpulab::train {
namespace {

// Prints, for torchvision's model: every norm/dropout/stochastic-depth module's settings and
// every parameter's numel, mean, std, min and max right after construction.
constexpr const char* kDescribe = R"PY(
import json, sys, torch, torchvision
from torchvision.ops import StochasticDepth
name, size = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
kw = {"num_classes": 10}
if name.startswith("vit_"):
    kw["image_size"] = size
m = torchvision.models.__dict__[name](weights=None, **kw)
mods = {}
for n, x in m.named_modules():
    if isinstance(x, torch.nn.modules.batchnorm._BatchNorm):
        mods[n] = ["bn", x.eps, x.momentum]
    elif isinstance(x, torch.nn.LayerNorm):
        mods[n] = ["ln", x.eps]
    elif isinstance(x, torch.nn.Dropout):
        mods[n] = ["dropout", x.p]
    elif isinstance(x, StochasticDepth):
        mods[n] = ["sd", x.p]
params = {n: [p.numel(), p.mean().item(), p.std().item() if p.numel() > 1 else 0.0]
          for n, p in m.named_parameters()}
json.dump({"modules": mods, "params": params}, sys.stdout)
)PY";

// Cached: both tests of a model read the same description.
Json describe_torchvision(const std::string& name, int64_t size) {
  static std::map<std::string, Json> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  RunOptions opts;
  opts.timeout = std::chrono::minutes(5);
  auto r = run_process({testing::torchvision_python(), "-c", kDescribe, name, std::to_string(size)},
                       opts);
  EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  if (!r.ok() || !r->success()) return Json();
  return cache[name] = Json::parse(r->out);
}

// Our model's settings in the same shape as kDescribe's "modules".
Json describe_ours(torch::nn::Module& model) {
  Json mods = Json::object();
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto& m = item.value();
    if (auto* bn = m->as<train::BatchNorm2d>()) {
      mods[item.key()] = {"bn", bn->options.eps(), bn->options.momentum().value_or(-1)};
    } else if (auto* ln = m->as<torch::nn::LayerNorm>()) {
      mods[item.key()] = {"ln", ln->options.eps()};
    } else if (auto* drop = m->as<torch::nn::Dropout>()) {
      mods[item.key()] = {"dropout", drop->options.p()};
    } else {
      std::ostringstream text;
      m->pretty_print(text);
      const std::string prefix = "StochasticDepth(p=";
      if (text.str().rfind(prefix, 0) == 0) {
        mods[item.key()] = {"sd", std::stod(text.str().substr(prefix.size()))};
      }
    }
  }
  return mods;
}

struct ZooCase {
  const char* model;
  int64_t image_size;
};

// How gtest (and so ctest's test name) shows a case: by value, not its bytes, which held the model
// name's address and changed from build to build.
void PrintTo(const ZooCase& c, std::ostream* os) {
  *os << c.model << " at "
      << (c.image_size > 0 ? std::to_string(c.image_size) + " px" : "its size");
}

class ZooConfig : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooConfig, NormDropoutAndStochasticDepthSettingsMatchTorchvision) {
  if (testing::torchvision_python().empty())
    GTEST_FAIL() << testing::reference_missing("torchvision");
  const ZooCase c = GetParam();
  const Json ref = describe_torchvision(c.model, c.image_size);
  ASSERT_TRUE(ref.is_object());
  ModelOptions o;
  o.num_classes = 10;
  o.image_size = c.image_size;
  auto model = create_model(c.model, o);
  const Json ours = describe_ours(*model);
  for (const auto& [name, want] : ref["modules"].items()) {
    ASSERT_TRUE(ours.contains(name)) << c.model << ": no " << want[0] << " module " << name;
    const Json& got = ours[name];
    ASSERT_EQ(got[0], want[0]) << name;
    for (size_t i = 1; i < want.size(); ++i) {
      // Settings (eps, momentum, kernel sizes) are the same decimal numbers on both sides: only
      // float-to-double printing can differ, far below 1e-12; eps 1e-5 vs 1e-3 is caught.
      EXPECT_NEAR(got[i].get<double>(), want[i].get<double>(), 1e-12)
          << c.model << " " << name << " " << want[0] << " setting " << i;
    }
  }
  EXPECT_EQ(ours.size(), ref["modules"].size()) << c.model << ": modules torchvision lacks";
}

// Same distributions as torchvision (He fan-out, uniform, truncated normal, xavier, constants):
// constants exactly, random tensors by mean and std within a few sampling errors.
TEST_P(ZooConfig, InitialWeightsFollowTorchvisionsInit) {
  if (testing::torchvision_python().empty())
    GTEST_FAIL() << testing::reference_missing("torchvision");
  const ZooCase c = GetParam();
  const Json ref = describe_torchvision(c.model, c.image_size);
  ASSERT_TRUE(ref.is_object());
  torch::manual_seed(0);
  ModelOptions o;
  o.num_classes = 10;
  o.image_size = c.image_size;
  auto model = create_model(c.model, o);
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(ref["params"].contains(p.key())) << p.key();
    const Json& want = ref["params"][p.key()];
    const auto n = static_cast<double>(want[0].get<int64_t>());
    const double mean = want[1].get<double>(), std = want[2].get<double>();
    auto t = p.value().detach().to(torch::kFloat64);
    if (std <= 1e-6 * std::abs(mean)) {  // a constant (float32 sums leave a tiny std)
      EXPECT_EQ(t.min().item<double>(), t.max().item<double>()) << p.key() << " is not constant";
      EXPECT_NEAR(t.mean().item<double>(), mean, std::abs(mean) * 1e-6) << p.key();
      continue;
    }
    // Six sampling errors of the difference of two samples' statistics (ours and torchvision's,
    // each a sample of n: a sample std's relative error is 1/sqrt(2n), the difference's
    // 1/sqrt(n)); a wrong fan mode or distribution is off by far more. (One sample's error alone
    // failed convnext_tiny's 2.4 M-element linear at 1.0030 against 6/sqrt(2n) = 0.0028.)
    const double got_std = t.std().item<double>();
    EXPECT_NEAR(got_std / std, 1.0, 6.0 / std::sqrt(n)) << p.key() << " std";
    EXPECT_NEAR(t.mean().item<double>(), mean, 6.0 * std * std::sqrt(2.0 / n)) << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(PartB, ZooConfig,
                         ::testing::Values(ZooCase{"efficientnet_b0", 0},
                                           ZooCase{"efficientnet_b5", 0},
                                           ZooCase{"mobilenet_v2", 0},
                                           ZooCase{"mobilenet_v3_small", 0},
                                           ZooCase{"mobilenet_v3_large", 0},
                                           ZooCase{"vit_b_32", 32}, ZooCase{"convnext_tiny", 0}),
                         [](const auto& info) { return std::string(info.param.model); });

}  // namespace
}  // namespace gpulab::train
