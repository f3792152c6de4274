// Per-rank checkpoints of a model-parallel run, read at any layout (mesh_checkpoint.h).
#include "train/parallel/mesh_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/crc32.h"
#include "core/error.h"
#include "core/files.h"
#include "core/mapped_file.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/optim/state_key.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

namespace o = torch::optim;

constexpr const char* kParams = "param";  // the field of parameters and buffers

std::string piece_file(const std::string& stem, int rank, int files) {
  return fmt::format("{}.mesh-{}-of-{}.safetensors", stem, rank, files);
}

// The pieces one rank writes: tensors by key, and their boxes.
struct Pieces {
  StateDict tensors;
  Json chunks = Json::array();
};

// Each piece under field/name/k, k counting a tensor's pieces (they come in name order).
void add_pieces(Pieces& w, const std::string& field, const std::vector<HeldPiece>& pieces) {
  for (size_t i = 0, k = 0; i < pieces.size(); ++i) {
    const auto& p = pieces[i];
    k = i > 0 && pieces[i - 1].name == p.name ? k + 1 : 0;
    const std::string key = fmt::format("{}/{}/{}", field, p.name, k);
    w.tensors[key] = p.data;
    w.chunks.push_back({{"key", key}, {"field", field}, {"name", p.name}, {"at", p.box.at}});
  }
}

std::string hex_of(const torch::Tensor& bytes) {
  const auto t = bytes.contiguous();
  const auto* p = t.data_ptr<uint8_t>();
  std::string out;
  for (int64_t i = 0; i < t.numel(); ++i) out += fmt::format("{:02x}", p[i]);
  return out;
}

std::optional<torch::Tensor> bytes_of_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto t = torch::empty({static_cast<int64_t>(hex.size() / 2)}, torch::kUInt8);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const auto digit = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    t[static_cast<int64_t>(i / 2)] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return t;
}

Json rng_json() {
  Json cuda = Json::array();
  if (torch::cuda::is_available())
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i)
      cuda.push_back(
          hex_of(at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, i)).get_state()));
  return {{"cpu", hex_of(at::detail::getDefaultCPUGenerator().get_state())}, {"cuda", cuda}};
}

void set_rng(const Json& rng) {
  if (auto cpu = bytes_of_hex(rng.value("cpu", std::string{})); cpu && cpu->numel() > 0) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*cpu);
  }
  if (!torch::cuda::is_available() || !rng.contains("cuda") || !rng["cuda"].is_array()) return;
  const auto n = std::min<size_t>(rng["cuda"].size(), torch::cuda::device_count());
  for (size_t i = 0; i < n; ++i) {
    auto state = bytes_of_hex(rng["cuda"][i].is_string() ? rng["cuda"][i].get<std::string>() : "");
    if (!state) continue;
    auto gen = at::globalContext().defaultGenerator(
        torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*state);
  }
}

// The optimizer's step count (every parameter trains every step, so any state's).
Json optimizer_step(const o::Optimizer& opt) {
  for (const auto& [key, st] : opt.state())
    if (auto step = state_step(*st)) return *step;
  return nullptr;
}

// A field's pieces (kParams: the parameters and buffers) as this rank writes them.
using FieldPieces = std::vector<std::pair<std::string, std::vector<HeldPiece>>>;

// Writes this rank's pieces, and their CRC-32.
Status write_pieces(const fs::path& file, const std::string& stem_name, const FieldPieces& fields,
                    uint32_t& crc) {
  Pieces w;
  for (const auto& [field, pieces] : fields) add_pieces(w, field, pieces);
  return write_safetensors(
      file, w.tensors,
      {{"format", kMeshFormat}, {"checkpoint", stem_name}, {"chunks", w.chunks.dump()}}, &crc);
}

// The parameters' and buffers' pieces of a rank of the first data-parallel replica.
FieldPieces param_pieces(DeviceMesh& mesh, torch::nn::Module& model, StageLayout& layout,
                         const StateDict& ordinary) {
  return {
      {kParams, first_copy_pieces(model, mesh.coord().pp, layout, ordinary, held_state(model))}};
}

// opt's state of this rank's slices (views), each part a first copy writes.
FieldPieces slice_pieces(const o::Optimizer& opt, const std::vector<FlatSlice>& slices) {
  std::map<std::string, std::vector<HeldPiece>> by_field;
  for (const auto& slice : slices) {
    auto it = opt.state().find(state_key(slice.shard));
    if (it == opt.state().end()) continue;
    for (auto& [field, t] : moment_fields(*it->second))
      for (const auto& part : slice.parts) {
        if (!part.first_copy) continue;
        const auto flat = t->narrow(0, part.at, part.numel);
        for (const auto& run : part.runs) {
          const auto v = run_view(flat, run);
          for (const auto& q : run.placed)
            by_field[field].push_back({part.name, q.whole, in_box(v, q.local_at, q.whole.size)});
        }
      }
  }
  return {by_field.begin(), by_field.end()};
}

Json tensors_json(const StateDict& ordinary) {
  Json out = Json::object();
  for (const auto& [name, t] : ordinary)
    out[name] = {{"shape", t.sizes().vec()}, {"dtype", safetensors_dtype_name(t.scalar_type())}};
  return out;
}

}  // namespace

bool is_mesh_checkpoint(const CheckpointInfo& ckpt) {
  auto text = read_file(ckpt.manifest);
  if (!text) return false;
  auto j = parse_json(*text, ckpt.manifest.string());
  return j && j->is_object() && j->value("format", std::string{}) == kMeshFormat;
}

namespace {

// Writes the files (`files` of them: world ranks 0 .. files-1 write, `mine` their pieces), then
// rank 0 the index, and applies `keep`.
void save_pieces(const fs::path& dir, const TrainState& s, DeviceMesh& mesh,
                 torch::nn::Module& model, const o::Optimizer& opt, int keep, StageLayout& layout,
                 int files, const std::function<FieldPieces()>& mine) {
  const auto& l = mesh.layout();
  const int rank = mesh.world().rank();
  const std::string name = checkpoint_stem(s);
  fs::path file;
  Status written = ok_status();
  uint32_t crc = 0;
  int64_t bytes = 0;
  if (rank < files) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    file = dir / piece_file(name, rank, files);
    written = write_pieces(file, name, mine(), crc);
    if (written.ok()) bytes = static_cast<int64_t>(fs::file_size(file, ec));
  }
  const auto sums = dist::agree_all_written(mesh.world(), file, written, bytes, crc, name);
  if (rank != 0) return;
  std::vector<std::string> names;
  for (int r = 0; r < files; ++r) names.push_back(piece_file(name, r, files));
  Json index = dist::per_rank_index(s, kMeshFormat, names, sums);
  index.update(Json{{"world_size", l.world()},
                    {"mesh", {{"tp", l.tp()}, {"pp", l.pp()}, {"dp", l.dp()}}},
                    {"tensors", tensors_json(layout.ordinary_layout(model))},
                    {"optimizer_step", optimizer_step(opt)},
                    {"rng", rng_json()}});
  dist::write_index(dir / (name + ".json"), index, names);
  const auto all = list_checkpoints(dir);  // newest first; every format counts toward `keep`
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i)
    remove_checkpoint(all[i]);
}

}  // namespace

void save_mesh_checkpoint(const fs::path& dir, const TrainState& s, DeviceMesh& mesh,
                          torch::nn::Module& model, const o::Optimizer& opt, int keep,
                          StageLayout& layout) {
  // The first data-parallel replica's ranks are world ranks 0 .. tp*pp-1 (mesh_layout.h).
  save_pieces(dir, s, mesh, model, opt, keep, layout, mesh.layout().tp() * mesh.layout().pp(), [&] {
    const StateDict ordinary = layout.ordinary_layout(model);
    auto out = param_pieces(mesh, model, layout, ordinary);
    for (const auto& [field, dict] : state_moments(model, opt))
      out.emplace_back(field, first_copy_pieces(model, mesh.coord().pp, layout, ordinary, dict));
    return out;
  });
}

void save_sharded_mesh_checkpoint(const fs::path& dir, const TrainState& s, DeviceMesh& mesh,
                                  torch::nn::Module& model, const o::Optimizer& opt,
                                  const std::vector<FlatSlice>& slices, int keep,
                                  StageLayout& layout) {
  save_pieces(dir, s, mesh, model, opt, keep, layout, mesh.world().size(), [&] {
    FieldPieces out;
    if (mesh.coord().dp == 0)
      out = param_pieces(mesh, model, layout, layout.ordinary_layout(model));
    for (auto& f : slice_pieces(opt, slices)) out.push_back(std::move(f));
    return out;
  });
}

namespace {

Error data_error(const fs::path& index, const std::string& what) {
  return Error{Code::kDataError, "checkpoint " + index.string() + ": " + what,
               "it is damaged or incomplete; resume from an older checkpoint or start afresh"};
}

// One stored piece: its file, the box it fills and its tensor (a view of the mapped file).
struct Stored {
  size_t file = 0;
  Box box;
  torch::Tensor data;
};

using FieldName = std::pair<std::string, std::string>;

// A mesh checkpoint's index and the headers of its files, every piece checked against the
// ordinary shapes and every tensor covered once, before any piece is used.
struct MeshIndex {
  fs::path manifest;
  Json j;
  std::vector<SafetensorsFile> files;
  std::map<FieldName, std::vector<Stored>> pieces;
  std::set<size_t> verified;
};

Result<std::vector<int64_t>> shape_in(const Json& tensors, const std::string& name) {
  if (!tensors.contains(name) || !tensors[name].is_object() || !tensors[name].contains("shape") ||
      !tensors[name]["shape"].is_array())
    return Error{Code::kDataError, "no shape for " + name};
  return tensors[name]["shape"].get<std::vector<int64_t>>();
}

// Reads one file's header (mapped) and adds its pieces, each inside its tensor.
Status add_file(MeshIndex& m, size_t i, const fs::path& path) {
  auto f = read_safetensors(path);
  if (!f) return data_error(m.manifest, f.error().message);
  Json chunks;
  try {
    chunks = Json::parse(f->metadata.count("chunks") ? f->metadata.at("chunks") : "");
  } catch (const std::exception&) {
    return data_error(m.manifest, path.filename().string() + " has no list of its pieces");
  }
  const Json& tensors = m.j["tensors"];
  for (const auto& c : chunks) {
    if (!c.is_object() || !c.contains("key") || !c.contains("at"))
      return data_error(m.manifest, path.filename().string() + " lists a malformed piece");
    const auto key = c.value("key", std::string{}), name = c.value("name", std::string{});
    const auto t = f->tensors.find(key);
    auto shape = shape_in(tensors, name);
    Stored p{i, {c["at"].get<std::vector<int64_t>>(), {}}, {}};
    if (t == f->tensors.end() || !shape) return data_error(m.manifest, "no piece " + key);
    p.data = t->second;
    p.box.size = p.data.sizes().vec();
    bool inside = p.box.at.size() == shape->size() && p.box.size.size() == shape->size();
    for (size_t d = 0; inside && d < shape->size(); ++d)
      inside = p.box.at[d] >= 0 && p.box.at[d] + p.box.size[d] <= (*shape)[d];
    if (!inside) return data_error(m.manifest, "piece " + key + " lies outside " + name);
    auto& list = m.pieces[{c.value("field", std::string{}), name}];
    const bool twice = std::any_of(list.begin(), list.end(),
                                   [&](const Stored& s) { return s.box.at == p.box.at; });
    if (!twice) list.push_back(std::move(p));
  }
  m.files.push_back(std::move(*f));
  return ok_status();
}

// Every tensor's pieces fill it exactly (none missing, none overlapping): the parameters of
// every tensor, each optimizer field of a tensor wholly or not at all.
Status check_coverage(const MeshIndex& m) {
  const Json& tensors = m.j["tensors"];
  // Boxes inside the tensor (add_file) that do not overlap and hold its count of values tile it.
  std::map<FieldName, int64_t> filled;
  for (const auto& [key, list] : m.pieces) {
    std::vector<const Box*> boxes;
    for (const auto& p : list) boxes.push_back(&p.box);
    filled[key] = tiled_values(boxes);
    if (filled[key] < 0)
      return data_error(m.manifest,
                        fmt::format("two of its pieces of {} {} overlap", key.second, key.first));
  }
  for (const auto& [name, meta] : tensors.items()) {
    int64_t numel = 1;
    for (auto n : shape_in(tensors, name).value_or(std::vector<int64_t>{})) numel *= n;
    if (filled[{kParams, name}] != numel)
      return data_error(m.manifest, fmt::format("its pieces hold {} of the {} values of {}",
                                                filled[{kParams, name}], numel, name));
  }
  for (const auto& [key, n] : filled) {
    auto shape = shape_in(tensors, key.second);
    if (!shape) return data_error(m.manifest, "a piece of " + key.second + ", not in the index");
    int64_t numel = 1;
    for (auto d : *shape) numel *= d;
    if (n != numel)
      return data_error(m.manifest, fmt::format("its pieces hold {} of the {} values of {} {}", n,
                                                numel, key.second, key.first));
  }
  return ok_status();
}

Result<MeshIndex> read_index_of(const fs::path& manifest) {
  MeshIndex m;
  m.manifest = manifest;
  auto text = read_file(manifest);
  if (!text) return text.error();
  auto j = parse_json(*text, manifest.string());
  if (!j) return j.error();
  m.j = std::move(*j);
  if (!m.j.is_object() || m.j.value("format", std::string{}) != kMeshFormat ||
      !m.j.contains("shards") || !m.j["shards"].is_array() || m.j["shards"].empty() ||
      !m.j.contains("tensors") || !m.j["tensors"].is_object())
    return data_error(manifest, "not a mesh checkpoint index");
  for (size_t i = 0; i < m.j["shards"].size(); ++i) {
    const auto& s = m.j["shards"][i];
    const auto name = s.is_object() ? s.value("file", std::string{}) : std::string{};
    const fs::path file = manifest.parent_path() / name;
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (name.empty() || name.find('/') != std::string::npos || ec)
      return data_error(manifest, "piece file " + file.string() + " is missing");
    if (static_cast<int64_t>(size) != s.value("bytes", int64_t{-1}))
      return data_error(manifest, fmt::format("piece file {} is {} bytes, the index says {}",
                                              file.string(), size, s.value("bytes", int64_t{-1})));
    if (auto st = add_file(m, i, file); !st) return st.error();
  }
  if (auto st = check_coverage(m); !st) return st.error();
  // The fields read after the first change, their types checked now (they throw if wrong).
  (void)train_state_from_json(m.j);
  (void)m.j.value("checksum_algorithm", std::string{});
  for (const auto& s : m.j["shards"]) (void)s.value("checksum", std::string{});
  (void)m.j.value("rng", Json::object()).value("cpu", std::string{});
  return m;
}

// A field of the wrong JSON type (a hand-edited index or header) is damage like any other.
Result<MeshIndex> read_index(const fs::path& manifest) {
  try {
    return read_index_of(manifest);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return data_error(manifest, "malformed: " + what.substr(0, what.find('\n')));
  }
}

// File i's bytes against the index's checksum (once per file).
Status verify(MeshIndex& m, size_t i) {
  if (m.verified.count(i)) return ok_status();
  const auto& s = m.j["shards"][i];
  const fs::path file = m.manifest.parent_path() / s.value("file", std::string{});
  auto mapped = MappedFile::open(file);
  std::string bytes;
  if (!mapped) {
    auto read = read_file(file);
    if (!read) return data_error(m.manifest, "cannot read " + file.string());
    bytes = std::move(*read);
  }
  const std::string_view view = mapped ? (*mapped)->bytes() : std::string_view(bytes);
  if (!checksum_matches(view, m.j.value("checksum_algorithm", std::string{}),
                        s.value("checksum", std::string{})))
    return data_error(m.manifest, "piece file " + file.string() + " does not match its checksum");
  m.verified.insert(i);
  return ok_status();
}

std::vector<int64_t> minus(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(a.size());
  for (size_t d = 0; d < a.size(); ++d) out[d] = a[d] - b[d];
  return out;
}

// Fills `target` (this rank's tensor, zeros where it holds padding) from the stored pieces of
// (field, name) its boxes overlap; without a target, checks the files they come from instead.
Status fill(MeshIndex& m, const FieldName& key, const std::vector<Placed>& mine,
            torch::Tensor* target) {
  const auto it = m.pieces.find(key);
  if (it == m.pieces.end()) return ok_status();
  for (const auto& p : mine)
    for (const auto& s : it->second) {
      const auto o = overlap(p.whole, s.box);
      if (!o) continue;
      if (!target) {
        if (auto st = verify(m, s.file); !st) return st;
        continue;
      }
      std::vector<int64_t> local = minus(o->at, p.whole.at);
      for (size_t d = 0; d < local.size(); ++d) local[d] += p.local_at[d];
      in_box(*target, local, o->size).copy_(in_box(s.data, minus(o->at, s.box.at), o->size));
    }
  return ok_status();
}

// Refuses a checkpoint of another model: every ordinary tensor the same name and shape.
Status check_shapes(const MeshIndex& m, const StateDict& ordinary) {
  const Json& tensors = m.j["tensors"];
  std::string differs;
  for (const auto& [name, t] : ordinary) {
    auto shape = shape_in(tensors, name);
    if (!shape)
      differs = name + " is not in it";
    else if (*shape != t.sizes().vec())
      differs = fmt::format("{} is [{}] there and [{}] here", name, fmt::join(*shape, ", "),
                            fmt::join(t.sizes(), ", "));
    if (!differs.empty()) break;
  }
  if (differs.empty() && tensors.size() != ordinary.size())
    differs = fmt::format("it holds {} tensors, this model {}", tensors.size(), ordinary.size());
  if (differs.empty()) return ok_status();
  return Error{Code::kDataError,
               "checkpoint " + m.manifest.string() + " was written for another model: " + differs,
               "resume it with the --model it was trained with, or start a new run in another "
               "--output_dir"};
}

}  // namespace

namespace {

// A tensor (or a view of one) this rank fills from the stored pieces of `key` its boxes overlap.
struct Want {
  FieldName key;
  std::vector<Placed> mine;
  torch::Tensor into;
};

// What a load reads: the index checked against this model, the parameters and buffers it holds.
struct Reading {
  MeshIndex m;
  std::vector<Want> params;
  std::set<std::string> fields;  // the optimizer fields stored
  int64_t step = 0;
};

Result<Reading> start_reading(const CheckpointInfo& ckpt, torch::nn::Module& model,
                              StageLayout& layout) {
  auto m = read_index(ckpt.manifest);
  if (!m) return m.error();
  const StateDict ordinary = layout.ordinary_layout(model);
  if (auto st = check_shapes(*m, ordinary); !st) return st.error();
  Reading r{std::move(*m), {}, {}, 0};
  for (const auto& [key, list] : r.m.pieces)
    if (key.first != kParams) r.fields.insert(key.first);
  for (const auto& [name, t] : held_state(model)) {
    const auto whole = ordinary.at(name).sizes();
    r.params.push_back({{kParams, name},
                        placements(layout.slices(model, name, whole), whole),
                        torch::zeros_like(t)});
  }
  const auto step = r.m.j.value("optimizer_step", Json(nullptr));
  r.step = step.is_number() ? step.get<int64_t>() : 0;
  return r;
}

// Every file a want reads checked first, then every want filled.
Status fill_all(MeshIndex& m, std::vector<Want>& wants) {
  for (auto& w : wants)
    if (auto st = fill(m, w.key, w.mine, nullptr); !st) return st;
  torch::NoGradGuard no_grad;
  for (auto& w : wants) (void)fill(m, w.key, w.mine, &w.into);
  return ok_status();
}

using States = std::vector<std::pair<torch::Tensor, std::unique_ptr<o::OptimizerParamState>>>;

// The parameters and opt's states (built first: another --optimizer fails before any change),
// then the RNG.
Result<TrainState> commit(Reading& r, torch::nn::Module& model, o::Optimizer& opt, States states) {
  torch::NoGradGuard no_grad;
  const StateDict held = held_state(model);
  for (auto& w : r.params) held.at(w.key.second).copy_(w.into);
  for (auto& [p, st] : states) opt.state()[state_key(p)] = std::move(st);
  set_rng(r.m.j.value("rng", Json::object()));
  return train_state_from_json(r.m.j);
}

}  // namespace

Result<TrainState> load_mesh_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                        o::Optimizer& opt, StageLayout& layout) {
  auto r = start_reading(ckpt, model, layout);
  if (!r) return r.error();
  // Each trained parameter's optimizer fields, as the parameter is laid out.
  std::vector<Want> wants = r->params;  // `into` shared: filling these fills r->params
  std::map<std::string, const std::vector<Placed>*> placed;
  for (const auto& w : r->params) placed[w.key.second] = &w.mine;
  std::map<std::string, std::map<std::string, torch::Tensor>> moments;
  for (const auto& [name, p] : held_parameters(model)) {
    if (!p.requires_grad()) continue;
    for (const auto& f : r->fields)
      if (r->m.pieces.count({f, name})) {
        moments[name][f] = torch::zeros_like(p);
        wants.push_back({{f, name}, *placed.at(name), moments[name][f]});
      }
  }
  if (auto st = fill_all(r->m, wants); !st) return st.error();
  States states;
  try {
    for (const auto& [name, p] : held_parameters(model))
      if (moments.count(name)) states.emplace_back(p, make_state(opt, r->step, moments.at(name)));
  } catch (const Exception& e) {
    return e.error();
  }
  return commit(*r, model, opt, std::move(states));
}

Result<TrainState> load_sharded_mesh_checkpoint(const CheckpointInfo& ckpt,
                                                torch::nn::Module& model, o::Optimizer& opt,
                                                const std::vector<FlatSlice>& slices,
                                                StageLayout& layout) {
  auto r = start_reading(ckpt, model, layout);
  if (!r) return r.error();
  std::vector<Want> wants = r->params;  // `into` shared: filling these fills r->params
  std::vector<std::map<std::string, torch::Tensor>> moments(slices.size());
  for (size_t i = 0; i < slices.size(); ++i)
    for (const auto& f : r->fields) {
      size_t stored = 0;
      for (const auto& part : slices[i].parts) stored += r->m.pieces.count({f, part.name});
      if (stored == 0) continue;
      if (stored != slices[i].parts.size())
        return data_error(ckpt.manifest, "the optimizer's " + f + " is missing for some tensors");
      auto flat = torch::zeros_like(slices[i].shard);
      moments[i][f] = flat;
      for (const auto& part : slices[i].parts)
        for (const auto& run : part.runs)
          wants.push_back(
              {{f, part.name}, run.placed, run_view(flat.narrow(0, part.at, part.numel), run)});
    }
  if (auto st = fill_all(r->m, wants); !st) return st.error();
  States states;
  try {
    for (size_t i = 0; i < slices.size(); ++i)
      if (!moments[i].empty())
        states.emplace_back(slices[i].shard, make_state(opt, r->step, moments[i]));
  } catch (const Exception& e) {
    return e.error();
  }
  return commit(*r, model, opt, std::move(states));
}

Result<TrainState> load_stage_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                         o::Optimizer& opt, StageLayout& layout) {
  return is_mesh_checkpoint(ckpt) ? load_mesh_checkpoint(ckpt, model, opt, layout)
                                  : load_pipeline_checkpoint(ckpt, model, opt, layout);
}

Result<TrainState> agree_loaded(dist::Communicator& world, Result<TrainState> mine) {
  auto failed = torch::zeros({world.size()}, torch::kLong);
  failed[world.rank()] = mine.ok() ? 0 : 1;
  failed = failed.to(world.device());
  world.allreduce_sum(failed, "whether every rank read its part of the checkpoint");
  failed = failed.cpu();
  int first = -1;
  for (int r = world.size() - 1; r >= 0; --r)
    if (failed[r].item<int64_t>() != 0) first = r;
  if (first < 0) return mine;
  // The first rank that failed says why to every rank (rank 0's words are the ones shown).
  constexpr int64_t kChars = 1024;
  auto text = torch::zeros({kChars}, torch::kLong);
  if (world.rank() == first) {
    const std::string why = mine.error().message;
    for (size_t i = 0; i < why.size() && i < static_cast<size_t>(kChars); ++i)
      text[static_cast<int64_t>(i)] = static_cast<unsigned char>(why[i]);
  }
  text = text.to(world.device());
  world.broadcast(text, first, "why a rank could not read the checkpoint");
  text = text.cpu();
  if (!mine) return mine;
  std::string why;
  for (int64_t i = 0; i < kChars && text[i].item<int64_t>() != 0; ++i)
    why += static_cast<char>(text[i].item<int64_t>());
  return Error{Code::kDataError, "rank " + std::to_string(first) + ": " + why + "; no rank resumed",
               "resume from an older checkpoint (--resume PATH) or start afresh"};
}

namespace {

// The ordinary tensors joined from every piece one at a time, read through the mapped files.
class MeshCheckpointStream : public TensorStream {
 public:
  explicit MeshCheckpointStream(MeshIndex m) : m_(std::move(m)) {
    for (const auto& [name, meta] : m_.j["tensors"].items()) {
      const auto shape = shape_in(m_.j["tensors"], name).value();  // check_coverage read them
      const auto it = m_.pieces.find({kParams, name});
      // No pieces: no values (a dimension of 0).
      const auto options =
          it == m_.pieces.end() ? torch::TensorOptions() : it->second.front().data.options();
      layout_[name] = torch::empty(shape, options.device(torch::kMeta));
    }
  }
  const StateDict& layout() const override { return layout_; }
  torch::Tensor take(const std::string& name) override {
    const auto& like = layout_.at(name);
    auto t = torch::empty(like.sizes(), like.options().device(torch::kCPU));
    const auto it = m_.pieces.find({kParams, name});
    if (it != m_.pieces.end())
      for (const auto& p : it->second) in_box(t, p.box.at, p.box.size).copy_(p.data);
    return t;
  }

 private:
  MeshIndex m_;
  StateDict layout_;
};

}  // namespace

Result<std::unique_ptr<TensorStream>> mesh_checkpoint_stream(const fs::path& index) {
  auto m = read_index(index);
  if (!m) return m.error();
  for (size_t i = 0; i < m->files.size(); ++i)
    if (auto st = verify(*m, i); !st) return st.error();
  return std::unique_ptr<TensorStream>(std::make_unique<MeshCheckpointStream>(std::move(*m)));
}

Result<StateDict> consolidate_mesh_checkpoint(const fs::path& index) {
  auto stream = mesh_checkpoint_stream(index);
  if (!stream) return stream.error();
  StateDict out;
  for (const auto& [name, like] : (*stream)->layout()) out[name] = (*stream)->take(name);
  return out;
}

}  // namespace gpulab::train::parallel
