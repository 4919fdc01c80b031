#pragma once
// The op harness's one list of cases: per op of the table one or more named cases, each with an
// input maker (random shapes and values), the function that runs it and the facts the modes
// need (tests/ops/harness/op_harness.h). A new op adds its cases to op_cases.cpp and is covered
// by every mode; OpHarness.EveryOpHasACase fails while an op has none.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::harness {

// How big a case's inputs are: small for finite differences (a few elements per axis), medium
// for comparing backends (odd extents; element-wise tensors past the 16k elements from which the
// CPU hands them to oneDNN), large for timing (shapes of a training step).
enum class Size { small, medium, large };
const char* size_name(Size size);
Size parse_size(const std::string& text);

// What an input maker is given: the dtype of the floating inputs to make (f64 for the grad mode,
// f32 otherwise; the backends mode rounds them to bf16/f16 itself), the size, and random draws
// from the harness's seeded engine.
class InputMaker {
 public:
  InputMaker(DType dtype, Size size) : dtype_(dtype), size_(size) {}
  DType dtype() const { return dtype_; }
  Size size() const { return size_; }

  // An extent drawn in [low, high] at the small size, in [medium, medium * 5/4] at the medium
  // size, and exactly `large` at the large size.
  std::int64_t extent(std::int64_t low, std::int64_t high, std::int64_t medium, std::int64_t large);
  // An integer in [low, high] at every size (strides, labels, indices).
  std::int64_t draw(std::int64_t low, std::int64_t high);
  // Values uniform in [low, high] with magnitude at least `min_magnitude`.
  Tensor uniform(const Shape& shape, double low = -2, double high = 2, double min_magnitude = 0.05);
  // Whole numbers in [low, high] (exact in every floating dtype; comparisons see ties).
  Tensor integers(const Shape& shape, int low, int high);
  // Values pairwise distinct within each slice along `axes` (the rest fixed): a shuffled,
  // evenly spaced grid in [-2, 2] whose values bf16 and f16 hold exactly while a slice has at
  // most 512 elements. Max, argmax and max pooling then have one winner, in every dtype and for
  // a finite-difference step.
  Tensor distinct(const Shape& shape, const std::vector<std::int64_t>& axes);
  // `count` indices in [0, rows) of `dtype` (i32 or i64).
  Tensor indices(std::int64_t count, std::int64_t rows, DType dtype);

 private:
  DType dtype_;
  Size size_;
};

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using Run = std::function<Outputs(const Inputs&)>;

// One draw of a case: its inputs and the function that runs the op on them (with the
// attributes drawn with them, e.g. strides, bound in).
struct Instance {
  Inputs inputs;
  Run run;
};

struct OpCase {
  OpKind op{};
  std::string name;  // what this case covers of the op, e.g. "transpose_b"
  std::function<Inputs(InputMaker&)> inputs;
  // Runs the case (the op, and around it what makes its inputs or outputs usable) on the
  // inputs' device, any number of times. Every mode differentiates, where it does, weighted sums
  // of all floating outputs (finite_difference.h: weighted_sum).
  Run run;
  // In place of `inputs` and `run`, for cases that draw attributes with the shapes.
  std::function<Instance(InputMaker&)> instance;

  // grad mode, for ops with a gradient rule:
  bool grad = true;                  // checked against finite differences in float64
  std::vector<bool> differentiable;  // per input; empty: every floating input
  double grad_step = 1e-6;
  double grad_tolerance = 1e-6;  // on |analytic - numeric| / max(1, |numeric|)

  // backends mode:
  bool compare_gradients = true;  // the tape's gradients of the floating inputs too
  std::vector<DType> dtypes{DType::f32, DType::bf16, DType::f16};
  bool uses_tf32 = false;  // matmul/convolution: checked with TF32 on as well where it applies

  Instance make(InputMaker& maker) const;  // draws inputs (and attributes)
  std::string label() const;               // "matmul/transpose_b"
};

// Every case of every op, in the op table's order.
const std::vector<OpCase>& op_cases();

}  // namespace tandem::harness
