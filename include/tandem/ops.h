#pragma once
// The closed list of ops and their functional API. Every op is defined once in the op table
// (src/ops/): shape/dtype inference, gradient rule and FLOP/byte cost; backends only supply
// kernels. All image ops are NHWC; filters are (KH, KW, C_in, C_out) as in TensorFlow.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/attrs.h"
#include "tandem/random.h"
#include "tandem/tensor.h"

namespace tandem {

enum class OpKind : std::uint8_t {
  // element-wise unary
  neg,
  abs,
  sign,
  exp,
  log,
  sqrt,
  rsqrt,
  square,
  relu,
  gelu,
  sigmoid,
  tanh,
  // their backward kernels (dy with the forward input x or output y)
  relu_backward,
  gelu_backward,
  sigmoid_backward,
  tanh_backward,
  // element-wise binary with NumPy broadcasting
  add,
  sub,
  mul,
  div,
  maximum,
  minimum,
  pow,
  // comparisons (bool result) and selection
  equal,
  greater,
  greater_equal,
  less,
  select,
  // reductions and broadcasting
  sum,
  mean,
  max,
  argmax,
  broadcast_to,
  // gathering rows by index (embeddings) and its adjoint
  gather,
  scatter_add,
  // linear algebra and convolution
  matmul,
  conv2d,
  conv2d_backward_input,
  conv2d_backward_filter,
  // pooling
  max_pool2d,
  max_pool2d_backward,
  avg_pool2d,
  avg_pool2d_backward,
  global_avg_pool2d,
  // normalisation
  batch_norm,
  batch_norm_backward,
  layer_norm,
  layer_norm_backward,
  // softmax family
  softmax,
  softmax_backward,
  log_softmax,
  log_softmax_backward,
  // layout and type
  reshape,
  transpose,
  concat,
  slice,
  pad,
  cast,
  // regularisation and losses
  dropout,
  sparse_softmax_cross_entropy,
  // optimizer updates (in place: outputs alias the parameter and slot inputs)
  sgd_update,
  adam_update,
};
inline constexpr int kNumOps = static_cast<int>(OpKind::adam_update) + 1;

const char* op_name(OpKind kind);

// Runs one op eagerly on the device of its inputs and records it on every active gradient tape.
// The functions below are typed wrappers around this call.
std::vector<Tensor> call_op(OpKind kind, const std::vector<Tensor>& inputs,
                            const Attrs& attrs = {});

// ---- element-wise unary ----
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate=true uses the tanh approximation (like tf.nn.gelu(approximate=True)).
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& x);
Tensor gelu_backward(const Tensor& dy, const Tensor& x, bool approximate = false);
Tensor sigmoid_backward(const Tensor& dy, const Tensor& y);
Tensor tanh_backward(const Tensor& dy, const Tensor& y);

// ---- element-wise binary (NumPy broadcasting; both inputs must share a dtype) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
// Element-wise condition ? a : b, all three broadcast together; condition is bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// A scalar of x's dtype and device, for mixing tensors and numbers.
Tensor scalar_like(const Tensor& x, double value);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// ---- reductions (empty axes = all axes; negative axes count from the end) ----
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& axes = {}, bool keepdims = false);
Tensor reduce_max(const Tensor& x, const std::vector<std::int64_t>& axes = {},
                  bool keepdims = false);
Tensor argmax(const Tensor& x, std::int64_t axis = -1);  // i64 indices
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// Sums a broadcast gradient back down to `shape` (the inverse of broadcast_to).
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// ---- gathering rows (embeddings) ----
// Rows of params (V, ...) picked by indices (any shape, i32 or i64, each in [0, V)):
// (indices..., ...). An index outside [0, V) is an error naming it.
Tensor gather(const Tensor& params, const Tensor& indices);
// gather's adjoint: (rows, ...) zeros with updates[i...] (indices..., ...) added to row
// indices[i...]; repeated indices accumulate.
Tensor scatter_add(const Tensor& updates, const Tensor& indices, std::int64_t rows);

// ---- linear algebra ----
// a (..., M, K) x b (..., K, N) [+ bias (N,)]; batch dimensions must match, or b is 2-D.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a = false,
              bool transpose_b = false);

// ---- convolution and pooling (NHWC) ----
enum class Padding { valid, same };
const char* padding_name(Padding padding);
Padding parse_padding(const std::string& text);

struct Conv2DOptions {
  std::array<std::int64_t, 2> strides{1, 1};
  Padding padding = Padding::valid;
  std::array<std::int64_t, 2> dilations{1, 1};
};
// x (N, H, W, C_in), filter (KH, KW, C_in, C_out), optional bias (C_out,) -> (N, OH, OW, C_out)
Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2DOptions& options = {});
Tensor conv2d(const Tensor& x, const Tensor& filter, const Tensor& bias,
              const Conv2DOptions& options = {});
Tensor conv2d_backward_input(const Tensor& dy, const Tensor& filter, const Shape& input_shape,
                             const Conv2DOptions& options = {});
// Returns {d_filter} or {d_filter, d_bias} when with_bias.
std::vector<Tensor> conv2d_backward_filter(const Tensor& x, const Tensor& dy,
                                           const Shape& filter_shape, bool with_bias,
                                           const Conv2DOptions& options = {});

struct Pool2DOptions {
  std::array<std::int64_t, 2> window{2, 2};
  std::array<std::int64_t, 2> strides{2, 2};
  Padding padding = Padding::valid;
};
Tensor max_pool2d(const Tensor& x, const Pool2DOptions& options = {});
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2DOptions& options = {});
// Averages exclude padded cells, as TensorFlow does.
Tensor avg_pool2d(const Tensor& x, const Pool2DOptions& options = {});
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& input_shape,
                           const Pool2DOptions& options = {});
Tensor global_avg_pool2d(const Tensor& x);  // (N, H, W, C) -> (N, C)

// ---- batch normalisation over all axes but the last (channels) ----
struct BatchNormTrainingResult {
  Tensor y;         // normalised, scaled and shifted x
  Tensor mean;      // (C,) batch mean
  Tensor variance;  // (C,) biased batch variance
};
BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon);
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon);
// {dx, d_gamma, d_beta}; training=false treats mean and variance as constants.
std::vector<Tensor> batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& variance, double epsilon,
                                        bool training);

// ---- layer normalisation over the last axis ----
struct LayerNormResult {
  Tensor y;     // normalised, scaled and shifted x
  Tensor mean;  // (...) one per row: x's shape without its last axis
  Tensor rstd;  // (...) 1 / sqrt(variance + epsilon), the biased variance of the row
};
// gamma, beta (C,) with C = x.dim(-1), in x's dtype or f32 for a bf16/f16 x.
LayerNormResult layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           double epsilon);
// {dx, d_gamma, d_beta}
std::vector<Tensor> layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& rstd);

// ---- softmax ----
Tensor softmax(const Tensor& x, std::int64_t axis = -1);
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1);
Tensor softmax_backward(const Tensor& dy, const Tensor& y, std::int64_t axis = -1);
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, std::int64_t axis = -1);

// ---- layout and type ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one extent may be -1
Tensor transpose(const Tensor& x, const std::vector<std::int64_t>& permutation);
Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis);
// begin per axis; size per axis, -1 meaning "to the end".
Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin,
             const std::vector<std::int64_t>& size);
// paddings: {before, after} per axis.
Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings,
           double value = 0.0);
Tensor cast(const Tensor& x, DType dtype);

// ---- regularisation and losses ----
struct DropoutResult {
  Tensor y;
  Tensor mask;  // 0 or 1/(1-rate), x's dtype: y = x * mask
};
// Draws the mask from `generator` (counter-based, so reproducible on any device).
DropoutResult dropout(const Tensor& x, double rate, Generator& generator = default_generator());

struct CrossEntropyResult {
  Tensor loss;      // (N,) per example
  Tensor backprop;  // (N, C) softmax(logits) - one_hot(labels): d loss / d logits
};
// logits (N, C) float, labels (N,) i32 or i64 in [0, C). A label out of range is an error.
CrossEntropyResult sparse_softmax_cross_entropy_with_logits(const Tensor& logits,
                                                            const Tensor& labels);

// ---- optimizer updates, in place on `param` and the slots ----
struct SgdOptions {
  double learning_rate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;  // L2 term added to the gradient
};
// velocity may be undefined when momentum is 0.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdOptions& options);

struct AdamOptions {
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;      // Keras' default
  double weight_decay = 0.0;  // decoupled (AdamW) when > 0
};
// step counts from 1 and drives the bias correction.
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, std::int64_t step,
                 const AdamOptions& options);

}  // namespace tandem
