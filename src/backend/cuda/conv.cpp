// CUDA 2-D convolution on cuDNN, NHWC throughout: forward, backward data and backward filter.
// The fastest algorithm for each shape, direction, dtype and math mode is measured once with
// cuDNN's find calls and cached; workspaces come from the stream-ordered pool. Two things
// cuDNN's descriptors cannot say are handled around the calls: Tandem's filters are
// (KH, KW, C_in, C_out) while cuDNN's NHWC filters are (C_out, KH, KW, C_in), so filters and
// their gradients are permuted; and TensorFlow's SAME padding may pad one more cell after than
// before, which cuDNN's symmetric padding cannot, so such inputs get that cell explicitly first.
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "ops/op_attrs.h"
#include "ops/window.h"
#include "tandem/cuda.h"

namespace tandem::cuda {
namespace {

// Workspace offered to the algorithm search; algorithms needing more are not considered.
constexpr std::size_t kSearchWorkspaceBytes = 512ull * 1024 * 1024;

cudnnDataType_t cudnn_type(DType dtype) {
  return dtype == DType::f32    ? CUDNN_DATA_FLOAT
         : dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16
                                : CUDNN_DATA_HALF;
}

class TensorDescriptor {
 public:
  // An NHWC tensor of shape (N, H, W, C).
  TensorDescriptor(const Shape& nhwc, DType dtype) {
    check(cudnn().cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
    check(cudnn().cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NHWC, cudnn_type(dtype),
                                             static_cast<int>(nhwc[0]), static_cast<int>(nhwc[3]),
                                             static_cast<int>(nhwc[1]), static_cast<int>(nhwc[2])),
          "cudnnSetTensor4dDescriptor");
  }
  ~TensorDescriptor() { cudnn().cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  // A (C_out, KH, KW, C_in) filter.
  FilterDescriptor(const Shape& krsc, DType dtype) {
    check(cudnn().cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor");
    check(cudnn().cudnnSetFilter4dDescriptor(desc_, cudnn_type(dtype), CUDNN_TENSOR_NHWC,
                                             static_cast<int>(krsc[0]), static_cast<int>(krsc[3]),
                                             static_cast<int>(krsc[1]), static_cast<int>(krsc[2])),
          "cudnnSetFilter4dDescriptor");
  }
  ~FilterDescriptor() { cudnn().cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(const Window2D& g, cudnnMathType_t math) {
    check(cudnn().cudnnCreateConvolutionDescriptor(&desc_), "cudnnCreateConvolutionDescriptor");
    check(cudnn().cudnnSetConvolution2dDescriptor(
              desc_, static_cast<int>(g.pad_before[0]), static_cast<int>(g.pad_before[1]),
              static_cast<int>(g.strides[0]), static_cast<int>(g.strides[1]),
              static_cast<int>(g.dilations[0]), static_cast<int>(g.dilations[1]),
              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    set_math(math);
  }
  ~ConvolutionDescriptor() { cudnn().cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  void set_math(cudnnMathType_t math) {
    check(cudnn().cudnnSetConvolutionMathType(desc_, math), "cudnnSetConvolutionMathType");
  }
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

enum class Direction { forward, backward_data, backward_filter };

// The geometry cuDNN runs: symmetric padding, on an input that may carry the extra cells.
struct Geometry {
  Window2D window;            // as the op defines it
  Window2D symmetric;         // padded input, pad_before on both sides
  bool padded_input = false;  // symmetric.input_shape() != window.input_shape()
};

Geometry geometry_of(const Window2D& window) {
  Geometry g{window, window, false};
  for (int axis = 0; axis < 2; ++axis) {
    const std::int64_t extra = window.pad_after[axis] - window.pad_before[axis];
    if (extra > 0) {
      (axis == 0 ? g.symmetric.in_h : g.symmetric.in_w) += extra;
      g.padded_input = true;
    }
    g.symmetric.pad_after[axis] = window.pad_before[axis];
  }
  return g;
}

cudnnMathType_t math_for(DType dtype) {
  if (dtype != DType::f32) return CUDNN_TENSOR_OP_MATH;
  return tf32_enabled() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

struct Choice {
  int algorithm = 0;
  std::size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

using ChoiceKey = std::tuple<int, int, int, int, std::vector<std::int64_t>>;

// The measured best algorithm for this convolution, found on first use. `buffers` are the
// call's real x, w and y (whichever the direction writes is overwritten by the search too).
Choice choose(DeviceContext& context, Direction direction, const Geometry& g, DType dtype,
              const TensorDescriptor& x_desc, const void* x, const FilterDescriptor& w_desc,
              const void* w, const TensorDescriptor& y_desc, const void* y,
              ConvolutionDescriptor& conv) {
  static std::mutex mutex;
  static std::map<ChoiceKey, Choice> choices;
  const Window2D& s = g.symmetric;
  const cudnnMathType_t math = math_for(dtype);
  const ChoiceKey key{
      context.index,
      static_cast<int>(direction),
      static_cast<int>(dtype),
      static_cast<int>(math),
      {s.batch, s.in_h, s.in_w, s.in_c, s.k_h, s.k_w, s.out_c, s.strides[0], s.strides[1],
       s.dilations[0], s.dilations[1], s.pad_before[0], s.pad_before[1]}};
  std::lock_guard lock(mutex);
  if (const auto found = choices.find(key); found != choices.end()) return found->second;

  // As much workspace as the search may use, less when the GPU is short of memory.
  Tensor workspace;
  std::size_t workspace_bytes = kSearchWorkspaceBytes;
  while (!workspace.defined()) {
    try {
      workspace = Tensor::empty({static_cast<std::int64_t>(workspace_bytes)}, DType::u8,
                                Device::cuda(context.index));
    } catch (const OutOfMemory&) {
      if (workspace_bytes == 0) throw;
      workspace_bytes = workspace_bytes > 1024 * 1024 ? workspace_bytes / 4 : 0;
    }
  }
  const CudnnLibrary& api = cudnn();
  constexpr int kMaxResults = 16;
  int returned = 0;
  Choice choice;
  bool chosen = false;
  auto pick = [&](const auto* results) {
    for (int i = 0; i < returned && !chosen; ++i) {
      if (results[i].status != CUDNN_STATUS_SUCCESS) continue;
      choice = {static_cast<int>(results[i].algo), results[i].memory, results[i].mathType};
      chosen = true;
    }
  };
  void* space = workspace_bytes ? workspace.raw_data() : nullptr;
  if (direction == Direction::forward) {
    cudnnConvolutionFwdAlgoPerf_t results[kMaxResults];
    check(api.cudnnFindConvolutionForwardAlgorithmEx(
              context.cudnn, x_desc.get(), x, w_desc.get(), w, conv.get(), y_desc.get(),
              const_cast<void*>(y), kMaxResults, &returned, results, space, workspace_bytes),
          "cudnnFindConvolutionForwardAlgorithmEx");
    pick(results);
  } else if (direction == Direction::backward_data) {
    cudnnConvolutionBwdDataAlgoPerf_t results[kMaxResults];
    check(api.cudnnFindConvolutionBackwardDataAlgorithmEx(
              context.cudnn, w_desc.get(), w, y_desc.get(), y, conv.get(), x_desc.get(),
              const_cast<void*>(x), kMaxResults, &returned, results, space, workspace_bytes),
          "cudnnFindConvolutionBackwardDataAlgorithmEx");
    pick(results);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t results[kMaxResults];
    check(api.cudnnFindConvolutionBackwardFilterAlgorithmEx(
              context.cudnn, x_desc.get(), x, y_desc.get(), y, conv.get(), w_desc.get(),
              const_cast<void*>(w), kMaxResults, &returned, results, space, workspace_bytes),
          "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    pick(results);
  }
  if (!chosen) {
    throw Error("conv2d: cuDNN found no algorithm for a " + std::to_string(s.k_h) + "x" +
                std::to_string(s.k_w) + " convolution of " + shape_str(s.input_shape()) + " " +
                dtype_name(dtype) + " on this GPU");
  }
  choices.emplace(key, choice);
  return choice;
}

Shape krsc_shape(const Window2D& g) {
  return {g.out_c, g.k_h, g.k_w, g.in_c};
}

// The filter in cuDNN's (C_out, KH, KW, C_in) layout.
Tensor krsc_filter(DeviceContext& context, const Tensor& filter) {
  Tensor permuted = Tensor::empty({filter.dim(3), filter.dim(0), filter.dim(1), filter.dim(2)},
                                  filter.dtype(), filter.device());
  permute(context, filter, permuted, {3, 0, 1, 2});
  return permuted;
}

// x, or x with the extra SAME-padding cells after it.
Tensor symmetric_input(DeviceContext& context, const Tensor& x, const Geometry& g) {
  if (!g.padded_input) return x;
  Tensor padded = Tensor::empty(g.symmetric.input_shape(), x.dtype(), x.device());
  copy_window(context, x, padded, {0, 0, 0, 0}, false, 0);
  return padded;
}

// A fused conv2d (x, filter[, bias][, residual]) with fused_relu/fused_add, which the fusion pass
// makes in CPU graphs and which reaches this backend when called directly, runs its epilogue as
// one element-wise pass after the convolution and the bias.
void run_forward(const KernelContext& c) {
  const auto& attrs = op_attrs<OpKind::conv2d>(c.attrs);
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  if (y.numel() == 0) return;
  const Geometry g = geometry_of(
      conv_window("conv2d", x.shape(), c.inputs[1].shape(), read_attrs<Conv2DOptions>(c.attrs)));
  const DType dtype = x.dtype();
  // The op table lets a memory plan write y over a residual that dies here (in_place_input): keep
  // it before cuDNN overwrites y.
  Tensor residual = attrs.fused_add ? c.inputs.back() : Tensor();
  if (residual.defined() && residual.raw_data() == y.raw_data()) residual = residual.clone();
  const Tensor input = symmetric_input(context, x, g);
  const Tensor filter = krsc_filter(context, c.inputs[1]);
  const TensorDescriptor x_desc(g.symmetric.input_shape(), dtype);
  const TensorDescriptor y_desc(y.shape(), dtype);
  const FilterDescriptor w_desc(krsc_shape(g.symmetric), dtype);
  ConvolutionDescriptor conv(g.symmetric, math_for(dtype));
  const Choice choice = choose(context, Direction::forward, g, dtype, x_desc, input.raw_data(),
                               w_desc, filter.raw_data(), y_desc, y.raw_data(), conv);
  conv.set_math(choice.math);
  const Tensor workspace =
      Tensor::empty({static_cast<std::int64_t>(choice.workspace)}, DType::u8, x.device());
  // The bias goes into y first and cuDNN adds the convolution onto it (beta 1) before its one
  // rounding: y = round(conv + bias), as on the CPU. Adding it after a rounded convolution would
  // round twice, which in bf16 flips the sign of sums near zero, so a relu after it passes or
  // stops gradients that the exact sum would not.
  const bool with_bias = has_bias_input(c.inputs.size(), attrs.fused_add);
  if (with_bias) broadcast_into(context, c.inputs[2], y);
  const float one = 1.0f;
  const float zero = 0.0f;
  check(cudnn().cudnnConvolutionForward(
            context.cudnn, &one, x_desc.get(), input.raw_data(), w_desc.get(), filter.raw_data(),
            conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(choice.algorithm),
            choice.workspace ? workspace.raw_data() : nullptr, choice.workspace,
            with_bias ? &one : &zero, y_desc.get(), y.raw_data()),
        "cudnnConvolutionForward");
  add_residual_relu(context, residual.defined() ? &residual : nullptr, attrs.fused_relu, y);
}

void run_backward_input(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& dy = c.inputs[0];
  const Tensor& dx = c.outputs[0];
  if (dx.numel() == 0) return;
  const Geometry g =
      geometry_of(conv_window("conv2d_backward_input", dx.shape(), c.inputs[1].shape(),
                              read_attrs<Conv2DOptions>(c.attrs)));
  const DType dtype = dy.dtype();
  const Tensor filter = krsc_filter(context, c.inputs[1]);
  const Tensor padded_dx =
      g.padded_input ? Tensor::empty(g.symmetric.input_shape(), dtype, dx.device()) : dx;
  const TensorDescriptor dx_desc(g.symmetric.input_shape(), dtype);
  const TensorDescriptor dy_desc(dy.shape(), dtype);
  const FilterDescriptor w_desc(krsc_shape(g.symmetric), dtype);
  ConvolutionDescriptor conv(g.symmetric, math_for(dtype));
  if (dy.numel() == 0) {
    check(cudaMemsetAsync(dx.raw_data(), 0, dx.nbytes(), context.stream), "cudaMemsetAsync");
    return;
  }
  const Choice choice =
      choose(context, Direction::backward_data, g, dtype, dx_desc, padded_dx.raw_data(), w_desc,
             filter.raw_data(), dy_desc, dy.raw_data(), conv);
  conv.set_math(choice.math);
  const Tensor workspace =
      Tensor::empty({static_cast<std::int64_t>(choice.workspace)}, DType::u8, dx.device());
  const float one = 1.0f;
  const float zero = 0.0f;
  check(cudnn().cudnnConvolutionBackwardData(
            context.cudnn, &one, w_desc.get(), filter.raw_data(), dy_desc.get(), dy.raw_data(),
            conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algorithm),
            choice.workspace ? workspace.raw_data() : nullptr, choice.workspace, &zero,
            dx_desc.get(), padded_dx.raw_data()),
        "cudnnConvolutionBackwardData");
  if (g.padded_input) copy_window(context, padded_dx, dx, {0, 0, 0, 0}, true, 0);
}

void run_backward_filter(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const Tensor& dy = c.inputs[1];
  const Tensor& d_filter = c.outputs[0];  // (KH, KW, C_in, C_out)
  const Geometry g =
      geometry_of(conv_window("conv2d_backward_filter", x.shape(),
                              op_attrs<OpKind::conv2d_backward_filter>(c.attrs).filter_shape,
                              read_attrs<Conv2DOptions>(c.attrs)));
  const DType dtype = x.dtype();
  const Tensor krsc_gradient = Tensor::empty(krsc_shape(g.symmetric), dtype, x.device());
  if (dy.numel() == 0 || x.numel() == 0) {
    check(cudaMemsetAsync(d_filter.raw_data(), 0, d_filter.nbytes(), context.stream),
          "cudaMemsetAsync");
  } else {
    const Tensor input = symmetric_input(context, x, g);
    const TensorDescriptor x_desc(g.symmetric.input_shape(), dtype);
    const TensorDescriptor dy_desc(dy.shape(), dtype);
    const FilterDescriptor w_desc(krsc_shape(g.symmetric), dtype);
    ConvolutionDescriptor conv(g.symmetric, math_for(dtype));
    const Choice choice =
        choose(context, Direction::backward_filter, g, dtype, x_desc, input.raw_data(), w_desc,
               krsc_gradient.raw_data(), dy_desc, dy.raw_data(), conv);
    conv.set_math(choice.math);
    const Tensor workspace =
        Tensor::empty({static_cast<std::int64_t>(choice.workspace)}, DType::u8, x.device());
    const float one = 1.0f;
    const float zero = 0.0f;
    check(cudnn().cudnnConvolutionBackwardFilter(
              context.cudnn, &one, x_desc.get(), input.raw_data(), dy_desc.get(), dy.raw_data(),
              conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algorithm),
              choice.workspace ? workspace.raw_data() : nullptr, choice.workspace, &zero,
              w_desc.get(), krsc_gradient.raw_data()),
          "cudnnConvolutionBackwardFilter");
    permute(context, krsc_gradient, d_filter, {1, 2, 3, 0});
  }
  if (op_attrs<OpKind::conv2d_backward_filter>(c.attrs).with_bias) {
    const std::int64_t channels = dy.dim(3);
    reduce_middle(context, dy.raw_data(), dtype, c.outputs[1].raw_data(), c.outputs[1].dtype(), 1,
                  channels == 0 ? 0 : dy.numel() / channels, channels, Reduction::sum, 1.0);
  }
}

}  // namespace

void register_conv_kernels(KernelTable& table) {
  const std::uint32_t floating = floating_mask();
  table.set(OpKind::conv2d, run_forward, floating);
  // The backward ops run whichever algorithm benchmarked fastest; the forward one's candidates
  // are all deterministic.
  constexpr const char* kFastestAlgorithm =
      "runs the fastest cuDNN algorithm, which may be a nondeterministic one";
  table.set(OpKind::conv2d_backward_input, run_backward_input, floating, kFastestAlgorithm);
  table.set(OpKind::conv2d_backward_filter, run_backward_filter, floating, kFastestAlgorithm);
}

}  // namespace tandem::cuda
