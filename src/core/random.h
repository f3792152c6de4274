// Random strings from the kernel's CSPRNG (getrandom): API tokens, lease and container names,
// SSH passwords. One home, so that every secret is drawn the same, uniformly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpulab {

inline constexpr std::string_view kAlnum =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

// `n` characters drawn uniformly from `alphabet` (2..256 characters).
std::string random_string(std::size_t n, std::string_view alphabet = kAlnum);

}  // namespace gpulab
