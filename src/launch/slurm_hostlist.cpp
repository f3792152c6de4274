// Host list expansion: names are split into text and bracket groups, each group into ranges,
// and the names are the product of the groups in order.
#include "launch/slurm_hostlist.h"

#include <charconv>
#include <map>

namespace gpulab::launch {

namespace {

Error bad_list(std::string_view list, const std::string& why) {
  return Error{Code::kInvalidArgument, "host list '" + std::string(list) + "' is not valid: " + why,
               "write hosts as Slurm does: name, name[1-4,7], or several joined by commas"};
}

// The items of a list: commas outside brackets separate them.
Result<std::vector<std::string>> split_items(std::string_view list) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[' && ++depth > 1) return bad_list(list, "nested '['");
    if (c == ']' && --depth < 0) return bad_list(list, "']' without '['");
    if (c == ',' && depth == 0) {
      if (!cur.empty()) items.push_back(cur);
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (depth != 0) return bad_list(list, "'[' without ']'");
  if (!cur.empty()) items.push_back(cur);
  return items;
}

bool parse_uint(std::string_view s, unsigned long long& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "01-03,07" -> 01 02 03 07 (width from each range's first number).
Result<std::vector<std::string>> expand_ranges(std::string_view list, std::string_view body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    std::string_view r =
        body.substr(pos, comma == std::string_view::npos ? body.npos : comma - pos);
    size_t dash = r.find('-');
    std::string_view lo_s = r.substr(0, dash);
    std::string_view hi_s = dash == std::string_view::npos ? lo_s : r.substr(dash + 1);
    unsigned long long lo = 0, hi = 0;
    if (!parse_uint(lo_s, lo) || !parse_uint(hi_s, hi))
      return bad_list(list, "'" + std::string(r) + "' is not a number or range");
    if (hi < lo) return bad_list(list, "range '" + std::string(r) + "' runs backwards");
    if (hi - lo > 100000) return bad_list(list, "range '" + std::string(r) + "' is too long");
    for (unsigned long long v = lo; v <= hi; ++v) {
      std::string n = std::to_string(v);
      if (n.size() < lo_s.size()) n.insert(0, lo_s.size() - n.size(), '0');
      out.push_back(n);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view list) {
  auto items = split_items(list);
  if (!items.ok()) return items.error();
  std::vector<std::string> hosts;
  for (const auto& item : *items) {
    std::vector<std::string> names{""};
    size_t pos = 0;
    while (pos < item.size()) {
      size_t open = item.find('[', pos);
      std::string text =
          item.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      for (auto& n : names) n += text;
      if (open == std::string::npos) break;
      size_t close = item.find(']', open);
      auto parts = expand_ranges(list, std::string_view(item).substr(open + 1, close - open - 1));
      if (!parts.ok()) return parts.error();
      std::vector<std::string> next;
      for (const auto& n : names)
        for (const auto& p : *parts) next.push_back(n + p);
      names = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  if (hosts.empty()) return bad_list(list, "it names no host");
  return hosts;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  // Group by (prefix, digit width) keeping first-seen order; runs of consecutive numbers fold.
  struct Group {
    std::string prefix;
    size_t width = 0;
    std::vector<unsigned long long> nums;
  };
  std::vector<Group> groups;
  std::vector<std::string> plain;
  std::vector<std::pair<bool, size_t>> order;  // (is group, index)
  for (const auto& h : hosts) {
    size_t d = h.size();
    while (d > 0 && h[d - 1] >= '0' && h[d - 1] <= '9') --d;
    unsigned long long v = 0;
    if (d == h.size() || !parse_uint(std::string_view(h).substr(d), v)) {
      order.emplace_back(false, plain.size());
      plain.push_back(h);
      continue;
    }
    std::string prefix = h.substr(0, d);
    // A zero-padded number fixes the group's width; an unpadded one joins a group of its own
    // digit count ("gpu11" beside "gpu08") or an unpadded group.
    const size_t digits = h.size() - d;
    const bool padded = h[d] == '0' && digits > 1;
    size_t width = padded ? digits : 0;
    size_t gi = 0;
    while (gi < groups.size() &&
           (groups[gi].prefix != prefix ||
            (groups[gi].width != width && (padded || groups[gi].width != digits))))
      ++gi;
    if (gi < groups.size()) width = groups[gi].width;
    if (gi == groups.size()) {
      groups.push_back({prefix, width, {}});
      order.emplace_back(true, gi);
    }
    groups[gi].nums.push_back(v);
  }
  auto pad = [](unsigned long long v, size_t width) {
    std::string n = std::to_string(v);
    if (n.size() < width) n.insert(0, width - n.size(), '0');
    return n;
  };
  std::string out;
  for (auto [is_group, i] : order) {
    if (!out.empty()) out += ',';
    if (!is_group) {
      out += plain[i];
      continue;
    }
    const auto& g = groups[i];
    if (g.nums.size() == 1) {
      out += g.prefix + pad(g.nums[0], g.width);
      continue;
    }
    std::string ranges;
    for (size_t k = 0; k < g.nums.size();) {
      size_t e = k;
      while (e + 1 < g.nums.size() && g.nums[e + 1] == g.nums[e] + 1) ++e;
      if (!ranges.empty()) ranges += ',';
      ranges += pad(g.nums[k], g.width);
      if (e > k) ranges += "-" + pad(g.nums[e], g.width);
      k = e + 1;
    }
    out += g.prefix + "[" + ranges + "]";
  }
  return out;
}

}  // namespace gpulab::launch
