// Hugging Face's sharded weights (train/weights/hf_shards.h): sizes read as transformers reads
// max_shard_size; a model split under the limit and read back through the path every command
// takes (locate_model_files), from the folder, the index or any one shard; a layout change
// leaving no stale file; a failed write taking every tensor and leaving nothing; and an index
// that disagrees with its files refused, naming what is wrong. transformers' own reading and
// writing of these folders is proven in hf_roundtrip_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/json.h"
#include "support/temp_dir.h"
#include "train/counting_stream.h"
#include "train/run_files.h"
#include "train/train_options.h"
#include "train/weights/hf_shards.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kNoLimit = ~uint64_t{0};

// 1,200 bytes (alone: above the limit), 400 bytes (x2), 8,000 bytes, 100 bytes of bf16 and 80 of
// int64: under a 1,000-byte limit, four files (a tensor above it alone, the others packed in name
// order while they fit).
StateDict sample() {
  StateDict w;
  w["a.weight"] = torch::arange(300, torch::kFloat32);
  w["b.bias"] = torch::linspace(-1, 1, 100);
  w["b.weight"] = torch::ones({10, 10});
  w["c.big"] = torch::randn({2000}, torch::TensorOptions().dtype(torch::kFloat32));
  w["d.half"] = torch::full({50}, 0.5, torch::kBFloat16);
  w["e.count"] = torch::arange(10, torch::kInt64);
  return w;
}

Result<fs::path> write(const fs::path& dir, const StateDict& w, uint64_t max_bytes) {
  StateDictStream stream(w);
  return write_hf_weights(dir, stream, {{"format", "pt"}}, max_bytes);
}

StateDict read_back(const fs::path& path) {
  auto files = locate_model_files(path);
  EXPECT_TRUE(files.ok()) << files.error().to_string();
  if (!files) return {};
  auto w = read_model_weights(*files);
  EXPECT_TRUE(w.ok()) << w.error().to_string();
  return w ? *w : StateDict{};
}

void expect_equal(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    EXPECT_EQ(t.scalar_type(), b.at(name).scalar_type()) << name;
    EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
  }
}

std::vector<std::string> weights_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(HfShards, SizesReadAsTransformersReadsMaxShardSize) {
  // transformers.utils.hub.convert_file_size_to_int: decimal KB/MB/GB, binary KiB/MiB/GiB,
  // a lowercase final b counts bits.
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"50GB", 50'000'000'000}, {"500MB", 500'000'000}, {"2GiB", uint64_t{2} << 30},
      {"3mib", 3 << 20},        {"1KB", 1000},          {"8Gb", 1'000'000'000},
      {"1048576", 1 << 20},     {"64KiB", 64 << 10}};
  for (const auto& [text, bytes] : good) {
    auto got = parse_shard_size(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.error().to_string();
    EXPECT_EQ(*got, bytes) << text;
  }
  for (const char* text : {"", "5XB", "1.5GB", "-1GB", "GB", "999", "0", "5 GB", "50TB"}) {
    auto got = parse_shard_size(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.error().code, Code::kInvalidArgument) << text;
    EXPECT_NE(got.error().hint.find("50GB"), std::string::npos) << got.error().hint;
  }
  // `gpulab train` refuses it before any work starts; its default is transformers' own.
  TrainOptions o;
  EXPECT_EQ(parse_shard_size(o.max_shard_size).value(), 50'000'000'000u);
  o.max_shard_size = "5XB";
  const Status st = validate(o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "--max_shard_size '5XB' is not a shard size from 1KB to 1EB");
}

TEST(HfShards, AModelSplitUnderTheLimitReadsBackFromTheFolderTheIndexOrAnyShard) {
  gpulab::testing::TempDir dir("hf_shards");
  const StateDict w = sample();
  auto index = write(dir.path, w, 1000);
  ASSERT_TRUE(index.ok()) << index.error().to_string();
  EXPECT_EQ(*index, dir.path / kHfIndexName);
  const std::vector<std::string> want = {
      "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
      "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors", kHfIndexName};
  EXPECT_EQ(weights_files(dir.path), want);
  // The index as save_pretrained writes it: the bytes of every tensor, each tensor's file.
  const Json j = Json::parse(read_file(*index).value());
  EXPECT_EQ(j["metadata"]["total_size"], 1200 + 400 + 400 + 8000 + 100 + 80);
  EXPECT_EQ(j["weight_map"]["a.weight"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["b.bias"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["b.weight"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["c.big"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["d.half"], "model-00004-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["e.count"], "model-00004-of-00004.safetensors");
  EXPECT_EQ(read_safetensors(dir.path / "model-00002-of-00004.safetensors").value().tensors.size(),
            2u);
  for (const fs::path& path : {dir.path, *index, dir.path / "model-00004-of-00004.safetensors"}) {
    SCOPED_TRACE(path.string());
    expect_equal(read_back(path), w);
  }
}

TEST(HfShards, ALayoutChangeLeavesNoStaleWeights) {
  gpulab::testing::TempDir dir("hf_shards_stale");
  write_file_atomic(dir.path / "config.json", "{}").value_or_throw();
  const StateDict w = sample();
  ASSERT_TRUE(write(dir.path, w, 1000).ok());
  // Under the limit now: one file, and the index and its shards gone (transformers would read
  // model.safetensors first; our reader too, but a stale index misleads every other tool).
  auto one = write(dir.path, w, kNoLimit);
  ASSERT_TRUE(one.ok()) << one.error().to_string();
  EXPECT_EQ(*one, dir.path / kHfWeightsName);
  EXPECT_EQ(weights_files(dir.path), (std::vector<std::string>{"config.json", kHfWeightsName}));
  // Back to shards of another count: model.safetensors, which readers prefer, is gone.
  ASSERT_TRUE(write(dir.path, w, 10'000).ok());
  EXPECT_EQ(weights_files(dir.path),
            (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                      "model-00002-of-00002.safetensors", kHfIndexName}));
  expect_equal(read_back(dir.path), w);
  EXPECT_EQ(hf_weights_path(dir.path), dir.path / kHfIndexName);
}

TEST(HfShards, AFailedWriteTakesEveryTensorAndLeavesNoShard) {
  gpulab::testing::TempDir dir("hf_shards_fail");
  StateDict w = sample();
  w["f.complex"] = torch::zeros({4}, torch::kComplexFloat);  // no safetensors dtype: the last file
  testing::CountingStream stream(w);
  auto st = write_hf_weights(dir.path, stream, {}, 1000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("f.complex"), std::string::npos) << st.error().message;
  EXPECT_EQ(stream.taken, w.size());
  EXPECT_TRUE(weights_files(dir.path).empty()) << weights_files(dir.path).front();
}

// An index and files that disagree: each refused as a DataError naming the fault, no crash.
TEST(HfShards, AnIndexThatDisagreesWithItsFilesIsRefusedNamingTheFault) {
  gpulab::testing::TempDir dir("hf_shards_bad");
  const StateDict w = sample();
  const fs::path index = dir.path / kHfIndexName;
  const std::string good = [&] {
    EXPECT_TRUE(write(dir.path, w, 1000).ok());
    return read_file(index).value();
  }();
  const fs::path third = dir.path / "model-00003-of-00004.safetensors";
  auto edit = [&](const std::function<void(Json&)>& f) {
    Json j = Json::parse(good);
    f(j);
    write_file_atomic(index, j.dump()).value_or_throw();
  };
  struct Case {
    const char* what;
    std::function<void()> damage;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"not JSON", [&] { write_file_atomic(index, "{\"weight_map\": ").value_or_throw(); },
       kHfIndexName},
      {"no map", [&] { edit([](Json& j) { j.erase("weight_map"); }); }, "no \"weight_map\""},
      {"a path", [&] { edit([](Json& j) { j["weight_map"]["a.weight"] = "../x.safetensors"; }); },
       "not a file name in the index's folder"},
      {"moved",
       [&] { edit([](Json& j) { j["weight_map"]["c.big"] = j["weight_map"]["a.weight"]; }); },
       "places tensor c.big in model-00001-of-00004.safetensors, which has no such tensor"},
      {"missing file", [&] { fs::rename(third, dir.path / "elsewhere"); },
       "names model-00003-of-00004.safetensors, which is not in"},
      {"in two files",
       [&] {
         fs::copy_file(dir.path / "elsewhere", third);
         fs::copy_file(third, dir.path / "model-00005-of-00004.safetensors");
         edit([](Json& j) { j["weight_map"]["x"] = "model-00005-of-00004.safetensors"; });
       },
       "tensor c.big is in both model-00003-of-00004.safetensors and "
       "model-00005-of-00004.safetensors"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    write_file_atomic(index, good).value_or_throw();
    c.damage();
    auto files = locate_model_files(dir.path);
    ASSERT_TRUE(files.ok()) << files.error().to_string();
    auto read = read_model_weights(*files);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().code, Code::kDataError);
    EXPECT_NE(read.error().to_string().find(c.says), std::string::npos) << read.error().to_string();
  }
}

}  // namespace
}  // namespace gpulab::train
