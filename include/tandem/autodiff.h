#pragma once
// Reverse-mode automatic differentiation with a gradient tape, like tf.GradientTape: ops run
// eagerly while the tape records them; gradient() walks the record backwards calling each op's
// gradient rule from the op table, so gradients run on the same device kernels as the forward
// pass and can themselves be recorded by an outer tape (higher-order gradients).
#include <memory>
#include <vector>

#include "tandem/tensor.h"

namespace tandem {

class GradientTape {
 public:
  // persistent: gradient() may be called more than once. watch_accessed_variables: tensors marked
  // as variables (layer weights) are watched as soon as an op uses them.
  explicit GradientTape(bool persistent = false, bool watch_accessed_variables = true);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Records ops that use `tensor` from now on.
  void watch(const Tensor& tensor);

  // d target / d source for each source. `output_gradient` seeds the reverse pass (defaults to
  // ones of target's shape). A source the target does not depend on gets an undefined tensor,
  // or zeros when `unconnected_zero` is true.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const Tensor& output_gradient = {}, bool unconnected_zero = false);

  // Number of ops recorded so far (for tests and diagnostics).
  std::size_t recorded_ops() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// While alive, no tape on this thread records (like `with tape.stop_recording():`).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

}  // namespace tandem
