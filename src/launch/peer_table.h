// Who is where in a distributed job: each rank's host name and address, exchanged once at
// rendezvous, so that a rank whose collective fails names the peer it lost ("10.0.0.3 is node2
// (ranks 2-3)") instead of a bare socket address. No libtorch: the communicator fills it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpulab::launch {

class PeerTable {
 public:
  // What a rank publishes: "<host name> <address>".
  static std::string record(const std::string& host, const std::string& addr);
  void set(int rank, std::string_view record);
  size_t size() const { return peers_.size(); }

  // The host a rank runs on ("" when unknown).
  std::string host_of(int rank) const;
  // For each IPv4 address in `error` (Gloo says "[10.0.0.3]:41234"), the host and ranks there:
  // "; peer 10.0.0.3 is node2 (ranks 2-3)", leaving out `self` (a peer on this rank's own
  // host). Empty when no address in it is a peer's.
  std::string explain(std::string_view error, int self = -1) const;

 private:
  struct Peer {
    std::string host;
    std::string addr;
  };
  std::vector<Peer> peers_;
};

// This machine's host name (the UTS name), "" when unknown.
std::string this_host_name();

}  // namespace gpulab::launch
