// Atomic, checksummed training checkpoints and their discovery for --resume.
#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "core/crc32.h"
#include "core/disk_space.h"
#include "core/files.h"
#include "core/strings.h"
#include "train/test_hooks.h"

namespace gpulab::train {

std::string checksum_text(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(crc));
  return buf;
}

std::string checksum_hex(std::string_view bytes) {
  return checksum_text(crc32(bytes));
}

bool checksum_matches(std::string_view bytes, const std::string& algorithm,
                      const std::string& expected) {
  if (algorithm == kChecksumAlgorithm) return checksum_hex(bytes) == expected;
  if (algorithm != "fnv1a64") return false;  // a newer gpulab's: not one this build can check
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return expected == buf;
}

namespace {

const std::regex kName(R"(ckpt-e(\d+)-s(\d+)\.pt)");

void throw_io(const std::string& what, const fs::path& p) {
  throw Exception(Code::kInternal, what + " " + p.string() + ": " + std::strerror(errno),
                  "check free disk space and permissions of the output folder");
}

// The same discipline as core's write_file_atomic (temp, fsync, rename, fsync folder), with a
// pause point in the middle for the kill test. The space is reserved before the first byte and
// any failure removes the temporary, so a full disk leaves the last checkpoint as the newest.
void write_atomic_with_hook(const fs::path& path, std::string_view data, int64_t epoch) {
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (is_no_space(errno)) throw Exception(no_space_error(path, data.size()));
    throw_io("cannot create", tmp);
  }
  const auto fail = [&](const std::string& what, const Error* error = nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    if (error) throw Exception(*error);
    if (is_no_space(err)) throw Exception(no_space_error(path, data.size()));
    errno = err;
    throw_io(what, tmp);
  };
  if (auto st = reserve_space(fd, path, data.size()); !st) fail("", &st.error());
  auto write_range = [&](size_t from, size_t to) {
    while (from < to) {
      ssize_t n = ::write(fd, data.data() + from, to - from);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write");
      from += static_cast<size_t>(n);
    }
  };
  write_range(0, data.size() / 2);
  test_hooks::checkpoint_write_pause(epoch);  // a kill test's moment
  write_range(data.size() / 2, data.size());
  if (::fsync(fd) != 0) fail("cannot sync");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("cannot sync");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename");
  int dfd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string serialize_state(const TrainState& s, torch::nn::Module& model,
                            const torch::optim::Optimizer& opt) {
  torch::serialize::OutputArchive root, model_ar, opt_ar;
  model.save(model_ar);
  opt.save(opt_ar);
  root.write("model", model_ar);
  root.write("optimizer", opt_ar);
  root.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  if (torch::cuda::is_available()) {
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
      auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, i));
      root.write("rng_cuda_" + std::to_string(i), gen.get_state());
    }
  }
  Json meta = {{"format", "gpulab-checkpoint-1"},
               {"epoch", s.epoch},
               {"step", s.step},
               {"batches_done", s.batches_done},
               {"seed", s.seed},
               {"world_size", s.world_size},
               {"data_order", {{"sampler", "shuffle"}, {"seed_of_epoch", "seed + epoch"}}},
               {"scaler", scaler_json(s.scaler)},
               {"history", s.history},
               {"options", s.options}};
  root.write("meta", c10::IValue(meta.dump()));
  std::ostringstream out;
  root.save_to(out);
  return std::move(out).str();
}

// libtorch's messages carry a C++ backtrace after the first line; a user needs only that line.
std::string first_line(const char* what) {
  std::string s(what);
  return s.substr(0, s.find('\n'));
}

std::optional<CheckpointInfo> parse_manifest(const fs::path& manifest) {
  auto text = read_file(manifest);
  if (!text) return std::nullopt;
  auto j = parse_json(*text, manifest.string());
  if (!j || !j->is_object() || !j->contains("file") || !j->contains("checksum"))
    return std::nullopt;
  CheckpointInfo info;
  info.manifest = manifest;
  info.file = manifest.parent_path() / (*j)["file"].get<std::string>();
  info.epoch = j->value("epoch", int64_t{0});
  info.step = j->value("step", int64_t{0});
  return info;
}

// Reads the checkpoint bytes and checks them against the manifest.
Result<std::string> read_verified(const CheckpointInfo& ckpt) {
  auto mtext = read_file(ckpt.manifest);
  if (!mtext) return mtext.error();
  auto m = parse_json(*mtext, ckpt.manifest.string());
  if (!m) return m.error();
  auto data = read_file(ckpt.file);
  if (!data) return data.error();
  if (static_cast<int64_t>(data->size()) != m->value("bytes", int64_t{-1}) ||
      !checksum_matches(*data, m->value("checksum_algorithm", std::string("fnv1a64")),
                        m->value("checksum", std::string{})))
    return Error{Code::kDataError,
                 "checkpoint " + ckpt.file.string() + " does not match its manifest",
                 "it is damaged; resume from an older one or start afresh"};
  return data;
}

// module.save's archive: each module's own tensors by name, each child module as an archive.
void collect_tensors(torch::serialize::InputArchive& ar, const std::string& prefix,
                     std::map<std::string, torch::Tensor>& out) {
  for (const auto& key : ar.keys()) {
    c10::IValue value;
    if (!ar.try_read(key, value)) continue;
    if (value.isTensor()) {
      out[prefix + key] = value.toTensor().detach();
    } else if (value.isObject()) {
      torch::serialize::InputArchive child;
      if (ar.try_read(key, child)) collect_tensors(child, prefix + key + ".", out);
    }
  }
}

}  // namespace

Result<CheckpointWeights> read_checkpoint_weights(const CheckpointInfo& ckpt) {
  auto bytes = read_verified(ckpt);
  if (!bytes) return bytes.error();
  CheckpointWeights w;
  try {
    torch::serialize::InputArchive root, model_ar;
    root.load_from(bytes->data(), bytes->size());
    c10::IValue meta_v;
    root.read("meta", meta_v);
    auto meta = parse_json(meta_v.toStringRef(), "checkpoint meta").value_or_throw();
    w.options = meta.value("options", Json::object());
    root.read("model", model_ar);
    collect_tensors(model_ar, "", w.tensors);
  } catch (const Exception& e) {
    return e.error();
  } catch (const std::exception& e) {
    return Error{Code::kDataError,
                 "cannot read checkpoint " + ckpt.file.string() + ": " + first_line(e.what()),
                 "it is not a gpulab checkpoint; pass a run folder or its ckpt-*.pt"};
  }
  if (w.tensors.empty())
    return Error{Code::kDataError, "checkpoint " + ckpt.file.string() + " holds no model tensors",
                 "pass another checkpoint of the run"};
  return w;
}

Json scaler_json(const LossScaler::State& s) {
  return {{"scale", s.scale}, {"good_steps", s.good_steps}, {"skipped", s.skipped}};
}

LossScaler::State scaler_from_json(const Json& j) {
  return {j.value("scale", 1.0), j.value("good_steps", int64_t{0}), j.value("skipped", int64_t{0})};
}

std::string checkpoint_stem(const TrainState& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ckpt-e%04lld-s%08lld", static_cast<long long>(s.epoch),
                static_cast<long long>(s.step));
  return buf;
}

Json train_state_json(const TrainState& s) {
  return {{"epoch", s.epoch},
          {"step", s.step},
          // A stop mid-epoch (SIGINT, SIGTERM) resumes after the batches it had done.
          {"batches_done", s.batches_done},
          {"seed", s.seed},
          {"world_size", s.world_size},
          {"scaler", scaler_json(s.scaler)},
          {"history", s.history},
          {"options", s.options}};
}

TrainState train_state_from_json(const Json& j) {
  TrainState s;
  s.epoch = j.value("epoch", int64_t{0});
  s.step = j.value("step", int64_t{0});
  s.batches_done = j.value("batches_done", int64_t{0});
  s.seed = j.value("seed", int64_t{0});
  s.world_size = j.value("world_size", int64_t{1});
  s.scaler = scaler_from_json(j.value("scaler", Json::object()));
  s.history = j.value("history", Json::array());
  s.options = j.value("options", Json::object());
  return s;
}

CheckpointInfo save_checkpoint(const fs::path& dir, const TrainState& s, torch::nn::Module& model,
                               const torch::optim::Optimizer& opt, int keep) {
  fs::create_directories(dir);
  const std::string bytes = serialize_state(s, model, opt);
  CheckpointInfo info;
  info.epoch = s.epoch;
  info.step = s.step;
  info.file = dir / (checkpoint_stem(s) + ".pt");
  info.manifest = fs::path(info.file).replace_extension(".json");
  // An older manifest under this name would vouch for the new bytes before they are complete.
  std::error_code ec;
  fs::remove(info.manifest, ec);
  write_atomic_with_hook(info.file, bytes, s.epoch);
  Json manifest = {{"file", info.file.filename().string()},
                   {"bytes", bytes.size()},
                   {"checksum", checksum_hex(bytes)},
                   {"checksum_algorithm", kChecksumAlgorithm},
                   {"epoch", s.epoch},
                   {"step", s.step}};
  if (auto st = write_file_atomic(info.manifest, manifest.dump(2) + "\n"); !st) {
    fs::remove(info.file, ec);  // without its manifest it would never count: leave no orphan
    throw Exception(st.error());
  }

  // Retention: keep the newest `keep` complete ones; drop stale temporaries and orphans.
  auto all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) remove_checkpoint(all[i]);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool tmp = name.find(".tmp-") != std::string::npos;
    const bool orphan =
        std::regex_match(name, kName) && !fs::exists(fs::path(e.path()).replace_extension(".json"));
    if (tmp || orphan) fs::remove(e.path(), ec);
  }
  return info;
}

std::vector<CheckpointInfo> list_checkpoints(const fs::path& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    auto info = parse_manifest(e.path());
    if (info && fs::exists(info->file)) out.push_back(*info);
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return std::tie(a.epoch, a.step) > std::tie(b.epoch, b.step);
  });
  return out;
}

void remove_checkpoint(const CheckpointInfo& ckpt) {
  Json files = Json::array();
  if (auto text = read_file(ckpt.manifest))
    if (auto j = parse_json(*text, ckpt.manifest.string());
        j && j->is_object() && j->contains("shards") && (*j)["shards"].is_array())
      files = (*j)["shards"];
  std::error_code ec;
  fs::remove(ckpt.manifest, ec);
  for (const auto& f : files)
    if (f.is_object())
      if (auto name = f.value("file", std::string{});
          !name.empty() && name.find('/') == std::string::npos)
        fs::remove(ckpt.manifest.parent_path() / name, ec);
  fs::remove(ckpt.file, ec);
}

namespace {

// Every file a per-rank checkpoint's manifest lists ("shards") is there at its size: checked
// for all of them when choosing one to resume (their checksums are checked as they are read).
bool files_present(const CheckpointInfo& c) {
  auto text = read_file(c.manifest);
  auto j = parse_json(text.value_or(""), c.manifest.string());
  if (!j || !j->is_object() || !j->contains("shards")) return true;  // an ordinary one
  if (!(*j)["shards"].is_array()) return false;
  for (const auto& f : (*j)["shards"]) {
    std::error_code ec;
    const auto name = f.is_object() && f.contains("file") && f["file"].is_string()
                          ? f["file"].get<std::string>()
                          : std::string{};
    const auto size = fs::file_size(c.manifest.parent_path() / name, ec);
    if (name.empty() || ec || !f.contains("bytes") || !f["bytes"].is_number_integer() ||
        static_cast<int64_t>(size) != f["bytes"].get<int64_t>())
      return false;
  }
  return true;
}

}  // namespace

std::optional<CheckpointInfo> find_resumable(const fs::path& dir, const fs::path& older_than) {
  bool past = older_than.empty();
  for (const auto& c : list_checkpoints(dir)) {
    if (!past) {
      past = c.manifest == older_than;
      continue;
    }
    if (files_present(c) && read_verified(c)) return c;
    std::cerr << "warning: skipping damaged checkpoint " << c.file.string() << "\n";
  }
  return std::nullopt;
}

Result<CheckpointInfo> checkpoint_at(const fs::path& file) {
  // One rank's file of a per-rank checkpoint (ckpt-….rank-R-of-W.pt,
  // ckpt-….mesh-R-of-N.safetensors) stands for the checkpoint of its index.
  const std::string name = file.filename().string();
  const size_t piece = std::min(name.find(".rank-"), name.find(".mesh-"));
  const fs::path manifest = piece != std::string::npos
                                ? file.parent_path() / (name.substr(0, piece) + ".json")
                                : fs::path(file).replace_extension(".json");
  if (!fs::exists(file))
    return Error{Code::kNotFound, "no checkpoint at " + file.string(),
                 "pass --resume auto to pick the newest complete one in the output folder"};
  auto info = parse_manifest(manifest);
  if (!info)
    return Error{Code::kDataError, "checkpoint " + file.string() + " has no valid manifest",
                 "it was not completely written; use an older checkpoint"};
  return *info;
}

Result<TrainState> load_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                   torch::optim::Optimizer& opt) {
  auto bytes = read_verified(ckpt);
  if (!bytes) return bytes.error();
  TrainState s;
  try {
    torch::serialize::InputArchive root, model_ar, opt_ar;
    root.load_from(bytes->data(), bytes->size());
    c10::IValue meta_v;
    root.read("meta", meta_v);
    auto meta = parse_json(meta_v.toStringRef(), "checkpoint meta").value_or_throw();
    root.read("model", model_ar);
    root.read("optimizer", opt_ar);
    model.load(model_ar);
    opt.load(opt_ar);
    torch::Tensor rng;
    root.read("rng_cpu", rng);
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(rng);
    }
    if (torch::cuda::is_available()) {
      for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
        torch::Tensor t;
        if (!root.try_read("rng_cuda_" + std::to_string(i), t)) continue;
        auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, i));
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(t);
      }
    }
    s.epoch = meta.at("epoch").get<int64_t>();
    s.step = meta.at("step").get<int64_t>();
    s.batches_done = meta.value("batches_done", int64_t{0});
    s.seed = meta.at("seed").get<int64_t>();
    s.world_size = meta.value("world_size", int64_t{1});
    s.scaler = scaler_from_json(meta.at("scaler"));
    s.history = meta.value("history", Json::array());
    s.options = meta.value("options", Json::object());
  } catch (const Exception& e) {
    return e.error();
  } catch (const std::exception& e) {
    return Error{Code::kDataError,
                 "cannot load checkpoint " + ckpt.file.string() + ": " + first_line(e.what()),
                 "it was written for a different model or optimizer; check --model/--optimizer"};
  }
  return s;
}

}  // namespace gpulab::train
