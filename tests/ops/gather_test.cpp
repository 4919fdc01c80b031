#include <gtest/gtest.h>

#include <string>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;

TEST(Gather, PicksRowsInIndexOrder) {
  const Tensor table = Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2});
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32}) {
    for (DType index_dtype : {DType::i32, DType::i64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + dtype_name(index_dtype));
      const Tensor indices =
          cast(Tensor::from_vector<std::int64_t>({2, 0, 2, 1}, {2, 2}), index_dtype);
      const Tensor rows = gather(cast(table, dtype), indices);
      EXPECT_EQ(rows.shape(), (Shape{2, 2, 2}));
      EXPECT_EQ(rows.dtype(), dtype);
      expect_close(rows, Tensor::from_vector<double>({20, 21, 0, 1, 20, 21, 10, 11}, {2, 2, 2}), 0);
    }
  }
}

TEST(Gather, ScalarIndexGivesOneRow) {
  const Tensor table = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor row = gather(table, Tensor::scalar(1, DType::i32));
  EXPECT_EQ(row.shape(), (Shape{2}));
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Gather, RejectsIndicesOutsideTheTable) {
  const Tensor table = Tensor::zeros({4, 3});
  for (std::int64_t bad : {-1, 4}) {
    try {
      gather(table, Tensor::from_vector<std::int64_t>({0, bad}, {2}));
      FAIL() << "index " << bad << " was accepted";
    } catch (const InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("index " + std::to_string(bad) + " at position 1"), std::string::npos)
          << message;
      EXPECT_NE(message.find("[0, 4)"), std::string::npos) << message;
    }
  }
  EXPECT_THROW(gather(table, Tensor::zeros({2}, DType::f32)), InvalidArgument);
  EXPECT_THROW(gather(Tensor::scalar(1.0), Tensor::zeros({2}, DType::i32)), InvalidArgument);
}

TEST(ScatterAdd, RepeatedIndicesAccumulate) {
  const Tensor indices = Tensor::from_vector<std::int32_t>({1, 3, 1, 1}, {4});
  const Tensor updates = Tensor::from_vector<double>({1, 2, 10, 20, 100, 200, 0.5, 0.25}, {4, 2});
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor sums = scatter_add(cast(updates, dtype), indices, 5);
    EXPECT_EQ(sums.shape(), (Shape{5, 2}));
    EXPECT_EQ(sums.dtype(), dtype);
    const bool integer = dtype == DType::i32;
    expect_close(
        sums,
        Tensor::from_vector<double>(
            {0, 0, integer ? 101.0 : 101.5, integer ? 202.0 : 202.25, 0, 0, 10, 20, 0, 0}, {5, 2}),
        dtype == DType::bf16 ? 1e-2 : 1e-6);
  }
}

// bf16 sums accumulate in float: 256 ones stay 256 instead of stalling where bf16 stops
// representing + 1.
TEST(ScatterAdd, HalfPrecisionAccumulatesInFloat) {
  const Tensor indices = Tensor::zeros({512}, DType::i64);
  const Tensor sums = scatter_add(Tensor::ones({512, 1}, DType::bf16), indices, 1);
  EXPECT_EQ(sums.item(), 512.0);
}

TEST(ScatterAdd, ChecksShapesAndIndices) {
  const Tensor indices = Tensor::from_vector<std::int32_t>({0, 1}, {2});
  EXPECT_THROW(scatter_add(Tensor::zeros({3, 2}), indices, 4), InvalidArgument);
  EXPECT_THROW(scatter_add(Tensor::zeros({2, 2}), indices, -1), InvalidArgument);
  EXPECT_THROW(scatter_add(Tensor::zeros({2, 2}), indices, 1), InvalidArgument);
  EXPECT_THROW(scatter_add(Tensor::zeros({2}, DType::boolean), indices, 2), InvalidArgument);
}

TEST(ScatterAdd, IsTheAdjointOfGather) {
  // <gather(p, i), u> = <p, scatter_add(u, i)> for any p and u.
  const Tensor indices = Tensor::from_vector<std::int64_t>({3, 0, 3, 2, 1, 3}, {2, 3});
  const Tensor params = testing::random_tensor({4, 5});
  const Tensor updates = testing::random_tensor({2, 3, 5});
  const double left = sum(gather(params, indices) * updates).item();
  const double right = sum(params * scatter_add(updates, indices, 4)).item();
  EXPECT_NEAR(left, right, 1e-9 * std::max(1.0, std::abs(left)));
}

}  // namespace
}  // namespace tandem
