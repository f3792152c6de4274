// gpulab's one rule for the names of the objects it makes (containers, snapshots, backups,
// leases): 1-64 of [A-Za-z0-9_.-], starting with a letter or digit.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpulab {

// Docker's own rule is the same pattern with no length limit; 64 keeps a name usable as the
// container's hostname (HOST_NAME_MAX). "my-lab" or a 64-hex id is fine; "a/b", "", "-x" are not.
inline constexpr std::size_t kMaxObjectNameLength = 64;
bool valid_object_name(std::string_view name);

}  // namespace gpulab
