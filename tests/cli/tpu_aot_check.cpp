// Compiles a training step for a TPU topology ahead of time, with no TPU: the CNN of the XLA
// tests (convolution, batch normalisation, dropout's Philox in i64, Adam with its f64 schedule),
// traced as a custom loop's step, lowered to StableHLO and given to the plugin's PJRT_Compile.
// Run by tests/cli/tpu_cli_test.cpp inside a network namespace with TPU_SKIP_MDS_QUERY=1 (libtpu
// is never loaded outside one). Usage: tandem_tpu_aot_check PLUGIN TOPOLOGY; prints
// "compiled for TOPOLOGY: N bytes of code" and exits 0, or the error and exits 1.
#include <cstdio>
#include <exception>

#include "tandem/autodiff.h"
#include "tandem/compile.h"
#include "tandem/nn.h"
#include "tandem/random.h"
#include "tandem/train.h"
#include "tandem/xla.h"

int main(int argc, char** argv) {
  using namespace tandem;
  if (argc != 3) {
    std::fprintf(stderr, "usage: tandem_tpu_aot_check PLUGIN TOPOLOGY\n");
    return 2;
  }
  try {
    manual_seed(5);
    nn::Sequential model({nn::Conv2D(8, 3, "relu"), nn::BatchNormalization(), nn::MaxPool2D(),
                          nn::Flatten(), nn::Dropout(0.25), nn::Dense(16, "relu"), nn::Dense(4)});
    model.build({12, 12, 1});
    const train::SparseCategoricalCrossentropy loss_fn(/*from_logits=*/true);
    train::Adam optimizer(1e-2);
    const Tensor images = random_uniform({16, 12, 12, 1}, 0.0, 1.0);  // (N, H, W, C)
    const Tensor labels = Tensor::zeros({16}, DType::i32);            // (N,)
    CompiledStep step =
        trace_step("tpu_aot_train_step",
                   [&](const std::vector<Tensor>& inputs) {
                     Tensor loss;
                     std::vector<Tensor> gradients;
                     {
                       GradientTape tape;
                       loss = loss_fn(inputs[1], model(inputs[0], /*training=*/true));
                       gradients = tape.gradient(loss, model.trainable_weights());
                     }
                     optimizer.apply_gradients(gradients, model.trainable_weights());
                     return std::vector<Tensor>{loss};
                   },
                   {images, labels});
    const std::int64_t bytes =
        xla::compile_for_topology(argv[1], argv[2], step.lower_to_stablehlo().module);
    std::printf("compiled for %s: %lld bytes of code\n", argv[2], static_cast<long long>(bytes));
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tandem_tpu_aot_check: %s\n", error.what());
    return 1;
  }
}
