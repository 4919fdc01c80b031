// The zoo models' FLOP counts from the op table's cost functions, against published and
// hand-counted figures (forward pass of one example).
#include <gtest/gtest.h>

#include "tandem/bench.h"
#include "tandem/random.h"

namespace tandem::bench {
namespace {

Work forward_of(const std::string& model, const WorkloadOptions& options = {}) {
  const Workload workload = bench::workload(model, options);
  manual_seed(3);
  nn::Model built = build_model(workload);
  const auto [features, labels] = synthetic_batch(workload, 1, 5);
  return forward_work(built, features);
}

TEST(BenchFlops, ResNet50IsAbout4Point1GigaMacsAt224) {
  // He et al. (2016), Table 1: 3.8 x 10^9 FLOPs (multiply-adds) for v1; v1.5 moves the stride
  // to the 3x3 convolution, which the usual counters (torchvision, fvcore) put at 4.09-4.11 G.
  const Work work = forward_of("resnet50");
  EXPECT_NEAR(work.macs / 1e9, 4.1, 0.05);
  EXPECT_GT(work.flops, 2 * work.macs);  // batch norm, ReLU, pooling and adds on top
  EXPECT_LT(work.flops, 2.05 * work.macs);
  EXPECT_GT(work.bytes, 0.0);
}

TEST(BenchFlops, MlpAndCnnMatchTheirHandCounts) {
  // mlp: 784 x 128 + 128 x 10 multiply-adds.
  EXPECT_NEAR(forward_of("mlp").macs, 784 * 128 + 128 * 10, 200);
  // cnn: 3x3x1x32 at 26x26, 3x3x32x64 at 11x11, 1600 x 64 and 64 x 10; the convolutions'
  // FLOPs also hold their bias additions (0.6% more).
  const double cnn = 26 * 26 * 32 * 9 + 11 * 11 * 64 * 9 * 32 + 1600 * 64 + 64 * 10;
  EXPECT_NEAR(forward_of("cnn").macs / cnn, 1.0, 0.01);
}

TEST(BenchFlops, BertBaseEncoderIsAbout11GigaMacsAt128Tokens) {
  // BERT-base (Devlin et al. 2019): 12 layers of 4 x 768^2 attention projections and
  // 2 x 768 x 3072 feed-forward weights, times 128 tokens, plus 2 x 128^2 x 768 attention
  // products per layer: 11.17 G multiply-adds (the commonly quoted ~22 GFLOPs).
  const double linear = 12.0 * (4 * 768.0 * 768 + 2 * 768.0 * 3072) * 128;
  const double attention = 12.0 * 2 * 128.0 * 128 * 768;
  const Work work = forward_of("transformer");
  EXPECT_NEAR(work.macs / (linear + attention), 1.0, 0.01);
  EXPECT_NEAR(work.macs / 1e9, 11.2, 0.1);
}

}  // namespace
}  // namespace tandem::bench
