// Progress channel between a rank and its launcher: the rank overwrites one small file with what
// it is doing (a training step, a named collective) at each progress point; the launcher reads
// the file's age to find a rank that stopped making progress, and its text to say where.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace gpulab::launch {

// Set by the launcher for each rank: the rank's heartbeat file.
inline constexpr const char* kEnvHeartbeatFile = "GPULAB_HEARTBEAT_FILE";

// Rank side: records `what` as this rank's latest progress. Cheap (one pwrite of a fixed-size
// record, no allocation on the steady path); does nothing when no launcher asked for it.
// Thread-safe: the gradient hooks call it from autograd's threads.
// The first call arms the channel: progress points that may legitimately wait for slow peers
// during start-up (the first collectives) use heartbeat_if_armed, so they count only once the
// rank has started its real work.
void heartbeat(std::string_view what);
void heartbeat_if_armed(std::string_view what);

// Launcher side: the rank's last record. nullopt until the rank has beaten once, so slow
// start-up (data loading, model creation) never counts as a hang.
struct Beat {
  std::chrono::system_clock::time_point when;  // the file's modification time
  std::string what;
};
std::optional<Beat> read_heartbeat(const std::string& file);

}  // namespace gpulab::launch
