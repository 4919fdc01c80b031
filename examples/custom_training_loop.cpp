// A custom training loop: the pieces Model::fit uses, written out by hand the way a TensorFlow
// user writes a tf.GradientTape loop, and compiled the way tf.function compiles it: the step is
// a tandem::function, traced on its first call and run as one graph after. Trains a small CNN on
// Fashion-MNIST when Debian's dataset-fashion-mnist package is installed, otherwise on a
// synthetic 10-class image problem, then reports the test accuracy.
//
//   build/examples/custom_training_loop [steps=300] [batch_size=64] [compiled|eager]
#include <cstdio>
#include <filesystem>
#include <string>

#include "tandem/data.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

// 28x28 noise images whose class k (0..9) is a bright 6x6 square at a position of its own.
data::ImageClassificationData synthetic_images(std::int64_t train_count, std::int64_t test_count) {
  Generator generator(7);
  auto make = [&](std::int64_t count, Tensor& images, Tensor& labels) {
    std::vector<float> pixels =
        random_uniform({count, 28, 28, 1}, 0.0, 0.3, DType::f32, generator).to_vector<float>();
    std::vector<std::int32_t> classes(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      const auto k = static_cast<std::int32_t>(i % 10);
      classes[static_cast<std::size_t>(i)] = k;
      const std::int64_t top = (k / 5) * 12 + 4;
      const std::int64_t left = (k % 5) * 5 + 1;
      for (std::int64_t r = top; r < top + 6; ++r) {
        for (std::int64_t c = left; c < left + 6; ++c) {
          pixels[static_cast<std::size_t>(i * 784 + r * 28 + c)] = 1.0f;
        }
      }
    }
    images = Tensor::from_vector(pixels, {count, 28, 28, 1});
    labels = Tensor::from_vector(classes, {count});
  };
  data::ImageClassificationData data;
  make(train_count, data.train_images, data.train_labels);
  make(test_count, data.test_images, data.test_labels);
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::int64_t steps = argc > 1 ? std::stoll(argv[1]) : 300;
    const std::int64_t batch_size = argc > 2 ? std::stoll(argv[2]) : 64;
    const bool eager = argc > 3 && std::string(argv[3]) == "eager";
    manual_seed(0);

    const bool have_fashion_mnist = std::filesystem::exists(
        std::filesystem::path(data::kFashionMnistDefaultDir) / "train-labels-idx1-ubyte.gz");
    const data::ImageClassificationData images =
        have_fashion_mnist ? data::load_fashion_mnist() : synthetic_images(4000, 1000);
    std::printf("data: %s, %lld training and %lld test images\n",
                have_fashion_mnist ? "Fashion-MNIST" : "synthetic",
                static_cast<long long>(images.train_images.dim(0)),
                static_cast<long long>(images.test_images.dim(0)));

    data::TensorDataset train_set(images.train_images, images.train_labels);
    train_set.shuffle(/*seed=*/0).batch(batch_size, /*drop_remainder=*/true);

    nn::Sequential model({nn::Conv2D(16, 3, "relu"), nn::MaxPool2D(), nn::Flatten(),
                          nn::Dense(64, "relu"), nn::Dense(images.num_classes)});
    model.build({28, 28, 1});
    model.summary();

    const train::SparseCategoricalCrossentropy loss_fn(/*from_logits=*/true);
    train::Adam optimizer(1e-3);
    train::Mean train_loss("loss");
    train::SparseCategoricalAccuracy train_accuracy;

    // The training step: forward pass and loss under a tape, gradients, one update. Inputs
    // (images, labels) -> (logits, loss).
    const auto step_body = [&](const std::vector<Tensor>& inputs) {
      Tensor logits;
      Tensor loss;
      std::vector<Tensor> gradients;
      {
        GradientTape tape;
        logits = model(inputs[0], /*training=*/true);
        loss = loss_fn(inputs[1], logits);
        gradients = tape.gradient(loss, model.trainable_weights());
      }
      optimizer.apply_gradients(gradients, model.trainable_weights());
      return std::vector<Tensor>{logits, loss};
    };
    Function train_step = function("train_step", step_body);

    std::int64_t step = 0;
    for (std::int64_t epoch = 0; step < steps; ++epoch) {
      const auto batches = train_set.iterate(epoch);
      while (step < steps) {
        const std::optional<data::Batch> batch = batches->next();
        if (!batch) break;
        const std::vector<Tensor> results = eager ? step_body({batch->features, batch->labels})
                                                  : train_step({batch->features, batch->labels});
        const Tensor& logits = results[0];
        const Tensor& loss = results[1];
        if (step == 0 && !eager) {
          const CompiledStepStats& stats = train_step.last_step()->stats();
          std::printf(
              "compiled step: %zu nodes (traced %zu), peak %.1f MiB of intermediates "
              "(%.1f MiB with a buffer each)\n",
              stats.nodes, stats.traced_nodes, static_cast<double>(stats.peak_bytes) / (1 << 20),
              static_cast<double>(stats.unplanned_bytes) / (1 << 20));
        }

        train_loss.update_state(loss.item());
        train_accuracy.update_state(batch->labels, logits);
        if (++step % 50 == 0 || step == steps) {
          std::printf("step %4lld  loss %.4f  accuracy %.4f\n", static_cast<long long>(step),
                      train_loss.result(), train_accuracy.result());
          train_loss.reset_state();
          train_accuracy.reset_state();
        }
      }
    }

    // Inference: no tape records, Dropout and BatchNormalization run in inference mode.
    train::SparseCategoricalAccuracy test_accuracy;
    test_accuracy.update_state(images.test_labels, model.predict(images.test_images, 256));
    std::printf("test accuracy %.4f after %lld steps\n", test_accuracy.result(),
                static_cast<long long>(step));
    return 0;
  } catch (const Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
}
