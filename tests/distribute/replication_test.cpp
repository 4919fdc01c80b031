// The pieces every strategy shares: replica shares of a batch, gradient buckets, packing
// gradients into flat buffers and back.
#include <gtest/gtest.h>

#include "distribute/replication.h"
#include "tandem/ops.h"

namespace tandem::testing {
namespace {

using distribute::detail::Share;
using distribute::detail::share_of;

TEST(Replication, SharesCoverTheBatchInOrder) {
  for (const auto [batch, replicas] : {std::pair{64, 2}, {10, 3}, {7, 4}, {2, 3}, {1, 1}}) {
    std::int64_t next = 0;
    for (int replica = 0; replica < replicas; ++replica) {
      const Share share = share_of(batch, replicas, replica);
      EXPECT_EQ(share.start, next) << batch << "/" << replicas;
      EXPECT_GE(share.count, batch / replicas);
      EXPECT_LE(share.count, batch / replicas + 1);
      next += share.count;
    }
    EXPECT_EQ(next, batch);
  }
  EXPECT_EQ(share_of(10, 3, 0).count, 4);
  EXPECT_EQ(share_of(2, 3, 2).count, 0);  // more replicas than examples
}

TEST(Replication, BucketsFollowTheBackwardOrderAndTheSizeCap) {
  const std::vector<Tensor> variables{
      Tensor::zeros({100}),            // 400 bytes
      Tensor::zeros({10}),             // 40
      Tensor::zeros({300}),            // 1200
      Tensor::zeros({5}, DType::f64),  // 40
      Tensor::zeros({20}),             // 80
  };
  const auto layout = distribute::detail::plan_buckets(variables, 1024);
  // Last variables first; a new bucket at the dtype change and when 1024 bytes would be passed.
  ASSERT_EQ(layout.buckets.size(), 4u);
  EXPECT_EQ(layout.buckets[0], std::vector<std::size_t>{4});
  EXPECT_EQ(layout.buckets[1], std::vector<std::size_t>{3});
  EXPECT_EQ(layout.buckets[2], std::vector<std::size_t>{2});  // 1200 bytes on its own
  EXPECT_EQ(layout.buckets[3], (std::vector<std::size_t>{1, 0}));
  const auto one = distribute::detail::plan_buckets(variables, 1 << 20);
  EXPECT_EQ(one.buckets.size(), 3u);  // only the dtypes split it
}

TEST(Replication, PackAndUnpackRoundTripWithWeightsAndHoles) {
  const std::vector<Tensor> like{Tensor::zeros({2, 2}), Tensor::zeros({3}), Tensor::zeros({1})};
  const std::vector<Tensor> values{Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), Tensor(),
                                   Tensor::from_vector<float>({5}, {1})};
  const Tensor flat = distribute::detail::pack(values, like, {2, 0, 1}, 0.5);
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{2.5, 0.5, 1, 1.5, 2, 0, 0, 0}));
  const std::vector<Tensor> views = distribute::detail::unpack(flat, like, {2, 0, 1});
  EXPECT_EQ(views[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(views[1].to_vector<float>(), (std::vector<float>{0.5, 1, 1.5, 2}));
  EXPECT_EQ(views[0].to_vector<float>(), std::vector<float>{2.5});

  // Weight 1 of one tensor copies it: the collective's in-place sum must not touch the gradient.
  const Tensor single = distribute::detail::pack(values, like, {0}, 1.0);
  EXPECT_NE(single.raw_data(), values[0].raw_data());
  // Weight 0 gives zeros, even without tensors (a replica without examples).
  EXPECT_EQ(distribute::detail::pack({}, like, {1, 2}, 0.0).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0}));
}

TEST(Replication, SetDataMovesAWeightKeepingItsIdentity) {
  Tensor weight = Tensor::zeros({3});
  weight.set_variable(true);
  weight.set_name("dense/kernel");
  const std::uint64_t id = weight.id();
  const Tensor replica = Tensor::from_vector<float>({1, 2, 3}, {3});
  weight.set_data(replica);
  EXPECT_EQ(weight.id(), id);
  EXPECT_TRUE(weight.is_variable());
  EXPECT_EQ(weight.raw_data(), replica.raw_data());
  EXPECT_EQ(weight.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(weight.set_data(Tensor::zeros({4})), InvalidArgument);
}

}  // namespace
}  // namespace tandem::testing
