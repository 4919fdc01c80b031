#pragma once
// The closed list of ops and their functional API. Every op is defined once in the op table
// (src/ops/): shape/dtype inference, gradient rule and FLOP/byte cost; backends only supply
// kernels. All image ops are NHWC; filters are (KH, KW, C_in, C_out) as in TensorFlow.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/attrs.h"
#include "tandem/random.h"
#include "tandem/tensor.h"

namespace tandem {

// The closed list of ops, by family. Each family is defined in src/ops/<family>.cpp (shape
// inference, gradient rule and cost, forward and backward side by side), which must define
// exactly its list below, in this order: one missing, extra or out of place does not compile.
#define TANDEM_OPS_elementwise(X)                                                    \
  /* element-wise unary */                                                           \
  X(neg)                                                                             \
  X(abs)                                                                             \
  X(sign)                                                                            \
  X(exp)                                                                             \
  X(log)                                                                             \
  X(sqrt) X(rsqrt) X(square) X(relu) X(gelu) X(sigmoid)                              \
      X(tanh) /* their backward kernels (dy with the forward input x or output y) */ \
      X(relu_backward) X(gelu_backward) X(sigmoid_backward)                          \
          X(tanh_backward) /* binary with NumPy broadcasting */                      \
      X(add) X(sub) X(mul) X(div) X(maximum) X(minimum)                              \
          X(pow) /* comparisons (bool result) and selection */                       \
      X(equal) X(greater) X(greater_equal) X(less) X(select)
// reductions and broadcasting
#define TANDEM_OPS_reduction(X) X(sum) X(mean) X(max) X(argmax) X(broadcast_to)
// gathering rows by index (embeddings) and its adjoint
#define TANDEM_OPS_gather(X) X(gather) X(scatter_add)
#define TANDEM_OPS_linalg(X) X(matmul)
#define TANDEM_OPS_conv(X) X(conv2d) X(conv2d_backward_input) X(conv2d_backward_filter)
#define TANDEM_OPS_pool(X) \
  X(max_pool2d) X(max_pool2d_backward) X(avg_pool2d) X(avg_pool2d_backward) X(global_avg_pool2d)
#define TANDEM_OPS_norm(X) X(batch_norm) X(batch_norm_backward)
#define TANDEM_OPS_layer_norm(X) X(layer_norm) X(layer_norm_backward)
#define TANDEM_OPS_softmax(X) X(softmax) X(softmax_backward) X(log_softmax) X(log_softmax_backward)
// layout and type
#define TANDEM_OPS_layout(X) X(reshape) X(transpose) X(concat) X(slice) X(pad) X(cast)
#define TANDEM_OPS_dropout(X) X(dropout)
#define TANDEM_OPS_loss(X) X(sparse_softmax_cross_entropy)
// optimizer updates (in place: outputs alias the parameter and slot inputs)
#define TANDEM_OPS_optimizer(X) X(sgd_update) X(adam_update) X(assign)
// collectives across the replicas of a data-parallel XLA program
#define TANDEM_OPS_collective(X) X(all_reduce)
// formed by a compiled step's fusion passes: a chain of element-wise ops as one loop; a
// convolution with the max pooling after it; a convolution's filter gradient from the gradient
// of the max pooling after it
#define TANDEM_OPS_fused(X) X(fused_elementwise) X(pooled_conv2d) X(pooled_conv2d_backward_filter)
// quantisation simulated in floating point (post-training calibration, quantisation-aware
// training)
#define TANDEM_OPS_quantize(X) X(fake_quantize) X(quantized_conv2d) X(quantized_matmul)

// The families in table order: F(family, X) for each.
#define TANDEM_OP_FAMILIES(F, X)                                                             \
  F(elementwise, X)                                                                          \
  F(reduction, X)                                                                            \
  F(gather, X)                                                                               \
  F(linalg, X)                                                                               \
  F(conv, X)                                                                                 \
  F(pool, X) F(norm, X) F(layer_norm, X) F(softmax, X) F(layout, X) F(dropout, X) F(loss, X) \
      F(optimizer, X) F(collective, X) F(fused, X) F(quantize, X)
#define TANDEM_OPS_OF_FAMILY(family, X) TANDEM_OPS_##family(X)
// X(op) for every op, in table order.
#define TANDEM_OPS(X) TANDEM_OP_FAMILIES(TANDEM_OPS_OF_FAMILY, X)

enum class OpKind : std::uint8_t {
#define TANDEM_OP_KIND_ENUMERATOR(op) op,
  TANDEM_OPS(TANDEM_OP_KIND_ENUMERATOR)
#undef TANDEM_OP_KIND_ENUMERATOR
};
#define TANDEM_OP_COUNT_ONE(op) +1
inline constexpr int kNumOps = 0 TANDEM_OPS(TANDEM_OP_COUNT_ONE);
#undef TANDEM_OP_COUNT_ONE

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
// Draws the mask from `generator` (counter-based, so reproducible on any device). Inside a
// compiled step the draw happens at each run, so the generator must outlive the step (a layer's
// own and the default one do).
DropoutResult dropout(const Tensor& x, double rate, Generator& generator = default_generator());

struct CrossEntropyResult {
  Tensor loss;      // (N,) per example
  Tensor backprop;  // (N, C) softmax(logits) - one_hot(labels): d loss / d logits
};
// logits (N, C) float, labels (N,) i32 or i64 in [0, C). A label out of range is an error.
CrossEntropyResult sparse_softmax_cross_entropy_with_logits(const Tensor& logits,
                                                            const Tensor& labels);

// ---- optimizer updates, in place on `param` and the slots ----
// The learning rate and step of an update are an operand, not an attribute: a compiled step
// (tandem/compile.h) reads them anew on every run, so a schedule never causes a recompile, and a
// CUDA graph or XLA executable takes them from device memory.
// f64 (2,) {learning_rate, step} on `device`; step counts updates from 1 (Adam's bias correction).
// An update also takes a gated schedule, f64 (3,) {learning_rate, step, apply}, made with ops on
// the device: where apply is 0 it changes nothing (loss scaling skips an overflowing step so).
Tensor update_schedule(double learning_rate, std::int64_t step, Device device = Device::cpu());

struct SgdOptions {
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;  // L2 term added to the gradient
};
// velocity may be undefined when momentum is 0; schedule from update_schedule (its step unused).
void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const Tensor& schedule,
                const SgdOptions& options = {});

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;      // Keras' default
  double weight_decay = 0.0;  // decoupled (AdamW) when > 0
};
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const Tensor& schedule,
                 const AdamOptions& options = {});
// Writes `value` into `target` in place (same shape and dtype): state a step keeps on the device,
// such as a loss scale, changed by a node of the compiled step rather than by the host.
void assign(Tensor& target, const Tensor& value);

// ---- collectives ----
// The sum of `x` over the `replicas` replicas of the data-parallel program it runs in
// (stablehlo.all_reduce; the XLA strategies trace their step once for every replica). Run
// eagerly, or in a program of one replica, it is `x`; eagerly with more replicas it is an error.
Tensor all_reduce(const Tensor& x, int replicas);

// ---- quantisation, simulated in floating point ----
struct FakeQuantizeResult {
  Tensor y;
  Tensor in_range;  // 1 where x fell inside the integer range, else 0 (x's shape and dtype)
};
// The values an integer kernel would see, computed in f32 (f64 for an f64 x) and rounded to x's
// dtype: q = round(x / scale) + zero_point (ties to even, as QuantizeLinear and TensorFlow
// round), clamped to [quant_min, quant_max], and y = (q - zero_point) * scale. On XLA:CPU the
// division may go through a reciprocal: an x within an ulp of a grid line can land one step from
// the CPU kernel's result. `scale` (positive) and `zero_point` (whole numbers) are f32
// scalars (per tensor) or (C,) vectors along x's last axis (per channel: a Dense kernel's or a
// Conv2D filter's output channels), and operands, not attributes: a range that moves every
// training step never recompiles a step. The gradient is the straight-through estimator: dy
// where x was in range, 0 where it was clamped; scale and zero_point get none.
FakeQuantizeResult fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point,
                                 std::int64_t quant_min, std::int64_t quant_max);

// ---- integer kernels (inference) ----
// A quantised layer's product in integers (tandem/quantization.h's scheme): x (f32) is quantised
// per tensor with zero point 0, q = round(x / input_scale) (ties to even) clamped to [0, 255]
// (input_unsigned) or [-128, 127]; the i8 weights w (output channels last) multiply it with
// exact integer sums; and y[..., c] = sum(q w) * (input_scale * weight_scale[c]) + bias[c], in
// f32: what fake_quantize's simulation computes up to the rounding of its f32 sums. input_scale
// is an f32 scalar operand, weight_scale and bias (C_out,) f32; a NaN in x quantises to the low
// end of the range. On the CPU they run on oneDNN's int8 kernels (AMX or VNNI where the CPU has
// them), which keep constant weights (Tensor::is_constant) reordered into their layout. XLA
// lowers them; CUDA has no kernel yet. No gradient: training runs the simulation
// (fake_quantize), these run the trained model.
struct QuantizedInput {
  Tensor scale;  // f32 scalar
  bool is_unsigned = false;
};
// x (N, H, W, C_in), filter (KH, KW, C_in, C_out) i8 -> (N, OH, OW, C_out) f32.
Tensor quantized_conv2d(const Tensor& x, const QuantizedInput& input, const Tensor& filter,
                        const Tensor& filter_scale, const Tensor& bias,
                        const Conv2DOptions& options = {});
// x (..., M, K), weights (K, N) i8 -> (..., M, N) f32.
Tensor quantized_matmul(const Tensor& x, const QuantizedInput& input, const Tensor& weights,
                        const Tensor& weight_scale, const Tensor& bias);

// ---- values the host computes for every run of a step ----
// Fills a CPU tensor of the operand's shape and dtype.
using HostFill = std::function<void(Tensor& host)>;
// A small operand the host computes for each step: an optimizer's learning rate and step,
// dropout's seed and counter offset. Eagerly `fill` runs now and the result is copied to
// `device`. Inside a traced step it does not run then: the compiled graph takes the value as an
// input and runs `fill` before each of its runs, in the order of the trace, so these values are
// never constants of the graph (no recompile when they change) and `fill` may advance host state
// (a step counter, a random stream) exactly as the eager step would. `what` names the value in
// the graph's listing.
Tensor host_operand(const char* what, const Shape& shape, DType dtype, Device device,
                    HostFill fill);
// Whether this thread is tracing a step (tandem/compile.h): ops return symbolic tensors, and
// host control flow on values (or on state the step changes) cannot be traced.
bool tracing();

}  // namespace tandem
