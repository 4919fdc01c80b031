// Uses the installed headers and libtandem.a: a model built, compiled and fitted for one step.
#include <iostream>

#include <tandem/tandem.h>

int main() {
  using namespace tandem;
  Generator generator(7);
  const Tensor x = random_normal({8, 4}, 0.0, 1.0, DType::f32, generator);  // (N, features)
  const Tensor y = Tensor::zeros({8}, DType::i64);                          // (N,) class ids
  nn::Sequential model({nn::Dense(3)});
  model.compile({.optimizer = train::SGD(0.1),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
  const train::History history = model.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  std::cout << "tandem " << version() << ", " << history.history().at("loss").size()
            << " epoch; consumer: ok\n";
  return 0;
}
