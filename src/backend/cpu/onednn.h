#pragma once
// Shared oneDNN plumbing for the CPU kernels: one engine and stream, and memory descriptors and
// memory objects that wrap Tandem tensors without copying.
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::cpu {

dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();

// The oneDNN data type of `dtype`, or nothing where oneDNN has none (f64, i64, bool).
std::optional<dnnl::memory::data_type> onednn_data_type(DType dtype);

// What oneDNN can do on this CPU, from the instruction set it dispatches to (its effective ISA).
struct OnednnIsa {
  const char* name;  // "avx2", "avx512_core_amx", ...
  // oneDNN 2.6 implements bf16 only with AVX-512 (emulated on avx512_core, native from
  // avx512_core_bf16): on an AVX2 CPU its bf16 primitives cannot be created.
  bool bf16;
  // Its int8 products are exact only with VNNI (vpdpbusd sums four u8 x s8 products in s32).
  // Without it they pair products with vpmaddubsw, which saturates at 16 bits: two 255 x 127
  // products already overflow, so results on an AVX2 or plain AVX-512 CPU can be far off.
  bool exact_int8;
  // Sapphire Rapids and later (AMX tiles): see onednn_matmul_extents.
  bool amx;
};
const OnednnIsa& onednn_isa();
// The extents a oneDNN matmul of (M, K) by (K, N) with `dtype` inputs is built with: K and N,
// except on AMX CPUs, where they are rounded up to multiples of 64: in bf16 N always and K where
// K mod 32 = 31, in int8 (u8 or i8 inputs) K. oneDNN 2.6's AMX bf16 product
// (brg:avx512_core_amx_bf16) runs some shapes with a partial 64-element block on tiles configured
// for another of its kernels: wrong results (48 < N < 64 with more than two threads; K = 63 or
// 1055 with some M on 8 or more) or an illegal instruction (K = 63 with N = 80 from two threads
// on). In a standalone oneDNN program on an AMX Xeon, 63 of 4,500 random bf16 products (M up to
// 300 or 600, K and N up to 300, 2-16 threads, transposes, bias) failed; 1 of 4,000 with N alone
// rounded up (K = 63); none of 4,000 with K and N rounded up, nor of 5,000 with N rounded up and
// K where K mod 32 = 31 (bench/RESULTS.md, 2026-12-04 evening). Its AMX int8 product (u8 by s8,
// weights in its blocked layout, f32 result) failed the same ways for K = 125-127: 14 of 6,300
// random products as given, none of 8,000 with K rounded up to a multiple of 64. The caller gives
// it A and B padded with zeros (zero_padded: zero rows and columns add nothing to the sums) and
// copies the first N columns of the result out (copy_leading_columns).
struct MatmulExtents {
  std::int64_t k;
  std::int64_t n;
};
MatmulExtents onednn_matmul_extents(std::int64_t k, std::int64_t n, DType dtype);
// Whether the f32/bf16 kernels of a float op run on oneDNN for `dtype` on this CPU (f32 always,
// bf16 where oneDNN has it); where not, the op's loops run.
bool onednn_float_kernels(DType dtype);

dnnl::memory::dims onednn_dims(const Shape& shape);
// Plain row-major layout of any rank (a, ab, abc, ...); NHWC tensors are row-major too.
dnnl::memory::desc plain_desc(const Shape& shape, DType dtype);
// Treats an NHWC tensor as oneDNN's logical NCHW with an nhwc physical layout.
dnnl::memory::desc nhwc_desc(const Shape& nhwc_shape, DType dtype);
dnnl::memory wrap(const dnnl::memory::desc& desc, const Tensor& tensor);
// A primitive's arguments, which a kernel keeps for one node of a compiled step
// (KernelContext::state): memory objects made once and pointed at the node's buffers on each
// call, and the list oneDNN's C API takes. At batch 1, caches cold after the filters streamed
// through, making the memory objects and the map of an eager call took 3-6 us of a 130 us
// convolution.
class PrimitiveArguments {
 public:
  // Binds `arg` to `tensor`'s buffer, which the primitive reads or writes as `desc`.
  void bind(int arg, const dnnl::memory::desc& desc, const Tensor& tensor);
  // Binds `arg` to a memory object of its own (a reordered constant, a scratch buffer).
  void bind(int arg, const dnnl::memory& memory);
  void clear();
  // Runs `primitive` on the shared stream with these arguments and waits for it.
  void execute(const dnnl::primitive& primitive);

 private:
  struct Bound {
    int arg;
    dnnl::memory memory;
    const void* data;  // the buffer `memory` points at (nullptr: its own)
  };
  std::vector<Bound> bound_;
  std::vector<dnnl_exec_arg_t> list_;
};

// How a fused convolution or product (Conv2DAttrs/MatmulAttrs::fused_add) gets its residual:
// as the operand of a binary post-op (kResidualArg), or already in the destination, which a sum
// post-op adds the result onto (a compiled graph wrote the output over the residual's buffer:
// OpDef::in_place_input). The sum lets oneDNN 2.6 keep its brgemm kernels for 1x1 convolutions,
// which it leaves for older ones with the binary post-op.
enum class Residual { none, operand, in_destination };
// The post-ops of a fused convolution or product: the residual added first, then relu.
dnnl::primitive_attr fused_post_ops(Residual residual, const dnnl::memory::desc& operand,
                                    bool relu);
// The argument that gives the residual's binary post-op (always the first post-op) its operand.
inline constexpr int kResidualArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
// Whether oneDNN picked its reference implementation ("ref:any"), scalar loops far slower than
// ours or than doing without the post-op that forced it.
bool is_reference_implementation(const char* impl_info);
// Runs one primitive on the shared stream and waits for it.
void execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

}  // namespace tandem::cpu
