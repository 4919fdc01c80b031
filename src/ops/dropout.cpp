// Dropout: zeroes each element with probability `rate` and scales the kept ones by 1/(1-rate).
// The mask comes from the counter-based Philox stream (seed, offset), the op's second input (i64
// (2,), a host operand: a compiled step draws a new offset every run without recompiling):
// element i is kept iff uniform_from_bits(philox_word(seed, offset, i)) >= rate, so a draw is
// reproducible on any device and independent of the thread count.
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

void require_rate(const char* op, double rate) {
  if (!(rate >= 0.0 && rate < 1.0)) {
    throw InvalidArgument(std::string(op) + ": rate must be in [0, 1), got " +
                          std::to_string(rate) + "; it is the fraction of elements dropped");
  }
}

// (x, philox) -> (y, mask), both x's shape and dtype; philox is i64 (2,) {seed, offset}.
std::vector<TensorMeta> infer_dropout(const char* op, std::span<const TensorMeta> in,
                                      const Attrs& attrs) {
  require_floating(op, in[0]);
  if (in[1].dtype != DType::i64 || in[1].shape != Shape{2}) {
    throw InvalidArgument(std::string(op) +
                          ": the Philox input must be i64 (2) {seed, offset}, got " +
                          dtype_name(in[1].dtype) + " " + shape_str(in[1].shape));
  }
  require_rate(op, op_attrs<OpKind::dropout>(attrs).rate);
  return {in[0], in[0]};
}

// y = x * mask: the mask does not depend on x, so x's gradient is the upstream one masked.
std::vector<Tensor> grad_dropout(const GradContext& c) {
  if (!c.output_grads[0].defined()) return {Tensor(), Tensor()};
  return {c.output_grads[0] * c.outputs[1], Tensor()};
}

// One multiply per element; the random bits are integer work.
OpCost dropout_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return elementwise_cost(in.first(1), out.first(1), 1.0);
}

}  // namespace

std::vector<OpDef> define_dropout_ops() {
  return op_family<k_dropout_ops>(
      OpRules<OpKind::dropout>{2, 2, infer_dropout, grad_dropout, dropout_cost});
}

DropoutResult dropout(const Tensor& x, double rate, Generator& generator) {
  // Checked before reserving, so a bad call leaves the generator's stream untouched.
  require_rate("dropout", rate);
  if (!x.defined()) throw InvalidArgument("dropout: input 0 is an undefined tensor");
  const auto count = static_cast<std::uint64_t>(x.numel());
  // Reserved when the value is made: now eagerly, before each run in a compiled step; the
  // generator outlives the step (a layer's own, or the default one).
  const Tensor philox = host_operand(
      "dropout seed and offset", {2}, DType::i64, x.device(), [&generator, count](Tensor& host) {
        std::int64_t* values = host.data<std::int64_t>();
        values[0] = static_cast<std::int64_t>(generator.seed());
        values[1] = static_cast<std::int64_t>(generator.reserve(count));
      });
  std::vector<Tensor> outputs =
      call_op(OpKind::dropout, {x, philox}, make_op_attrs<OpKind::dropout>({rate}));
  return {std::move(outputs[0]), std::move(outputs[1])};
}

}  // namespace tandem
