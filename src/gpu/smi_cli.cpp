// Last-resort backends: run `nvidia-smi -q -x` (XML) and `rocm-smi --showallinfo --json`, or read
// their captured output under DIR/commands/ when detecting from a captured tree.
#include <string>

#include "core/files.h"
#include "core/json.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "gpu/backend.h"
#include "gpu/known_devices.h"
#include "gpu/xml.h"

namespace gpulab::gpu {

namespace {

// The places the seed's builder looks, then $PATH.
std::optional<fs::path> find_tool(const std::vector<fs::path>& known, const char* program) {
  if (auto p = find_executable(known)) return p;
  return which(program);
}

// Output of a tool: the captured file under a root, or the live command's stdout.
Result<std::string> tool_output(const DetectOptions& opts, const std::string& captured,
                                const std::vector<fs::path>& known, const char* program,
                                std::vector<std::string> args) {
  if (!opts.root.empty()) {
    fs::path file = opts.root / "commands" / captured;
    auto text = read_file(file);
    if (!text) return Error{Code::kNotFound, "no captured output " + file.string()};
    return text;
  }
  auto bin = find_tool(known, program);
  if (!bin) return Error{Code::kNotFound, std::string(program) + " not found"};
  std::vector<std::string> argv;
  if (bin->extension() == ".py") argv.push_back("python3");
  argv.push_back(bin->string());
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions ro;
  ro.timeout = std::chrono::seconds(30);
  auto r = run_process(argv, ro);
  if (!r) return r.error();
  if (!r->success()) {
    std::string why = trim(r->err.empty() ? r->out : r->err);
    if (why.size() > 200) why.resize(200);
    return Error{Code::kUnavailable, bin->string() + " failed: " + why};
  }
  return r->out;
}

std::optional<int> numa_of(const DetectOptions& opts, const std::optional<std::string>& pci) {
  if (!pci) return std::nullopt;
  auto t = read_text(under_root(opts.root, "/sys/bus/pci/devices/" + *pci + "/numa_node"));
  auto v = t ? leading_number(*t) : std::nullopt;
  if (!v || *v < 0) return std::nullopt;
  return static_cast<int>(*v);
}

// Backends that parse everything at init keep it here and hand it out.
class ParsedBackend : public GpuBackend {
 public:
  int device_count() const override { return static_cast<int>(gpus_.size()); }
  GpuInfo static_info(int i) const override {
    GpuInfo g = gpus_.at(static_cast<size_t>(i));
    g.memory_used_bytes.reset();
    g.utilization_percent.reset();
    g.temperature_c.reset();
    g.power_mw.reset();
    g.processes.clear();
    return g;
  }
  void sample(int i, GpuInfo& g) const override {
    const GpuInfo& p = gpus_.at(static_cast<size_t>(i));
    g.memory_used_bytes = p.memory_used_bytes;
    g.utilization_percent = p.utilization_percent;
    g.temperature_c = p.temperature_c;
    g.power_mw = p.power_mw;
  }
  std::vector<GpuProcess> processes(int i) const override {
    return gpus_.at(static_cast<size_t>(i)).processes;
  }

 protected:
  std::vector<GpuInfo> gpus_;
};

class NvidiaSmiBackend : public ParsedBackend {
 public:
  std::string_view name() const override { return "nvidia_smi"; }
  Vendor vendor() const override { return Vendor::kNvidia; }
  bool expensive(const DetectOptions& opts) const override { return opts.root.empty(); }
  std::optional<std::string> cuda_version() const override { return cuda_; }

  bool init(const DetectOptions& opts) override {
    auto out = tool_output(opts, "nvidia-smi-q-x.xml",
                           {"/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi",
                            "/usr/lib/wsl/lib/nvidia-smi", "/opt/nvidia/bin/nvidia-smi"},
                           "nvidia-smi", {"-q", "-x"});
    if (!out) return fail(out.error().message);
    auto doc = parse_xml(*out);
    if (!doc) return fail("nvidia-smi XML: " + doc.error().message);
    if (doc->name != "nvidia_smi_log") return fail("nvidia-smi XML: root is <" + doc->name + ">");
    auto driver = doc->text_at("driver_version");
    if (auto c = doc->text_at("cuda_version"); c && *c != "N/A") cuda_ = c;
    for (const XmlElement* x : doc->children_named("gpu")) {
      GpuInfo g;
      g.vendor = Vendor::kNvidia;
      g.index = static_cast<int>(gpus_.size());
      g.source = "nvidia_smi";
      g.name = x->text_at("product_name").value_or("");
      g.uuid = x->text_at("uuid");
      g.pci_bus_id = normalize_pci_bus_id(
          x->text_at("pci/pci_bus_id")
              .value_or(x->attributes.count("id") ? x->attributes.at("id") : ""));
      g.driver_version = driver;
      std::string arch = x->text_at("product_architecture").value_or("");
      if (!arch.empty() && arch != "N/A") g.architecture = arch;
      g.compute_capability = nvidia_compute_capability(g.name, arch);
      if (!g.architecture && g.compute_capability)
        g.architecture = nvidia_architecture(*g.compute_capability);
      g.memory_total_bytes = bytes_from_text(x->text_at("fb_memory_usage/total").value_or(""));
      g.memory_used_bytes = bytes_from_text(x->text_at("fb_memory_usage/used").value_or(""));
      g.utilization_percent = leading_number(x->text_at("utilization/gpu_util").value_or(""));
      g.temperature_c = leading_number(x->text_at("temperature/gpu_temp").value_or(""));
      // Drivers from R535 moved power under gpu_power_readings.
      auto watts = leading_number(x->text_at("gpu_power_readings/power_draw").value_or(""));
      if (!watts) watts = leading_number(x->text_at("power_readings/power_draw").value_or(""));
      if (watts) g.power_mw = static_cast<std::uint64_t>(*watts * 1000.0 + 0.5);
      g.numa_node = numa_of(opts, g.pci_bus_id);
      if (const XmlElement* procs = x->child("processes")) {
        for (const XmlElement* p : procs->children_named("process_info")) {
          GpuProcess gp;
          gp.pid = static_cast<int>(leading_number(p->text_at("pid").value_or("")).value_or(0));
          gp.name = p->text_at("process_name").value_or("");
          gp.memory_used_bytes = bytes_from_text(p->text_at("used_memory").value_or(""));
          g.processes.push_back(std::move(gp));
        }
      }
      gpus_.push_back(std::move(g));
    }
    if (gpus_.empty()) return fail("nvidia-smi lists no GPU");
    return true;
  }

 private:
  std::optional<std::string> cuda_;
};

// rocm-smi --json keys vary a little between releases ("Card series" / "Card Series").
std::optional<std::string> field(const Json& card, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    std::string want = to_lower(k);
    for (auto it = card.begin(); it != card.end(); ++it) {
      if (to_lower(it.key()) != want || !it->is_string()) continue;
      std::string v = trim(it->get<std::string>());
      if (v.empty() || v == "N/A" || v == "Unknown") continue;
      return v;
    }
  }
  return std::nullopt;
}

class RocmSmiCliBackend : public ParsedBackend {
 public:
  std::string_view name() const override { return "rocm_smi_cli"; }
  Vendor vendor() const override { return Vendor::kAmd; }
  bool expensive(const DetectOptions& opts) const override { return opts.root.empty(); }

  bool init(const DetectOptions& opts) override {
    auto out = tool_output(opts, "rocm-smi.json",
                           {"/usr/bin/rocm-smi", "/usr/local/bin/rocm-smi",
                            "/opt/rocm/bin/rocm-smi", "/opt/rocm/libexec/rocm_smi/rocm_smi.py"},
                           "rocm-smi", {"--showallinfo", "--showmeminfo", "vram", "--json"});
    if (!out) return fail(out.error().message);
    // rocm-smi may print warnings before the JSON document.
    size_t brace = out->find('{');
    if (brace == std::string::npos) return fail("rocm-smi printed no JSON");
    auto doc = parse_json(std::string_view(*out).substr(brace), "rocm-smi JSON");
    if (!doc) return fail(doc.error().message);
    if (!doc->is_object()) return fail("rocm-smi JSON is not an object");
    std::optional<std::string> driver;
    if (doc->contains("system") && (*doc)["system"].is_object())
      driver = field((*doc)["system"], {"Driver version"});
    std::vector<std::pair<int, const Json*>> cards;
    for (auto it = doc->begin(); it != doc->end(); ++it) {
      if (!starts_with(it.key(), "card") || !it->is_object()) continue;
      if (auto n = parse_uint(it.key().substr(4))) cards.emplace_back(static_cast<int>(*n), &*it);
    }
    std::sort(cards.begin(), cards.end());
    for (const auto& [num, card] : cards) gpus_.push_back(parse_card(num, *card, driver, opts));
    if (gpus_.empty()) return fail("rocm-smi lists no GPU");
    return true;
  }

 private:
  static GpuInfo parse_card(int num, const Json& c, const std::optional<std::string>& driver,
                            const DetectOptions& opts) {
    GpuInfo g;
    g.vendor = Vendor::kAmd;
    g.index = num;
    g.source = "rocm_smi_cli";
    g.name = field(c, {"Card Series", "Device Name", "Card Model"}).value_or("AMD GPU");
    if (starts_with(g.name, "0x")) {
      if (auto id = parse_uint(g.name))
        g.name = amd_name_for_device_id(static_cast<unsigned>(*id)).value_or(g.name);
    }
    if (auto u = field(c, {"Unique ID"})) g.uuid = to_lower(*u);
    if (auto p = field(c, {"PCI Bus"})) g.pci_bus_id = normalize_pci_bus_id(*p);
    if (auto gfx = field(c, {"GFX Version"})) {
      g.gfx_target = to_lower(*gfx);
      g.architecture = amd_architecture(*g.gfx_target);
    }
    if (auto p = field(c, {"Compute Partition", "Current Compute Partition"}))
      g.compute_partition = to_upper(*p);
    if (auto p = field(c, {"Memory Partition", "Current Memory Partition", "Current NPS mode"}))
      g.memory_partition = to_upper(*p);
    g.driver_version = field(c, {"Driver version"});
    if (!g.driver_version) g.driver_version = driver;
    if (auto v = field(c, {"VRAM Total Memory (B)"})) g.memory_total_bytes = parse_uint(*v);
    if (auto v = field(c, {"VRAM Total Used Memory (B)"})) g.memory_used_bytes = parse_uint(*v);
    if (auto v = field(c, {"GPU use (%)"})) g.utilization_percent = leading_number(*v);
    if (auto v = field(c, {"Temperature (Sensor junction) (C)", "Temperature (Sensor edge) (C)"}))
      g.temperature_c = leading_number(*v);
    auto w = field(
        c, {"Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)"});
    if (auto v = w ? leading_number(*w) : std::nullopt)
      g.power_mw = static_cast<std::uint64_t>(*v * 1000.0 + 0.5);
    g.numa_node = numa_of(opts, g.pci_bus_id);
    return g;
  }
};

}  // namespace

std::unique_ptr<GpuBackend> make_nvidia_smi_cli_backend() {
  return std::make_unique<NvidiaSmiBackend>();
}
std::unique_ptr<GpuBackend> make_rocm_smi_cli_backend() {
  return std::make_unique<RocmSmiCliBackend>();
}

}  // namespace gpulab::gpu
