#pragma once
// StableHLO lowering: each op's rule, beside its definition in the op table (as JAX registers a
// lowering per primitive), writes the op as StableHLO (MLIR text) into a function body that an
// emitter builds. The compile layer lowers a whole graph with these rules into one module
// (compile/stablehlo_module.h), which a PJRT plugin compiles for XLA:CPU, XLA:GPU or a TPU.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/attrs.h"
#include "tandem/dtype.h"
#include "tandem/tensor.h"

namespace tandem {

struct TensorMeta;

// A value of the function being written: its SSA name ("%v3") and what it holds.
struct StablehloValue {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

// Writes the body of one func.func: fresh SSA names, one op per line, and the helpers the rules
// share (types, constants, NumPy broadcasting).
class StablehloEmitter {
 public:
  // "tensor<2x3xf32>", "tensor<i1>" (a rank-0 bool).
  static std::string type(const Shape& shape, DType dtype);
  static std::string type(const StablehloValue& value) { return type(value.shape, value.dtype); }
  // "f32", "bf16", "i32", "ui8", "i1".
  static std::string element_type(DType dtype);
  // The type sums and products of `dtype` accumulate in: f32 for the 16-bit floats (as the CPU
  // kernels accumulate), else the dtype itself.
  static DType accumulation_type(DType dtype);

  // Appends `op` (text after "%name = ") as a new value of `shape` and `dtype`.
  StablehloValue emit(const std::string& op, const Shape& shape, DType dtype);
  // Appends an op with several results: its values, "%v3#0", "%v3#1", ...
  std::vector<StablehloValue> emit_results(const std::string& op,
                                           const std::vector<StablehloValue>& results);
  // A tensor of `shape` filled with `value` (a splat constant).
  StablehloValue constant(double value, const Shape& shape, DType dtype);
  // `value` broadcast to `shape` the NumPy way (trailing axes aligned); itself when it has it.
  StablehloValue broadcast(const StablehloValue& value, const Shape& shape);
  // `value` broadcast to `shape` with its axis i becoming axis dims[i].
  StablehloValue broadcast_in_dim(const StablehloValue& value, const Shape& shape,
                                  const std::vector<std::int64_t>& dims);
  // `value` reduced over `axis` and broadcast back to its shape (a keepdims reduction that
  // combines with `value` element-wise).
  StablehloValue reduce_back(const StablehloValue& value, std::int64_t axis, const std::string& op,
                             double init);
  // An op over operands of one shape, giving that shape in `result_dtype`: `op` is its full
  // name ("stablehlo.add", "chlo.erf"), `attributes` the text inside its braces, if any.
  StablehloValue elementwise(const std::string& op, const std::vector<StablehloValue>& operands,
                             DType result_dtype, const std::string& attributes = "");
  // "stablehlo.compare" of two operands of one shape and dtype: `direction` is "EQ", "GE", ...;
  // floats compare as FLOAT, u8 and bool as UNSIGNED, the other integers as SIGNED.
  StablehloValue compare(const StablehloValue& left, const StablehloValue& right,
                         const std::string& direction);
  // A tensor of `shape` counting 0, 1, ... along axis `dimension`.
  StablehloValue iota(const Shape& shape, std::int64_t dimension, DType dtype);
  // The replica this program runs as (0 in a program of one), an i64 scalar.
  StablehloValue replica_id();
  // Element `index` of a vector (n,), as a scalar.
  StablehloValue element(const StablehloValue& vector, std::int64_t index);
  // "stablehlo.convert".
  StablehloValue convert(const StablehloValue& value, DType dtype);
  // `value` in its accumulation type (f32 for the 16-bit floats): multi-step formulas compute
  // there and round once at the end, as the CPU kernels' compute type does.
  StablehloValue widened(const StablehloValue& value) {
    return convert(value, accumulation_type(value.dtype));
  }
  // `value` padded with `fill` by low, high and (between cells) interior cells per axis;
  // interior empty: none.
  StablehloValue pad(const StablehloValue& value, double fill, const std::vector<std::int64_t>& low,
                     const std::vector<std::int64_t>& high,
                     std::vector<std::int64_t> interior = {});
  // The cells [begin, limit) of each axis of `value`, every strides[axis]-th from begin (strides
  // empty: every cell).
  StablehloValue slice(const StablehloValue& value, const std::vector<std::int64_t>& begin,
                       const std::vector<std::int64_t>& limit,
                       std::vector<std::int64_t> strides = {});
  // `value` with another shape of as many elements.
  StablehloValue reshape(const StablehloValue& value, const Shape& shape);
  // stablehlo.dot_general of `lhs` and `rhs` over the given batch and contracting axes, giving
  // `shape` in `result_dtype` (f32 for 16-bit operands: XLA accumulates in it).
  StablehloValue dot_general(const StablehloValue& lhs, const StablehloValue& rhs,
                             const std::vector<std::int64_t>& batch_axes,
                             std::int64_t lhs_contracting, std::int64_t rhs_contracting,
                             const Shape& shape, DType result_dtype);
  // `value` reduced over `axes` with the binary op `op` ("stablehlo.add") from `init`; a sum of
  // 16-bit floats accumulates in f32.
  StablehloValue reduce(const StablehloValue& value, const std::vector<std::int64_t>& axes,
                        const std::string& op, double init);

  // The region of a reduction: "{ ^bb0(%a: tensor<f32>, %b: ...): ... }" combining two
  // scalars with `op`, or comparing them with `comparison` ("GE") when that is given.
  std::string binary_region(const std::string& op, DType dtype, const std::string& comparison = "");
  // "dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>": (low, high) per axis.
  static std::string padding(const std::vector<std::array<std::int64_t, 2>>& low_high);

  // "array<i64: 1, 2>", the attribute form of an extent or axis list.
  static std::string i64_array(const std::vector<std::int64_t>& values);

  const std::string& body() const { return body_; }

 private:
  std::string fresh();
  std::string body_;
  int next_ = 0;
};

// A parameter of @main: its value ("%argN", see stablehlo_argument) and the index of the result
// whose buffer it becomes (tf.aliasing_output: XLA updates the donated buffer in place), or -1.
struct StablehloArgument {
  StablehloValue value;
  int aliased_result = -1;
};

// The value of @main's parameter `index`.
StablehloValue stablehlo_argument(std::size_t index, const Shape& shape, DType dtype);

// A module `symbol` of one public @main over `arguments`, with the body `emitter` wrote, returning
// `results`: what a PJRT plugin compiles (a program of `replicas` data-parallel replicas).
std::string stablehlo_module(const std::string& symbol, int replicas,
                             std::span<const StablehloArgument> arguments,
                             const StablehloEmitter& emitter,
                             std::span<const StablehloValue> results);

// A StableHLO op's name as a template argument: lower_unary<"stablehlo.exponential">.
template <std::size_t N>
struct StablehloName {
  char text[N];
  constexpr StablehloName(const char (&name)[N]) {  // NOLINT: implicit, for template arguments
    for (std::size_t i = 0; i < N; ++i)
      text[i] = name[i];
  }
};

// The lowering rule of an op: writes it from its inputs and returns its outputs (with the
// shapes and dtypes the op table inferred, `outputs`). Throws InvalidArgument for attributes or
// dtypes it cannot lower, naming the op.
using LowerFn = std::vector<StablehloValue> (*)(StablehloEmitter& emitter,
                                                std::span<const StablehloValue> inputs,
                                                std::span<const TensorMeta> outputs,
                                                const Attrs& attrs);

}  // namespace tandem
