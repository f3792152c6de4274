// Hugging Face's sharded safetensors folders, read and written (hf_shards.h).
#include "train/weights/hf_shards.h"

#include <fmt/format.h>

#include <cctype>
#include <regex>
#include <set>

#include "core/disk_space.h"
#include "core/files.h"
#include "core/json.h"
#include "train/weights/safetensors_writer.h"

namespace gpulab::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kIndexSuffix = ".safetensors.index.json";
constexpr long double kMinShardBytes = 1e3;
constexpr long double kMaxShardBytes = 1e18;

// The data bytes of every tensor of `layout` (the index's total_size).
uint64_t total_bytes(const StateDict& layout) {
  uint64_t total = 0;
  for (const auto& [name, t] : layout) total += t.nbytes();
  return total;
}

// The shard names save_pretrained gives: model-00001-of-00003.safetensors.
std::string shard_name(size_t i, size_t n) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
}

bool is_shard_name(const std::string& name) {
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, kShard);
}

Error index_error(const fs::path& index, const std::string& what) {
  return Error{Code::kDataError, index.string() + ": " + what,
               "a Hugging Face folder needs its index and every file it names, as downloaded "
               "(`hf download` fetches them all)"};
}

// The index's weight map (tensor -> file name), checked for shape: names of files in its folder.
Result<std::map<std::string, std::string>> weight_map_of(const fs::path& index) {
  auto text = read_file(index);
  if (!text) return text.error();
  auto j = parse_json(*text, index.string());
  if (!j) return index_error(index, j.error().message);
  if (!j->is_object() || !j->contains("weight_map") || !(*j)["weight_map"].is_object() ||
      (*j)["weight_map"].empty())
    return index_error(index, "no \"weight_map\" of tensor names to file names");
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : (*j)["weight_map"].items()) {
    const bool plain = file.is_string() && !file.get<std::string>().empty() &&
                       file.get<std::string>().find('/') == std::string::npos &&
                       file.get<std::string>().find("..") == std::string::npos;
    if (!plain)
      return index_error(index, "tensor " + name + " is placed in " + file.dump() +
                                    ", not a file name in the index's folder");
    map.emplace(name, file.get<std::string>());
  }
  return map;
}

// One file's tensors into `out`, each checked against the index's placement.
Status read_one_shard(const fs::path& index, const std::string& file,
                      const std::map<std::string, std::string>& map, StateDict& out,
                      std::map<std::string, std::string>& found_in) {
  const fs::path path = index.parent_path() / file;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return index_error(index,
                       "names " + file + ", which is not in " + index.parent_path().string());
  auto shard = read_safetensors(path);
  if (!shard) return shard.error();
  for (auto& [name, t] : shard->tensors) {
    if (auto [at, fresh] = found_in.emplace(name, file); !fresh)
      return index_error(index, "tensor " + name + " is in both " + at->second + " and " + file);
    out.emplace(name, std::move(t));
  }
  for (const auto& [name, where] : map)
    if (where == file && !out.contains(name))
      return index_error(index,
                         "places tensor " + name + " in " + file + ", which has no such tensor");
  return ok_status();
}

// Removes `dir`'s weights files of another layout than `keep` (model.safetensors, the index or
// save_pretrained's shard names).
void remove_stale(const fs::path& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool weights = name == kHfWeightsName || name == kHfIndexName || is_shard_name(name);
    if (weights && !keep.contains(name)) fs::remove(entry.path(), ec);
  }
}

// The shards' files, each from the stream's next tensors; the stream is taken to its end even
// after a failure, and a failure removes the shards already written.
Status write_shards(const fs::path& dir, TensorStream& stream,
                    const std::map<std::string, std::string>& metadata,
                    const std::vector<std::vector<std::string>>& plan) {
  Status st = ok_status();
  size_t written = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    StateDict layout;
    for (const auto& name : plan[i]) layout.emplace(name, stream.layout().at(name));
    auto w = SafetensorsWriter::create(dir / shard_name(i, plan.size()), layout, metadata);
    if (st && !w) st = w.error();
    for (const auto& name : plan[i]) {
      const auto t = stream.take(name);
      if (st) st = w->write(name, t);
    }
    if (st) st = w->commit();
    if (st) written = i + 1;
  }
  std::error_code ec;
  if (!st)
    for (size_t i = 0; i < written; ++i) fs::remove(dir / shard_name(i, plan.size()), ec);
  return st;
}

Status write_index(const fs::path& dir, const StateDict& layout,
                   const std::vector<std::vector<std::string>>& plan) {
  OrderedJson map = OrderedJson::object();
  for (size_t i = 0; i < plan.size(); ++i)
    for (const auto& name : plan[i]) map[name] = shard_name(i, plan.size());
  const OrderedJson index = {{"metadata", {{"total_size", total_bytes(layout)}}},
                             {"weight_map", map}};
  return write_file_atomic(dir / kHfIndexName, index.dump(2) + "\n");
}

}  // namespace

Result<uint64_t> parse_shard_size(std::string_view text) {
  static const std::regex kSize(R"((\d{1,15})([KMG]i?[Bb])?)", std::regex::icase);
  std::match_results<std::string_view::const_iterator> m;
  long double bytes = 0;
  if (std::regex_match(text.begin(), text.end(), m, kSize)) {
    bytes = std::stold(m[1].str());
    std::string unit = m[2].str();
    for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const bool binary = unit.size() == 3;
    const int power = unit.empty() ? 0 : unit[0] == 'K' ? 1 : unit[0] == 'M' ? 2 : 3;
    for (int i = 0; i < power; ++i) bytes *= binary ? 1024 : 1000;
    if (!binary && !unit.empty() && text.back() == 'b') bytes /= 8;  // "Gb": bits, as transformers
  }
  if (bytes < kMinShardBytes || bytes > kMaxShardBytes)
    return Error{Code::kInvalidArgument,
                 "'" + std::string(text) + "' is not a shard size from 1KB to 1EB",
                 "pass a size as transformers' max_shard_size takes it: 50GB, 500MB, 2GiB or "
                 "a number of bytes"};
  return static_cast<uint64_t>(bytes);
}

bool is_hf_index(const fs::path& path) {
  return path.filename().string().ends_with(kIndexSuffix);
}

std::optional<fs::path> hf_index_of_shard(const fs::path& shard) {
  const fs::path index = shard.parent_path() / kHfIndexName;
  std::error_code ec;
  if (!fs::is_regular_file(index, ec)) return std::nullopt;
  auto map = weight_map_of(index);
  if (!map) return std::nullopt;
  for (const auto& [name, file] : *map)
    if (file == shard.filename().string()) return index;
  return std::nullopt;
}

Result<StateDict> read_hf_shards(const fs::path& index) {
  auto map = weight_map_of(index);
  if (!map) return map.error();
  std::set<std::string> files;
  for (const auto& [name, file] : *map) files.insert(file);
  StateDict out;
  std::map<std::string, std::string> found_in;
  for (const auto& file : files)
    if (auto st = read_one_shard(index, file, *map, out, found_in); !st) return st.error();
  return out;
}

std::vector<std::vector<std::string>> plan_shards(const StateDict& layout, uint64_t max_bytes) {
  std::vector<std::vector<std::string>> plan;
  uint64_t used = 0;
  for (const auto& [name, t] : layout) {
    const uint64_t size = t.nbytes();
    if (plan.empty() || (used > 0 && used + size > max_bytes)) {
      plan.emplace_back();
      used = 0;
    }
    plan.back().push_back(name);
    used += size;
  }
  return plan;
}

Result<fs::path> write_hf_weights(const fs::path& dir, TensorStream& stream,
                                  const std::map<std::string, std::string>& metadata,
                                  uint64_t max_bytes) {
  const auto plan = plan_shards(stream.layout(), max_bytes);
  if (plan.size() <= 1) {
    if (auto st = write_stream(dir / kHfWeightsName, stream, metadata); !st) return st.error();
    remove_stale(dir, {kHfWeightsName});
    return dir / kHfWeightsName;
  }
  const uint64_t total = total_bytes(stream.layout());
  Status st = ok_status();
  if (const auto free = free_bytes(dir); free && *free < total) st = no_space_error(dir, total);
  // An old index would name old and new shards together while they are replaced: gone first.
  std::error_code ec;
  if (st) fs::remove(dir / kHfIndexName, ec);
  if (!st) {
    drain(stream);
    return st.error();
  }
  if (st = write_shards(dir, stream, metadata, plan); !st) return st.error();
  if (st = write_index(dir, stream.layout(), plan); !st) return st.error();
  std::set<std::string> keep{kHfIndexName};
  for (size_t i = 0; i < plan.size(); ++i) keep.insert(shard_name(i, plan.size()));
  remove_stale(dir, keep);
  return dir / kHfIndexName;
}

fs::path hf_weights_path(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / kHfWeightsName, ec) && fs::exists(dir / kHfIndexName, ec))
    return dir / kHfIndexName;
  return dir / kHfWeightsName;
}

}  // namespace gpulab::train
