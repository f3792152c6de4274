// The round trip with Hugging Face, proven with transformers itself: a gpulab-trained run folder
// of every family (Llama, Qwen2, GPT-2: lm_family_rows.h) loads with AutoModelForCausalLM /
// AutoTokenizer (tests/parity/hf_roundtrip.py) and gives gpulab's logits and greedy tokens; what
// transformers saves of it loads back into gpulab (and `gpulab generate --model` continues the
// prompt as transformers did); an interrupted run's checkpoint exports to the same folder; a wrong
// file is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/json.h"
#include "support/tensor_diff.h"
#include "train/data/tokenizer.h"
#include "train/generate.h"
#include "train/hf_parity.h"
#include "train/lm_family_rows.h"
#include "train/models/lm_families.h"
#include "train/run_files.h"
#include "train/trainer_test_util.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

// A tiny run on byte-tokenized text (so the folder has a tokenizer), fp32: 40 steps, enough to
// continue "The quick" with " brown fox", so the greedy tokens compared are not one repeated id.
fs::path train_tiny(const fs::path& dir, const std::string& model,
                    const std::vector<std::string>& extra = {}) {
  {
    std::ofstream text(dir / "corpus.txt");
    for (int i = 0; i < 400; ++i)
      text << "The quick brown fox " << i << " jumps over the lazy dog.\n";
  }
  auto t = testing::run_gpulab({"data", "tokenize", "--input", (dir / "corpus.txt").string(),
                                "--tokenizer", "bytes", "--block_bytes", "256", "--out",
                                (dir / "data").string()});
  EXPECT_EQ(t.exit_code, 0) << t.out << t.err;  // 18 KB in 256-byte blocks: both splits filled
  const fs::path run = dir / "run";
  std::vector<std::string> args{"train",
                                "--model",
                                model,
                                "--dataset",
                                "text",
                                "--data_dir",
                                (dir / "data").string(),
                                "--seq_len",
                                "32",
                                "--batch_size",
                                "8",
                                "--num_epochs",
                                "1",
                                "--limit_train_batches",
                                "40",
                                "--learning_rate",
                                "3e-3",
                                "--device",
                                "cpu",
                                "--precision",
                                "fp32",
                                "--threads",
                                "2",
                                "--no_report",
                                "--output_dir",
                                run.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = testing::run_gpulab(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return r.exit_code == 0 ? run : fs::path();
}

// gpulab's model of a folder, read as `gpulab generate --model DIR` reads it.
CausalLmPtr load_folder(const fs::path& dir, LoadedDecoder& loaded) {
  auto l = load_decoder(dir.string(), "");
  EXPECT_TRUE(l.ok()) << l.error().to_string();
  if (!l.ok()) return nullptr;
  loaded = std::move(*l);
  auto model = build_causal_lm(loaded.config);
  auto st = load_state_dict(*model, loaded.tensors, loaded.what);
  EXPECT_TRUE(st.ok()) << st.error().message;
  model->eval();
  return st.ok() ? model : nullptr;
}

// Logits on the reference's ids against transformers' (relative Frobenius distance), within
// hf_tolerance: 10x transformers' own float32 rounding (its distance from float64, same run).
void expect_same_logits(CausalLm& model, const StateDict& ref, const std::string& what) {
  torch::NoGradGuard no_grad;
  const auto logits = model.forward(ref.at("ids"));
  const double d = gpulab::test::relative_diff(logits, ref.at("logits"));
  const double noise = ref.at("noise.logits").item<double>();
  std::printf("%s: logits %.2e (transformers' float32 rounding %.2e)\n", what.c_str(), d, noise);
  EXPECT_LT(d, testing::hf_tolerance(noise)) << what;
}

// With `shard_size`, gpulab writes the run's weights as Hugging Face's shards and index, and
// transformers saves its copy the same way: each side reads the other's.
void round_trip(const std::string& model_name, const std::string& shard_size = "") {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  const fs::path dir = testing::temp_dir("hf_roundtrip_" + model_name + shard_size);
  std::vector<std::string> sharded;
  if (!shard_size.empty()) sharded = {"--max_shard_size", shard_size};
  const fs::path run = train_tiny(dir, model_name, sharded);
  ASSERT_FALSE(run.empty());
  ASSERT_TRUE(fs::exists(run / "tokenizer.json")) << "the run folder has no tokenizer files";
  std::vector<std::string> args = {
      testing::hf_python(), std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_roundtrip.py",
      run.string(),         dir.string(),
      "--prompt",           "The quick",
      "--new_tokens",       "12"};
  args.insert(args.end(), sharded.begin(), sharded.end());
  auto py = run_process(args, testing::reference_run());
  ASSERT_TRUE(py.ok() && py->success()) << testing::reference_failure(py);
  std::string last = py->out.substr(0, py->out.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') + 1);  // the script's last line: its facts
  const Json facts = Json::parse(last);
  std::printf("%s: transformers read %s\n", model_name.c_str(), facts.dump().c_str());
  EXPECT_EQ(facts["metadata"]["format"], "pt");
  // transformers read the files gpulab wrote: one, or the shards its index lists; and saved its
  // copy likewise.
  EXPECT_EQ(facts["weight_files"].size() > 1, !shard_size.empty()) << facts["weight_files"];
  EXPECT_EQ(fs::exists(dir / "hf" / "model.safetensors.index.json"), !shard_size.empty());
  EXPECT_TRUE(facts["missing"].empty() && facts["unexpected"].empty() &&
              facts["mismatched"].empty())
      << facts.dump();
  EXPECT_EQ(facts["vocab_size"], 256);
  // AutoModelForCausalLM picked the family's own class from the run's config.json, which states
  // what transformers would otherwise default: token ids, dtype, tying, rope theta.
  const DecoderConfig shape = find_decoder_config(model_name).value();
  EXPECT_EQ(facts["model_class"], std::string(shape.traits().architecture));
  const Json config = Json::parse(read_file(run / "config.json").value());
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
                          "vocab_size", "tie_word_embeddings"})
    EXPECT_TRUE(config.contains(key)) << key << " missing from config.json";
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["tie_word_embeddings"], shape.tie_word_embeddings);
  if (shape.traits().rotary) {
    EXPECT_EQ(config["rope_theta"], shape.rope_theta);
  }
  // The byte tokenizer has no bos/eos: null, not GPT-2's default 50256 outside 256 ids.
  EXPECT_TRUE(facts["eos_token_id"].is_null() && facts["bos_token_id"].is_null()) << facts.dump();
  EXPECT_FALSE(facts["tokenizer"].is_null()) << "AutoTokenizer did not read the run's tokenizer";
  EXPECT_EQ(facts["decoded"].get<std::string>().rfind("The quick", 0), 0u) << facts.dump();

  const auto ref = read_safetensors(dir / "reference.safetensors").value().tensors;
  LoadedDecoder loaded;
  auto model = load_folder(run, loaded);
  ASSERT_TRUE(model);
  expect_same_logits(*model, ref, model_name + " run folder in transformers");
  // Same prompt ids from both tokenizers, same greedy continuation.
  auto tok = open_tokenizer(loaded.tokenizer_spec).value();
  std::vector<int64_t> prompt;
  for (int32_t id : tok->encode("The quick")) prompt.push_back(id);
  EXPECT_EQ(prompt, testing::to_ids(ref.at("prompt")));
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = ref.at("generated").numel();
  const auto ours = generate(*model, prompt, greedy);
  EXPECT_EQ(ours, testing::to_ids(ref.at("generated")));
  std::vector<int32_t> all(prompt.begin(), prompt.end());
  all.insert(all.end(), ours.begin(), ours.end());
  EXPECT_EQ(tok->decode(all).value(), facts["decoded"].get<std::string>());
  std::printf("%s: greedy '%s'\n", model_name.c_str(), tok->decode(all).value().c_str());

  // Back: what transformers saved of the model loads into gpulab with the same logits.
  LoadedDecoder back;
  auto again = load_folder(dir / "hf", back);
  ASSERT_TRUE(again);
  expect_same_logits(*again, ref, model_name + " transformers' save_pretrained in gpulab");
  // The command a user runs on transformers' folder prints transformers' greedy text.
  auto g = testing::run_gpulab({"generate", "--model", (dir / "hf").string(), "--tokenizer",
                                "bytes", "--prompt", "The quick", "--temperature", "0",
                                "--max_new_tokens", std::to_string(greedy.max_new_tokens)});
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, facts["decoded"].get<std::string>() + "\n") << g.err;
  fs::remove_all(dir);
}

// Every family's tiny shape (lm_family_rows.h; Qwen2's is grouped-query with q/k/v biases and
// tied: transformers reads the tied table as lm_head too).
class HfRoundTripFamily : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(HfRoundTripFamily, RunFolderLoadsInTransformersAndBack) {
  ASSERT_FALSE(GetParam().second.empty()) << GetParam().first << " has no -tiny shape";
  round_trip(GetParam().second);
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, HfRoundTripFamily,
                         ::testing::ValuesIn(testing::family_rows()), testing::family_row_name);

// A model larger than --max_shard_size: gpulab's shards and index load in transformers, and
// transformers' save_pretrained in shards (max_shard_size) loads in gpulab, with the same logits
// and greedy text as the single files.
TEST(HfRoundTrip, ShardedFoldersLoadBothWays) {
  round_trip("llama-tiny", "4MB");
}

// A run stopped before its end has checkpoints only: export turns the newest into the same
// Hugging Face folder the finished run wrote, and generate reads the run folder without
// --weights. A checkpoint renamed to .safetensors is named, with what to pass.
TEST(HfRoundTrip, InterruptedRunExportsAndGenerates) {
  const fs::path dir = testing::temp_dir("hf_interrupted");
  const fs::path run = train_tiny(dir, "llama-tiny");
  ASSERT_FALSE(run.empty());
  const auto finished = read_safetensors(run / "model.safetensors").value().tensors;
  for (const char* f :
       {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::remove(run / f);
  const auto ckpt = find_resumable(run / "checkpoints");
  ASSERT_TRUE(ckpt);
  for (const fs::path& source : {ckpt->manifest, ckpt->file, run}) {
    const fs::path out = dir / ("export_" + source.filename().string());
    auto e =
        testing::run_gpulab({"export", "--checkpoint", source.string(), "--output", out.string()});
    ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
    const auto exported = read_safetensors(out / "model.safetensors").value();
    EXPECT_EQ(exported.metadata.at("format"), "pt");
    ASSERT_EQ(exported.tensors.size(), finished.size()) << source;
    for (const auto& [name, t] : finished)
      EXPECT_TRUE(torch::equal(t, exported.tensors.at(name))) << source << " " << name;
    EXPECT_TRUE(fs::exists(out / "config.json") && fs::exists(out / "tokenizer.json")) << source;
  }
  // In shards on request, read back as one model; a size transformers would not take is refused
  // before anything is written.
  const fs::path sharded = dir / "export_sharded";
  auto e = testing::run_gpulab({"export", "--checkpoint", run.string(), "--output",
                                sharded.string(), "--max_shard_size", "40KB"});
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("(model.safetensors.index.json, config.json"), std::string::npos) << e.out;
  auto sharded_files = locate_model_files(sharded).value();
  const auto back = read_model_weights(sharded_files).value();
  ASSERT_EQ(back.size(), finished.size());
  for (const auto& [name, t] : finished) EXPECT_TRUE(torch::equal(t, back.at(name))) << name;
  auto size = testing::run_gpulab({"export", "--checkpoint", run.string(), "--output",
                                   (dir / "export_bad_size").string(), "--max_shard_size", "5XB"});
  EXPECT_EQ(size.exit_code, 2) << size.out << size.err;
  EXPECT_NE(size.err.find("'5XB' is not a shard size"), std::string::npos) << size.err;
  EXPECT_FALSE(fs::exists(dir / "export_bad_size"));
  auto one_file =
      testing::run_gpulab({"export", "--checkpoint", run.string(), "--output",
                           (dir / "one.safetensors").string(), "--max_shard_size", "1MB"});
  EXPECT_EQ(one_file.exit_code, 2) << one_file.out << one_file.err;
  EXPECT_NE(one_file.err.find("--max_shard_size splits a folder's weights into files"),
            std::string::npos)
      << one_file.err;
  EXPECT_FALSE(fs::exists(dir / "one.safetensors"));
  auto g = testing::run_gpulab({"generate", "--model", run.string(), "--prompt", "The",
                                "--max_new_tokens", "4", "--temperature", "0"});
  EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
  // A new run starts from the interrupted one's weights (--init_weights takes the folder).
  fs::create_directories(dir / "second");
  EXPECT_FALSE(train_tiny(dir / "second", "llama-tiny", {"--init_weights", run.string()}).empty());
  fs::copy_file(ckpt->file, dir / "weights.safetensors");
  auto bad = testing::run_gpulab({"generate", "--model", "llama-tiny", "--weights",
                                  (dir / "weights.safetensors").string(), "--prompt", "The"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("is a PyTorch archive (a checkpoint), not a safetensors file"),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("gpulab export"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// A sharded run (--shard full, one rank): export joins its shards, from the index or a shard
// file, into the finished run's tensors bit for bit.
TEST(HfRoundTrip, ShardedCheckpointExports) {
  const fs::path dir = testing::temp_dir("hf_sharded");
  const fs::path run = train_tiny(dir, "gpt2-tiny", {"--shard", "full"});
  ASSERT_FALSE(run.empty());
  const auto finished = read_safetensors(run / "model.safetensors").value().tensors;
  const auto ckpt = find_resumable(run / "checkpoints");
  ASSERT_TRUE(ckpt);
  const fs::path shard = fs::path(ckpt->manifest).replace_extension(".rank-0-of-1.pt");
  ASSERT_TRUE(fs::exists(shard)) << shard;
  for (const fs::path& source : {ckpt->manifest, shard}) {
    const fs::path out = dir / ("export_" + source.filename().string());
    auto e =
        testing::run_gpulab({"export", "--checkpoint", source.string(), "--output", out.string()});
    ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
    EXPECT_NE(e.out.find("sharded checkpoint"), std::string::npos) << e.out;
    const auto exported = read_safetensors(out / "model.safetensors").value().tensors;
    ASSERT_EQ(exported.size(), finished.size()) << source;
    for (const auto& [name, t] : finished)
      EXPECT_TRUE(torch::equal(t, exported.at(name))) << source << " " << name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
