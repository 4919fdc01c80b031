// Dropout: zeroes each element with probability `rate` and scales the kept ones by 1/(1-rate).
// The mask comes from the counter-based Philox stream (seed, offset) stored in the op's
// attributes: element i is kept iff uniform_from_bits(philox_word(seed, offset, i)) >= rate, so a
// draw is reproducible on any device and independent of the thread count.
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

// x -> (y, mask), both x's shape and dtype.
std::vector<TensorMeta> infer_dropout(const char* op, std::span<const TensorMeta> in,
                                      const Attrs& attrs) {
  require_floating(op, in[0]);
  require_rate(op, op_attrs<OpKind::dropout>(attrs).rate);
  return {in[0], in[0]};
}

// y = x * mask: the mask does not depend on x, so x's gradient is the upstream one masked.
std::vector<Tensor> grad_dropout(const GradContext& c) {
  if (!c.output_grads[0].defined()) return {Tensor()};
  return {c.output_grads[0] * c.outputs[1]};
}

// One multiply per element; the random bits are integer work.
OpCost dropout_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return elementwise_cost(in, out.first(1), 1.0);
}

}  // namespace

std::vector<OpDef> define_dropout_ops() {
  return op_family<k_dropout_ops>(
      OpRules<OpKind::dropout>{1, 1, infer_dropout, grad_dropout, dropout_cost});
}

DropoutResult dropout(const Tensor& x, double rate, Generator& generator) {
  // Checked before reserving, so a bad call leaves the generator's stream untouched.
  require_rate("dropout", rate);
  const std::uint64_t seed = generator.seed();
  const std::int64_t count = x.defined() ? x.numel() : 0;  // call_op rejects undefined x
  const std::uint64_t offset = generator.reserve(static_cast<std::uint64_t>(count));
  std::vector<Tensor> outputs =
      call_op(OpKind::dropout, {x},
              make_op_attrs<OpKind::dropout>(
                  {rate, static_cast<std::int64_t>(seed), static_cast<std::int64_t>(offset)}));
  return {std::move(outputs[0]), std::move(outputs[1])};
}

}  // namespace tandem
