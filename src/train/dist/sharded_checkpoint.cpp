// Sharded checkpoints: per-rank shard files, rank 0's index, resharding on load, consolidation.
#include "train/dist/sharded_checkpoint.h"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "core/crc32.h"
#include "core/error.h"
#include "core/files.h"
#include "train/optim/state_key.h"

namespace gpulab::train::dist {

namespace {

std::string shard_name(const std::string& stem, int rank, int world) {
  return fmt::format("{}.rank-{}-of-{}.pt", stem, rank, world);
}

// The optimizer state of one shard as named tensors (SGD momentum; Adam/AdamW moments, step).
std::vector<std::pair<std::string, torch::Tensor>> state_tensors(const torch::optim::Optimizer& opt,
                                                                 const torch::Tensor& p) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto it = opt.state().find(state_key(p));
  if (it == opt.state().end()) return out;
  const auto* st = it->second.get();
  if (auto* s = dynamic_cast<const torch::optim::SGDParamState*>(st)) {
    if (s->momentum_buffer().defined()) out.emplace_back("momentum_buffer", s->momentum_buffer());
  } else if (auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(st)) {
    out.emplace_back("step", torch::tensor(s->step()));
    out.emplace_back("exp_avg", s->exp_avg());
    out.emplace_back("exp_avg_sq", s->exp_avg_sq());
    if (s->max_exp_avg_sq().defined()) out.emplace_back("max_exp_avg_sq", s->max_exp_avg_sq());
  } else if (auto* s = dynamic_cast<const torch::optim::AdamParamState*>(st)) {
    out.emplace_back("step", torch::tensor(s->step()));
    out.emplace_back("exp_avg", s->exp_avg());
    out.emplace_back("exp_avg_sq", s->exp_avg_sq());
    if (s->max_exp_avg_sq().defined()) out.emplace_back("max_exp_avg_sq", s->max_exp_avg_sq());
  } else {
    throw Exception(Code::kUnsupported, "sharded checkpoints hold SGD, Adam and AdamW state only",
                    "use --optimizer sgd, adam or adamw with --shard");
  }
  return out;
}

void set_state(torch::optim::Optimizer& opt, const torch::Tensor& p,
               const std::map<std::string, torch::Tensor>& t) {
  if (t.empty()) return;
  auto get = [&](const char* k) {
    auto it = t.find(k);
    return it == t.end() ? torch::Tensor() : it->second;
  };
  std::unique_ptr<torch::optim::OptimizerParamState> st;
  if (dynamic_cast<torch::optim::SGD*>(&opt)) {
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(get("momentum_buffer"));
    st = std::move(s);
  } else if (dynamic_cast<torch::optim::AdamW*>(&opt)) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(get("step").item<int64_t>());
    s->exp_avg(get("exp_avg"));
    s->exp_avg_sq(get("exp_avg_sq"));
    if (auto m = get("max_exp_avg_sq"); m.defined()) s->max_exp_avg_sq(m);
    st = std::move(s);
  } else if (dynamic_cast<torch::optim::Adam*>(&opt)) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(get("step").item<int64_t>());
    s->exp_avg(get("exp_avg"));
    s->exp_avg_sq(get("exp_avg_sq"));
    if (auto m = get("max_exp_avg_sq"); m.defined()) s->max_exp_avg_sq(m);
    st = std::move(s);
  } else {
    throw Exception(Code::kUnsupported, "sharded checkpoints hold SGD, Adam and AdamW state only",
                    "use --optimizer sgd, adam or adamw with --shard");
  }
  opt.state()[state_key(p)] = std::move(st);
}

Json layout_json(torch::nn::Module& model, ShardedModel& sharded) {
  std::map<const void*, std::string> names;
  for (const auto& kv : model.named_parameters())
    names[kv.value().unsafeGetTensorImpl()] = kv.key();
  Json groups = Json::array();
  for (const auto& unit : sharded.layout())
    for (const auto* g : unit.groups) {
      Json params = Json::array();
      for (size_t i = 0; i < g->params().size(); ++i) {
        const auto& p = g->params()[i];
        params.push_back({{"name", names[p.unsafeGetTensorImpl()]},
                          {"shape", p.sizes().vec()},
                          {"strides", p.strides().vec()},
                          {"offset", g->offset_of(i)}});
      }
      groups.push_back({{"unit", unit.name},
                        {"numel", g->numel()},
                        {"dtype", std::string(c10::toString(g->shard().scalar_type()))},
                        {"params", params}});
    }
  return groups;
}

Error data_error(const fs::path& index, const std::string& what) {
  return Error{Code::kDataError, "sharded checkpoint " + index.string() + ": " + what,
               "it is damaged or incomplete; resume from an older checkpoint or start afresh"};
}

struct ShardFile {
  std::map<std::string, torch::Tensor> tensors;
  torch::Tensor rng;
};

// Reads the index and every shard, checking sizes and checksums, before anything is used.
Result<std::pair<Json, std::vector<ShardFile>>> read_all(const fs::path& index_file) {
  auto text = read_file(index_file);
  if (!text) return text.error();
  auto index = parse_json(*text, index_file.string());
  if (!index) return index.error();
  if (!index->is_object() || index->value("format", std::string{}) != kShardedFormat ||
      !index->contains("shards") || !(*index)["shards"].is_array())
    return data_error(index_file, "not a sharded checkpoint index");
  const auto world = index->value("world_size", int64_t{0});
  const auto& shards = (*index)["shards"];
  if (world < 1 || static_cast<int64_t>(shards.size()) != world)
    return data_error(index_file, fmt::format("the index lists {} shard files for a world of {}",
                                              shards.size(), world));
  const auto algorithm = index->value("checksum_algorithm", std::string("fnv1a64"));
  std::vector<ShardFile> out;
  for (const auto& s : shards) {
    const fs::path file = index_file.parent_path() / s.value("file", std::string{});
    auto data = read_file(file);
    if (!data) return data_error(index_file, "shard file " + file.string() + " is missing");
    if (static_cast<int64_t>(data->size()) != s.value("bytes", int64_t{-1}) ||
        !checksum_matches(*data, algorithm, s.value("checksum", std::string{})))
      return data_error(index_file,
                        fmt::format("shard file {} does not match the index ({} bytes, index "
                                    "says {})",
                                    file.string(), data->size(), s.value("bytes", int64_t{-1})));
    ShardFile sf;
    try {
      torch::serialize::InputArchive ar;
      ar.load_from(data->data(), data->size());
      for (const auto& key : ar.keys()) {
        torch::Tensor t;
        ar.read(key, t);
        if (key == "rng_cpu")
          sf.rng = t;
        else
          sf.tensors[key] = t;
      }
    } catch (const std::exception& e) {
      std::string w = e.what();
      return data_error(
          index_file, "cannot read shard file " + file.string() + ": " + w.substr(0, w.find('\n')));
    }
    out.push_back(std::move(sf));
  }
  return std::make_pair(std::move(*index), std::move(out));
}

// The real (unpadded) flat values of key `k` of group g, joined over the shards.
Result<torch::Tensor> joined(const std::vector<ShardFile>& shards, const std::string& k,
                             int64_t numel, const fs::path& index) {
  std::vector<torch::Tensor> parts;
  for (const auto& s : shards) {
    auto it = s.tensors.find(k);
    if (it == s.tensors.end()) return data_error(index, "a shard file lacks " + k);
    parts.push_back(it->second.reshape({-1}));
  }
  auto flat = torch::cat(parts);
  if (flat.numel() < numel) return data_error(index, k + " is shorter than the index says");
  return flat.narrow(0, 0, numel);
}

torch::Tensor my_slice(const torch::Tensor& real, const FlatGroup& g) {
  auto out = torch::zeros({g.shard_numel()}, real.options());
  const int64_t start = g.shard_numel() * g.rank();
  const int64_t n = std::max<int64_t>(0, std::min(g.shard_numel(), real.numel() - start));
  if (n > 0) out.narrow(0, 0, n).copy_(real.narrow(0, start, n));
  return out;
}

}  // namespace

torch::Tensor agree_all_written(Communicator& comm, const fs::path& file, const Status& written,
                                int64_t bytes, uint32_t crc, const std::string& name) {
  const int rank = comm.rank(), world = comm.size();
  auto sums = torch::zeros({world, 3}, torch::kLong);
  sums[rank][0] = bytes;
  sums[rank][1] = static_cast<int64_t>(crc);
  sums[rank][2] = written.ok() ? 0 : 1;
  sums = sums.to(comm.device());  // NCCL reduces device tensors only
  comm.allreduce_sum(sums, "all-reduce of the checkpoint shard sizes");
  sums = sums.cpu();
  std::string failed;
  for (int r = 0; r < world; ++r)
    if (sums[r][2].item<int64_t>() != 0) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  if (failed.empty()) return sums;
  std::error_code ec;
  if (!file.empty()) fs::remove(file, ec);
  if (!written.ok()) throw Exception(written.error());
  throw Exception(Code::kUnavailable,
                  fmt::format("checkpoint {} was not written: rank(s) {} could not write their "
                              "shard; the previous checkpoint stays the newest",
                              name, failed));
}

Json per_rank_index(const TrainState& s, const char* format, const std::vector<std::string>& files,
                    const torch::Tensor& sums) {
  Json list = Json::array();
  for (size_t r = 0; r < files.size(); ++r) {
    const auto row = static_cast<int64_t>(r);
    list.push_back(
        {{"file", files[r]},
         {"bytes", sums[row][0].item<int64_t>()},
         {"checksum", checksum_text(static_cast<uint32_t>(sums[row][1].item<int64_t>()))}});
  }
  Json index = train_state_json(s);
  index.update(Json{{"format", format},
                    {"file", list[0]["file"]},
                    {"bytes", list[0]["bytes"]},
                    {"checksum", list[0]["checksum"]},
                    {"checksum_algorithm", kChecksumAlgorithm},
                    {"shards", list}});
  return index;
}

void write_index(const fs::path& manifest, const Json& index,
                 const std::vector<std::string>& files) {
  if (auto st = write_file_atomic(manifest, index.dump(2) + "\n"); !st) {
    std::error_code ec;  // one folder (one node, or a shared file system)
    for (const auto& f : files) fs::remove(manifest.parent_path() / f, ec);
    throw Exception(st.error());
  }
}

bool is_sharded_checkpoint(const CheckpointInfo& ckpt) {
  auto text = read_file(ckpt.manifest);
  if (!text) return false;
  auto j = parse_json(*text, ckpt.manifest.string());
  return j && j->is_object() && j->value("format", std::string{}) == kShardedFormat;
}

namespace {

// Writes this rank's shard; every rank's outcome is agreed in agree_all_written.
torch::Tensor write_shard_all_or_none(Communicator& comm, const fs::path& file,
                                      const std::string& bytes, const std::string& name) {
  return agree_all_written(comm, file, write_file_atomic(file, bytes),
                           static_cast<int64_t>(bytes.size()), crc32(bytes), name);
}

}  // namespace

CheckpointInfo save_sharded_checkpoint(const fs::path& dir, const TrainState& s,
                                       torch::nn::Module& model, ShardedModel& sharded,
                                       const torch::optim::Optimizer& opt, int keep) {
  auto& comm = sharded.comm();
  const int rank = comm.rank(), world = comm.size();
  fs::create_directories(dir);
  const std::string name = checkpoint_stem(s);
  torch::serialize::OutputArchive ar;
  auto groups = sharded.groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& shard = groups[i]->shard();
    ar.write(fmt::format("g{}", i), shard.detach());
    for (const auto& [k, t] : state_tensors(opt, shard)) ar.write(fmt::format("g{}.{}", i, k), t);
  }
  // Buffers (BatchNorm statistics) are the same on every rank: rank 0 keeps them.
  if (rank == 0)
    for (const auto& kv : model.named_buffers()) ar.write("b." + kv.key(), kv.value().detach());
  ar.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  std::ostringstream os;
  ar.save_to(os);
  const std::string bytes = std::move(os).str();
  const auto sums = write_shard_all_or_none(comm, dir / shard_name(name, rank, world), bytes, name);
  CheckpointInfo info;
  info.epoch = s.epoch;
  info.step = s.step;
  info.file = dir / shard_name(name, 0, world);
  info.manifest = dir / (name + ".json");
  if (rank != 0) return info;
  std::vector<std::string> files;
  for (int r = 0; r < world; ++r) files.push_back(shard_name(name, r, world));
  Json index = per_rank_index(s, kShardedFormat, files, sums);
  index.update(Json{{"world_size", world},
                    {"shard", shard_stage_name(sharded.stage())},
                    {"groups", layout_json(model, sharded)}});
  write_index(info.manifest, index, files);
  // Retention: the newest `keep` sharded checkpoints; the index goes first, then its shards.
  int kept = 0;
  for (const auto& c : list_checkpoints(dir))
    if (is_sharded_checkpoint(c) && ++kept > keep) remove_checkpoint(c);
  return info;
}

Result<TrainState> load_sharded_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                           ShardedModel& sharded, torch::optim::Optimizer& opt) {
  auto all = read_all(ckpt.manifest);
  if (!all) return all.error();
  auto& [index, shards] = *all;
  const Json want = layout_json(model, sharded);
  const Json& have = index["groups"];
  auto groups = sharded.groups();
  bool same = have.is_array() && have.size() == groups.size();
  for (size_t i = 0; same && i < groups.size(); ++i)
    same = have[i].value("numel", int64_t{-1}) == want[i]["numel"].get<int64_t>() &&
           have[i]["params"].size() == want[i]["params"].size();
  if (!same)
    return Error{Code::kDataError,
                 "sharded checkpoint " + ckpt.manifest.string() +
                     " was written for another model or wrap policy (its flat layout differs)",
                 "pass the --model and --shard_wrap it was written with"};
  // Everything is read and checked; now change the shards, the optimizer and the parameters.
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < groups.size(); ++i) {
    auto& g = *groups[i];
    const int64_t n = g.numel();
    auto real = joined(shards, fmt::format("g{}", i), n, ckpt.manifest);
    if (!real) return real.error();
    g.shard().copy_(my_slice(*real, g));
    std::map<std::string, torch::Tensor> st;
    for (const char* k : {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}) {
      const std::string key = fmt::format("g{}.{}", i, k);
      if (!shards[0].tensors.count(key)) continue;
      auto t = joined(shards, key, n, ckpt.manifest);
      if (!t) return t.error();
      st[k] = my_slice(*t, g).to(g.shard().options());
    }
    if (auto it = shards[0].tensors.find(fmt::format("g{}.step", i)); it != shards[0].tensors.end())
      st["step"] = it->second;
    set_state(opt, g.shard(), st);
  }
  for (const auto& kv : model.named_buffers())
    if (auto it = shards[0].tensors.find("b." + kv.key()); it != shards[0].tensors.end())
      kv.value().copy_(it->second);
  const size_t mine =
      std::min<size_t>(static_cast<size_t>(sharded.comm().rank()), shards.size() - 1);
  if (shards[mine].rng.defined()) {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(shards[mine].rng);
  }
  sharded.gather_all();
  return train_state_from_json(index);
}

Result<std::map<std::string, torch::Tensor>> consolidate_sharded_checkpoint(
    const fs::path& index_file) {
  auto all = read_all(index_file);
  if (!all) return all.error();
  auto& [index, shards] = *all;
  std::map<std::string, torch::Tensor> out;
  const auto& groups = index["groups"];
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    auto real = joined(shards, fmt::format("g{}", i), g.value("numel", int64_t{0}), index_file);
    if (!real) return real.error();
    for (const auto& p : g["params"]) {
      auto shape = p["shape"].get<std::vector<int64_t>>();
      auto strides = p["strides"].get<std::vector<int64_t>>();
      auto t =
          real->as_strided(shape, strides, real->storage_offset() + p["offset"].get<int64_t>());
      out[p["name"].get<std::string>()] = t.contiguous();
    }
  }
  for (const auto& [key, t] : shards[0].tensors)
    if (key.rfind("b.", 0) == 0) out[key.substr(2)] = t;
  return out;
}

}  // namespace gpulab::train::dist
