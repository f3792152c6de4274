// safetensors I/O: round trips for every dtype, and a clear one-line error (never a crash) for
// truncated, malformed or mismatched files and state dicts; the writer that takes one tensor at
// a time writes the same bytes, keeps its order and, failing, leaves no file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>

#include "core/files.h"
#include "train/counting_stream.h"
#include "train/weights/safetensors.h"
#include "train/weights/safetensors_writer.h"

namespace gpulab::train {
namespace {

std::string header_only(const std::string& json) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

std::string error_of(std::string_view bytes) {
  auto r = parse_safetensors(bytes, "w.safetensors");
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
  return r.error().message;
}

TEST(Safetensors, RoundTripsEveryDtype) {
  StateDict in;
  in["f32"] = torch::randn({3, 4});
  in["f64"] = torch::randn({2}, torch::kFloat64);
  in["f16"] = torch::randn({5, 1}).to(torch::kFloat16);
  in["bf16"] = torch::randn({7}).to(torch::kBFloat16);
  in["i64"] = torch::randint(-1000, 1000, {2, 3}, torch::kInt64);
  in["i32"] = torch::randint(-1000, 1000, {4}, torch::kInt32);
  in["u8"] = torch::randint(0, 255, {6}, torch::kUInt8);
  in["b"] = torch::rand({3}) > 0.5;
  in["scalar"] = torch::tensor(3.5f).reshape({});
  in["empty"] = torch::zeros({0, 4});
  in["strided"] = torch::arange(12, torch::kFloat32).reshape({3, 4}).t();  // non-contiguous
  auto bytes = serialize_safetensors(in, {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes->data(), 8);
  EXPECT_EQ(header_len % 8, 0u) << "data must start 8-byte aligned";
  auto out = parse_safetensors(*bytes, "mem");
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->metadata.at("format"), "pt");
  ASSERT_EQ(out->tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const auto& got = out->tensors.at(name);
    EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(got, t)) << name;
  }
}

TEST(Safetensors, WritesAndReadsFiles) {
  const auto path = std::filesystem::temp_directory_path() / "gpulab_st_test.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"x", torch::ones({2, 2})}}).ok());
  auto back = read_safetensors(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(torch::equal(back->tensors.at("x"), torch::ones({2, 2})));
  std::filesystem::remove(path);
  auto gone = read_safetensors(path);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, Code::kNotFound);
}

using testing::CountingStream;

StateDict some_tensors() {
  return {{"b.bias", torch::randn({5}, torch::kFloat64)},
          {"a.weight", torch::arange(12, torch::kFloat32).reshape({3, 4}).t()},  // strided
          {"c.ids", torch::randint(0, 9, {2, 2}, torch::kInt64)}};
}

TEST(SafetensorsWriter, TensorByTensorWritesTheWholeWritersBytes) {
  const auto dir = std::filesystem::temp_directory_path() / "gpulab_st_writer";
  std::filesystem::remove_all(dir);
  const StateDict in = some_tensors();
  CountingStream stream(in);
  ASSERT_TRUE(write_stream(dir / "w.safetensors", stream, {{"format", "pt"}}).ok());
  EXPECT_EQ(stream.taken, 3u);
  auto whole = serialize_safetensors(in, {{"format", "pt"}});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(read_file(dir / "w.safetensors").value(), *whole);
  const auto back = read_safetensors(dir / "w.safetensors").value();
  for (const auto& [name, t] : in) EXPECT_TRUE(torch::equal(back.tensors.at(name), t)) << name;
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsWriter, ATensorOutOfOrderOrReshapedIsRefusedAndNothingIsWritten) {
  const auto dir = std::filesystem::temp_directory_path() / "gpulab_st_writer_order";
  std::filesystem::remove_all(dir);
  const StateDict in = some_tensors();
  for (const std::string how : {"order", "shape", "dtype", "short"}) {
    auto w = SafetensorsWriter::create(dir / "w.safetensors", in, {});
    ASSERT_TRUE(w.ok()) << w.error().message;
    Status st = ok_status();
    if (how == "order") st = w->write("b.bias", in.at("b.bias"));
    if (how == "shape") st = w->write("a.weight", torch::zeros({3, 4}));  // it is [4, 3]
    if (how == "dtype") st = w->write("a.weight", in.at("a.weight").to(torch::kFloat64));
    if (how == "short") {
      ASSERT_TRUE(w->write("a.weight", in.at("a.weight")).ok());
      st = w->commit();
    }
    ASSERT_FALSE(st.ok()) << how;
    EXPECT_EQ(st.error().code, Code::kInternal) << how;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors"));
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsWriter, AFailedWriteStillTakesEveryTensorAndLeavesNoFile) {
  // A folder where a file is: the writer cannot begin, yet every tensor is taken (the ranks that
  // send a model-parallel run's weights are not left waiting).
  const auto base = std::filesystem::temp_directory_path() / "gpulab_st_writer_fail";
  std::filesystem::remove_all(base);
  ASSERT_TRUE(write_file_atomic(base, "a file, not a folder").ok());
  CountingStream stream(some_tensors());
  auto st = write_stream(base / "w.safetensors", stream, {});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(stream.taken, 3u);
  EXPECT_FALSE(std::filesystem::exists(base / "w.safetensors"));
  std::filesystem::remove(base);
}

TEST(Safetensors, TruncatedFilesSayHowMuchIsMissing) {
  auto bytes = serialize_safetensors({{"w", torch::randn({64, 64})}}).value();
  EXPECT_NE(error_of(bytes.substr(0, 5)).find("too short"), std::string::npos);
  EXPECT_NE(error_of(bytes.substr(0, 20)).find("truncated"), std::string::npos);
  const std::string msg = error_of(bytes.substr(0, bytes.size() - 1));
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST(Safetensors, MalformedHeadersAreDataErrors) {
  EXPECT_NE(error_of(header_only("{not json")).find("malformed"), std::string::npos);
  EXPECT_NE(error_of(header_only("[1,2]")).find("not an object"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(error_of(huge).find("implausible"), std::string::npos);
  EXPECT_NE(error_of(header_only(R"({"a":{"dtype":"F32","shape":[2]}})")).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(
      error_of(header_only(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})") + "abcd")
          .find("unsupported dtype 'Q7'"),
      std::string::npos);
  EXPECT_NE(
      error_of(header_only(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})") + "abcd")
          .find("do not match"),
      std::string::npos);
  EXPECT_NE(
      error_of(header_only(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})") + "abcd")
          .find("bad dimension"),
      std::string::npos);
  const std::string overlap =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_NE(error_of(header_only(overlap) + std::string(12, '\0')).find("overlap"),
            std::string::npos);
  auto r = parse_safetensors(header_only("{oops"), "w.safetensors");
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_EQ(r.error().message.rfind("w.safetensors: ", 0), 0u) << "names the file first";
}

TEST(Safetensors, StrictLoadListsEveryProblemAndChangesNothing) {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  auto good = module_state_dict(*net);
  StateDict copy;
  for (const auto& [k, v] : good) copy[k] = v.clone();
  ASSERT_TRUE(load_state_dict(*net, copy).ok());

  StateDict bad = copy;
  bad.erase("0.bias");
  bad["head.weight"] = torch::zeros({1});
  bad["0.weight"] = torch::zeros({5, 4});
  bad["1.running_mean"] = torch::zeros({3}, torch::kInt64);
  const auto before = net[0]->as<torch::nn::Linear>()->weight.clone();
  auto st = load_state_dict(*net, bad, "w.safetensors");
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.error().message;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_NE(msg.find("1 missing (0.bias)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 unexpected (head.weight)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0.weight [5,4] vs model [3,4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.running_mean I64 vs model F32"), std::string::npos) << msg;
  EXPECT_TRUE(torch::equal(before, net[0]->as<torch::nn::Linear>()->weight));
}

TEST(Safetensors, LoadConvertsHalfPrecisionWeights) {
  torch::nn::Linear fc(4, 2);
  StateDict half;
  half["weight"] = torch::randn({2, 4}).to(torch::kFloat16);
  half["bias"] = torch::randn({2}).to(torch::kBFloat16);
  ASSERT_TRUE(load_state_dict(*fc, half).ok());
  EXPECT_EQ(fc->weight.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(fc->weight, half["weight"].to(torch::kFloat32)));
}

}  // namespace
}  // namespace gpulab::train
