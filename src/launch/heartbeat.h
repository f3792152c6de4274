// Progress channel between a rank and its launcher: the rank overwrites one small file with what
// it is doing (a training step, a named collective) at each progress point; the launcher reads
// the file's age to find a rank that stopped making progress, and its text to say where.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpulab::launch {

// Set by the launcher for each rank: the rank's heartbeat file.
inline constexpr const char* kEnvHeartbeatFile = "GPULAB_HEARTBEAT_FILE";

// Rank side: records `what` as this rank's latest progress. Cheap (one pwrite of a fixed-size
// record, no allocation on the steady path); does nothing when no launcher asked for it.
// Thread-safe: the gradient hooks call it from autograd's threads.
// heartbeat() marks a progress point (a training or evaluation batch starts, a checkpoint): it
// counts them and times the phase between two of them, so the launcher can learn how long a
// healthy phase takes. The first call arms the channel: waits inside a phase (collectives, which
// may legitimately wait for slow peers during start-up) use heartbeat_if_armed, which refreshes
// the record without counting, and only once the rank has started its real work.
void heartbeat(std::string_view what);
void heartbeat_if_armed(std::string_view what);

// Launcher side: the rank's last record. nullopt until the rank has beaten once, so slow
// start-up (data loading, model creation) never counts as a hang. An empty file is a record
// caught being rewritten (a shell's `printf ... > file` truncates, then writes): it counts as a
// beat at its modification time with `previous`'s text and counters, or as none without one.
struct Beat {
  std::chrono::system_clock::time_point when;  // the file's modification time
  std::string what;
  int64_t progress = 0;        // progress points so far (0: a record written by other means)
  double slowest_phase_s = 0;  // the longest time between two progress points so far
};
std::optional<Beat> read_heartbeat(const std::string& file,
                                   const std::optional<Beat>& previous = std::nullopt);

}  // namespace gpulab::launch
