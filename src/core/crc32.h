// CRC-32 (the IEEE polynomial of zlib, PNG and zip: reflected 0xEDB88320, initial and final XOR
// 0xFFFFFFFF), eight bytes a step: the checksum of checkpoint manifests and shard indexes, about
// four times as fast as the byte-wise FNV-1a they carried before (docs/benchmarks.md, session 42).
#pragma once

#include <cstdint>
#include <string_view>

namespace gpulab {

// The CRC-32 of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start).
uint32_t crc32(std::string_view bytes, uint32_t crc = 0);

}  // namespace gpulab
