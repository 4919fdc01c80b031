// A training step that runs out of memory says so with the batch size and the fixes to try.
#include <gtest/gtest.h>

#include <string>

#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(OutOfMemory, FitNamesTheBatchSizeAndTheFixes) {
  manual_seed(2);
  nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  model.compile({.optimizer = train::Adam(1e-3),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
  const Tensor images = Tensor::zeros({512, 28, 28, 1});
  const Tensor labels = Tensor::zeros({512}, DType::i32);
  // Room for the weights and data, not for a step on 512 images.
  set_memory_limit(Device::cpu(), memory_info(Device::cpu()).held + (16u << 20));
  try {
    model.fit(images, labels, {.batch_size = 512, .epochs = 1, .verbose = 0, .shuffle = false});
    set_memory_limit(Device::cpu(), 0);
    FAIL() << "a step on 512 images fitted in 16 MiB";
  } catch (const OutOfMemory& error) {
    set_memory_limit(Device::cpu(), 0);
    const std::string message = error.what();
    for (const char* part :
         {"out of memory on cpu", "training a batch of 512 examples", "--find-max-batch",
          "--precision bf16", "gradient_accumulation_steps"}) {
      EXPECT_NE(message.find(part), std::string::npos) << part << " missing from: " << message;
    }
  }
  // With the limit lifted the same step trains.
  EXPECT_NO_THROW(
      model.fit(images, labels, {.batch_size = 512, .epochs = 1, .verbose = 0, .shuffle = false}));
}

}  // namespace
}  // namespace tandem
