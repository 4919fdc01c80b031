// Optimizer updates, applied in place: the outputs alias the parameter and slot inputs (see
// output_aliases), so an update allocates nothing. The formulas are Keras' (TF 2.15):
//
// SGD, with g = grad + weight_decay * param (an L2 term added to the gradient):
//   momentum 0:  param -= lr * g
//   otherwise:   velocity = momentum * velocity - lr * g
//                param += velocity                              (classic)
//                param += momentum * velocity - lr * g          (nesterov)
// Adam, with t = step counting from 1:
//   param -= lr * weight_decay * param                           (decoupled, AdamW; when > 0)
//   m += (1 - beta1) * (grad - m);  v += (1 - beta2) * (grad^2 - v)
//   lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//   param -= lr_t * m / (sqrt(v) + epsilon)
// so epsilon is added to the uncorrected sqrt(v), Kingma & Ba's "epsilon hat" form that Keras
// uses, not to sqrt(v_hat) as in PyTorch: the two differ by a factor sqrt(1 - beta2^t) on
// epsilon, which matters only while v is tiny.
//
// lr and t come from the schedule operand, f64 (2,) {learning_rate, step} (update_schedule), so a
// compiled step reads them anew each run. Updates are not differentiable: no gradient rules.
#include <cmath>
#include <string>
#include <utility>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/stablehlo.h"

namespace tandem {
namespace {

// Every input but the schedule (input 2) matches param.
void require_matching(const char* op, std::span<const TensorMeta> in,
                      std::span<const char* const> names) {
  require_floating(op, in[0]);
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (i == 2) continue;
    if (in[i].shape != in[0].shape || in[i].dtype != in[0].dtype) {
      throw InvalidArgument(std::string(op) + ": " + names[i] + " " + shape_str(in[i].shape) + " " +
                            dtype_name(in[i].dtype) + " must match param " +
                            shape_str(in[0].shape) + " " + dtype_name(in[0].dtype));
    }
  }
  if (in[2].dtype != DType::f64 || (in[2].shape != Shape{2} && in[2].shape != Shape{3})) {
    throw InvalidArgument(std::string(op) +
                          ": the schedule must be f64 (2) {learning_rate, step} as "
                          "update_schedule makes it, or (3) {learning_rate, step, apply}, got " +
                          dtype_name(in[2].dtype) + " " + shape_str(in[2].shape));
  }
}

void require_in_range(const char* op, const char* name, double value, double low, double high,
                      bool high_inclusive) {
  const bool ok = value >= low && (high_inclusive ? value <= high : value < high);
  if (!ok) {
    throw InvalidArgument(std::string(op) + ": " + name + " must be in [" + std::to_string(low) +
                          ", " + std::to_string(high) + (high_inclusive ? "]" : ")") + ", got " +
                          std::to_string(value));
  }
}

void require_finite(const char* op, const char* name, double value) {
  if (!std::isfinite(value)) {
    throw InvalidArgument(std::string(op) + ": " + name + " must be finite, got " +
                          std::to_string(value));
  }
}

// (param, grad, schedule[, velocity]) -> (param[, velocity]), updated in place.
std::vector<TensorMeta> infer_sgd_update(const char* op, std::span<const TensorMeta> in,
                                         const Attrs& attrs) {
  static constexpr const char* kNames[] = {"param", "grad", "schedule", "velocity"};
  require_matching(op, in, std::span(kNames, in.size()));
  const SgdOptions options = op_attrs<OpKind::sgd_update>(attrs);
  require_finite(op, "weight_decay", options.weight_decay);
  const double momentum = options.momentum;
  require_in_range(op, "momentum", momentum, 0.0, 1.0, true);
  if (momentum > 0.0 && in.size() < 4) {
    throw InvalidArgument(std::string(op) + ": momentum " + std::to_string(momentum) +
                          " needs a velocity slot shaped like param " + shape_str(in[0].shape));
  }
  if (in.size() == 4) return {in[0], in[3]};
  return {in[0]};
}

// (param, grad, schedule, m, v) -> (param, m, v), updated in place.
std::vector<TensorMeta> infer_adam_update(const char* op, std::span<const TensorMeta> in,
                                          const Attrs& attrs) {
  static constexpr const char* kNames[] = {"param", "grad", "schedule", "m", "v"};
  require_matching(op, in, kNames);
  const AdamOptions options = op_attrs<OpKind::adam_update>(attrs);
  require_finite(op, "weight_decay", options.weight_decay);
  require_in_range(op, "beta1", options.beta1, 0.0, 1.0, false);
  require_in_range(op, "beta2", options.beta2, 0.0, 1.0, false);
  const double epsilon = options.epsilon;
  if (!(epsilon >= 0.0)) {
    throw InvalidArgument(std::string(op) + ": epsilon must be >= 0, got " +
                          std::to_string(epsilon));
  }
  return {in[0], in[3], in[4]};
}

// (target, value) -> (target), written in place.
std::vector<TensorMeta> infer_assign(const char* op, std::span<const TensorMeta> in, const Attrs&) {
  if (in[1].shape != in[0].shape || in[1].dtype != in[0].dtype) {
    throw InvalidArgument(std::string(op) + ": value " + shape_str(in[1].shape) + " " +
                          dtype_name(in[1].dtype) + " must match target " + shape_str(in[0].shape) +
                          " " + dtype_name(in[0].dtype));
  }
  return {in[0]};
}

// The value becomes the target's new version (the module aliases it to the target's buffer).
std::vector<StablehloValue> lower_assign(StablehloEmitter&, std::span<const StablehloValue> in,
                                         std::span<const TensorMeta>, const Attrs&) {
  return {in[1]};
}

// The lanes of a multi-tensor update (one for a plain update), from its attributes.
template <OpKind Kind>
std::int64_t lanes_of(const Attrs& attrs) {
  return op_attrs<Kind>(attrs).lanes;
}

// Per element: SGD reads param and grad (and velocity) and writes them back; Adam reads four
// tensors and writes three. A multi-tensor update costs the sum of its lanes.
template <OpKind Kind, int kFlops>
OpCost update_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                   const Attrs& attrs) {
  const auto lanes = static_cast<std::size_t>(lanes_of<Kind>(attrs));
  const std::size_t inputs = in.size() / lanes;
  const std::size_t outputs = out.size() / lanes;
  OpCost total;
  for (std::size_t lane = 0; lane < lanes; ++lane) {
    std::vector<TensorMeta> tensors(in.begin() + static_cast<std::ptrdiff_t>(lane * inputs),
                                    in.begin() + static_cast<std::ptrdiff_t>((lane + 1) * inputs));
    tensors.erase(tensors.begin() + 2);  // the schedule's 16 bytes are not per element
    const OpCost cost = elementwise_cost(tensors, out.subspan(lane * outputs, 1), kFlops);
    total.flops += cost.flops;
    total.bytes += cost.bytes;
  }
  return total;
}

// A multi-tensor update lowers lane by lane, with `lower` the rule for one.
template <OpKind Kind, auto lower>
std::vector<StablehloValue> lower_lanes(StablehloEmitter& emit, std::span<const StablehloValue> in,
                                        std::span<const TensorMeta> out, const Attrs& attrs) {
  const auto lanes = static_cast<std::size_t>(lanes_of<Kind>(attrs));
  const std::size_t inputs = in.size() / lanes;
  const std::size_t outputs = out.size() / lanes;
  // A gated schedule {lr, step, apply}: each result is the new value where apply is not 0, else
  // the input it replaces.
  const bool gated = in[2].shape == Shape{3};
  const std::vector<int>& aliases = op_def(Kind).output_aliases;
  std::vector<StablehloValue> results;
  for (std::size_t lane = 0; lane < lanes; ++lane) {
    const std::span<const StablehloValue> lane_in = in.subspan(lane * inputs, inputs);
    std::vector<StablehloValue> updated =
        lower(emit, lane_in, out.subspan(lane * outputs, outputs), attrs);
    for (std::size_t k = 0; k < updated.size(); ++k) {
      if (gated) {
        const StablehloValue& old = lane_in[static_cast<std::size_t>(aliases[k])];
        const StablehloValue keep =
            emit.compare(emit.element(lane_in[2], 2), emit.constant(0.0, {}, DType::f64), "EQ");
        updated[k] = emit.elementwise(
            "stablehlo.select", {emit.broadcast(keep, old.shape), old, updated[k]}, old.dtype);
      }
      results.push_back(std::move(updated[k]));
    }
  }
  return results;
}

// The updates lowered as the kernels compute them: in the compute type (f32 for the 16-bit
// floats), the schedule's scalars taken in f64 and converted once, the new values rounded to the
// parameter's dtype. They return the new versions of the inputs they write; the module makes
// those results alias the arguments (tf.aliasing_output), so XLA updates them in place.
class UpdateLowering {
 public:
  UpdateLowering(StablehloEmitter& emit, std::span<const StablehloValue> in)
      : emit_(emit),
        shape_(in[0].shape),
        dtype_(in[0].dtype),
        compute_(StablehloEmitter::accumulation_type(in[0].dtype)),
        schedule_(in[2]) {}
  // The schedule's learning rate or step, in f64.
  StablehloValue schedule(std::int64_t index) { return emit_.element(schedule_, index); }
  // A scalar in f64 broadcast to the parameter's shape in the compute type.
  StablehloValue spread(const StablehloValue& scalar) {
    return emit_.broadcast(emit_.convert(scalar, compute_), shape_);
  }
  StablehloValue constant(double value) { return emit_.constant(value, shape_, compute_); }
  StablehloValue load(const StablehloValue& value) { return emit_.convert(value, compute_); }
  StablehloValue store(const StablehloValue& value) { return emit_.convert(value, dtype_); }
  StablehloValue apply(const char* op, const StablehloValue& a, const StablehloValue& b) {
    return emit_.elementwise(op, {a, b}, a.dtype);
  }
  StablehloValue add(const StablehloValue& a, const StablehloValue& b) {
    return apply("stablehlo.add", a, b);
  }
  StablehloValue subtract(const StablehloValue& a, const StablehloValue& b) {
    return apply("stablehlo.subtract", a, b);
  }
  StablehloValue multiply(const StablehloValue& a, const StablehloValue& b) {
    return apply("stablehlo.multiply", a, b);
  }
  StablehloValue divide(const StablehloValue& a, const StablehloValue& b) {
    return apply("stablehlo.divide", a, b);
  }
  StablehloValue f64(double value) { return emit_.constant(value, {}, DType::f64); }

 private:
  StablehloEmitter& emit_;
  Shape shape_;
  DType dtype_;
  DType compute_;
  StablehloValue schedule_;
};

std::vector<StablehloValue> lower_sgd_update(StablehloEmitter& emit,
                                             std::span<const StablehloValue> in,
                                             std::span<const TensorMeta>, const Attrs& attrs) {
  const SgdOptions options = op_attrs<OpKind::sgd_update>(attrs);
  UpdateLowering u(emit, in);
  const StablehloValue learning_rate = u.spread(u.schedule(0));
  const StablehloValue param = u.load(in[0]);
  const StablehloValue grad =
      u.add(u.load(in[1]), u.multiply(u.constant(options.weight_decay), param));
  const StablehloValue step = u.multiply(learning_rate, grad);
  if (in.size() < 4) return {u.store(u.subtract(param, step))};
  const StablehloValue momentum = u.constant(options.momentum);
  const StablehloValue velocity = u.subtract(u.multiply(momentum, u.load(in[3])), step);
  const StablehloValue updated =
      options.nesterov ? u.subtract(u.add(param, u.multiply(momentum, velocity)), step)
                       : u.add(param, velocity);
  return {u.store(updated), u.store(velocity)};
}

std::vector<StablehloValue> lower_adam_update(StablehloEmitter& emit,
                                              std::span<const StablehloValue> in,
                                              std::span<const TensorMeta>, const Attrs& attrs) {
  const AdamOptions options = op_attrs<OpKind::adam_update>(attrs);
  UpdateLowering u(emit, in);
  // lr sqrt(1 - beta2^t) / (1 - beta1^t) and 1 - lr weight_decay, in f64 as the kernel has them.
  const StablehloValue learning_rate = u.schedule(0);
  const StablehloValue t = u.schedule(1);
  const auto power = [&](double base) { return u.apply("stablehlo.power", u.f64(base), t); };
  const StablehloValue corrected = u.divide(
      u.multiply(learning_rate,
                 emit.elementwise("stablehlo.sqrt", {u.subtract(u.f64(1.0), power(options.beta2))},
                                  DType::f64)),
      u.subtract(u.f64(1.0), power(options.beta1)));
  const StablehloValue decay =
      u.subtract(u.f64(1.0), u.multiply(learning_rate, u.f64(options.weight_decay)));
  const StablehloValue grad = u.load(in[1]);
  const StablehloValue m_old = u.load(in[3]);
  const StablehloValue v_old = u.load(in[4]);
  const StablehloValue m =
      u.add(m_old, u.multiply(u.constant(1.0 - options.beta1), u.subtract(grad, m_old)));
  const StablehloValue v = u.add(v_old, u.multiply(u.constant(1.0 - options.beta2),
                                                   u.subtract(u.multiply(grad, grad), v_old)));
  const StablehloValue denominator =
      u.add(emit.elementwise("stablehlo.sqrt", {v}, v.dtype), u.constant(options.epsilon));
  const StablehloValue param =
      u.subtract(u.multiply(u.load(in[0]), u.spread(decay)),
                 u.divide(u.multiply(u.spread(corrected), m), denominator));
  return {u.store(param), u.store(m), u.store(v)};
}

}  // namespace

std::vector<OpDef> define_optimizer_ops() {
  return op_family<k_optimizer_ops>(
      OpRules<OpKind::sgd_update>{3,
                                  4,
                                  infer_sgd_update,
                                  nullptr,
                                  update_cost<OpKind::sgd_update, 5>,
                                  lower_lanes<OpKind::sgd_update, lower_sgd_update>,
                                  {0, 3},
                                  true},
      OpRules<OpKind::adam_update>{5,
                                   5,
                                   infer_adam_update,
                                   nullptr,
                                   update_cost<OpKind::adam_update, 12>,
                                   lower_lanes<OpKind::adam_update, lower_adam_update>,
                                   {0, 3, 4},
                                   true},
      OpRules<OpKind::assign>{2, 2, infer_assign, nullptr, nullptr, lower_assign, {0}, true});
}

Tensor update_schedule(double learning_rate, std::int64_t step, Device device) {
  if (!std::isfinite(learning_rate)) {
    throw InvalidArgument("update_schedule: learning_rate must be finite, got " +
                          std::to_string(learning_rate));
  }
  if (step < 1) {
    throw InvalidArgument("update_schedule: step must count from 1, got " + std::to_string(step) +
                          "; pass the number of updates made so far + 1");
  }
  return Tensor::from_vector<double>({learning_rate, static_cast<double>(step)}, {2}, device);
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const Tensor& schedule,
                const SgdOptions& options) {
  const Attrs attrs = make_op_attrs<OpKind::sgd_update>({options});
  // Without momentum the velocity plays no part (and may be undefined).
  if (options.momentum != 0.0 && !velocity.defined()) {
    throw InvalidArgument("sgd_update: momentum " + std::to_string(options.momentum) +
                          " needs a velocity tensor; create it once as "
                          "Tensor::zeros(param.shape(), param.dtype())");
  }
  if (options.momentum == 0.0) {
    call_op(OpKind::sgd_update, {param, grad, schedule}, attrs);
  } else {
    call_op(OpKind::sgd_update, {param, grad, schedule, velocity}, attrs);
  }
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const Tensor& schedule,
                 const AdamOptions& options) {
  call_op(OpKind::adam_update, {param, grad, schedule, m, v},
          make_op_attrs<OpKind::adam_update>({options}));
}

void assign(Tensor& target, const Tensor& value) {
  call_op(OpKind::assign, {target, value});
}

}  // namespace tandem
