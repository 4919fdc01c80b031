// Matrix multiplication: a (..., M, K) x b (..., K, N) [+ bias (N,)], either operand optionally
// transposed in its last two axes. Definition, wrappers and gradient rule side by side.
#include <numeric>
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

// The logical (M, K) / (K, N) extents of one operand, whose last two axes hold the matrix.
struct MatrixExtents {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

MatrixExtents matrix_extents(const Shape& shape, bool transposed) {
  const std::int64_t stored_rows = shape[shape.size() - 2];
  const std::int64_t stored_cols = shape[shape.size() - 1];
  return transposed ? MatrixExtents{stored_cols, stored_rows}
                    : MatrixExtents{stored_rows, stored_cols};
}

std::string operand_str(const char* name, const TensorMeta& meta, bool transposed) {
  return std::string(name) + " " + shape_str(meta.shape) + (transposed ? " (transposed)" : "");
}

std::vector<TensorMeta> infer_matmul(const char* op, std::span<const TensorMeta> in,
                                     const Attrs& attrs) {
  const TensorMeta& a = in[0];
  const TensorMeta& b = in[1];
  const bool transpose_a = op_attrs<OpKind::matmul>(attrs).transpose_a;
  const bool transpose_b = op_attrs<OpKind::matmul>(attrs).transpose_b;
  require_same_dtype(op, in);
  if (a.dtype == DType::boolean) {
    throw InvalidArgument(std::string(op) + ": bool operands " + shape_str(a.shape) + " and " +
                          shape_str(b.shape) + " cannot be multiplied; cast them to f32 or i32");
  }
  if (a.shape.size() < 2 || b.shape.size() < 2) {
    throw InvalidArgument(std::string(op) + ": both operands need rank >= 2, got a " +
                          shape_str(a.shape) + " and b " + shape_str(b.shape) +
                          "; reshape a vector to (1, K) or (K, 1)");
  }
  const MatrixExtents a_matrix = matrix_extents(a.shape, transpose_a);  // (M, K)
  const MatrixExtents b_matrix = matrix_extents(b.shape, transpose_b);  // (K, N)
  if (a_matrix.cols != b_matrix.rows) {
    throw InvalidArgument(
        std::string(op) + ": inner extents differ: " + operand_str("a", a, transpose_a) +
        " has K = " + std::to_string(a_matrix.cols) + " but " + operand_str("b", b, transpose_b) +
        " has K = " + std::to_string(b_matrix.rows) + "; check the transpose flags");
  }
  const Shape a_batch(a.shape.begin(), a.shape.end() - 2);
  const Shape b_batch(b.shape.begin(), b.shape.end() - 2);
  if (!b_batch.empty() && a_batch != b_batch) {
    throw InvalidArgument(std::string(op) + ": batch extents differ: a " + shape_str(a.shape) +
                          " and b " + shape_str(b.shape) +
                          "; b must have a's batch extents or be a 2-D matrix");
  }
  const bool fused_add = op_attrs<OpKind::matmul>(attrs).fused_add;
  if (has_bias_input(in.size(), fused_add)) {
    const TensorMeta& bias = in[2];
    if (bias.shape != Shape{b_matrix.cols}) {
      throw InvalidArgument(std::string(op) + ": bias " + shape_str(bias.shape) +
                            " must have shape (" + std::to_string(b_matrix.cols) +
                            ",) to match N of b " + shape_str(b.shape));
    }
  }
  Shape out_shape = a_batch;
  out_shape.push_back(a_matrix.rows);
  out_shape.push_back(b_matrix.cols);
  if (fused_add && in.back().shape != out_shape) {
    throw InvalidArgument(std::string(op) + ": the fused residual " + shape_str(in.back().shape) +
                          " must have the product's shape " + shape_str(out_shape));
  }
  return {{out_shape, a.dtype}};
}

// 2 * batch * M * N * K multiply-adds, plus one add per output element for the bias and one for
// a fused residual.
OpCost matmul_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                   const Attrs& attrs) {
  const MatmulAttrs matmul = op_attrs<OpKind::matmul>(attrs);
  const MatrixExtents a_matrix = matrix_extents(in[0].shape, matmul.transpose_a);
  const double outputs = static_cast<double>(shape_numel(out[0].shape));
  const double flops = 2.0 * outputs * static_cast<double>(a_matrix.cols) +
                       (has_bias_input(in.size(), matmul.fused_add) ? outputs : 0.0) +
                       (matmul.fused_add ? outputs : 0.0);
  return {flops, bytes_of(in) + bytes_of(out)};
}

// Axes 0 .. count - 1.
std::vector<std::int64_t> first_axes(int count) {
  std::vector<std::int64_t> axes(static_cast<std::size_t>(count));
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

// With Y = op(A) op(B): d op(A) = dY op(B)^T and d op(B) = op(A)^T dY; a transposed operand
// gets the transpose of that, which the transpose flags express without copies.
Tensor grad_a(const Tensor& dy, const Tensor& b, bool transpose_a, bool transpose_b) {
  if (!transpose_a) return matmul(dy, b, false, !transpose_b);
  if (b.rank() == 2 && dy.rank() > 2) {
    // op(B) dY^T would put the 2-D operand first, which matmul does not broadcast: transpose
    // dY op(B)^T instead.
    std::vector<std::int64_t> swap_last_two = first_axes(dy.rank());
    std::swap(swap_last_two[swap_last_two.size() - 2], swap_last_two.back());
    return transpose(matmul(dy, b, false, !transpose_b), swap_last_two);
  }
  return matmul(b, dy, transpose_b, true);
}

Tensor grad_b(const Tensor& dy, const Tensor& a, bool transpose_a, bool transpose_b) {
  if (transpose_b) return matmul(dy, a, true, transpose_a);
  return matmul(a, dy, !transpose_a, false);
}

// Gradient of b, summed over the batch when a 2-D b is shared by every batch entry.
Tensor grad_b_of_product(const Tensor& dy, const Tensor& a, const Tensor& b, bool transpose_a,
                         bool transpose_b) {
  if (b.rank() != 2 || a.rank() <= 2) return grad_b(dy, a, transpose_a, transpose_b);
  if (transpose_a) {
    return sum(grad_b(dy, a, transpose_a, transpose_b), first_axes(a.rank() - 2));
  }
  // Untransposed a folds the batch into M, so the sum happens inside one 2-D product.
  const std::int64_t k = a.dim(-1);
  const std::int64_t n = dy.dim(-1);
  return grad_b(reshape(dy, {-1, n}), reshape(a, {-1, k}), false, transpose_b);
}

// With a fused relu, dy is first masked where the output is zero; a fused residual's gradient is
// that dy.
std::vector<Tensor> grad_matmul(const GradContext& c) {
  const Tensor dy = op_attrs<OpKind::matmul>(c.attrs).fused_relu
                        ? relu_backward(c.output_grads[0], c.outputs[0])
                        : c.output_grads[0];  // (..., M, N)
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  const bool transpose_a = op_attrs<OpKind::matmul>(c.attrs).transpose_a;
  const bool transpose_b = op_attrs<OpKind::matmul>(c.attrs).transpose_b;
  std::vector<Tensor> grads(c.inputs.size());
  if (c.needs_grad(0)) grads[0] = grad_a(dy, b, transpose_a, transpose_b);
  if (c.needs_grad(1)) grads[1] = grad_b_of_product(dy, a, b, transpose_a, transpose_b);
  const bool fused_add = op_attrs<OpKind::matmul>(c.attrs).fused_add;
  if (has_bias_input(c.inputs.size(), fused_add) && c.needs_grad(2)) {
    grads[2] = sum(dy, first_axes(dy.rank() - 1));  // (N,)
  }
  if (fused_add && c.needs_grad(c.inputs.size() - 1)) grads.back() = dy;
  return grads;
}

Attrs matmul_attrs(bool transpose_a, bool transpose_b) {
  return make_op_attrs<OpKind::matmul>({transpose_a, transpose_b, false, false});
}

// ---- StableHLO ----

// stablehlo.dot_general contracting K, with a's batch axes as batch dimensions when b has them
// too (else b's matrix multiplies every batch of a); then the bias and the fused relu.
std::vector<StablehloValue> lower_matmul(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta> out, const Attrs& attrs) {
  const MatmulAttrs& matmul = op_attrs<OpKind::matmul>(attrs);
  const StablehloValue& a = in[0];
  const StablehloValue& b = in[1];
  const auto a_rank = static_cast<std::int64_t>(a.shape.size());
  const auto b_rank = static_cast<std::int64_t>(b.shape.size());
  const std::int64_t a_contracting = matmul.transpose_a ? a_rank - 2 : a_rank - 1;
  const std::int64_t b_contracting = matmul.transpose_b ? b_rank - 1 : b_rank - 2;
  std::vector<std::int64_t> batch(static_cast<std::size_t>(std::max<std::int64_t>(b_rank - 2, 0)));
  std::iota(batch.begin(), batch.end(), 0);
  const Shape& shape = out[0].shape;
  // dot_general gives the batch axes, then a's free axes (..., M), then b's (N); 16-bit operands
  // give an f32 product (XLA accumulates in it), the bias and relu applied to it and the result
  // rounded once, as the fused kernels do (rounding before the bias can flip a relu near 0).
  const DType accumulate = StablehloEmitter::accumulation_type(out[0].dtype);
  StablehloValue product =
      emit.dot_general(a, b, batch, a_contracting, b_contracting, shape, accumulate);
  if (has_bias_input(in.size(), matmul.fused_add)) {
    product = emit.elementwise("stablehlo.add",
                               {product, emit.broadcast(emit.convert(in[2], accumulate), shape)},
                               accumulate);
  }
  if (matmul.fused_add) {
    product = emit.elementwise("stablehlo.add", {product, emit.convert(in.back(), accumulate)},
                               accumulate);
  }
  if (matmul.fused_relu) {
    product = emit.elementwise("stablehlo.maximum",
                               {product, emit.constant(0.0, shape, accumulate)}, accumulate);
  }
  product = emit.convert(product, out[0].dtype);
  return {product};
}

}  // namespace

std::vector<OpDef> define_linalg_ops() {
  return op_family<k_linalg_ops>(
      OpRules<OpKind::matmul>{2, 4, infer_matmul, grad_matmul, matmul_cost, lower_matmul});
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return call_op(OpKind::matmul, {a, b}, matmul_attrs(transpose_a, transpose_b))[0];
}

Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a,
              bool transpose_b) {
  return call_op(OpKind::matmul, {a, b, bias}, matmul_attrs(transpose_a, transpose_b))[0];
}

}  // namespace tandem
