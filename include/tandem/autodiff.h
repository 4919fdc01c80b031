#pragma once
// Reverse-mode automatic differentiation with a gradient tape, like tf.GradientTape: ops run
// eagerly while the tape records them; gradient() walks the record backwards calling each op's
// gradient rule from the op table, so gradients run on the same device kernels as the forward
// pass and can themselves be recorded by an outer tape (higher-order gradients).
#include <cstddef>
#include <functional>
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

  // Called with a source's index and its gradient as soon as the reverse pass has finished it
  // (no op left to visit uses the source), while the pass goes on with earlier ops: data-parallel
  // training starts all-reducing the last layers' gradients during the backward pass. Every
  // source is reported once, unconnected ones (undefined or zero gradient) at the end.
  using GradientReady = std::function<void(std::size_t source_index, const Tensor& gradient)>;

  // d target / d source for each source. `output_gradient` seeds the reverse pass (defaults to
  // ones of target's shape). A source the target does not depend on gets an undefined tensor,
  // or zeros when `unconnected_zero` is true. `on_ready`, when set, sees each gradient early.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const Tensor& output_gradient = {}, bool unconnected_zero = false,
                               const GradientReady& on_ready = {});

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
