#pragma once
// Compiled steps, Tandem's tf.function: a step (a forward pass, a whole training step with its
// tape and optimizer update) traced once into a graph of op-table nodes, simplified (constants
// folded, repeated work merged, dead work dropped), given a static memory plan (every
// intermediate in one block, buffers reused by liveness) and run as a whole, with no per-op
// dispatch, tape or allocation. Values the host changes every step (learning rate, Adam's step,
// dropout's seed and offset) are host operands (tandem/ops.h) the graph takes anew each run, so
// they never force a recompile. Weights and optimizer slots are read and updated in place by
// reference.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/tensor.h"

namespace tandem {

// What compiling a step found and planned, known before its first run.
struct CompiledStepStats {
  std::size_t traced_nodes = 0;  // ops the trace recorded
  std::size_t nodes = 0;         // ops a run executes, after the passes
  std::size_t constants = 0;     // captured tensors found constant
  std::size_t folded = 0;        // nodes evaluated once at compile time
  std::size_t merged = 0;        // nodes that repeated an earlier one
  std::size_t removed = 0;       // nodes whose results nothing used
  std::size_t fused = 0;         // activations fused into the node that made their input
  std::size_t grouped = 0;       // optimizer updates merged into multi-tensor updates
  std::size_t in_place = 0;      // results written into the buffer of an input dead after them
  std::size_t host_operands = 0;
  // Bytes: the one block holding every intermediate (buffers reused by liveness); what the same
  // intermediates take with a buffer each, as an eager step allocates them; the step's results;
  // the captured tensors it reads (weights, slots, constants).
  std::size_t arena_bytes = 0;
  std::size_t unplanned_bytes = 0;
  std::size_t output_bytes = 0;
  std::size_t capture_bytes = 0;
  // The most the step holds at once beyond its captures: the block, results, host operands.
  std::size_t peak_bytes = 0;
};

using StepBody = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// A traced and planned step. Runs on the device it was traced on, one run at a time.
class CompiledStep {
 public:
  // Runs the graph on `inputs` (shaped as the trace's; InvalidArgument naming the input
  // otherwise). A result stays valid after the next run: its buffer is reused only once the
  // caller has dropped it.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Frees the block of intermediates until the next run allocates it again: a StepCache does
  // this for the step it ran last when it runs another, so that only one block is held.
  void release_memory();
  const std::string& name() const;
  const CompiledStepStats& stats() const;
  // The nodes after the passes, one per line with shapes, and the memory plan.
  std::string listing() const;
  // The graph as one StableHLO module, for an XLA backend to compile: @main takes the step's
  // inputs, then `captured` (the weights, slots and constants the trace read), then the host
  // operands; it returns the step's results, then the new version of each argument the step
  // updates in place (`updated`: their argument indices, in result order), aliased to it so
  // that XLA writes the donated buffer. Throws InvalidArgument naming an op without a rule.
  struct Stablehlo {
    std::string module;
    std::vector<Tensor> captured;
    std::size_t host_operands = 0;
    std::vector<std::size_t> updated;
  };
  Stablehlo lower_to_stablehlo() const;
  // Fills the host operands as a run does (advancing what they count, e.g. an optimizer's step)
  // and returns their CPU copies in @main's order; they stay valid until the next fill or run.
  const std::vector<Tensor>& fill_host_operands();

  struct Impl;
  explicit CompiledStep(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

// Traces `body` once on symbolic tensors shaped like `examples` (ops record instead of running;
// reading a value is an error naming the op) and compiles the graph. Nothing runs: host state
// such as an optimizer's step count advances only when the compiled step runs. With `replicas`
// above 1 the step is one replica's of a data-parallel program (examples: one replica's share;
// all_reduce sums across them): it runs only lowered to XLA, and run() throws.
CompiledStep trace_step(const std::string& name, const StepBody& body,
                        const std::vector<Tensor>& examples, int replicas = 1);

// What decides a compiled step's graph, part by part ("input 0" -> "(32, 784) f32 on cpu:0"), so
// a recompile can say what changed.
struct SignaturePart {
  std::string name;
  std::string value;
  bool operator==(const SignaturePart&) const = default;
};
using StepSignature = std::vector<SignaturePart>;
// One part per input: shape, dtype and device.
StepSignature input_signature(const std::vector<Tensor>& inputs);

// Where compile messages go (recompiles and the warning about them): standard error unless set.
using CompileLog = std::function<void(const std::string& line)>;
void set_compile_log(CompileLog log);
// Writes `line` where compile messages go (fit's note that a step runs eagerly, say).
void write_compile_log(const std::string& line);

// The compiled versions of one step, by signature. A compile after the first is logged with
// what changed; at the third, a warning says that recompiling costs a trace each time and what
// usually causes it. Only the step returned last holds its block of intermediates (a partial
// last batch does not double the memory a step needs).
class StepCache {
 public:
  explicit StepCache(std::string name);
  CompiledStep get(const StepSignature& signature, const std::function<CompiledStep()>& compile);
  int compiles() const { return compiles_; }
  // The step get() returned last, nullptr before the first.
  const CompiledStep* last() const {
    return last_returned_ < steps_.size() ? &steps_[last_returned_].second : nullptr;
  }
  void clear();

 private:
  std::string name_;
  std::vector<std::pair<StepSignature, CompiledStep>> steps_;
  StepSignature last_compiled_;
  std::size_t last_returned_ = 0;  // index into steps_ (none while steps_ is empty)
  int compiles_ = 0;
};

// tf.function for C++: wraps a step; the first call with an input signature traces and compiles
// it, later calls with that signature run the graph, a new signature traces again (logged). A
// call made while another step is traced is inlined into that step's graph.
//   auto step = tandem::function("train_step", [&](const std::vector<Tensor>& in) { ... });
//   auto [loss] = step({x, y});
class Function {
 public:
  Function(std::string name, StepBody body);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  int compiles() const { return cache_->compiles(); }
  // The compiled step of the last call (nullptr before the first).
  const CompiledStep* last_step() const { return last_ ? &*last_ : nullptr; }

 private:
  std::string name_;
  StepBody body_;
  std::shared_ptr<StepCache> cache_;
  std::optional<CompiledStep> last_;
};

Function function(std::string name, StepBody body);

}  // namespace tandem
