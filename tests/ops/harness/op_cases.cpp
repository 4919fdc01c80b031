// The op harness's cases, one block per op family in the op table's order. Shapes come from
// InputMaker::extent (small for finite differences, medium for the backends, large for timing);
// values are drawn away from the ops' kinks and, where an op picks a winner (max, argmax, max
// pooling), distinct along the axes it picks over, so every dtype agrees on the winner.
#include "ops/harness/op_cases.h"

#include <algorithm>
#include <numeric>

#include "ops/fused.h"
#include "ops/harness/finite_difference.h"
#include "ops/op_attrs.h"

namespace tandem::harness {

const char* size_name(Size size) {
  switch (size) {
    case Size::small:
      return "small";
    case Size::medium:
      return "medium";
    case Size::large:
      return "large";
  }
  return "?";
}

Size parse_size(const std::string& text) {
  for (Size size : {Size::small, Size::medium, Size::large}) {
    if (text == size_name(size)) return size;
  }
  throw InvalidArgument("unknown size '" + text + "' (small, medium or large)");
}

std::int64_t InputMaker::extent(std::int64_t low, std::int64_t high, std::int64_t medium,
                                std::int64_t large) {
  switch (size_) {
    case Size::small:
      return testing::random_extent(low, high);
    case Size::medium:
      return testing::random_extent(medium, medium + medium / 4);
    case Size::large:
      return large;
  }
  return low;
}

std::int64_t InputMaker::draw(std::int64_t low, std::int64_t high) {
  return testing::random_extent(low, high);
}

Tensor InputMaker::uniform(const Shape& shape, double low, double high, double min_magnitude) {
  return testing::random_tensor(shape, low, high, min_magnitude, dtype_);
}

Tensor InputMaker::integers(const Shape& shape, int low, int high) {
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (double& value : values)
    value = static_cast<double>(draw(low, high));
  return cast(Tensor::from_vector(values, shape), dtype_);
}

Tensor InputMaker::distinct(const Shape& shape, const std::vector<std::int64_t>& axes) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  std::vector<bool> along(shape.size(), false);
  for (std::int64_t axis : axes)
    along[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)] = true;
  std::int64_t slice_size = 1;
  for (std::size_t a = 0; a < shape.size(); ++a)
    if (along[a]) slice_size *= shape[a];
  // A power-of-two spacing keeps the grid exact in bf16 (8 significant bits) up to 512 values.
  double spacing = 1.0;
  while (static_cast<double>(slice_size) * spacing > 4.0)
    spacing /= 2;
  const std::int64_t numel = shape_numel(shape);
  std::vector<std::int64_t> slice_of(static_cast<std::size_t>(numel));
  std::vector<std::int64_t> position(static_cast<std::size_t>(numel));
  for (std::int64_t i = 0; i < numel; ++i) {
    std::int64_t rest = i, slice = 0, pos = 0, slice_stride = 1, pos_stride = 1;
    for (std::int64_t a = rank - 1; a >= 0; --a) {
      const std::int64_t index = rest % shape[static_cast<std::size_t>(a)];
      rest /= shape[static_cast<std::size_t>(a)];
      if (along[static_cast<std::size_t>(a)]) {
        pos += index * pos_stride;
        pos_stride *= shape[static_cast<std::size_t>(a)];
      } else {
        slice += index * slice_stride;
        slice_stride *= shape[static_cast<std::size_t>(a)];
      }
    }
    slice_of[static_cast<std::size_t>(i)] = slice;
    position[static_cast<std::size_t>(i)] = pos;
  }
  const std::int64_t slices = slice_size == 0 ? 0 : numel / slice_size;
  std::vector<std::vector<std::int64_t>> permutations(static_cast<std::size_t>(slices));
  for (auto& permutation : permutations) {
    permutation.resize(static_cast<std::size_t>(slice_size));
    std::iota(permutation.begin(), permutation.end(), std::int64_t{0});
    std::shuffle(permutation.begin(), permutation.end(), testing::test_rng());
  }
  std::vector<double> values(static_cast<std::size_t>(numel));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t rank_in_slice =
        permutations[static_cast<std::size_t>(slice_of[i])][static_cast<std::size_t>(position[i])];
    values[i] = static_cast<double>(rank_in_slice - slice_size / 2) * spacing;
  }
  return cast(Tensor::from_vector(values, shape), dtype_);
}

Tensor InputMaker::indices(std::int64_t count, std::int64_t rows, DType dtype) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(count));
  for (std::int64_t& value : values)
    value = draw(0, rows - 1);
  return cast(Tensor::from_vector(values, {count}), dtype);
}

Instance OpCase::make(InputMaker& maker) const {
  if (instance) return instance(maker);
  return {inputs(maker), run};
}

std::string OpCase::label() const {
  return std::string(op_name(op)) + "/" + name;
}

namespace {

using K = OpKind;

// Output extent of a convolution or pooling window along one axis.
std::int64_t window_extent(std::int64_t input, std::int64_t window, std::int64_t stride,
                           std::int64_t dilation, Padding padding) {
  if (padding == Padding::same) return (input + stride - 1) / stride;
  return (input - (window - 1) * dilation - 1) / stride + 1;
}

Shape elementwise_shape(InputMaker& in) {
  return {in.extent(1, 4, 3, 16), in.extent(1, 4, 65, 256), in.extent(1, 4, 97, 256)};
}

Shape pair_shape(InputMaker& in) {
  return {in.extent(1, 4, 41, 512), in.extent(1, 4, 401, 2048)};
}

Shape reduction_shape(InputMaker& in) {
  return {in.extent(1, 4, 6, 64), in.extent(1, 4, 130, 128), in.extent(1, 4, 70, 128)};
}

Shape image_shape(InputMaker& in, std::int64_t small_low, std::int64_t small_high) {
  return {in.extent(1, 2, 2, 16), in.extent(small_low, small_high, 11, 56),
          in.extent(small_low, small_high, 10, 56), in.extent(1, 3, 5, 64)};
}

class CaseList {
 public:
  void add(OpCase c) { cases_.push_back(std::move(c)); }

  void unary(K op, Tensor (*fn)(const Tensor&), double low = -2, double high = 2) {
    add({.op = op,
         .name = "3d",
         .inputs =
             [low, high](InputMaker& in) {
               return Inputs{in.uniform(elementwise_shape(in), low, high)};
             },
         .run = [fn](const Inputs& x) { return Outputs{fn(x[0])}; }});
  }

  // b broadcast along a's rows (b: last axis) and along its last axis (b: (rows, 1)); values
  // of a in [low, high], of b in [b_low, b_high].
  template <typename Fn>
  void binary(K op, Fn fn, double low = -2, double high = 2, double b_low = -2, double b_high = 2) {
    for (bool rows : {false, true}) {
      add({.op = op,
           .name = rows ? "broadcast_rows" : "broadcast_last_axis",
           .inputs =
               [=](InputMaker& in) {
                 const Shape shape = elementwise_shape(in);
                 const Shape b_shape = rows ? Shape{shape[1], 1} : Shape{shape[2]};
                 return Inputs{in.uniform(shape, low, high), in.uniform(b_shape, b_low, b_high)};
               },
           .run = [fn](const Inputs& x) { return Outputs{fn(x[0], x[1])}; }});
    }
  }

  // Whole numbers from a few values, so equal and greater_equal see ties in every dtype.
  template <typename Fn>
  void comparison(K op, Fn fn) {
    add({.op = op,
         .name = "ties",
         .inputs =
             [](InputMaker& in) {
               const Shape shape{in.extent(1, 5, 5, 1024), in.extent(1, 7, 7, 1024)};
               return Inputs{in.integers(shape, -3, 3), in.integers({shape[1]}, -3, 3)};
             },
         .run = [fn](const Inputs& x) { return Outputs{fn(x[0], x[1])}; },
         .compare_gradients = false});
  }

  std::vector<OpCase> release() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
};

void elementwise_cases(CaseList& list) {
  list.unary(K::neg, neg);
  list.unary(K::abs, abs);
  list.add({.op = K::sign,
            .name = "times_x",  // sign's gradient is zero; times x, the check sees sign itself
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
            .run = [](const Inputs& x) { return Outputs{sign(x[0]) * x[0]}; }});
  list.unary(K::exp, exp);
  list.unary(K::log, log, 0.2, 3);
  list.unary(K::sqrt, sqrt, 0.2, 3);
  list.unary(K::rsqrt, rsqrt, 0.2, 3);
  list.unary(K::square, square);
  list.unary(K::relu, relu);
  for (bool approximate : {false, true}) {
    list.add({.op = K::gelu,
              .name = approximate ? "tanh" : "exact",
              .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
              .run = [approximate](const Inputs& x) { return Outputs{gelu(x[0], approximate)}; }});
  }
  list.unary(K::sigmoid, sigmoid);
  list.unary(K::tanh, tanh);

  list.add({.op = K::relu_backward,
            .name = "2d",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = pair_shape(in);
                  return Inputs{in.uniform(shape), in.uniform(shape)};
                },
            .run = [](const Inputs& x) { return Outputs{relu_backward(x[0], x[1])}; },
            .differentiable = {true, false}});
  for (bool approximate : {false, true}) {
    list.add(
        {.op = K::gelu_backward,
         .name = approximate ? "tanh" : "exact",
         .inputs =
             [](InputMaker& in) {
               const Shape shape = pair_shape(in);
               return Inputs{in.uniform(shape), in.uniform(shape)};
             },
         .run = [approximate](
                    const Inputs& x) { return Outputs{gelu_backward(x[0], x[1], approximate)}; },
         .compare_gradients = false});
  }
  list.add({.op = K::sigmoid_backward,
            .name = "2d",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = pair_shape(in);
                  return Inputs{in.uniform(shape), in.uniform(shape, 0.1, 0.9)};
                },
            .run = [](const Inputs& x) { return Outputs{sigmoid_backward(x[0], x[1])}; }});
  list.add({.op = K::tanh_backward,
            .name = "2d",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = pair_shape(in);
                  return Inputs{in.uniform(shape), in.uniform(shape, -0.9, 0.9)};
                },
            .run = [](const Inputs& x) { return Outputs{tanh_backward(x[0], x[1])}; }});

  list.binary(K::add, [](auto& a, auto& b) { return add(a, b); });
  list.binary(K::sub, [](auto& a, auto& b) { return sub(a, b); });
  list.binary(K::mul, [](auto& a, auto& b) { return mul(a, b); });
  // The divisor in [1, 2]: its broadcast gradient sums -dy a / b^2 over rows, and divisors near
  // 0.3 make that sum a cancellation that bf16 keeps only to a few percent (measured).
  list.binary(
      K::div, [](auto& a, auto& b) { return div(a, b); }, 0.3, 2, 1, 2);
  list.binary(K::maximum, [](auto& a, auto& b) { return maximum(a, b); });
  list.binary(K::minimum, [](auto& a, auto& b) { return minimum(a, b); });
  list.binary(
      K::pow, [](auto& a, auto& b) { return pow(a, b); }, 0.3, 2, 0.3, 2);
  list.comparison(K::equal, [](auto& a, auto& b) { return equal(a, b); });
  list.comparison(K::greater, [](auto& a, auto& b) { return greater(a, b); });
  list.comparison(K::greater_equal, [](auto& a, auto& b) { return greater_equal(a, b); });
  list.comparison(K::less, [](auto& a, auto& b) { return less(a, b); });
  list.add(
      {.op = K::select,
       .name = "max_of_pair",
       .inputs =
           [](InputMaker& in) {
             const Shape shape{in.extent(1, 4, 5, 1024), in.extent(1, 4, 8, 1024)};
             return Inputs{in.uniform(shape), in.uniform({shape[1]})};
           },
       .run = [](const Inputs& x) { return Outputs{where(greater(x[0], x[1]), x[0], x[1])}; }});
  list.add(
      {.op = K::select,
       .name = "three_shapes",
       .inputs =
           [](InputMaker& in) {
             const std::int64_t rows = in.extent(1, 4, 5, 1024);
             const std::int64_t columns = in.extent(1, 4, 8, 1024);
             return Inputs{in.uniform({rows, columns}), in.uniform({columns}),
                           in.uniform({rows, 1})};
           },
       .run = [](const Inputs& x) { return Outputs{where(greater(x[0], x[2]), x[0], x[1])}; }});
}

void reduction_cases(CaseList& list) {
  struct Reduce {
    K op;
    const char* name;
    Tensor (*fn)(const Tensor&, const std::vector<std::int64_t>&, bool);
    std::vector<std::int64_t> axes;
    bool keepdims;
  };
  for (const Reduce& r :
       {Reduce{K::sum, "all", sum, {}, false}, Reduce{K::sum, "axes_0_2", sum, {0, 2}, false},
        Reduce{K::sum, "axis_1_keepdims", sum, {1}, true},
        Reduce{K::sum, "last_axis", sum, {-1}, false},
        Reduce{K::mean, "axis_1_keepdims", mean, {1}, true},
        Reduce{K::mean, "axis_0", mean, {0}, false},
        Reduce{K::mean, "axes_1_2", mean, {1, 2}, false}, Reduce{K::mean, "all", mean, {}, false},
        Reduce{K::max, "last_axis", reduce_max, {-1}, false},
        Reduce{K::max, "axes_0_1", reduce_max, {0, 1}, false}}) {
    const bool picks = r.op == K::max;
    list.add({.op = r.op,
              .name = r.name,
              .inputs =
                  [picks, axes = r.axes](InputMaker& in) {
                    const Shape shape = reduction_shape(in);
                    return Inputs{picks ? in.distinct(shape, axes) : in.uniform(shape)};
                  },
              .run = [r](const Inputs& x) { return Outputs{r.fn(x[0], r.axes, r.keepdims)}; }});
  }
  for (std::int64_t axis : {-1, 1}) {
    list.add(
        {.op = K::argmax,
         .name = axis == -1 ? "last_axis" : "axis_1",
         .inputs =
             [axis](InputMaker& in) { return Inputs{in.distinct(reduction_shape(in), {axis})}; },
         .run = [axis](const Inputs& x) { return Outputs{argmax(x[0], axis)}; },
         .compare_gradients = false});
  }
  list.add({.op = K::broadcast_to,
            .name = "new_leading_axis",
            .inputs =
                [](InputMaker& in) {
                  return Inputs{in.uniform({in.extent(1, 4, 40, 1024), 1})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{broadcast_to(x[0], {3, x[0].dim(0), 5})};
                }});
  list.add({.op = K::broadcast_to,
            .name = "middle_axis",
            .inputs =
                [](InputMaker& in) {
                  return Inputs{in.uniform({3, 1, in.extent(1, 4, 4, 256)})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{broadcast_to(x[0], {2, 3, 5, x[0].dim(2)})};
                }});
}

void gather_cases(CaseList& list) {
  list.add({.op = K::gather,
            .name = "i64_repeated",
            .inputs =
                [](InputMaker& in) {
                  const std::int64_t rows = in.extent(2, 5, 10, 32768);
                  const std::int64_t count = in.extent(1, 6, 8, 8192);
                  Tensor ids = in.indices(count, rows, DType::i64);
                  // a repeated index: its rows' gradients add up
                  ids = concat({ids, slice(ids, {0}, {1})}, 0);
                  return Inputs{in.uniform({rows, in.extent(1, 3, 6, 256), 2}),
                                reshape(ids, {1, count + 1})};
                },
            .run = [](const Inputs& x) { return Outputs{gather(x[0], x[1])}; }});
  list.add({.op = K::gather,
            .name = "i32_2d",
            .inputs =
                [](InputMaker& in) {
                  const std::int64_t rows = in.extent(2, 5, 10, 32768);
                  const std::int64_t count = in.extent(4, 4, 4, 4096);
                  return Inputs{in.uniform({rows, in.extent(1, 3, 6, 512)}),
                                reshape(in.indices(2 * count, rows, DType::i32), {2, count})};
                },
            .run = [](const Inputs& x) { return Outputs{gather(x[0], x[1])}; }});
  list.add(
      {.op = K::scatter_add, .name = "i32", .instance = [](InputMaker& in) {
         const std::int64_t count = in.extent(1, 6, 8, 8192);
         const std::int64_t rows = in.extent(2, 5, 10, 32768);
         return Instance{
             {in.uniform({count, in.extent(1, 4, 5, 256)}), in.indices(count, rows, DType::i32)},
             [rows](const Inputs& x) { return Outputs{scatter_add(x[0], x[1], rows)}; }};
       }});
}

void matmul_cases(CaseList& list) {
  struct Extents {
    std::int64_t batch, m, k, n;
  };
  auto extents = [](InputMaker& in) {
    return Extents{in.extent(2, 3, 3, 4), in.extent(1, 4, 37, 512), in.extent(1, 5, 64, 512),
                   in.extent(1, 4, 45, 512)};
  };
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      list.add(
          {.op = K::matmul,
           .name = std::string("bias") + (transpose_a ? "_ta" : "") + (transpose_b ? "_tb" : ""),
           .inputs =
               [=](InputMaker& in) {
                 const auto [batch, m, k, n] = extents(in);
                 return Inputs{in.uniform(transpose_a ? Shape{k, m} : Shape{m, k}),
                               in.uniform(transpose_b ? Shape{n, k} : Shape{k, n}),
                               in.uniform({n})};
               },
           .run =
               [=](const Inputs& x) {
                 return Outputs{matmul(x[0], x[1], x[2], transpose_a, transpose_b)};
               },
           .uses_tf32 = true});
    }
  }
  list.add({.op = K::matmul,
            .name = "bias_fused_relu",
            .inputs =
                [=](InputMaker& in) {
                  const auto [batch, m, k, n] = extents(in);
                  return Inputs{in.uniform({m, k}), in.uniform({k, n}), in.uniform({n})};
                },
            .run =
                [](const Inputs& x) {
                  return call_op(K::matmul, x, make_op_attrs<K::matmul>({false, false, true}));
                },
            .uses_tf32 = true});
  list.add({.op = K::matmul,
            .name = "batched",
            .inputs =
                [=](InputMaker& in) {
                  const auto [batch, m, k, n] = extents(in);
                  return Inputs{in.uniform({batch, m, k}), in.uniform({batch, k, n})};
                },
            .run = [](const Inputs& x) { return Outputs{matmul(x[0], x[1])}; },
            .uses_tf32 = true});
  list.add({.op = K::matmul,
            .name = "batched_2d_b_bias",
            .inputs =
                [=](InputMaker& in) {
                  const auto [batch, m, k, n] = extents(in);
                  return Inputs{in.uniform({batch, m, k}), in.uniform({k, n}), in.uniform({n})};
                },
            .run = [](const Inputs& x) { return Outputs{matmul(x[0], x[1], x[2])}; },
            .uses_tf32 = true});
  // A residual added to the result (the fusion pass's fused_add), as for conv2d.
  list.add(
      {.op = K::matmul,
       .name = "bias_fused_add",
       .inputs =
           [=](InputMaker& in) {
             const auto [batch, m, k, n] = extents(in);
             return Inputs{in.uniform({batch, m, k}), in.uniform({k, n}), in.uniform({n}),
                           in.uniform({batch, m, n})};
           },
       .run =
           [](const Inputs& x) {
             return call_op(K::matmul, x, make_op_attrs<K::matmul>({false, false, false, true}));
           },
       .uses_tf32 = true});
  list.add({.op = K::matmul,
            .name = "batched_tb",
            .inputs =
                [=](InputMaker& in) {
                  const auto [batch, m, k, n] = extents(in);
                  return Inputs{in.uniform({batch, m, k}), in.uniform({batch, n, k})};
                },
            .run = [](const Inputs& x) { return Outputs{matmul(x[0], x[1], false, true)}; },
            .uses_tf32 = true});
  list.add({.op = K::matmul,
            .name = "batched_ta_2d_b",
            .inputs =
                [=](InputMaker& in) {
                  const auto [batch, m, k, n] = extents(in);
                  return Inputs{in.uniform({batch, k, m}), in.uniform({k, n})};
                },
            .run = [](const Inputs& x) { return Outputs{matmul(x[0], x[1], true, false)}; },
            .uses_tf32 = true});
}

// A convolution's geometry: the input, filter and output shapes for its options.
struct ConvGeometry {
  Shape input, filter, output;
  Conv2DOptions options;
};

ConvGeometry conv_geometry(InputMaker& in, Conv2DOptions options) {
  const std::int64_t c_in = in.extent(1, 3, 8, 64), c_out = in.extent(1, 3, 16, 64);
  const Shape input{in.extent(1, 2, 2, 16), in.extent(5, 7, 15, 28), in.extent(5, 7, 14, 28), c_in};
  const Shape filter{in.extent(1, 3, 3, 3), in.extent(1, 3, 3, 3), c_in, c_out};
  const Shape output{
      input[0],
      window_extent(input[1], filter[0], options.strides[0], options.dilations[0], options.padding),
      window_extent(input[2], filter[1], options.strides[1], options.dilations[1], options.padding),
      c_out};
  return {input, filter, output, options};
}

// conv2d with a bias and a residual added to the result (the fusion pass's fused_add) on `g`.
Instance bias_fused_add_instance(InputMaker& in, const ConvGeometry& g) {
  return Instance{
      {in.uniform(g.input), in.uniform(g.filter), in.uniform({g.filter[3]}), in.uniform(g.output)},
      [options = g.options](const Inputs& x) {
        return call_op(K::conv2d, x, make_op_attrs<K::conv2d>({options, false, true}));
      }};
}

// conv2d's two backward ops on the geometry `make` draws: `input_name` for the input gradient,
// `filter_name` for the filter's (with the bias's).
template <typename MakeGeometry>
void conv_backward_cases(CaseList& list, const char* input_name, const char* filter_name,
                         MakeGeometry make) {
  list.add({.op = K::conv2d_backward_input,
            .name = input_name,
            .instance =
                [make](InputMaker& in) {
                  const ConvGeometry g = make(in);
                  return Instance{
                      {in.uniform(g.output), in.uniform(g.filter)}, [g](const Inputs& x) {
                        return Outputs{conv2d_backward_input(x[0], x[1], g.input, g.options)};
                      }};
                },
            .compare_gradients = false,
            .uses_tf32 = true});
  list.add({.op = K::conv2d_backward_filter,
            .name = filter_name,
            .instance =
                [make](InputMaker& in) {
                  const ConvGeometry g = make(in);
                  return Instance{
                      {in.uniform(g.input), in.uniform(g.output)}, [g](const Inputs& x) {
                        return conv2d_backward_filter(x[0], x[1], g.filter, true, g.options);
                      }};
                },
            .compare_gradients = false,
            .uses_tf32 = true});
}

void conv_cases(CaseList& list) {
  struct Variant {
    const char* name;
    Padding padding;
    bool random_strides;  // strides 1-2, dilation 1-2 along the height where the stride is 1
    std::array<std::int64_t, 2> strides, dilations;
    bool bias;
  };
  for (const Variant& v :
       {Variant{"valid", Padding::valid, true, {1, 1}, {1, 1}, true},
        Variant{"same", Padding::same, true, {1, 1}, {1, 1}, true},
        Variant{"same_stride2", Padding::same, false, {2, 2}, {1, 1}, true},
        Variant{"dilated_no_bias", Padding::valid, false, {1, 1}, {2, 1}, false}}) {
    list.add({.op = K::conv2d,
              .name = v.name,
              .instance =
                  [v](InputMaker& in) {
                    Conv2DOptions options{v.strides, v.padding, v.dilations};
                    if (v.random_strides) {
                      options.strides = {in.draw(1, 2), in.draw(1, 2)};
                      options.dilations = {options.strides[0] == 1 ? in.draw(1, 2) : 1, 1};
                    }
                    const ConvGeometry g = conv_geometry(in, options);
                    Inputs inputs{in.uniform(g.input), in.uniform(g.filter)};
                    if (v.bias) inputs.push_back(in.uniform({g.filter[3]}));
                    return Instance{std::move(inputs), [options](const Inputs& x) {
                                      return Outputs{x.size() == 3
                                                         ? conv2d(x[0], x[1], x[2], options)
                                                         : conv2d(x[0], x[1], options)};
                                    }};
                  },
              .uses_tf32 = true});
  }
  // relu fused into the convolution (a compiled step's fusion pass forms it on the CPU): its
  // kernel's post-op, and its gradient rule, which masks dy with the output.
  list.add({.op = K::conv2d,
            .name = "bias_fused_relu",
            .instance =
                [](InputMaker& in) {
                  const Conv2DOptions options{{1, 1}, Padding::same, {1, 1}};
                  const ConvGeometry g = conv_geometry(in, options);
                  return Instance{
                      {in.uniform(g.input), in.uniform(g.filter), in.uniform({g.filter[3]})},
                      [options](const Inputs& x) {
                        return call_op(K::conv2d, x, make_op_attrs<K::conv2d>({options, true}));
                      }};
                },
            .uses_tf32 = true});
  // A residual added to the result (the fusion pass's fused_add): a oneDNN binary post-op in
  // f32, added after the product elsewhere; its gradient is dy. (With a relu after it too, the
  // residual's gradient is masked cell by cell, and a bf16 mask flips where the sum is near 0:
  // that combination is checked bit for bit against the eager ops in compile_test instead.)
  list.add({.op = K::conv2d,
            .name = "bias_fused_add",
            .instance =
                [](InputMaker& in) {
                  const Conv2DOptions options{{1, 1}, Padding::same, {1, 1}};
                  return bias_fused_add_instance(in, conv_geometry(in, options));
                },
            .uses_tf32 = true});
  const Conv2DOptions same_stride2{{2, 2}, Padding::same, {1, 1}};
  conv_backward_cases(list, "same_stride2", "same_stride2_with_bias",
                      [same_stride2](InputMaker& in) { return conv_geometry(in, same_stride2); });
  // 1x1 filters with stride 1 and no padding (most of ResNet-50's): their own lowering, a
  // product of rows with the filter, forward and both backward ops.
  const auto pointwise = [](InputMaker& in) {
    ConvGeometry g = conv_geometry(in, {});
    g.filter[0] = g.filter[1] = 1;
    g.output = {g.input[0], g.input[1], g.input[2], g.filter[3]};
    return g;
  };
  list.add({.op = K::conv2d,
            .name = "pointwise",
            .instance =
                [pointwise](InputMaker& in) {
                  const ConvGeometry g = pointwise(in);
                  return Instance{
                      {in.uniform(g.input), in.uniform(g.filter), in.uniform({g.filter[3]})},
                      [](const Inputs& x) { return Outputs{conv2d(x[0], x[1], x[2])}; }};
                },
            .uses_tf32 = true});
  conv_backward_cases(list, "pointwise", "pointwise_with_bias", pointwise);
  // A strided 1x1 filter (a bottleneck's downsampling shortcut) with its block's residual fused,
  // on odd sizes such as 7x7 to 4x4: oneDNN's generic kernel, or its 1x1 kernel on the packed
  // positions the filter reads. (No relu after the residual: see bias_fused_add.)
  list.add({.op = K::conv2d,
            .name = "pointwise_stride2_fused_add",
            .instance =
                [](InputMaker& in) {
                  const Conv2DOptions options{{2, 2}, Padding::same, {1, 1}};
                  ConvGeometry g = conv_geometry(in, options);
                  g.filter[0] = g.filter[1] = 1;
                  g.input[1] |= 1;  // odd: the last position read is the last one there is
                  g.input[2] |= 1;
                  g.output = {g.input[0], (g.input[1] + 1) / 2, (g.input[2] + 1) / 2, g.filter[3]};
                  return bias_fused_add_instance(in, g);
                },
            .uses_tf32 = true});
}

void pool_cases(CaseList& list) {
  struct Variant {
    const char* name;
    Padding padding;
    bool random;  // window and strides drawn: 2 x 2-3, strides 2 x 1-2 (transposed for avg)
  };
  for (K op : {K::max_pool2d, K::avg_pool2d}) {
    const bool is_max = op == K::max_pool2d;
    for (const Variant& v :
         {Variant{"valid", Padding::valid, true}, Variant{"same", Padding::same, true},
          Variant{"3x3_stride2_same", Padding::same, false}}) {
      list.add({.op = op, .name = v.name, .instance = [v, is_max](InputMaker& in) {
                  Pool2DOptions options{{3, 3}, {2, 2}, v.padding};
                  if (v.random) {
                    options.window = {2, in.draw(2, 3)};
                    options.strides = {2, in.draw(1, 2)};
                    if (!is_max) {
                      std::swap(options.window[0], options.window[1]);
                      std::swap(options.strides[0], options.strides[1]);
                    }
                  }
                  const Shape shape = image_shape(in, 4, 6);
                  return Instance{{is_max ? in.distinct(shape, {1, 2}) : in.uniform(shape)},
                                  [options, is_max](const Inputs& x) {
                                    return Outputs{is_max ? max_pool2d(x[0], options)
                                                          : avg_pool2d(x[0], options)};
                                  }};
                }});
    }
  }
  const Pool2DOptions pool{{3, 3}, {2, 2}, Padding::same};
  auto pooled_shape = [](const Shape& x) {
    return Shape{x[0], window_extent(x[1], 3, 2, 1, Padding::same),
                 window_extent(x[2], 3, 2, 1, Padding::same), x[3]};
  };
  list.add(
      {.op = K::max_pool2d_backward,
       .name = "3x3_stride2_same",
       .inputs =
           [pooled_shape](InputMaker& in) {
             const Shape shape = image_shape(in, 4, 6);
             return Inputs{in.uniform(pooled_shape(shape)), in.distinct(shape, {1, 2})};
           },
       .run = [pool](const Inputs& x) { return Outputs{max_pool2d_backward(x[0], x[1], pool)}; },
       .compare_gradients = false});
  // relu's backward pass fused into max pooling's (a compiled step's fusion pass forms it on
  // the CPU): windows whose maximum is not positive pass nothing.
  const Pool2DOptions pool2x2{{2, 2}, {2, 2}, Padding::valid};
  list.add({.op = K::max_pool2d_backward,
            .name = "2x2_relu_masked",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = image_shape(in, 4, 7);
                  const Shape pooled{shape[0], window_extent(shape[1], 2, 2, 1, Padding::valid),
                                     window_extent(shape[2], 2, 2, 1, Padding::valid), shape[3]};
                  return Inputs{in.uniform(pooled), in.distinct(shape, {1, 2})};
                },
            .run =
                [pool2x2](const Inputs& x) {
                  return Outputs{call_op(K::max_pool2d_backward, x,
                                         make_op_attrs<K::max_pool2d_backward>({pool2x2, true}))};
                },
            .compare_gradients = false});
  list.add({.op = K::avg_pool2d_backward,
            .name = "3x3_stride2_same",
            .instance =
                [pooled_shape, pool](InputMaker& in) {
                  const Shape shape = image_shape(in, 4, 6);
                  return Instance{{in.uniform(pooled_shape(shape))},
                                  [shape, pool](const Inputs& x) {
                                    return Outputs{avg_pool2d_backward(x[0], shape, pool)};
                                  }};
                },
            .compare_gradients = false});
  list.add({.op = K::global_avg_pool2d,
            .name = "nhwc",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(image_shape(in, 1, 4))}; },
            .run = [](const Inputs& x) { return Outputs{global_avg_pool2d(x[0])}; }});
}

Shape activation_shape(InputMaker& in) {
  return {in.extent(2, 3, 4, 32), in.extent(1, 3, 7, 28), in.extent(1, 3, 6, 28),
          in.extent(1, 4, 24, 64)};
}

void norm_cases(CaseList& list) {
  auto training_inputs = [](InputMaker& in) {
    const Shape shape = activation_shape(in);
    return Inputs{in.uniform(shape, -1, 3), in.uniform({shape[3]}), in.uniform({shape[3]})};
  };
  list.add({.op = K::batch_norm,
            .name = "training",
            .inputs = training_inputs,
            .run =
                [](const Inputs& x) {
                  const BatchNormTrainingResult r = batch_norm_training(x[0], x[1], x[2], 1e-3);
                  return Outputs{r.y, r.mean, r.variance};
                },
            .grad_tolerance = 1e-5});
  list.add({.op = K::batch_norm,
            .name = "inference",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = activation_shape(in);
                  const Shape channels{shape[3]};
                  return Inputs{in.uniform(shape), in.uniform(channels), in.uniform(channels),
                                in.uniform(channels), in.uniform(channels, 0.5, 2)};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{batch_norm_inference(x[0], x[1], x[2], x[3], x[4], 1e-3)};
                },
            .differentiable = {true, true, true, false, false}});
  list.add({.op = K::batch_norm,
            .name = "training_statistics_for_inference",
            .inputs = training_inputs,
            .run =
                [](const Inputs& x) {
                  const BatchNormTrainingResult r = batch_norm_training(x[0], x[1], x[2], 1e-3);
                  return Outputs{
                      batch_norm_inference(x[0], x[1], x[2], r.mean, r.variance + 0.5, 1e-3)};
                },
            .grad_tolerance = 1e-5});
  for (bool training : {true, false}) {
    list.add({.op = K::batch_norm_backward,
              .name = training ? "training" : "inference",
              .inputs =
                  [](InputMaker& in) {
                    const Shape shape = activation_shape(in);
                    const Shape channels{shape[3]};
                    return Inputs{in.uniform(shape), in.uniform(shape, -1, 3), in.uniform(channels),
                                  in.uniform(channels), in.uniform(channels, 0.5, 2)};
                  },
              .run =
                  [training](const Inputs& x) {
                    return batch_norm_backward(x[0], x[1], x[2], x[3], x[4], 1e-3, training);
                  },
              .compare_gradients = false});
  }

  auto sequence = [](InputMaker& in) {
    const std::int64_t features = in.extent(2, 6, 48, 768);
    return Inputs{in.uniform({in.extent(1, 3, 3, 32), in.extent(1, 3, 5, 128), features}),
                  in.uniform({features}), in.uniform({features})};
  };
  list.add({.op = K::layer_norm,
            .name = "y",
            .inputs = sequence,
            .run = [](const Inputs& x) { return Outputs{layer_norm(x[0], x[1], x[2], 1e-3).y}; },
            .grad_tolerance = 1e-5});
  // The statistics as outputs too: their gradients flow back to x.
  list.add({.op = K::layer_norm,
            .name = "with_statistics",
            .inputs = sequence,
            .run =
                [](const Inputs& x) {
                  const LayerNormResult r = layer_norm(x[0], x[1], x[2], 1e-5);
                  return Outputs{r.y, r.mean, r.rstd};
                },
            .grad_tolerance = 1e-5});
  list.add({.op = K::layer_norm_backward,
            .name = "3d",
            .inputs =
                [sequence](InputMaker& in) {
                  Inputs x = sequence(in);
                  return Inputs{in.uniform(x[0].shape()), x[0], x[1]};
                },
            .run =
                [](const Inputs& x) {
                  const LayerNormResult forward = layer_norm(x[1], x[2], x[2], 1e-5);
                  return layer_norm_backward(x[0], x[1], x[2], forward.mean, forward.rstd);
                },
            .compare_gradients = false});
}

void softmax_cases(CaseList& list) {
  auto scores_shape = [](InputMaker& in) {
    return Shape{in.extent(2, 4, 4, 32), in.extent(2, 4, 6, 64), in.extent(2, 5, 37, 512)};
  };
  for (std::int64_t axis : {-1, 1}) {
    const char* name = axis == -1 ? "last_axis" : "axis_1";
    for (K op : {K::softmax, K::log_softmax}) {
      const bool log = op == K::log_softmax;
      list.add({.op = op,
                .name = name,
                .inputs =
                    [scores_shape](InputMaker& in) { return Inputs{in.uniform(scores_shape(in))}; },
                .run =
                    [axis, log](const Inputs& x) {
                      return Outputs{log ? log_softmax(x[0], axis) : softmax(x[0], axis)};
                    }});
    }
    for (K op : {K::softmax_backward, K::log_softmax_backward}) {
      const bool log = op == K::log_softmax_backward;
      list.add({.op = op,
                .name = name,
                .inputs =
                    [scores_shape, axis, log](InputMaker& in) {
                      const Shape shape = scores_shape(in);
                      const Tensor scores = in.uniform(shape);
                      return Inputs{in.uniform(shape),
                                    log ? log_softmax(scores, axis) : softmax(scores, axis)};
                    },
                .run =
                    [axis, log](const Inputs& x) {
                      return Outputs{log ? log_softmax_backward(x[0], x[1], axis)
                                         : softmax_backward(x[0], x[1], axis)};
                    }});
    }
  }
}

void layout_cases(CaseList& list) {
  auto matrix = [](InputMaker& in) {
    return Shape{in.extent(2, 4, 4, 1024), in.extent(2, 4, 6, 1024)};
  };
  list.add({.op = K::reshape,
            .name = "column",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
            .run =
                [](const Inputs& x) {
                  return Outputs{reshape(x[0], {-1, 1})};
                }});
  // A view of its input; the multiplication reads it through the view.
  list.add(
      {.op = K::reshape,
       .name = "regroup_times_2",
       .inputs =
           [](InputMaker& in) {
             return Inputs{in.uniform({in.extent(1, 4, 4, 1024), 2 * in.extent(1, 3, 3, 512)})};
           },
       .run =
           [](const Inputs& x) {
             return Outputs{reshape(x[0], {-1, x[0].dim(1) / 2}) * 2.0};
           }});
  list.add({.op = K::transpose,
            .name = "rotate_3d",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
            .run =
                [](const Inputs& x) {
                  return Outputs{transpose(x[0], {1, 2, 0})};
                }});
  list.add({.op = K::transpose,
            .name = "4d",
            .inputs =
                [](InputMaker& in) {
                  return Inputs{in.uniform({in.extent(1, 3, 3, 32), in.extent(1, 3, 4, 64),
                                            in.extent(1, 3, 5, 64), in.extent(1, 3, 2, 16)})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{transpose(x[0], {2, 0, 3, 1})};
                }});
  list.add({.op = K::concat,
            .name = "axis_0_repeated",
            .inputs =
                [matrix](InputMaker& in) {
                  const Shape shape = matrix(in);
                  return Inputs{in.uniform(shape), in.uniform({2, shape[1]})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{concat({x[0], x[1], x[0]}, 0)};
                }});
  list.add({.op = K::concat,
            .name = "axis_1_repeated",
            .inputs =
                [](InputMaker& in) {
                  const std::int64_t a = in.extent(1, 3, 3, 64), c = in.extent(1, 3, 5, 512);
                  return Inputs{in.uniform({a, in.extent(1, 4, 4, 128), c}),
                                in.uniform({a, in.extent(1, 3, 2, 64), c})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{concat({x[0], x[1], x[0]}, 1)};
                }});
  list.add({.op = K::slice,
            .name = "rows_to_end",
            .inputs = [matrix](InputMaker& in) { return Inputs{in.uniform(matrix(in))}; },
            .run =
                [](const Inputs& x) {
                  return Outputs{slice(x[0], {1, 0}, {-1, 1})};
                }});
  list.add({.op = K::slice,
            .name = "3d",
            .inputs =
                [](InputMaker& in) {
                  return Inputs{in.uniform(
                      {in.extent(4, 5, 5, 64), in.extent(3, 5, 6, 128), in.extent(4, 6, 7, 128)})};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{slice(x[0], {1, 2, 0}, {3, -1, 4})};
                }});
  list.add({.op = K::pad,
            .name = "2d_constant",
            .inputs = [matrix](InputMaker& in) { return Inputs{in.uniform(matrix(in))}; },
            .run =
                [](const Inputs& x) {
                  return Outputs{pad(x[0], {{{1, 2}}, {{0, 3}}}, 0.5)};
                }});
  list.add(
      {.op = K::cast,
       .name = "round_trip_f32",
       .inputs = [matrix](InputMaker& in) { return Inputs{in.uniform(matrix(in))}; },
       .run = [](const Inputs& x) { return Outputs{cast(cast(x[0], DType::f32), x[0].dtype())}; },
       .grad_step = 1e-3,
       .grad_tolerance = 1e-3});
  list.add({.op = K::cast,
            .name = "to_other_dtypes",
            .inputs =
                [](InputMaker& in) {
                  return Inputs{in.uniform({in.extent(2, 8, 40, 1 << 20)}, -100, 100)};
                },
            .run =
                [](const Inputs& x) {
                  return Outputs{cast(x[0], DType::f16), cast(x[0], DType::i32),
                                 cast(cast(x[0], DType::i64), DType::f32),
                                 cast(greater(x[0], scalar_like(x[0], 0.0)), DType::f32)};
                },
            .grad = false,
            .compare_gradients = false});
}

void loss_and_update_cases(CaseList& list) {
  // The mask is drawn once per call; the generator restarted each call keeps it fixed across
  // the finite-difference evaluations and the same on every backend. It outlives the call, as
  // a generator a compiled step draws from must (the traced mode runs the call as a graph).
  list.add({.op = K::dropout,
            .name = "y_and_mask",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
            .run =
                [](const Inputs& x) {
                  static thread_local Generator generator;
                  generator.set_state(99, 0);
                  const DropoutResult r = dropout(x[0], 0.3, generator);
                  return Outputs{r.y, r.mask};
                }});
  auto logits = [](InputMaker& in) {
    const std::int64_t batch = in.extent(1, 4, 9, 256), classes = in.extent(2, 5, 11, 1000);
    return Inputs{in.uniform({batch, classes}), in.indices(batch, classes, DType::i32)};
  };
  list.add({.op = K::sparse_softmax_cross_entropy,
            .name = "loss",
            .inputs = logits,
            .run = [](const Inputs& x) {
              return Outputs{sparse_softmax_cross_entropy_with_logits(x[0], x[1]).loss};
            }});
  list.add({.op = K::sparse_softmax_cross_entropy,
            .name = "loss_and_backprop",
            .inputs = logits,
            .run =
                [](const Inputs& x) {
                  const CrossEntropyResult r = sparse_softmax_cross_entropy_with_logits(x[0], x[1]);
                  return Outputs{r.loss, r.backprop};
                },
            .grad = false});
  auto parameters = [](InputMaker& in, int count) {
    const Shape shape{in.extent(1, 8, 50, 1 << 20)};
    Inputs inputs;
    for (int i = 0; i < count; ++i)
      inputs.push_back(in.uniform(shape));
    return inputs;
  };
  list.add({.op = K::sgd_update,
            .name = "nesterov_weight_decay",
            .inputs = [parameters](InputMaker& in) { return parameters(in, 3); },
            .run =
                [](const Inputs& x) {
                  Tensor param = x[0].clone();
                  Tensor velocity = x[2].clone();
                  sgd_update(param, x[1], velocity, update_schedule(0.1, 1, param.device()),
                             {0.9, true, 0.01});
                  return Outputs{param, velocity};
                },
            .compare_gradients = false});
  // param, grad, m and v (v positive, as a second moment is).
  const auto adam_inputs = [parameters](InputMaker& in) {
    Inputs x = parameters(in, 3);
    x.push_back(in.uniform(x[0].shape(), 0.1, 1));
    return x;
  };
  list.add({.op = K::adam_update,
            .name = "adamw",
            .inputs = adam_inputs,
            .run =
                [](const Inputs& x) {
                  Tensor param = x[0].clone();
                  Tensor m = x[2].clone();
                  Tensor v = x[3].clone();
                  adam_update(param, x[1], m, v, update_schedule(1e-2, 3, param.device()),
                              {0.9, 0.999, 1e-7, 0.01});
                  return Outputs{param, m, v};
                },
            .compare_gradients = false});
  // Gated schedules {lr, step, apply}: a skipped update (apply 0) changes nothing, then an
  // applied one runs as usual.
  const auto gated = [](double apply, const Device& device) {
    return Tensor::from_vector<double>({1e-2, 3, apply}, {3}, device);
  };
  list.add({.op = K::adam_update,
            .name = "gated_skipped_then_applied",
            .inputs = adam_inputs,
            .run =
                [gated](const Inputs& x) {
                  Tensor param = x[0].clone();
                  Tensor m = x[2].clone();
                  Tensor v = x[3].clone();
                  adam_update(param, x[1], m, v, gated(0, param.device()));
                  const Outputs skipped{param.clone(), m.clone(), v.clone()};
                  adam_update(param, x[1], m, v, gated(1, param.device()));
                  return Outputs{skipped[0], skipped[1], skipped[2], param, m, v};
                },
            .compare_gradients = false});
  list.add({.op = K::sgd_update,
            .name = "gated_skipped_then_applied",
            .inputs = [parameters](InputMaker& in) { return parameters(in, 3); },
            .run =
                [gated](const Inputs& x) {
                  Tensor param = x[0].clone();
                  Tensor velocity = x[2].clone();
                  sgd_update(param, x[1], velocity, gated(0, param.device()), {0.9});
                  const Tensor skipped = param.clone();
                  sgd_update(param, x[1], velocity, gated(1, param.device()), {0.9});
                  return Outputs{skipped, param, velocity};
                },
            .compare_gradients = false});
  list.add({.op = K::assign,
            .name = "in_place",
            .inputs = [parameters](InputMaker& in) { return parameters(in, 2); },
            .run =
                [](const Inputs& x) {
                  Tensor target = x[0].clone();
                  assign(target, x[1] * 2.0);
                  return Outputs{target};
                },
            .compare_gradients = false});
}

// all_reduce over the one replica an eager call (or a one-replica program) is: its input. The
// XLA strategy's tests sum across real replicas.
void collective_cases(CaseList& list) {
  list.add({.op = K::all_reduce,
            .name = "one_replica",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in))}; },
            .run = [](const Inputs& x) { return Outputs{all_reduce(x[0], 1)}; }});
}

// A chain of every op fused_elementwise runs (ops/fused.h), over a full input x (R, C), a bias
// (C,) repeated along the rows and a divisor y (R, C) in [1, 2]; relu_backward's mask is x,
// drawn away from 0, so every dtype masks the same cells.
void fused_cases(CaseList& list) {
  using I = FusedInstruction;
  // slots 0..2: x, bias, y; instruction k makes slot 3 + k
  const std::vector<I> program{{K::add, 0, 1}, {K::relu, 3},        {K::relu_backward, 2, 0},
                               {K::mul, 4, 5}, {K::sub, 6, 0},      {K::div, 7, 2},
                               {K::abs, 8},    {K::sqrt, 9},        {K::square, 10},
                               {K::neg, 11},   {K::maximum, 12, 0}, {K::minimum, 13, 1}};
  list.add({.op = K::fused_elementwise,
            .name = "every_instruction_with_a_bias",
            .inputs =
                [](InputMaker& in) {
                  const Shape shape = pair_shape(in);
                  return Inputs{in.uniform(shape, -1, 1, 0.1), in.uniform({shape[1]}),
                                in.uniform(shape, 1, 2)};
                },
            .run =
                [program](const Inputs& x) {
                  return Outputs{
                      call_op(K::fused_elementwise, x, fused_elementwise_attrs(program))};
                },
            .compare_gradients = false});
  // A first layer's filter gradient from the gradient of the relu and the 2x2 max pooling after
  // it (a compiled step's fusion pass forms it on the CPU, where the few-channel loops form the
  // gradient in bands): x (N, H, W, 1) to 20 channels, y the pooling's input, distinct values
  // (every dtype picks the same maxima) of both signs (the relu mask matters).
  list.add({.op = K::pooled_conv2d_backward_filter,
            .name = "3x3_to_20_2x2_relu_masked",
            .instance =
                [](InputMaker& in) {
                  const Shape x_shape{in.extent(1, 2, 2, 16), in.extent(4, 9, 12, 56),
                                      in.extent(4, 9, 12, 56), 1};
                  const Shape y_shape{x_shape[0], x_shape[1] - 2, x_shape[2] - 2, 20};
                  const Shape pooled{y_shape[0], y_shape[1] / 2, y_shape[2] / 2, 20};
                  Conv2DBackwardFilterAttrs filter_gradient;
                  filter_gradient.filter_shape = {3, 3, 1, 20};
                  filter_gradient.with_bias = true;
                  const Attrs attrs = pooled_conv2d_backward_filter_attrs(
                      make_op_attrs<K::max_pool2d_backward>({Pool2DOptions{}, true}),
                      make_op_attrs<K::conv2d_backward_filter>(filter_gradient));
                  return Instance{
                      {in.uniform(x_shape), in.uniform(pooled), in.distinct(y_shape, {1, 2})},
                      [attrs](const Inputs& x) {
                        return call_op(K::pooled_conv2d_backward_filter, x, attrs);
                      }};
                },
            .compare_gradients = false,
            .uses_tf32 = true});
}

// A convolution pooled as it is formed, and a filter gradient from its winners (a compiled
// step's fusion pass forms both on the CPU for a first layer): x (N, H, W, 1) pairwise distinct
// in each image through a 1x1 filter to 20 channels of magnitude at least 0.05, so each window
// has one winner on every backend; a bias and relu, 2x2 pooling. f32 only, as the pass forms
// them.
void pooled_convolution_cases(CaseList& list) {
  const auto pooled_conv_attrs = [] {
    Conv2DAttrs conv;
    conv.fused_relu = true;
    return pooled_conv2d_attrs(make_op_attrs<K::conv2d>(conv),
                               make_op_attrs<K::max_pool2d>(Pool2DOptions{}));
  };
  const auto inputs = [](InputMaker& in) {
    const Shape x_shape{in.extent(1, 2, 2, 16), in.extent(4, 9, 12, 56), in.extent(4, 9, 12, 56),
                        1};
    return Inputs{in.distinct(x_shape, {1, 2}), in.uniform({1, 1, 1, 20}), in.uniform({20})};
  };
  list.add(
      {.op = K::pooled_conv2d,
       .name = "1x1_to_20_relu_2x2",
       .inputs = inputs,
       .run = [pooled_conv_attrs](
                  const Inputs& x) { return call_op(K::pooled_conv2d, x, pooled_conv_attrs()); },
       .compare_gradients = false,
       .dtypes = {DType::f32}});
  list.add({.op = K::pooled_conv2d_backward_filter,
            .name = "from_the_winners_of_1x1_to_20_relu_2x2",
            .inputs =
                [inputs](InputMaker& in) {
                  Inputs made = inputs(in);
                  const Shape& x = made[0].shape();
                  made.push_back(in.uniform({x[0], x[1] / 2, x[2] / 2, 20}));  // pooled_dy
                  return made;
                },
            .run =
                [pooled_conv_attrs](const Inputs& x) {
                  const Tensor winners =
                      call_op(K::pooled_conv2d, {x[0], x[1], x[2]}, pooled_conv_attrs())[1];
                  Conv2DBackwardFilterAttrs filter_gradient;
                  filter_gradient.filter_shape = {1, 1, 1, 20};
                  filter_gradient.with_bias = true;
                  auto attrs = op_attrs<K::pooled_conv2d_backward_filter>(
                      pooled_conv2d_backward_filter_attrs(
                          make_op_attrs<K::max_pool2d_backward>({Pool2DOptions{}, true}),
                          make_op_attrs<K::conv2d_backward_filter>(filter_gradient)));
                  attrs.from_winners = true;
                  return call_op(K::pooled_conv2d_backward_filter, {x[0], x[3], winners},
                                 make_op_attrs<K::pooled_conv2d_backward_filter>(attrs));
                },
            .compare_gradients = false,
            .dtypes = {DType::f32}});
}

// Quantisation parameters live in f32 whatever x's dtype, on x's device.
Tensor f32_on(const Tensor& x, const std::vector<float>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape).to(x.device());
}

// Per tensor to int8 with some of x clamped; per channel to uint8 with zero points; and, for the
// finite differences, x clamped everywhere: there y does not move with x and the straight-through
// gradient is 0 too (inside the range it is 1 where the true derivative is 0). Rounding to the
// integer grid jumps: an x drawn in bf16 or f16 may sit across a grid line from its f32 value,
// so the value cases compare backends in f32 only; and their scales are powers of two, so that
// x / scale is exact on every backend (XLA:CPU may divide through a reciprocal, which can put a
// value within an ulp of a grid line on the other side: one step apart, as the op says).
void quantize_cases(CaseList& list) {
  list.add(
      {.op = K::fake_quantize,
       .name = "per_tensor_int8_clamped_beyond_2",
       .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in), -3, 3)}; },
       .run =
           [](const Inputs& x) {
             const FakeQuantizeResult r = fake_quantize(x[0], f32_on(x[0], {1.0f / 64}, {}),
                                                        f32_on(x[0], {0.0f}, {}), -128, 127);
             return Outputs{r.y, r.in_range};
           },
       .grad = false,
       .compare_gradients = false,
       .dtypes = {DType::f32}});
  list.add({.op = K::fake_quantize,
            .name = "per_channel_uint8_with_zero_points",
            .inputs = [](InputMaker& in) { return Inputs{in.uniform(pair_shape(in), -1, 2)}; },
            .run =
                [](const Inputs& x) {
                  const std::int64_t channels = x[0].shape().back();
                  std::vector<float> scales, zero_points;
                  for (std::int64_t c = 0; c < channels; ++c) {
                    scales.push_back(1.0f / static_cast<float>(64 << (c % 3)));
                    zero_points.push_back(static_cast<float>(20 * (c % 7)));
                  }
                  const FakeQuantizeResult r =
                      fake_quantize(x[0], f32_on(x[0], scales, {channels}),
                                    f32_on(x[0], zero_points, {channels}), 0, 255);
                  return Outputs{r.y, r.in_range};
                },
            .grad = false,
            .compare_gradients = false,
            .dtypes = {DType::f32}});
  list.add(
      {.op = K::fake_quantize,
       .name = "clamped_everywhere",
       .inputs = [](InputMaker& in) { return Inputs{in.uniform(elementwise_shape(in), 5, 6)}; },
       .run =
           [](const Inputs& x) {
             return Outputs{
                 fake_quantize(x[0], f32_on(x[0], {1.0f}, {}), f32_on(x[0], {0.0f}, {}), -2, 2).y};
           }});
}

// The integer products: x quantised with a power-of-two scale (exact division everywhere, as for
// fake_quantize) to uint8 (x in [0, 4], the top clamped at 255) or int8, whole-number int8
// weights, per-channel scales and a bias; and with the fusion pass's residual and relu. The sums
// stay below 2^24, so XLA's f32 product of the integer values is exact as well.
Inputs quantized_inputs(InputMaker& in, const Shape& x, const Shape& weights, bool is_unsigned) {
  const std::int64_t channels = weights.back();
  std::vector<float> scales;
  for (std::int64_t c = 0; c < channels; ++c)
    scales.push_back(0.001f * static_cast<float>(1 + c % 5));
  const Tensor x_values = is_unsigned ? in.uniform(x, 0, 4) : in.uniform(x, -2, 2);
  return {x_values, f32_on(x_values, {1.0f / 64}, {}),
          cast(in.integers(weights, -127, 127), DType::i8), f32_on(x_values, scales, {channels}),
          in.uniform({channels})};
}

void quantized_product_cases(CaseList& list) {
  for (const bool is_unsigned : {true, false}) {
    list.add({.op = K::quantized_conv2d,
              .name = is_unsigned ? "uint8_same" : "int8_strided_valid",
              .instance =
                  [is_unsigned](InputMaker& in) {
                    const Conv2DOptions options =
                        is_unsigned ? Conv2DOptions{{1, 1}, Padding::same, {1, 1}}
                                    : Conv2DOptions{{2, 2}, Padding::valid, {1, 1}};
                    const ConvGeometry g = conv_geometry(in, options);
                    return Instance{quantized_inputs(in, g.input, g.filter, is_unsigned),
                                    [options, is_unsigned](const Inputs& x) {
                                      return Outputs{quantized_conv2d(x[0], {x[1], is_unsigned},
                                                                      x[2], x[3], x[4], options)};
                                    }};
                  },
              .grad = false,
              .compare_gradients = false,
              .dtypes = {DType::f32}});
  }
  list.add({.op = K::quantized_conv2d,
            .name = "fused_add_relu",
            .instance =
                [](InputMaker& in) {
                  QuantizedConv2DAttrs attrs;
                  static_cast<Conv2DOptions&>(attrs) = {{1, 1}, Padding::same, {1, 1}};
                  attrs.fused_relu = attrs.fused_add = attrs.input_unsigned = true;
                  const ConvGeometry g = conv_geometry(in, attrs);
                  Inputs inputs = quantized_inputs(in, g.input, g.filter, true);
                  inputs.push_back(in.uniform(g.output));
                  return Instance{std::move(inputs), [attrs](const Inputs& x) {
                                    return call_op(K::quantized_conv2d, x,
                                                   make_op_attrs<K::quantized_conv2d>(attrs));
                                  }};
                },
            .grad = false,
            .compare_gradients = false,
            .dtypes = {DType::f32}});
  const auto matmul_shapes = [](InputMaker& in) {
    const std::int64_t k = in.extent(1, 9, 64, 512);
    return std::pair{Shape{in.extent(1, 4, 33, 128), k}, Shape{k, in.extent(1, 9, 48, 256)}};
  };
  list.add({.op = K::quantized_matmul,
            .name = "int8",
            .instance =
                [matmul_shapes](InputMaker& in) {
                  const auto [x, weights] = matmul_shapes(in);
                  return Instance{
                      quantized_inputs(in, x, weights, false), [](const Inputs& x) {
                        return Outputs{quantized_matmul(x[0], {x[1], false}, x[2], x[3], x[4])};
                      }};
                },
            .grad = false,
            .compare_gradients = false,
            .dtypes = {DType::f32}});
  list.add({.op = K::quantized_matmul,
            .name = "uint8_fused_add_relu",
            .instance =
                [matmul_shapes](InputMaker& in) {
                  const auto [x, weights] = matmul_shapes(in);
                  Inputs inputs = quantized_inputs(in, x, weights, true);
                  inputs.push_back(in.uniform({x[0], weights[1]}));
                  return Instance{
                      std::move(inputs), [](const Inputs& x) {
                        return call_op(
                            K::quantized_matmul, x,
                            make_op_attrs<K::quantized_matmul>(
                                {.input_unsigned = true, .fused_relu = true, .fused_add = true}));
                      }};
                },
            .grad = false,
            .compare_gradients = false,
            .dtypes = {DType::f32}});
}

std::vector<OpCase> make_cases() {
  CaseList list;
  elementwise_cases(list);
  reduction_cases(list);
  gather_cases(list);
  matmul_cases(list);
  conv_cases(list);
  pool_cases(list);
  norm_cases(list);
  softmax_cases(list);
  layout_cases(list);
  loss_and_update_cases(list);
  collective_cases(list);
  fused_cases(list);
  pooled_convolution_cases(list);
  quantize_cases(list);
  quantized_product_cases(list);
  std::vector<OpCase> cases = list.release();
  std::stable_sort(cases.begin(), cases.end(),
                   [](const OpCase& a, const OpCase& b) { return a.op < b.op; });
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = make_cases();
  return cases;
}

}  // namespace tandem::harness
