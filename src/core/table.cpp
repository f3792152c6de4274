// Renders a TextTable: left-aligned columns, a rule under the header.
#include "core/table.h"

#include <algorithm>

namespace gpulab {

std::string TextTable::render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < r.size() ? r[i] : "";
      out += cell;
      if (i + 1 < width.size()) out += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
  for (const auto& r : rows_) out += line(r);
  return out;
}

}  // namespace gpulab
