// Parsers of a container's /proc/net/tcp{,6} and /proc/net/dev for idle reclaim; see proc_net.h.
#include "service/ops/policies/proc_net.h"

#include <limits>
#include <sstream>
#include <vector>

#include "core/strings.h"

namespace gpulab::service {

namespace {

// Rows with fewer counters are not /proc/net/dev's (8 received, then 8 sent, since Linux 2.6).
constexpr std::size_t kDevCounters = 16;
constexpr std::size_t kDevTxBytes = 8;

// "  eth0: 1234 5 0 ..." (or "eth0:1234 ..." in old kernels) -> name and its counters; nullopt
// for any line that is not exactly that, a /proc/net/tcp row ("0: 0100007F:0016 ...") included.
std::optional<std::vector<std::int64_t>> dev_row(const std::string& line, std::string& name) {
  auto colon = line.find(':');
  if (colon == std::string::npos) return std::nullopt;
  name = trim(std::string_view(line).substr(0, colon));
  if (name.empty() || name.find_first_of(" \t|") != std::string::npos) return std::nullopt;
  std::vector<std::int64_t> counters;
  std::istringstream rest(line.substr(colon + 1));
  std::string word;
  while (rest >> word) {
    auto n = parse_int(word);
    if (!n || *n < 0 || counters.size() == kDevCounters) return std::nullopt;
    counters.push_back(*n);
  }
  if (counters.size() != kDevCounters) return std::nullopt;
  return counters;
}

}  // namespace

int ssh_sessions_in(const std::string& text) {
  // "  sl  local_address rem_address   st ..." rows: local "HEX_ADDR:0016", state 01 established.
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string sl, local, remote, st;
    if (!(row >> sl >> local >> remote >> st)) continue;
    auto colon = local.rfind(':');
    if (colon == std::string::npos || st != "01") continue;
    if (to_lower(local.substr(colon + 1)) == "0016") ++n;
  }
  return n;
}

std::optional<std::int64_t> net_bytes_in(const std::string& text) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::optional<std::int64_t> total;
  std::istringstream in(text);
  std::string line, name;
  while (std::getline(in, line)) {
    auto row = dev_row(line, name);
    if (!row) continue;
    if (!total) total = 0;
    if (name == "lo") continue;
    // Saturating: hostile text must not overflow; real counters are far below 2^62.
    for (std::int64_t v : {(*row)[0], (*row)[kDevTxBytes]})
      *total = v > kMax - *total ? kMax : *total + v;
  }
  return total;
}

}  // namespace gpulab::service
