// The rank -> host table and the lookup of addresses named in a collective's error.
#include "launch/peer_table.h"

#include <unistd.h>

#include <regex>
#include <set>

#include "launch/slurm_hostlist.h"

namespace gpulab::launch {

std::string PeerTable::record(const std::string& host, const std::string& addr) {
  return host + " " + addr;
}

void PeerTable::set(int rank, std::string_view record) {
  if (rank < 0) return;
  if (static_cast<size_t>(rank) >= peers_.size()) peers_.resize(rank + 1);
  auto sp = record.find(' ');
  peers_[rank].host = std::string(record.substr(0, sp));
  peers_[rank].addr = sp == std::string_view::npos ? "" : std::string(record.substr(sp + 1));
}

std::string PeerTable::host_of(int rank) const {
  return rank >= 0 && static_cast<size_t>(rank) < peers_.size() ? peers_[rank].host : "";
}

std::string PeerTable::explain(std::string_view error, int self) const {
  static const std::regex ipv4(R"((\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}))");
  std::string text(error), out;
  std::set<std::string> seen;
  for (std::sregex_iterator it(text.begin(), text.end(), ipv4), end; it != end; ++it) {
    const std::string addr = (*it)[1].str();
    if (!seen.insert(addr).second) continue;
    std::string host;
    std::vector<int> ranks;
    for (size_t r = 0; r < peers_.size(); ++r)
      if (peers_[r].addr == addr && static_cast<int>(r) != self) {
        ranks.push_back(static_cast<int>(r));
        host = peers_[r].host;
      }
    if (ranks.empty()) continue;
    // Ranks listed as a compact range: "ranks 2-3", "rank 5".
    std::vector<std::string> names;
    for (int r : ranks) names.push_back("r" + std::to_string(r));
    std::string list = compress_hostlist(names);
    if (list.front() == 'r' && list.size() > 1 && list[1] == '[')
      list = list.substr(2, list.size() - 3);
    else
      list = list.substr(1);
    out +=
        "; peer " + addr + " is " + host + " (rank" + (ranks.size() > 1 ? "s " : " ") + list + ")";
  }
  return out;
}

std::string this_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace gpulab::launch
