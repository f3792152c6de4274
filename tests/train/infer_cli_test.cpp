// `gpulab infer` end to end: torchvision's weights in, the same logits out; and every kind of
// bad weights or input file ends with exit code 2 and one line naming the problem.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <regex>

#include "core/files.h"
#include "core/json.h"
#include "core/subprocess.h"
#include "train/models/registry.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

class InferCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpulab_infer_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ModelOptions o;
    o.num_classes = 10;
    auto model = create_model("resnet18", o);
    good_ = module_state_dict(*model);
    ASSERT_TRUE(write_safetensors(path("good.safetensors"), good_).ok());
    ASSERT_TRUE(
        write_safetensors(path("x.safetensors"), {{"input", torch::randn({2, 3, 32, 32})}}).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  ProcessResult infer(const std::string& weights, const std::string& input = "x.safetensors",
                      std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {GPULAB_BINARY,   "infer",    "--model",   "resnet18",
                                     "--num_classes", "10",       "--weights", path(weights),
                                     "--input",       path(input)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    RunOptions opts;
    opts.timeout = std::chrono::minutes(5);
    return run_process(argv, opts).value();
  }

  // Exit code 2, no crash, and exactly one error line on stderr that contains `needle` (a path
  // that is not there gets a "hint:" line after it, naming what to pass).
  void expect_one_line_error(const ProcessResult& r, const std::string& needle) {
    EXPECT_EQ(r.signal, 0) << "crashed: " << r.err;
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    const auto hint = r.err.find("\nhint: ");
    EXPECT_EQ(
        std::count(r.err.begin(),
                   r.err.begin() + (hint == std::string::npos ? r.err.size() : hint + 1), '\n'),
        1)
        << r.err;
    std::printf("[infer-error] %s", r.err.c_str());
  }

  void write_raw(const std::string& name, const std::string& bytes) {
    ASSERT_TRUE(write_file_atomic(path(name), bytes).ok());
  }

  fs::path dir_;
  StateDict good_;
};

TEST_F(InferCli, RunsAndWritesTheSameLogitsAsTheLibrary) {
  auto r = infer("good.safetensors", "x.safetensors", {"--out", path("y.safetensors")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("row 0:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("row 1:"), std::string::npos) << r.out;
  auto y = read_safetensors(path("y.safetensors"));
  ASSERT_TRUE(y.ok()) << y.error().message;
  ModelOptions o;
  o.num_classes = 10;
  auto model = create_model("resnet18", o);
  ASSERT_TRUE(load_state_dict(*model, good_).ok());
  model->eval();
  torch::NoGradGuard no_grad;
  auto expect = model->forward(read_safetensors(path("x.safetensors"))->tensors.at("input"));
  // The same float32 model on the same input in another process: measured bitwise equal; the
  // tolerance allows a few ulp from another thread split. Wrong weights are off by O(1).
  EXPECT_TRUE(torch::allclose(y->tensors.at("output"), expect, 1e-5, 1e-6));
}

// `gpulab export` of a classifier's weights into a folder in Hugging Face's shards: infer reads
// the folder and gives the single file's logits to the bit.
TEST_F(InferCli, ReadsTheShardsExportWrites) {
  auto e = run_process({GPULAB_BINARY, "export", "--checkpoint", path("good.safetensors"),
                        "--output", path("sharded"), "--max_shard_size", "8MB"},
                       RunOptions{})
               .value();
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("model.safetensors.index.json"), std::string::npos) << e.out;
  EXPECT_TRUE(fs::exists(dir_ / "sharded" / "model-00002-of-00007.safetensors"));
  auto one = infer("good.safetensors", "x.safetensors", {"--out", path("y1.safetensors")});
  auto split = infer("sharded", "x.safetensors", {"--out", path("y2.safetensors")});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_TRUE(torch::equal(read_safetensors(path("y1.safetensors"))->tensors.at("output"),
                           read_safetensors(path("y2.safetensors"))->tensors.at("output")));
}

TEST_F(InferCli, TruncatedWeights) {
  auto bytes = read_file(path("good.safetensors")).value();
  write_raw("cut.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_one_line_error(infer("cut.safetensors"), "truncated");
  write_raw("tiny.safetensors", bytes.substr(0, 3));
  expect_one_line_error(infer("tiny.safetensors"), "too short");
}

TEST_F(InferCli, MalformedHeader) {
  auto bytes = read_file(path("good.safetensors")).value();
  bytes[8] = '[';  // the JSON object's opening brace
  write_raw("bad.safetensors", bytes);
  expect_one_line_error(infer("bad.safetensors"), "malformed");
  write_raw("garbage.safetensors", std::string(4096, 'G'));
  expect_one_line_error(infer("garbage.safetensors"), "implausible");
}

// A 150-byte file whose header claims 10^12 F32 elements: refused from the header, unallocated.
TEST_F(InferCli, HeaderClaimingATrillionElements) {
  const std::string h =
      R"({"fc.weight":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4000000000000]}})";
  std::string bytes(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(bytes.data(), &n, 8);
  write_raw("huge.safetensors", bytes + h);
  expect_one_line_error(infer("huge.safetensors"), "ends at byte 4000000000000");
}

TEST_F(InferCli, WrongDtype) {
  StateDict w = good_;
  w["fc.weight"] = w["fc.weight"].to(torch::kInt64);
  ASSERT_TRUE(write_safetensors(path("int.safetensors"), w).ok());
  expect_one_line_error(infer("int.safetensors"), "wrong dtype (fc.weight I64 vs model F32)");
}

TEST_F(InferCli, WrongShapeNamesTheTensor) {
  // Weights for 10 classes, model built for the default 1000.
  auto r = run_process({GPULAB_BINARY, "infer", "--model", "resnet18", "--weights",
                        path("good.safetensors"), "--input", path("x.safetensors")})
               .value();
  expect_one_line_error(r, "fc.weight [10,512] vs model [1000,512]");
}

TEST_F(InferCli, MissingAndUnexpectedNames) {
  StateDict w = good_;
  w.erase("layer4.1.bn2.running_var");
  w["head.weight"] = torch::zeros({1});
  ASSERT_TRUE(write_safetensors(path("names.safetensors"), w).ok());
  auto r = infer("names.safetensors");
  expect_one_line_error(r, "1 missing (layer4.1.bn2.running_var)");
  EXPECT_NE(r.err.find("1 unexpected (head.weight)"), std::string::npos) << r.err;
}

TEST_F(InferCli, MissingFileAndBadInputs) {
  expect_one_line_error(infer("nope.safetensors"), "no such file");
  ASSERT_TRUE(
      write_safetensors(path("noinput.safetensors"), {{"x", torch::zeros({1, 3, 32, 32})}}).ok());
  expect_one_line_error(infer("good.safetensors", "noinput.safetensors"),
                        "no tensor named 'input'");
  ASSERT_TRUE(
      write_safetensors(path("flat.safetensors"), {{"input", torch::zeros({3, 32, 32})}}).ok());
  expect_one_line_error(infer("good.safetensors", "flat.safetensors"), "N x 3 x H x W");
  ASSERT_TRUE(
      write_safetensors(path("small.safetensors"), {{"input", torch::zeros({1, 3, 8, 8})}}).ok());
  expect_one_line_error(infer("good.safetensors", "small.safetensors"), "at least 32 px");
}

TEST_F(InferCli, UnknownModelListsValidNames) {
  auto r = run_process({GPULAB_BINARY, "infer", "--model", "resnet19", "--weights",
                        path("good.safetensors"), "--input", path("x.safetensors")})
               .value();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown model 'resnet19'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean resnet18"), std::string::npos) << r.err;
}

TEST(ModelsCli, ListsEveryModelWithCountsAndRecommendations) {
  RunOptions opts;
  opts.timeout = std::chrono::minutes(1);
  auto r = run_process({GPULAB_BINARY, "models", "--json"}, opts).value();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = Json::parse(r.out);
  ASSERT_EQ(j["models"].size(), model_table().size());
  for (size_t i = 0; i < model_table().size(); ++i) {
    const auto& m = j["models"][i];
    EXPECT_EQ(m["name"], model_table()[i].name);
    EXPECT_GT(m["params"].get<int64_t>(), 0);
    EXPECT_FALSE(m["recommended"]["optimizer"].get<std::string>().empty());
  }
  // Language models by family, counted from their shapes: GPT-2 small's published count.
  bool gpt2_small = false;
  for (const auto& m : j["language_models"])
    if (m["name"] == "gpt2-124m")
      gpt2_small = m["family"] == "gpt2" && m["params"].get<int64_t>() == 124439808;
  EXPECT_TRUE(gpt2_small) << j["language_models"].dump();
  // torchvision's published resnet18 count, and its head at 10 classes (512 x 10 + 10): the
  // listing reads a table (ModelZoo checks every row against built models), never builds.
  EXPECT_EQ(j["models"][0]["name"], "resnet18");
  EXPECT_EQ(j["models"][0]["params"].get<int64_t>(), 11689512);
  auto ten = run_process({GPULAB_BINARY, "models", "--json", "--num_classes", "10"}, opts).value();
  ASSERT_EQ(ten.exit_code, 0) << ten.err;
  EXPECT_EQ(Json::parse(ten.out)["models"][0]["params"].get<int64_t>(), 11181642);
  ASSERT_EQ(j["recommendations"].size(), 4u);
  EXPECT_EQ(j["recommendations"][0]["args"],
            "--model resnet18 --learning_rate 0.001 --optimizer sgd --batch_size 256 "
            "--num_epochs 10");
  auto table = run_process({GPULAB_BINARY, "models"}, opts).value();
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const auto& info : model_table()) {
    EXPECT_NE(table.out.find(info.name + " "), std::string::npos) << info.name;
  }
  EXPECT_NE(table.out.find("For Vision Transformers"), std::string::npos);
  // The columns widen with the longest name (qwen2.5-0.5b): the row's words, any spacing.
  EXPECT_TRUE(std::regex_search(table.out, std::regex(R"(gpt2-124m +gpt2 +124,439,808)")))
      << table.out;
}

}  // namespace
}  // namespace gpulab::train
