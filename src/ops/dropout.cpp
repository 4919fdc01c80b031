// Dropout: zeroes each element with probability `rate` and scales the kept ones by 1/(1-rate).
// The mask comes from the counter-based Philox stream (seed, offset), the op's second input (i64
// (2,), a host operand: a compiled step draws a new offset every run without recompiling):
// element i is kept iff uniform_from_bits(philox_word(seed, offset, i)) >= rate, so a draw is
// reproducible on any device and independent of the thread count.
#include <array>
#include <cmath>
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/stablehlo.h"
#include "ops/trace_hook.h"

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

// Philox-4x32-10 (tandem/random.h) in StableHLO's integer ops: the random word of each element
// of `shape`, philox_word(seed, offset, i) for element i in row-major order, in the low 32 bits
// of an i64. 32-bit words live in i64 so that the 32 x 32-bit products keep their high halves
// (a wrapping 64-bit multiply), and are masked back to 32 bits after each add.
StablehloValue lower_philox_words(StablehloEmitter& emit, const StablehloValue& philox,
                                  const Shape& shape) {
  const Shape flat{shape_numel(shape)};
  const auto constant = [&](double value) { return emit.constant(value, flat, DType::i64); };
  const auto apply = [&](const char* op, const StablehloValue& a, const StablehloValue& b) {
    return emit.elementwise(op, {a, b}, DType::i64);
  };
  const StablehloValue word_mask = constant(4294967295.0);
  const auto low = [&](const StablehloValue& v) { return apply("stablehlo.and", v, word_mask); };
  const auto high = [&](const StablehloValue& v) {
    return apply("stablehlo.shift_right_logical", v, constant(32));
  };
  const auto xor3 = [&](const StablehloValue& a, const StablehloValue& b, const StablehloValue& c) {
    return apply("stablehlo.xor", apply("stablehlo.xor", a, b), c);
  };
  const StablehloValue seed = emit.broadcast(emit.element(philox, 0), flat);
  // Replica r of a data-parallel program holds the batch's share r: its words follow the r
  // shares before it, so any replica count draws the one mask of the whole batch.
  const StablehloValue share_start = emit.elementwise(
      "stablehlo.multiply",
      {emit.replica_id(), emit.constant(static_cast<double>(flat[0]), {}, DType::i64)}, DType::i64);
  const StablehloValue start =
      emit.elementwise("stablehlo.add", {emit.element(philox, 1), share_start}, DType::i64);
  const StablehloValue position =
      apply("stablehlo.add", emit.broadcast(start, flat), emit.iota(flat, 0, DType::i64));
  // Word `position` is lane position % 4 of the block with counter position / 4.
  const StablehloValue block = apply("stablehlo.shift_right_logical", position, constant(2));
  std::array<StablehloValue, 4> counter{low(block), high(block), constant(0), constant(0)};
  StablehloValue key0 = low(seed);
  StablehloValue key1 = high(seed);
  const StablehloValue multiplier0 = constant(0xD2511F53);
  const StablehloValue multiplier1 = constant(0xCD9E8D57);
  for (int round = 0; round < 10; ++round) {
    const StablehloValue product0 = apply("stablehlo.multiply", multiplier0, counter[0]);
    const StablehloValue product1 = apply("stablehlo.multiply", multiplier1, counter[2]);
    counter = {xor3(high(product1), counter[1], key0), low(product1),
               xor3(high(product0), counter[3], key1), low(product0)};
    if (round == 9) break;
    key0 = low(apply("stablehlo.add", key0, constant(0x9E3779B9)));
    key1 = low(apply("stablehlo.add", key1, constant(0xBB67AE85)));
  }
  const StablehloValue lane = apply("stablehlo.and", position, constant(3));
  StablehloValue word = counter[3];
  for (int k = 2; k >= 0; --k) {
    word = emit.elementwise("stablehlo.select",
                            {emit.compare(lane, constant(k), "EQ"), counter[k], word}, DType::i64);
  }
  return emit.reshape(word, shape);
}

// As the kernel: kept where (word >> 8) >= ceil(rate 2^24), the mask 1/(1-rate) or 0 in x's
// dtype, y = x * mask in the compute type.
std::vector<StablehloValue> lower_dropout(StablehloEmitter& emit,
                                          std::span<const StablehloValue> in,
                                          std::span<const TensorMeta>, const Attrs& attrs) {
  const double rate = op_attrs<OpKind::dropout>(attrs).rate;
  const StablehloValue& x = in[0];
  const StablehloValue bits = emit.elementwise(
      "stablehlo.shift_right_logical",
      {lower_philox_words(emit, in[1], x.shape), emit.constant(8, x.shape, DType::i64)},
      DType::i64);
  const StablehloValue kept =
      emit.compare(bits, emit.constant(std::ceil(rate * 16777216.0), x.shape, DType::i64), "GE");
  const StablehloValue mask =
      emit.elementwise("stablehlo.select",
                       {kept, emit.constant(1.0 / (1.0 - rate), x.shape, x.dtype),
                        emit.constant(0.0, x.shape, x.dtype)},
                       x.dtype);
  const DType compute = StablehloEmitter::accumulation_type(x.dtype);
  const StablehloValue y = emit.elementwise(
      "stablehlo.multiply", {emit.convert(x, compute), emit.convert(mask, compute)}, compute);
  return {emit.convert(y, x.dtype), mask};
}

}  // namespace

std::vector<OpDef> define_dropout_ops() {
  return op_family<k_dropout_ops>(
      OpRules<OpKind::dropout>{2, 2, infer_dropout, grad_dropout, dropout_cost, lower_dropout});
}

DropoutResult dropout(const Tensor& x, double rate, Generator& generator) {
  // Checked before reserving, so a bad call leaves the generator's stream untouched.
  require_rate("dropout", rate);
  if (!x.defined()) throw InvalidArgument("dropout: input 0 is an undefined tensor");
  // A step traced for several replicas sees one replica's share: the batch draws them all.
  const TraceRecorder* recorder = active_trace_recorder();
  const auto count = static_cast<std::uint64_t>(x.numel()) * (recorder ? recorder->replicas() : 1);
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
