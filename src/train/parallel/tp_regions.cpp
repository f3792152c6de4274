// The region crossings as torch::autograd::Function subclasses.
#include "train/parallel/tp_regions.h"

#include <cstdint>

#include "core/error.h"

namespace gpulab::train::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

TpGroup& group_of(AutogradContext* ctx) {
  return TpGroup::from_id(ctx->saved_data["tp_group"].toInt());
}

torch::Tensor summed(const torch::Tensor& t, TpGroup& g, const char* what) {
  auto out = t.clone(at::MemoryFormat::Contiguous);  // never reduce into autograd's own buffer
  g.allreduce_sum(out, what);
  return out;
}

torch::Tensor my_slice(const torch::Tensor& t, TpGroup& g) {
  const int64_t d = t.size(-1);
  GPULAB_ASSERT(d % g.size() == 0, "scatter_to_tp: last dimension not divisible by TP size");
  const int64_t part = d / g.size();
  return t.narrow(-1, g.rank() * part, part).contiguous();
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["tp_group"] = group;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(grad[0], group_of(ctx), "tensor-parallel copy (backward)"), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    return summed(x, TpGroup::from_id(group), "tensor-parallel reduce");
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], torch::Tensor()};
  }
};

struct GatherFromTp : torch::autograd::Function<GatherFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["tp_group"] = group;
    return TpGroup::from_id(group).gather_last_dim(x, "tensor-parallel gather");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {my_slice(grad[0], group_of(ctx)), torch::Tensor()};
  }
};

struct ScatterToTp : torch::autograd::Function<ScatterToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["tp_group"] = group;
    return my_slice(x, TpGroup::from_id(group));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {group_of(ctx).gather_last_dim(grad[0], "tensor-parallel scatter (backward)"),
            torch::Tensor()};
  }
};

constexpr int64_t kSeqDim = 1;

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["tp_group"] = group;
    return TpGroup::from_id(group).gather_dim(x, kSeqDim, "sequence-parallel gather");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {
        group_of(ctx).reduce_scatter_dim(grad[0], kSeqDim, "sequence-parallel gather (backward)"),
        torch::Tensor()};
  }
};

struct ReduceScatterSequence : torch::autograd::Function<ReduceScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["tp_group"] = group;
    return TpGroup::from_id(group).reduce_scatter_dim(x, kSeqDim, "sequence-parallel reduce");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {group_of(ctx).gather_dim(grad[0], kSeqDim, "sequence-parallel reduce (backward)"),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gather_sequence(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : GatherSequence::apply(x, group.id());
}

torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : ReduceScatterSequence::apply(x, group.id());
}

torch::Tensor copy_to_tp(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : CopyToTp::apply(x, group.id());
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : ReduceFromTp::apply(x, group.id());
}

torch::Tensor gather_from_tp(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : GatherFromTp::apply(x, group.id());
}

torch::Tensor scatter_to_tp(const torch::Tensor& x, TpGroup& group) {
  return group.size() == 1 ? x : ScatterToTp::apply(x, group.id());
}

torch::Tensor enter_tp(const torch::Tensor& x, TpGroup& group, bool sp) {
  return sp ? gather_sequence(x, group) : copy_to_tp(x, group);
}

torch::Tensor leave_tp(const torch::Tensor& partial, TpGroup& group, bool sp) {
  return sp ? reduce_scatter_sequence(partial, group) : reduce_from_tp(partial, group);
}

}  // namespace gpulab::train::parallel
