// Mixed precision of sharded data parallel from the command line: --shard_param_dtype (the
// gathered compute copies) and --shard_reduce_dtype (the reduce-scatter) against --precision.
// One home for the rules, used by `gpulab train`, `gpulab bench train` and `gpulab plan`.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::train::dist {

// auto | fp32 | bf16, for both flags.
const std::vector<std::string>& shard_dtype_names();

// The values are known and fit --precision: bf16 compute copies need --precision bf16 (the
// autocast that runs fp32 inputs against them); under fp64 only auto (the equivalence runs keep
// every byte fp64).
Status check_shard_dtypes(const std::string& precision, const std::string& param_dtype,
                          const std::string& reduce_dtype);

struct ShardDtypes {
  std::optional<torch::ScalarType> param;   // unset: the parameters' own dtype
  std::optional<torch::ScalarType> reduce;  // unset: the master (parameters') dtype
};

// auto: bf16 compute copies under --precision bf16 (FSDP's MixedPrecision: fp32 master shards,
// bf16 all-gathers), the parameters' own dtype otherwise; the reduce in the master dtype.
// Assumes check_shard_dtypes passed.
ShardDtypes resolve_shard_dtypes(const std::string& precision, const std::string& param_dtype,
                                 const std::string& reduce_dtype);

}  // namespace gpulab::train::dist
