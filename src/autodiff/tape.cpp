#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ops/backend.h"
#include "tandem/autodiff.h"

namespace tandem {

namespace {

struct RecordedOp {
  OpKind kind;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
};

}  // namespace

struct GradientTape::Impl {
  bool persistent = false;
  bool watch_accessed_variables = true;
  bool recording = true;
  bool used = false;
  std::unordered_set<std::uint64_t>
      tracked;  // ids of watched tensors and of values derived from them
  std::vector<RecordedOp> ops;

  bool depends_on_watched(std::span<const Tensor> inputs) const {
    for (const Tensor& input : inputs) {
      if (tracked.contains(input.id())) return true;
      if (watch_accessed_variables && input.is_variable() && is_floating(input.dtype()))
        return true;
    }
    return false;
  }
};

namespace {

struct ThreadTapes {
  std::vector<GradientTape::Impl*> active;
  int suspended = 0;  // NoGradGuard nesting depth
};

ThreadTapes& thread_tapes() {
  thread_local ThreadTapes tapes;
  return tapes;
}

// Observes every op; records it on this thread's tapes that watch one of its inputs.
class TapeRecorder final : public OpObserver {
 public:
  void after_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                const Attrs& attrs) override {
    if (!watches_this_thread()) return;
    ThreadTapes& tapes = thread_tapes();
    // Ops whose outputs are all integer or bool (argmax, comparisons) carry no gradient.
    const bool any_floating_output = std::any_of(
        outputs.begin(), outputs.end(), [](const Tensor& t) { return is_floating(t.dtype()); });
    if (!any_floating_output) return;
    for (GradientTape::Impl* tape : tapes.active) {
      if (!tape->recording || !tape->depends_on_watched(inputs)) continue;
      for (const Tensor& input : inputs) {
        if (input.is_variable() && tape->watch_accessed_variables) tape->tracked.insert(input.id());
      }
      for (const Tensor& output : outputs)
        tape->tracked.insert(output.id());
      tape->ops.push_back(RecordedOp{
          kind, {inputs.begin(), inputs.end()}, {outputs.begin(), outputs.end()}, attrs});
    }
  }
  bool watches_this_thread() const override {
    const ThreadTapes& tapes = thread_tapes();
    return !tapes.active.empty() && tapes.suspended == 0;
  }
};

void ensure_recorder_installed() {
  static TapeRecorder recorder;
  static const bool installed = [] {
    add_op_observer(&recorder);
    return true;
  }();
  (void)installed;
}

void accumulate(std::unordered_map<std::uint64_t, Tensor>& grads, const Tensor& tensor,
                const Tensor& grad) {
  auto [it, inserted] = grads.try_emplace(tensor.id(), grad);
  if (!inserted) it->second = add(it->second, grad);
}

}  // namespace

GradientTape::GradientTape(bool persistent, bool watch_accessed_variables)
    : impl_(std::make_unique<Impl>()) {
  ensure_recorder_installed();
  impl_->persistent = persistent;
  impl_->watch_accessed_variables = watch_accessed_variables;
  thread_tapes().active.push_back(impl_.get());
}

GradientTape::~GradientTape() {
  std::erase(thread_tapes().active, impl_.get());
}

void GradientTape::watch(const Tensor& tensor) {
  if (!tensor.defined()) throw InvalidArgument("GradientTape::watch: tensor is undefined");
  if (!is_floating(tensor.dtype())) {
    throw InvalidArgument(std::string("GradientTape::watch: only floating tensors have "
                                      "gradients, got ") +
                          dtype_name(tensor.dtype()) + " of shape " + shape_str(tensor.shape()));
  }
  impl_->tracked.insert(tensor.id());
}

std::size_t GradientTape::recorded_ops() const {
  return impl_->ops.size();
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const Tensor& output_gradient, bool unconnected_zero,
                                           const GradientReady& on_ready) {
  if (impl_->used && !impl_->persistent) {
    throw Error(
        "GradientTape::gradient called twice on a non-persistent tape; construct the tape with "
        "persistent=true to take several gradients");
  }
  if (!target.defined()) throw InvalidArgument("GradientTape::gradient: target is undefined");
  if (output_gradient.defined() && output_gradient.shape() != target.shape()) {
    throw InvalidArgument("GradientTape::gradient: output_gradient " +
                          shape_str(output_gradient.shape()) + " does not match the target " +
                          shape_str(target.shape()));
  }
  impl_->used = true;
  // The reverse pass is not recorded on this tape; outer tapes record it (higher-order gradients).
  impl_->recording = false;
  struct ResumeRecording {
    Impl* tape;
    ~ResumeRecording() { tape->recording = true; }
  } resume{impl_.get()};

  std::unordered_map<std::uint64_t, Tensor> grads;
  grads.emplace(target.id(), output_gradient.defined()
                                 ? output_gradient
                                 : Tensor::ones(target.shape(), target.dtype(), target.device()));
  std::unordered_set<std::uint64_t> wanted;
  for (const Tensor& source : sources)
    wanted.insert(source.id());

  // A source's gradient is final once the walk has passed the first recorded op that reads it;
  // sources in the order they finish, so the walk can report each one as soon as it is done.
  std::unordered_map<std::uint64_t, std::size_t> first_use;
  for (std::size_t index = impl_->ops.size(); index-- > 0;) {
    for (const Tensor& input : impl_->ops[index].inputs) {
      if (wanted.contains(input.id())) first_use[input.id()] = index;
    }
  }
  std::vector<std::size_t> finishing_order(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i)
    finishing_order[i] = i;
  const auto use_of = [&](std::size_t source_index) -> std::ptrdiff_t {
    const auto it = first_use.find(sources[source_index].id());
    return it == first_use.end() ? -1 : static_cast<std::ptrdiff_t>(it->second);
  };
  std::stable_sort(finishing_order.begin(), finishing_order.end(),
                   [&](std::size_t a, std::size_t b) { return use_of(a) > use_of(b); });
  std::vector<Tensor> result(sources.size());
  std::size_t finished = 0;
  const auto finish_sources_used_after = [&](std::ptrdiff_t index) {
    for (; finished < finishing_order.size() && use_of(finishing_order[finished]) > index;
         ++finished) {
      const std::size_t source_index = finishing_order[finished];
      const Tensor& source = sources[source_index];
      const auto it = grads.find(source.id());
      if (it != grads.end()) {
        result[source_index] = it->second;
      } else if (unconnected_zero) {
        result[source_index] = Tensor::zeros(source.shape(), source.dtype(), source.device());
      }
      if (on_ready) on_ready(source_index, result[source_index]);
    }
  };

  std::ptrdiff_t node_index = static_cast<std::ptrdiff_t>(impl_->ops.size());
  for (auto node = impl_->ops.rbegin(); node != impl_->ops.rend(); ++node) {
    finish_sources_used_after(--node_index);
    std::vector<Tensor> output_grads(node->outputs.size());
    bool any = false;
    for (std::size_t i = 0; i < node->outputs.size(); ++i) {
      auto it = grads.find(node->outputs[i].id());
      if (it == grads.end()) continue;
      output_grads[i] = it->second;
      any = true;
      // Keep gradients of requested sources; free the rest as soon as they are consumed.
      if (!wanted.contains(it->first)) grads.erase(it);
    }
    if (!any) continue;
    const OpDef& def = op_def(node->kind);
    if (def.gradient == nullptr) {
      throw Error(std::string("GradientTape::gradient: op ") + def.name +
                  " has no gradient rule, so the target cannot be differentiated through it");
    }
    std::vector<bool> needs_grad(node->inputs.size());
    bool any_needed = false;
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      needs_grad[i] = impl_->tracked.contains(node->inputs[i].id());
      any_needed = any_needed || needs_grad[i];
    }
    if (!any_needed) continue;
    const std::vector<Tensor> input_grads = def.gradient(
        GradContext{node->inputs, node->outputs, output_grads, node->attrs, &needs_grad});
    TANDEM_ASSERT(input_grads.size() == node->inputs.size(),
                  std::string("gradient rule of ") + def.name + " returned the wrong count");
    for (std::size_t i = 0; i < input_grads.size(); ++i) {
      const Tensor& grad = input_grads[i];
      if (!grad.defined()) continue;
      const Tensor& input = node->inputs[i];
      if (!impl_->tracked.contains(input.id())) continue;
      TANDEM_ASSERT(grad.shape() == input.shape(), std::string("gradient rule of ") + def.name +
                                                       " gave shape " + shape_str(grad.shape()) +
                                                       " for input " + shape_str(input.shape()));
      accumulate(grads, input, grad);
    }
  }

  finish_sources_used_after(-2);
  if (!impl_->persistent) impl_->ops.clear();
  return result;
}

NoGradGuard::NoGradGuard() {
  ++thread_tapes().suspended;
}
NoGradGuard::~NoGradGuard() {
  --thread_tapes().suspended;
}

}  // namespace tandem
