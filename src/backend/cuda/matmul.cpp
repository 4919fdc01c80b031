// CUDA matmul on cuBLASLt: f32 (IEEE, or TF32 tensor cores when cuda::tf32_enabled()), bf16 and
// f16 (tensor cores, f32 accumulation), the bias and a fused relu as a cuBLASLt epilogue, a fused
// residual as its C operand (beta 1), batches as strided batches. cuBLASLt is column-major: a
// row-major (M, N) product C = op(A) op(B) is the column-major (N, M) product
// C^T = op(B)^T op(A)^T, so the operands swap places and each transpose flag keeps its meaning for
// the operand it belongs to. The algorithm cuBLASLt's heuristic picks is cached per shape.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "ops/kernel_geometry.h"
#include "tandem/cuda.h"

namespace tandem::cuda {
namespace {

// cuBLASLt's recommended workspace on Hopper.
constexpr std::size_t kWorkspaceBytes = 32 * 1024 * 1024;

// The largest power of two (up to 256) dividing an address: what cuBLASLt may assume.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

// Descriptors and the chosen algorithm for one shape; immutable once made, except the bias
// pointer, which is set under the plan's lock for each call.
class Plan {
 public:
  Plan(cublasLtHandle_t handle, const MatmulShape& s, DType dtype, bool tf32,
       const std::array<std::uint32_t, 4>& alignments) {
    const CublasLtLibrary& api = cublaslt();
    const cudaDataType_t type = dtype == DType::f32    ? CUDA_R_32F
                                : dtype == DType::bf16 ? CUDA_R_16BF
                                                       : CUDA_R_16F;
    const cublasComputeType_t compute =
        dtype == DType::f32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check(api.cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // cuBLASLt's A is Tandem's b and its B is Tandem's a (see the top of the file).
    const cublasOperation_t op_b_as_a = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a_as_b = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(CUBLASLT_MATMUL_DESC_TRANSA, op_b_as_a);
    set_desc(CUBLASLT_MATMUL_DESC_TRANSB, op_a_as_b);
    if (s.has_bias || s.fused_relu) {
      const cublasLtEpilogue_t epilogue = !s.fused_relu ? CUBLASLT_EPILOGUE_BIAS
                                          : s.has_bias  ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                        : CUBLASLT_EPILOGUE_RELU;
      set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
      if (s.has_bias) set_desc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
    }
    // Stored shapes, column-major: b (K, N) row-major is (N, K) with leading dimension N.
    const std::uint64_t b_rows = static_cast<std::uint64_t>(s.transpose_b ? s.k : s.n);
    const std::uint64_t b_cols = static_cast<std::uint64_t>(s.transpose_b ? s.n : s.k);
    const std::uint64_t a_rows = static_cast<std::uint64_t>(s.transpose_a ? s.m : s.k);
    const std::uint64_t a_cols = static_cast<std::uint64_t>(s.transpose_a ? s.k : s.m);
    b_layout_ = layout(type, b_rows, b_cols, s.batch, s.b_batched ? s.k * s.n : 0);
    a_layout_ = layout(type, a_rows, a_cols, s.batch, s.m * s.k);
    c_layout_ = layout(type, static_cast<std::uint64_t>(s.n), static_cast<std::uint64_t>(s.m),
                       s.batch, s.m * s.n);
    cublasLtMatmulPreference_t preference = nullptr;
    check(api.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::size_t workspace = kWorkspaceBytes;
    api.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof(workspace));
    const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      api.cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i],
                                               &alignments[static_cast<std::size_t>(i)],
                                               sizeof(std::uint32_t));
    }
    int found = 0;
    const cublasStatus_t status =
        api.cublasLtMatmulAlgoGetHeuristic(handle, desc_, b_layout_, a_layout_, c_layout_,
                                           c_layout_, preference, 1, &heuristic_, &found);
    api.cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
      throw Error("matmul: cuBLASLt has no algorithm for (" + std::to_string(s.batch) + " x " +
                  std::to_string(s.m) + " x " + std::to_string(s.k) + ") x (" +
                  std::to_string(s.k) + " x " + std::to_string(s.n) + ") " + dtype_name(dtype) +
                  " products on this GPU");
    }
  }
  ~Plan() {
    const CublasLtLibrary& api = cublaslt();
    api.cublasLtMatrixLayoutDestroy(a_layout_);
    api.cublasLtMatrixLayoutDestroy(b_layout_);
    api.cublasLtMatrixLayoutDestroy(c_layout_);
    api.cublasLtMatmulDescDestroy(desc_);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // out = relu?(a b + bias + residual): the bias and the residual where not nullptr (the
  // residual may be out itself), the relu where the plan was made with one.
  void run(DeviceContext& context, const void* a, const void* b, const void* bias,
           const void* residual, void* out) {
    const Tensor workspace = Tensor::empty({static_cast<std::int64_t>(kWorkspaceBytes)}, DType::u8,
                                           Device::cuda(context.index));
    const float one = 1.0f;
    const float zero = 0.0f;
    std::lock_guard lock(mutex_);
    if (bias != nullptr) set_desc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    const void* c_operand = residual != nullptr ? residual : out;
    check(cublaslt().cublasLtMatmul(context.cublaslt, desc_, &one, b, b_layout_, a, a_layout_,
                                    residual != nullptr ? &one : &zero, c_operand, c_layout_, out,
                                    c_layout_, &heuristic_.algo, workspace.raw_data(),
                                    kWorkspaceBytes, context.stream),
          "cublasLtMatmul");
  }

 private:
  template <typename Value>
  void set_desc(cublasLtMatmulDescAttributes_t attribute, const Value& value) {
    check(cublaslt().cublasLtMatmulDescSetAttribute(desc_, attribute, &value, sizeof(value)),
          "cublasLtMatmulDescSetAttribute");
  }

  static cublasLtMatrixLayout_t layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                                       std::int64_t batch, std::int64_t batch_stride) {
    const CublasLtLibrary& api = cublaslt();
    cublasLtMatrixLayout_t result = nullptr;
    check(
        api.cublasLtMatrixLayoutCreate(&result, type, rows, cols, static_cast<std::int64_t>(rows)),
        "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      const auto count = static_cast<std::int32_t>(batch);
      check(api.cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                 sizeof(count)),
            "cublasLtMatrixLayoutSetAttribute");
      check(
          api.cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &batch_stride, sizeof(batch_stride)),
          "cublasLtMatrixLayoutSetAttribute");
    }
    return result;
  }

  std::mutex mutex_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr;
  cublasLtMatrixLayout_t b_layout_ = nullptr;
  cublasLtMatrixLayout_t c_layout_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

using PlanKey = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int,
                           bool, std::array<std::uint32_t, 4>>;

std::shared_ptr<Plan> plan_for(DeviceContext& context, const MatmulShape& s, DType dtype,
                               const std::array<std::uint32_t, 4>& alignments) {
  static std::mutex mutex;
  static std::map<PlanKey, std::shared_ptr<Plan>> plans;
  const bool tf32 = tf32_enabled();
  const int flags =
      s.b_batched | s.transpose_a << 1 | s.transpose_b << 2 | s.has_bias << 3 | s.fused_relu << 4;
  const PlanKey key{context.index, static_cast<int>(dtype), s.batch, s.m, s.k, s.n, flags, tf32,
                    alignments};
  std::lock_guard lock(mutex);
  auto& plan = plans[key];
  if (!plan) plan = std::make_shared<Plan>(context.cublaslt, s, dtype, tf32, alignments);
  return plan;
}

void run_matmul(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const MatmulShape s = matmul_shape(c);
  if (s.k == 0) {
    // An empty sum: zeros, plus the bias and the residual where there are, through the relu.
    if (s.fused_add) {
      const Tensor& residual = c.inputs.back();
      if (residual.raw_data() != out.raw_data()) {
        convert(context, residual.raw_data(), residual.dtype(), out.raw_data(), out.dtype(),
                out.numel());
      }
      if (s.has_bias) add_channel_bias(context, c.inputs[2], out);
    } else if (s.has_bias) {
      broadcast_into(context, c.inputs[2], out);
    } else {
      check(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), context.stream), "cudaMemsetAsync");
    }
    add_residual_relu(context, nullptr, s.fused_relu, out);
    return;
  }
  // A 16-bit product's bias goes into out first and is added as C (beta 1): cuBLASLt's bias
  // epilogue adds it to the product already rounded to 16 bits (errors of one ulp, and relu masks
  // flipped where the sum is near 0, seen on the H200), while C joins the f32 sum before the one
  // rounding, as in the convolutions.
  MatmulShape planned = s;
  const void* bias = s.has_bias ? c.inputs[2].raw_data() : nullptr;
  const void* residual = s.fused_add ? c.inputs.back().raw_data() : nullptr;
  if (s.has_bias && !s.fused_add && out.dtype() != DType::f32) {
    broadcast_into(context, c.inputs[2], out);
    planned.has_bias = false;
    bias = nullptr;
    residual = out.raw_data();
  }
  const std::array<std::uint32_t, 4> alignments{
      alignment_of(c.inputs[1].raw_data()), alignment_of(c.inputs[0].raw_data()),
      alignment_of(residual != nullptr ? residual : out.raw_data()), alignment_of(out.raw_data())};
  plan_for(context, planned, out.dtype(), alignments)
      ->run(context, c.inputs[0].raw_data(), c.inputs[1].raw_data(), bias, residual,
            out.raw_data());
}

}  // namespace

void register_matmul_kernels(KernelTable& table) {
  table.set(OpKind::matmul, run_matmul, floating_mask());
}

}  // namespace tandem::cuda
