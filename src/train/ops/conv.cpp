// Convolution forward for the model families (see conv.h): libtorch's conv, plus (with oneDNN) a
// CPU channels-last autograd function whose weight gradient oneDNN writes in channels-last.
#include "train/ops/conv.h"

#include <atomic>

#include "train/ops/conv_gemm.h"
#include "train/ops/cpu_kernels.h"

#if GPULAB_HAVE_DNNL
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace gpulab::train {

namespace {
std::atomic<ConvPath> g_conv_path{ConvPath::kAuto};
}  // namespace

void set_conv_path(ConvPath path) {
  g_conv_path = path;
}

ConvPath conv_path() {
  return g_conv_path.load();
}

std::optional<ConvPath> parse_conv_path(const std::string& name) {
  if (name == "auto") return ConvPath::kAuto;
  if (name == "dnnl") return ConvPath::kDnnl;
  if (name == "libtorch") return ConvPath::kLibtorch;
  return std::nullopt;
}

#if !GPULAB_HAVE_DNNL

bool conv2d_fast_path_built() {
  return false;
}
bool conv2d_fast_path_applies(const torch::nn::Conv2dImpl&, const torch::Tensor&) {
  return false;
}
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  return conv.forward(x);
}

#else

namespace {

bool conv_path_is(ConvPath what) {
  return conv_path() == what;
}

// The module's geometry, or nothing when its options are outside the fast path (transposed,
// non-zero padding modes, 'same'/'valid' padding). ADL picks c10::get_if (1.13) or std::get_if.
std::optional<ConvGeometry> geometry_of(const torch::nn::Conv2dImpl& conv) {
  const auto& o = conv.options;
  if (o.transposed() || get_if<torch::enumtype::kZeros>(&o.padding_mode()) == nullptr) return {};
  const auto* pad = get_if<torch::ExpandingArray<2> >(&o.padding());
  if (pad == nullptr) return {};
  ConvGeometry g;
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = (*o.stride())[i];
    g.padding[i] = (**pad)[i];
    g.dilation[i] = (*o.dilation())[i];
  }
  g.groups = o.groups();
  return g;
}

// A 4-D fp32 CPU tensor whose memory is in channels-last order. A 1x1 weight qualifies with
// either strides (its memory is the same), as the trainer's conversion leaves it.
bool channels_last_fp32_cpu(const torch::Tensor& t) {
  return t.defined() && t.dim() == 4 && t.layout() == torch::kStrided && t.device().is_cpu() &&
         t.scalar_type() == torch::kFloat && t.is_contiguous(torch::MemoryFormat::ChannelsLast);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The weight-gradient primitive for one shape, geometry and thread count, plus the reorder from
// its preferred (blocked) weight layout to channels-last when the two differ.
struct WeightGradPlan {
  dnnl::convolution_backward_weights primitive;
  dnnl::memory::desc src, diff_dst, diff_weights, diff_bias, user_weights;
  std::optional<dnnl::reorder> to_user;
  size_t scratch_bytes = 0, reorder_scratch_bytes = 0;
};

// Key: N C H W, O kh kw, OH OW, stride, padding, dilation, groups, bias, threads. oneDNN sizes its
// kernels' thread split when the primitive is made, so the thread count is part of the key.
using PlanKey = std::array<int64_t, 18>;

std::shared_ptr<WeightGradPlan> make_plan(const PlanKey& k, const ConvGeometry& g, bool bias) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t n = k[0], c = k[1], h = k[2], w = k[3], o = k[4], kh = k[5], kw = k[6];
  const int64_t oh = k[7], ow = k[8], groups = g.groups;
  auto plan = std::make_shared<WeightGradPlan>();
  plan->src = dnnl::memory::desc({n, c, h, w}, dt::f32, tag::nhwc);
  plan->diff_dst = dnnl::memory::desc({n, o, oh, ow}, dt::f32, tag::nhwc);
  // PyTorch's channels-last (O, I/g, kh, kw) weight is oneDNN's ohwi, or gohwi split by group.
  const dnnl::memory::dims wdims = groups == 1
                                       ? dnnl::memory::dims{o, c, kh, kw}
                                       : dnnl::memory::dims{groups, o / groups, c / groups, kh, kw};
  plan->user_weights = dnnl::memory::desc(wdims, dt::f32, groups == 1 ? tag::ohwi : tag::gohwi);
  const dnnl::memory::desc any_weights(wdims, dt::f32, tag::any);
  const dnnl::memory::desc bias_md =
      bias ? dnnl::memory::desc({o}, dt::f32, tag::a) : dnnl::memory::desc();
  const dnnl::memory::dims strides{g.stride[0], g.stride[1]};
  const dnnl::memory::dims dilates{g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN: 0 = dense
  const dnnl::memory::dims pad_l{g.padding[0], g.padding[1]};
  // Right padding that reproduces PyTorch's floor output size.
  const dnnl::memory::dims pad_r{
      (oh - 1) * g.stride[0] + (kh - 1) * g.dilation[0] + 1 - h - pad_l[0],
      (ow - 1) * g.stride[1] + (kw - 1) * g.dilation[1] + 1 - w - pad_l[1]};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per call: concurrent calls are safe
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc hint(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, plan->src,
                                      any_weights, bias_md, plan->diff_dst, strides, dilates, pad_l,
                                      pad_r),
      cpu_engine());
  const dnnl::convolution_backward_weights::primitive_desc pd(
      dnnl::convolution_backward_weights::desc(algo, plan->src, any_weights, bias_md,
                                               plan->diff_dst, strides, dilates, pad_l, pad_r),
      attr, cpu_engine(), hint);
  plan->primitive = dnnl::convolution_backward_weights(pd);
  plan->diff_weights = pd.diff_weights_desc();
  plan->diff_bias = pd.diff_bias_desc();
  plan->scratch_bytes = pd.scratchpad_desc().get_size();
  if (plan->diff_weights != plan->user_weights) {
    const dnnl::reorder::primitive_desc rpd(cpu_engine(), plan->diff_weights, cpu_engine(),
                                            plan->user_weights, attr);
    plan->to_user = dnnl::reorder(rpd);
    plan->reorder_scratch_bytes = rpd.scratchpad_desc().get_size();
  }
  return plan;
}

// One plan per key, made once: a primitive_desc per call would cost more than the copy it saves.
std::shared_ptr<WeightGradPlan> plan_for(const PlanKey& key, const ConvGeometry& g, bool bias) {
  static std::mutex mutex;
  static std::map<PlanKey, std::shared_ptr<WeightGradPlan> > plans;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  std::shared_ptr<WeightGradPlan> plan;
  try {
    plan = make_plan(key, g, bias);
  } catch (const dnnl::error&) {
    plan = nullptr;  // this oneDNN cannot do it: libtorch's backward computes it instead
  }
  if (plans.size() >= 512) plans.clear();  // many shapes (e.g. varying batch): start over
  plans.emplace(key, plan);
  return plan;
}

// Per-thread grow-only byte buffers (slot 0: scratchpad, 1: blocked weight gradient), as oneDNN's
// own scratchpad: a fresh allocation per call costs page faults on every step (ResNet-50 measured).
const torch::Tensor& thread_buffer(int slot, size_t bytes) {
  thread_local std::array<torch::Tensor, 2> buffers;
  auto& b = buffers[slot];
  if (!b.defined() || static_cast<size_t>(b.numel()) < bytes) {
    b = torch::Tensor();  // free the old one first
    b = torch::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                     torch::TensorOptions().dtype(torch::kByte));
  }
  return b;
}

void* ptr(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

// grad_weight (channels-last, with the weight's strides) and grad_bias (when asked) from oneDNN,
// or nothing when oneDNN has no primitive for this case.
std::optional<std::pair<torch::Tensor, torch::Tensor> > dnnl_weight_grad(
    const torch::Tensor& x, const torch::Tensor& grad_out, const torch::Tensor& weight,
    const ConvGeometry& g, bool bias) {
  const PlanKey key{x.size(0),      x.size(1),        x.size(2),
                    x.size(3),      weight.size(0),   weight.size(2),
                    weight.size(3), grad_out.size(2), grad_out.size(3),
                    g.stride[0],    g.stride[1],      g.padding[0],
                    g.padding[1],   g.dilation[0],    g.dilation[1],
                    g.groups,       bias ? 1 : 0,     at::get_num_threads()};
  const auto plan = plan_for(key, g, bias);
  if (!plan) return {};
  // Preserve: the gradient has the parameter's exact strides, so AccumulateGrad keeps it as is.
  auto grad_w = torch::empty_like(weight, torch::MemoryFormat::Preserve);
  torch::Tensor grad_b = bias ? torch::empty({weight.size(0)}, weight.options()) : torch::Tensor();
  const torch::Tensor blocked =
      plan->to_user ? thread_buffer(1, plan->diff_weights.get_size()) : grad_w;
  const torch::Tensor& scratch =
      thread_buffer(0, std::max(plan->scratch_bytes, plan->reorder_scratch_bytes));
  auto& engine = cpu_engine();
  thread_local dnnl::stream stream(cpu_engine());
  dnnl::memory scratch_mem(
      dnnl::memory::desc({static_cast<int64_t>(scratch.numel())}, dnnl::memory::data_type::u8,
                         dnnl::memory::format_tag::a),
      engine, ptr(scratch));
  dnnl::memory diff_w(plan->diff_weights, engine, ptr(blocked));
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(plan->src, engine, x.data_ptr())},
      {DNNL_ARG_DIFF_DST, dnnl::memory(plan->diff_dst, engine, grad_out.data_ptr())},
      {DNNL_ARG_DIFF_WEIGHTS, diff_w},
      {DNNL_ARG_SCRATCHPAD, scratch_mem}};
  if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, dnnl::memory(plan->diff_bias, engine, ptr(grad_b)));
  plan->primitive.execute(stream, args);
  if (plan->to_user) {
    dnnl::memory user_w(plan->user_weights, engine, ptr(grad_w));
    plan->to_user->execute(
        stream,
        {{DNNL_ARG_FROM, diff_w}, {DNNL_ARG_TO, user_w}, {DNNL_ARG_SCRATCHPAD, scratch_mem}});
  }
  stream.wait();
  return std::make_pair(grad_w, grad_b);
}

class DnnlConv2d : public torch::autograd::Function<DnnlConv2d> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, const ConvGeometry& g) {
    save_conv(ctx, x, weight, bias, g);
    // Grad mode is off in here: the same kernel as conv.forward(x), recording nothing.
    return at::convolution(x, weight, bias, g.stride, g.padding, g.dilation, false, {0, 0},
                           g.groups);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto c = saved_conv(ctx);
    const auto& x = c.x;
    const auto& weight = c.weight;
    const auto& g = c.g;
    const bool x_grad = c.x_grad;
    const bool bias_grad = c.bias_grad;
    const auto grad_out = grads[0].contiguous(torch::MemoryFormat::ChannelsLast);
    torch::Tensor grad_x, grad_w, grad_b;
    auto dnnl_grads = dnnl_weight_grad(x, grad_out, weight, g, bias_grad);
    if (dnnl_grads) {
      std::tie(grad_w, grad_b) = *dnnl_grads;
      if (x_grad) {
        grad_x = std::get<0>(at::convolution_backward(grad_out, x, weight, c10::nullopt, g.stride,
                                                      g.padding, g.dilation, false, {0, 0},
                                                      g.groups, {true, false, false}));
      }
    } else {
      const std::vector<int64_t> bias_len{weight.size(0)};
      std::tie(grad_x, grad_w, grad_b) = at::convolution_backward(
          grad_out, x, weight, bias_grad ? c10::optional<at::IntArrayRef>(bias_len) : c10::nullopt,
          g.stride, g.padding, g.dilation, false, {0, 0}, g.groups, {x_grad, true, bias_grad});
      grad_w = grad_w.contiguous(torch::MemoryFormat::ChannelsLast);
    }
    return {grad_x, grad_w, grad_b, torch::Tensor()};
  }
};

}  // namespace

bool conv2d_fast_path_built() {
  return true;
}

bool conv2d_fast_path_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  if (!cpu_kernels_enabled() || conv_path_is(ConvPath::kLibtorch) || !torch::GradMode::is_enabled())
    return false;
  const auto& w = conv.weight;
  if (!w.requires_grad() || !channels_last_fp32_cpu(x) || !channels_last_fp32_cpu(w)) return false;
  // As libtorch decides its layout (mkldnn_conv_use_channels_last): x or the weight says
  // channels-last; an N x C x 1 x 1 x (ResNet's last stage at 32 px) is both, its strides say NCHW.
  const auto cl = torch::MemoryFormat::ChannelsLast;
  if (x.suggest_memory_format() != cl && w.suggest_memory_format() != cl) return false;
  const auto& b = conv.bias;
  if (b.defined() && (!b.device().is_cpu() || b.scalar_type() != torch::kFloat)) return false;
  return geometry_of(conv).has_value();
}

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  if (!conv2d_fast_path_applies(conv, x)) return conv.forward(x);
  // An absent bias goes in as nullopt: autograd takes no undefined tensor as an input.
  const auto bias = conv.bias.defined() ? c10::optional<torch::Tensor>(conv.bias) : c10::nullopt;
  const auto g = *geometry_of(conv);
  if (!conv_path_is(ConvPath::kDnnl) && gemm_conv_applies(x.sizes(), conv.weight.sizes(), g))
    return gemm_conv2d(x, conv.weight, bias, g);
  return DnnlConv2d::apply(x, conv.weight, bias, g);
}

#endif  // GPULAB_HAVE_DNNL

}  // namespace gpulab::train
