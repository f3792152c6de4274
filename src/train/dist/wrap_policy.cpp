// Wrap policies: units from the top levels of the module tree.
#include "train/dist/wrap_policy.h"

#include "core/error.h"

namespace gpulab::train::dist {

namespace {

bool is_container(const torch::nn::Module& m, bool list_only) {
  if (dynamic_cast<const torch::nn::ModuleListImpl*>(&m)) return true;
  return !list_only && dynamic_cast<const torch::nn::SequentialImpl*>(&m);
}

bool has_params(torch::nn::Module& m) {
  for (const auto& p : m.parameters())
    if (p.requires_grad()) return true;
  return false;
}

// The elements of the first containers found depth-first (a transformer's layer list may sit
// inside a wrapper module: a decoder -> model -> layers); units are not searched further.
void find_container_elements(torch::nn::Module& m, const std::string& prefix, bool list_only,
                             std::vector<WrapUnit>& units) {
  for (auto& child : m.named_children()) {
    const std::string name = prefix + child.key();
    if (!is_container(*child.value(), list_only)) {
      find_container_elements(*child.value(), name + ".", list_only, units);
      continue;
    }
    for (auto& item : child.value()->named_children())
      if (has_params(*item.value())) units.push_back({name + "." + item.key(), item.value().get()});
  }
}

std::vector<WrapUnit> container_elements(torch::nn::Module& model, bool list_only) {
  std::vector<WrapUnit> units;
  find_container_elements(model, "", list_only, units);
  return units;
}

std::vector<WrapUnit> top_children(torch::nn::Module& model, bool sequential_only) {
  std::vector<WrapUnit> units;
  for (auto& child : model.named_children()) {
    if (sequential_only && !dynamic_cast<torch::nn::SequentialImpl*>(child.value().get())) continue;
    if (has_params(*child.value())) units.push_back({child.key(), child.value().get()});
  }
  return units;
}

}  // namespace

const std::vector<std::string>& wrap_policy_names() {
  static const std::vector<std::string> names{"auto", "blocks", "children", "none"};
  return names;
}

std::vector<WrapUnit> choose_units(torch::nn::Module& model, const std::string& policy) {
  if (policy == "none") return {};
  if (policy == "blocks") return container_elements(model, false);
  if (policy == "children") return top_children(model, false);
  if (policy == "auto") {
    auto units = container_elements(model, true);
    if (units.empty()) units = top_children(model, true);
    if (units.empty()) units = top_children(model, false);
    return units;
  }
  throw Exception(Code::kInvalidArgument, "unknown wrap policy '" + policy + "'",
                  "use auto, blocks, children or none");
}

}  // namespace gpulab::train::dist
