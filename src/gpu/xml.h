// A small XML reader for the one XML document gpulab reads (`nvidia-smi -q -x`): elements,
// attributes, text and the five predefined entities; no namespaces, no DTD processing.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::gpu {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // character data directly inside this element, trimmed
  std::vector<XmlElement> children;

  // First child with this name, or nullptr.
  const XmlElement* child(std::string_view name) const;
  std::vector<const XmlElement*> children_named(std::string_view name) const;
  // Text of a descendant by a slash path ("fb_memory_usage/total"); nullopt if absent.
  std::optional<std::string> text_at(std::string_view path) const;
};

// Parses a document and returns its root element; malformed input is a kDataError naming the
// byte offset.
Result<XmlElement> parse_xml(std::string_view text);

}  // namespace gpulab::gpu
