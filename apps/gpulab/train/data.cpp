// `gpulab data`: `get` downloads a data set (published MD5 checked, partial downloads resumed,
// archives unpacked) and `info` opens one as training would and prints what it holds.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "core/strings.h"
#include "train/data/datasets.h"
#include "train/data/fetch/download.h"
#include "train/data/token_file.h"

namespace gpulab::cli {

namespace {

void add_get(CLI::App& data) {
  auto name = std::make_shared<std::string>();
  auto opts = std::make_shared<train::FetchOptions>();
  auto no_progress = std::make_shared<bool>(false);
  auto* cmd = data.add_subcommand("get", "download a data set and check its published MD5");
  cmd->add_option("dataset", *name, join(train::fetchable_datasets(), ", "))->required();
  cmd->add_option("--dir", opts->dir, "folder to download and unpack into")->capture_default_str();
  cmd->add_option("--url", opts->url,
                  "download from this URL instead (base URL for multi-file sets)");
  cmd->add_option("--md5", opts->md5, "expected MD5 of the archive fetched from --url");
  cmd->add_flag("--no_progress,--no-progress", *no_progress, "no progress bar");
  cmd->callback([name, opts, no_progress] {
    if (!train::download_available())
      throw Exception(Code::kUnavailable,
                      "downloading is unavailable: this gpulab was built without libcurl",
                      "download the archive by hand (see README) and unpack it into " + opts->dir);
    opts->progress = !*no_progress;
    auto report = train::fetch_dataset(*name, *opts).value_or_throw();
    for (const auto& f : report.files) std::printf("%s\n", f.c_str());
    if (report.resumed_from > 0)
      std::printf("resumed a partial download at %s\n",
                  human_bytes(static_cast<double>(report.resumed_from)).c_str());
    std::printf("%s: %s in %s\n", name->c_str(),
                report.downloaded ? "downloaded and verified" : "already present, verified",
                report.data_path.c_str());
  });
}

// A token folder of `gpulab data tokenize` (what --dataset text trains on), checksums verified.
void describe_token_folder(const std::string& dir) {
  const auto data = train::TokenData::open(dir).value_or_throw();
  const auto& m = data.meta();
  std::printf("dataset: text (token folder %s)\n", dir.c_str());
  std::printf("tokenizer: %s%s, vocabulary %lld, %s ids%s\n", m.tokenizer.c_str(),
              m.tokenizer_model.empty() ? "" : (" (" + m.tokenizer_model + ")").c_str(),
              static_cast<long long>(m.vocab_size), train::token_dtype_name(m.dtype),
              m.eos_id >= 0 ? (", eos " + std::to_string(m.eos_id)).c_str() : "");
  for (const auto& [name, split] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}})
    std::printf("%s: %s tokens, %s of text\n", name,
                with_thousands(static_cast<double>(split->tokens), 0).c_str(),
                human_bytes(static_cast<double>(split->text_bytes)).c_str());
  std::printf("bytes per token: %.3f (train), %.3f (val)\n", m.bytes_per_token(),
              m.val_bytes_per_token());
}

void add_info(CLI::App& data) {
  struct Args {
    std::string name, data_dir = "./data", split = "train";
    train::DatasetOptions ds;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = data.add_subcommand("info", "open a data set as training would and describe it");
  cmd->add_option("dataset", a->name,
                  join(train::dataset_names(), ", ") +
                      "; text (the token folder in --data_dir) or a token folder itself")
      ->required();
  cmd->add_option("--data_dir,--data-dir", a->data_dir, "data folder")->capture_default_str();
  cmd->add_option("--split", a->split, "train or test")->capture_default_str();
  cmd->add_option("--cifar100_labels", a->ds.cifar100_labels, "fine or coarse")
      ->capture_default_str();
  cmd->callback([a] {
    std::error_code ec;
    if (a->name == "text" ||
        std::filesystem::exists(std::filesystem::path(a->name) / "meta.json", ec))
      return describe_token_folder(a->name == "text" ? a->data_dir : a->name);
    auto ds = train::open_dataset(a->name, a->data_dir, train::parse_split(a->split), a->ds);
    auto shape = ds->image_shape();
    std::printf("dataset: %s (%s)\n", ds->name().c_str(), a->split.c_str());
    std::printf("images: %lld, %lldx%lldx%lld\n", static_cast<long long>(ds->size()),
                static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
                static_cast<long long>(shape[2]));
    std::printf("classes: %lld\n", static_cast<long long>(ds->num_classes()));
    if (auto mem = ds->in_memory()) {
      auto counts = torch::bincount(mem->second, {}, ds->num_classes());
      std::vector<std::string> parts;
      for (int64_t c = 0; c < counts.size(0); ++c)
        parts.push_back(std::to_string(counts[c].item<int64_t>()));
      std::printf("per class: %s\n", join(parts, " ").c_str());
    }
  });
}

}  // namespace

void add_data_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* data = app.add_subcommand(
      "data", "data sets: download (get), inspect (info), tokenize text for language models");
  data->require_subcommand(1);
  add_get(*data);
  add_info(*data);
  add_data_tokenize_command(*data);
}

}  // namespace gpulab::cli
