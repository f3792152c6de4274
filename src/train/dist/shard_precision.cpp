// The rules of --shard_param_dtype and --shard_reduce_dtype.
#include "train/dist/shard_precision.h"

#include "core/flag_checks.h"

namespace gpulab::train::dist {

const std::vector<std::string>& shard_dtype_names() {
  static const std::vector<std::string> names{"auto", "fp32", "bf16"};
  return names;
}

Status check_shard_dtypes(const std::string& precision, const std::string& param_dtype,
                          const std::string& reduce_dtype) {
  for (const Status& s : {flag_one_of("shard_param_dtype", param_dtype, shard_dtype_names()),
                          flag_one_of("shard_reduce_dtype", reduce_dtype, shard_dtype_names())})
    if (!s) return s;
  if (param_dtype == "bf16" && precision != "bf16")
    return Error{Code::kInvalidArgument,
                 "--shard_param_dtype bf16 needs --precision bf16 (its autocast runs the model "
                 "on bf16 parameters)",
                 "add --precision bf16, or leave --shard_param_dtype auto"};
  if (precision == "fp64" && (param_dtype != "auto" || reduce_dtype != "auto"))
    return Error{Code::kInvalidArgument,
                 "--precision fp64 keeps parameters and gradients in fp64: --shard_param_dtype "
                 "and --shard_reduce_dtype must be auto",
                 "drop them, or train in fp32/bf16"};
  return ok_status();
}

ShardDtypes resolve_shard_dtypes(const std::string& precision, const std::string& param_dtype,
                                 const std::string& reduce_dtype) {
  ShardDtypes d;
  if (param_dtype == "bf16" || (param_dtype == "auto" && precision == "bf16"))
    d.param = torch::kBFloat16;
  else if (param_dtype == "fp32")
    d.param = torch::kFloat;
  if (reduce_dtype == "bf16")
    d.reduce = torch::kBFloat16;
  else if (reduce_dtype == "fp32")
    d.reduce = torch::kFloat;
  return d;
}

}  // namespace gpulab::train::dist
