// Facts about devices that the fallback sources do not report themselves (compute capability by
// model, AMD names by PCI id), plus the small value decoders the backends share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpulab::gpu {

// "00000000:18:00.0", "0000:18:00.0", "18:00.0" -> "0000:18:00.0" (lower case); nullopt if it
// does not look like a bus id.
std::optional<std::string> normalize_pci_bus_id(std::string_view id);

// KFD gfx_target_version 90402 -> "gfx942", 90010 -> "gfx90a", 110000 -> "gfx1100".
std::optional<std::string> gfx_from_target_version(std::uint64_t v);
// AMD architecture family from a gfx target: gfx942 -> "CDNA3", gfx90a -> "CDNA2".
std::optional<std::string> amd_architecture(std::string_view gfx);

// NVIDIA compute capability from the architecture name nvidia-smi reports ("Hopper") or, where
// that is ambiguous or missing, from the product name ("NVIDIA GeForce RTX 4090").
std::optional<std::string> nvidia_compute_capability(std::string_view name,
                                                     std::string_view architecture = {});
// Architecture name from a compute capability: "9.0" -> "Hopper".
std::optional<std::string> nvidia_architecture(std::string_view cc);

// Marketing name of an AMD Instinct device from its PCI device id (0x74a1 -> MI300X).
std::optional<std::string> amd_name_for_device_id(unsigned device_id);

// Leading number of a value with a unit: "81559 MiB" -> 81559, "71.16 W" -> 71.16; "N/A" -> none.
std::optional<double> leading_number(std::string_view s);
// Bytes from "81559 MiB", "24 GiB", "512 KiB", "123 B".
std::optional<std::uint64_t> bytes_from_text(std::string_view s);
// Parses a whole decimal or 0x-prefixed integer.
std::optional<std::uint64_t> parse_uint(std::string_view s);

}  // namespace gpulab::gpu
