// Mesh checkpoints (per-rank pieces, no gather) with 4 real ranks over Gloo: a tensor-parallel
// Llama at TP 4 (a vocabulary of 37 padded to 40, two kv heads each kept by two ranks, replicated
// norms) after one AdamW step writes four piece files that together hold every value once;
// joined they are the gathered model exactly, and read back at TP 4 and at one process they are
// the model and the optimizer's moments to the last bit; the final weights streamed to rank 0 are
// the gathered model. Damaged or incomplete sets are refused with what is wrong and change
// nothing; retention keeps the newest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/json.h"
#include "train/dist_worker.h"
#include "train/models/llama/llama.h"
#include "train/optim/state_key.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/flat_range.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/mesh_export.h"
#include "train/parallel/ordinary_checkpoint.h"
#include "train/parallel/tp_llama.h"
#include "train/parallel/tp_llama_state.h"
#include "train/parallel/tp_stage_layout.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors_writer.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;

namespace {

constexpr int kRanks = 4;

DecoderConfig tiny() {
  DecoderConfig c;
  c.name = "llama-mesh-tiny";
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.max_positions = 16;
  return c;
}

std::shared_ptr<LlamaForCausalLM> whole_model(const DecoderConfig& c, int seed) {
  torch::manual_seed(seed);
  auto m = std::make_shared<LlamaForCausalLM>(c);
  m->to(torch::kDouble);
  return m;
}

std::unique_ptr<torch::optim::AdamW> adamw(torch::nn::Module& m) {
  return std::make_unique<torch::optim::AdamW>(m.parameters(), torch::optim::AdamWOptions(1e-2));
}

// One AdamW step of the TP model on a fixed batch, so the checkpoint carries moments.
void one_step(TpLlamaForCausalLM& m, torch::optim::Optimizer& opt) {
  torch::manual_seed(7);
  auto ids = torch::randint(0, 37, {2, 8}, torch::kInt64);
  auto [loss, correct] = m.loss_of(m.forward(ids), torch::roll(ids, -1, 1));
  loss.backward();
  m.finish_gradients();
  opt.step();
}

TrainState state_at(int64_t epoch) {
  TrainState s;
  s.epoch = epoch;
  s.step = epoch * 3;
  s.seed = 5;
  s.world_size = kRanks;
  return s;
}

// Each rank: the model after one step, saved twice (keep 1); read back into a fresh TP model it
// is the same to the last bit. Rank 0 keeps the gathered model and moments for the parent.
int mesh_checkpoint_scenario() {
  const DecoderConfig c = tiny();
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, kRanks, 1);
  TpGroup g(mesh.tp());
  TpLlamaForCausalLM m(g, c, shard_state(c, module_state_dict(*whole_model(c, 41)), g.rank(), 4));
  auto opt = adamw(m);
  one_step(m, *opt);
  TpStageLayout layout;
  const fs::path dir = train::testing::worker_out() / "checkpoints";
  save_mesh_checkpoint(dir, state_at(1), mesh, m, *opt, 1, layout);
  save_mesh_checkpoint(dir, state_at(2), mesh, m, *opt, 1, layout);
  world.barrier("rank 0 wrote the index");
  const auto ckpt = find_resumable(dir);
  TpLlamaForCausalLM back(g, c, shard_state(c, module_state_dict(*whole_model(c, 3)), g.rank(), 4));
  auto back_opt = adamw(back);
  auto s = load_mesh_checkpoint(ckpt.value(), back, *back_opt, layout);
  bool same = s.ok() && s->epoch == 2 && s->step == 6;
  const auto want = state_moments(m, *opt), got = state_moments(back, *back_opt);
  for (const auto& [name, t] : module_state_dict(m))
    same = same && torch::equal(t, module_state_dict(back).at(name));
  for (const auto& [field, tensors] : want)
    for (const auto& [name, t] : tensors)
      same = same && got.count(field) && torch::equal(t, got.at(field).at(name));
  // The final weights, streamed: rank 0 joins and writes each tensor, the others only send.
  auto stream = mesh_model_stream(mesh, m, layout);
  bool streamed = true;
  if (g.rank() == 0)
    streamed = write_stream(train::testing::worker_out() / "final.safetensors", *stream, {}).ok();
  else
    for (const auto& [name, like] : stream->layout())
      streamed = streamed && !stream->take(name).defined();
  train::testing::save_tensors("mesh_stream" + std::to_string(g.rank()),
                               {torch::tensor({int64_t{streamed}})});
  std::vector<torch::Tensor> out{torch::tensor({int64_t{same}})};
  for (const auto& [name, t] : m.gather(module_state_dict(m))) out.push_back(t);
  for (const auto& [field, tensors] : want)
    for (const auto& [name, t] : m.gather(tensors)) out.push_back(t);
  train::testing::save_tensors("mesh_ckpt" + std::to_string(g.rank()), out);
  return 0;
}
train::testing::DistScenario mesh_checkpoint_worker("mesh_checkpoint", mesh_checkpoint_scenario);

class MeshCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpulab-mesh-ckpt-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    auto r = train::testing::run_ranks("mesh_checkpoint", kRanks, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.message;
    out_ = train::testing::load_tensors(dir_ / "mesh_ckpt0.pt");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // The gathered model (name order) and moments (field, then name order) rank 0 kept.
  static StateDict gathered(const StateDict& names, size_t first) {
    StateDict out;
    size_t i = first;
    for (const auto& [name, t] : names) out[name] = out_.at(i++);
    return out;
  }
  static CheckpointInfo newest(const fs::path& d) { return find_resumable(d).value(); }

  static fs::path dir_;
  static std::vector<torch::Tensor> out_;
};
fs::path MeshCheckpoint::dir_;
std::vector<torch::Tensor> MeshCheckpoint::out_;

TEST_F(MeshCheckpoint, EachRankWritesItsShareOnceAndRetentionKeepsTheNewest) {
  ASSERT_EQ(out_.at(0).item<int64_t>(), 1) << "a rank read back something else than it wrote";
  const fs::path ckpts = dir_ / "checkpoints";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpts)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 5u) << "keep 1: one index and its four pieces";
  EXPECT_EQ(names[0], "ckpt-e0002-s00000006.json");
  const auto whole = module_state_dict(*whole_model(tiny(), 41));
  int64_t model_values = 0, written = 0;
  for (const auto& [name, t] : whole) model_values += t.numel();
  for (int r = 0; r < kRanks; ++r) {
    const auto f = read_safetensors(ckpts / ("ckpt-e0002-s00000006.mesh-" + std::to_string(r) +
                                             "-of-4.safetensors"))
                       .value();
    int64_t mine = 0;
    for (const auto& [key, t] : f.tensors)
      if (key.rfind("param/", 0) == 0) mine += t.numel();
    EXPECT_LT(mine, model_values / 2) << "rank " << r << " wrote more than its share";
    written += mine;
  }
  EXPECT_EQ(written, model_values) << "every value of the model written once";
  // --resume given one rank's file means the checkpoint of its index.
  auto at = checkpoint_at(ckpts / "ckpt-e0002-s00000006.mesh-3-of-4.safetensors");
  ASSERT_TRUE(at.ok()) << at.error().message;
  EXPECT_EQ(at->manifest.filename(), "ckpt-e0002-s00000006.json");
}

TEST_F(MeshCheckpoint, JoinedItIsTheGatheredModelAndReadsIntoOneProcess) {
  const auto ckpt = newest(dir_ / "checkpoints");
  const auto names = module_state_dict(*whole_model(tiny(), 41));
  const auto want = gathered(names, 1);
  const auto joined = consolidate_mesh_checkpoint(ckpt.manifest).value();
  ASSERT_EQ(joined.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(torch::equal(joined.at(name), t)) << name;
  // One process: the whole model and AdamW, its moments the gathered ones, its step the run's.
  auto one = whole_model(tiny(), 3);
  auto opt = adamw(*one);
  StageLayout whole;
  auto s = load_mesh_checkpoint(ckpt, *one, *opt, whole);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->epoch, 2);
  for (const auto& [name, t] : want)
    EXPECT_TRUE(torch::equal(module_state_dict(*one).at(name), t)) << name;
  const auto moments = state_moments(*one, *opt);
  size_t i = 1 + names.size();
  for (const auto& field : {"exp_avg", "exp_avg_sq"})
    for (const auto& [name, t] : names)
      EXPECT_TRUE(torch::equal(moments.at(field).at(name), out_.at(i++))) << field << " " << name;
  for (const auto& p : one->parameters())
    EXPECT_EQ(state_step(*opt->state().at(state_key(p))).value_or(-1), 1);
}

TEST_F(MeshCheckpoint, FinalWeightsStreamToRankZeroAsTheGatheredModel) {
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(train::testing::load_tensors(dir_ / ("mesh_stream" + std::to_string(r) + ".pt"))
                  .at(0)
                  .item<int64_t>(),
              1)
        << "rank " << r << (r == 0 ? " could not write the file" : " was handed a tensor");
  const auto want = gathered(module_state_dict(*whole_model(tiny(), 41)), 1);
  const auto f = read_safetensors(dir_ / "final.safetensors").value();
  ASSERT_EQ(f.tensors.size(), want.size());
  for (const auto& [name, t] : want) {
    EXPECT_EQ(f.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(f.tensors.at(name), t)) << name;
  }
}

// A copy of the checkpoint folder, damaged by `harm`: loading it fails with `says` and leaves
// the model and optimizer as they were.
void expect_refused(const fs::path& from, const std::string& tag,
                    const std::function<void(const fs::path&)>& harm, const std::string& says) {
  const fs::path d = from.parent_path() / ("damaged-" + tag);
  fs::remove_all(d);
  fs::copy(from, d);
  const auto ckpt = find_resumable(d);  // before the harm: a load must check for itself
  ASSERT_TRUE(ckpt.has_value());
  harm(d);
  if (tag == "missing" || tag == "truncated") {  // --resume auto passes over the checkpoint
    EXPECT_FALSE(find_resumable(d).has_value()) << tag;
  }
  auto one = whole_model(tiny(), 3);
  const auto before = module_state_dict(*one);
  auto opt = adamw(*one);
  StageLayout whole;
  auto s = load_mesh_checkpoint(*ckpt, *one, *opt, whole);
  ASSERT_FALSE(s.ok()) << tag;
  EXPECT_EQ(s.error().code, Code::kDataError) << tag;
  EXPECT_NE(s.error().message.find(says), std::string::npos) << tag << ": " << s.error().message;
  EXPECT_TRUE(opt->state().empty()) << tag;
  for (const auto& [name, t] : module_state_dict(*one))
    EXPECT_TRUE(torch::equal(t, before.at(name))) << tag << " changed " << name;
  auto joined = consolidate_mesh_checkpoint(ckpt->manifest);
  EXPECT_FALSE(joined.ok()) << tag;
  fs::remove_all(d);
}

TEST_F(MeshCheckpoint, DamagedOrIncompleteSetsAreRefusedChangingNothing) {
  const fs::path ckpts = dir_ / "checkpoints";
  const std::string piece = "ckpt-e0002-s00000006.mesh-2-of-4.safetensors";
  expect_refused(
      ckpts, "missing", [&](const fs::path& d) { fs::remove(d / piece); }, "is missing");
  expect_refused(
      ckpts, "truncated", [&](const fs::path& d) { fs::resize_file(d / piece, 1000); },
      "the index says");
  // Rank 1's first q_proj piece moved from row 8 to row 4 in its file's list (same size, its
  // checksum recomputed): the values still add up to the tensor's, but rows 4-7 come twice and
  // rows 12-15 never.
  expect_refused(
      ckpts, "overlapping",
      [&](const fs::path& d) {
        const fs::path f = d / "ckpt-e0002-s00000006.mesh-1-of-4.safetensors";
        std::string bytes = read_file(f).value();
        const std::string piece =
            R"(8,0],\"field\":\"param\",\"key\":\"param/model.layers.0.self_attn.q_proj.weight/0)";
        const auto at = bytes.find(piece);
        ASSERT_NE(at, std::string::npos) << "the piece's entry in the file's list";
        bytes[at] = '4';
        std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
        // Its checksum in the index made to match (as a writer with this bug would record it).
        const fs::path index = d / "ckpt-e0002-s00000006.json";
        auto j = Json::parse(read_file(index).value());
        j["shards"][1]["checksum"] = checksum_hex(bytes);
        std::ofstream(index, std::ios::trunc) << j.dump(2);
      },
      "two of its pieces of model.layers.0.self_attn.q_proj.weight param overlap");
  expect_refused(
      ckpts, "flipped",
      [&](const fs::path& d) { train::testing::flip_byte_from_end(d / piece, 9); },
      "does not match its checksum");
}

// A ZeRO slice of one process holding lm_head.weight and model.norm.weight (the one parameter
// after the other, as a flat shard lays them out).
FlatSlice two_part_slice(torch::nn::Module& model, StageLayout& layout) {
  FlatSlice slice;
  int64_t at = 0;
  const auto held = module_state_dict(model);
  for (const std::string name : {"lm_head.weight", "model.norm.weight"}) {
    const auto shape = held.at(name).sizes();
    const int64_t n = held.at(name).numel();
    slice.parts.push_back(
        {name, at, n, flat_range_runs(layout.slices(model, name, shape), shape, shape, 0, n)});
    at += n;
  }
  slice.shard = torch::zeros({at}, torch::kDouble);
  return slice;
}

// Every piece of lm_head.weight's exp_avg renamed to a field no other tensor has (as a writer
// that lost the tensor's moments would leave the set: each field whole or absent per tensor), the
// index's checksums made to match.
void rename_lm_head_exp_avg(const fs::path& d) {
  const fs::path index = d / "ckpt-e0002-s00000006.json";
  auto j = Json::parse(read_file(index).value());
  const std::string was = R"(\"field\":\"exp_avg\",\"key\":\"exp_avg/lm_head.weight/)";
  const std::string now = R"(\"field\":\"exp_avX\",\"key\":\"exp_avg/lm_head.weight/)";
  int renamed = 0;
  for (int r = 0; r < kRanks; ++r) {
    const fs::path f = d / ("ckpt-e0002-s00000006.mesh-" + std::to_string(r) + "-of-4.safetensors");
    std::string bytes = read_file(f).value();
    for (auto at = bytes.find(was); at != std::string::npos; at = bytes.find(was, at)) {
      bytes.replace(at, was.size(), now);
      ++renamed;
    }
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    j["shards"][r]["checksum"] = checksum_hex(bytes);
  }
  ASSERT_EQ(renamed, kRanks) << "one exp_avg piece of lm_head.weight in each rank's file";
  std::ofstream(index, std::ios::trunc) << j.dump(2);
}

TEST_F(MeshCheckpoint, AZeroSliceWithMomentsForSomeOfItsTensorsIsRefusedChangingNothing) {
  const fs::path d = dir_ / "checkpoints-no-lm-head-exp-avg";
  fs::remove_all(d);
  fs::copy(dir_ / "checkpoints", d);
  const auto ckpt = newest(d);  // before the harm: a load must check for itself
  rename_lm_head_exp_avg(d);
  auto one = whole_model(tiny(), 3);
  const auto before = module_state_dict(*one);
  auto opt = adamw(*one);
  StageLayout whole;
  const auto slice = two_part_slice(*one, whole);
  auto s = load_sharded_mesh_checkpoint(ckpt, *one, *opt, {slice}, whole);
  // Fields are checked in name order: exp_avX (lm_head's alone) comes before exp_avg.
  ASSERT_FALSE(s.ok()) << "a slice whose lm_head.weight has no exp_avg was read";
  EXPECT_EQ(s.error().code, Code::kDataError);
  EXPECT_NE(s.error().message.find("the optimizer's exp_avX is missing for some tensors"),
            std::string::npos)
      << s.error().message;
  EXPECT_TRUE(opt->state().empty());
  for (const auto& [name, t] : module_state_dict(*one))
    EXPECT_TRUE(torch::equal(t, before.at(name))) << "changed " << name;
  // The same slice over the checkpoint as written reads: the refusal is the renamed pieces'.
  auto good =
      load_sharded_mesh_checkpoint(newest(dir_ / "checkpoints"), *one, *opt, {slice}, whole);
  EXPECT_TRUE(good.ok()) << good.error().message;
  fs::remove_all(d);
}

TEST_F(MeshCheckpoint, AnotherModelShapeIsRefusedNamingTheTensor) {
  auto c = tiny();
  c.vocab_size = 41;
  auto other = whole_model(c, 3);
  auto opt = adamw(*other);
  StageLayout whole;
  auto s = load_mesh_checkpoint(newest(dir_ / "checkpoints"), *other, *opt, whole);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("was written for another model: lm_head.weight is "
                                   "[37, 32] there and [41, 32] here"),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().hint.find("--model"), std::string::npos);
}

}  // namespace
