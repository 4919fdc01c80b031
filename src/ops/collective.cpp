// Collectives across the replicas of a data-parallel program: all_reduce sums a tensor over
// them. The XLA strategies trace one replica's step and compile it for N replicas, so the sum is
// StableHLO's all_reduce over one group of every replica; a program of one replica (and an eager
// call) sums over itself, giving its input.
#include <string>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/stablehlo.h"

namespace tandem {
namespace {

std::vector<TensorMeta> infer_all_reduce(const char* op, std::span<const TensorMeta> in,
                                         const Attrs& attrs) {
  const std::int64_t replicas = op_attrs<OpKind::all_reduce>(attrs).replicas;
  if (replicas < 1) {
    throw InvalidArgument(std::string(op) + ": replicas must be at least 1, got " +
                          std::to_string(replicas));
  }
  if (replicas > 1 && !tracing()) {
    throw InvalidArgument(std::string(op) + " over " + std::to_string(replicas) +
                          " replicas runs only in a step an XLA strategy compiles for them "
                          "(--strategy xla-cpu --replicas " +
                          std::to_string(replicas) + "); eagerly there is one replica");
  }
  if (in[0].dtype == DType::boolean) {
    throw InvalidArgument(std::string(op) + ": cannot sum bool " + shape_str(in[0].shape) +
                          "; cast it to a number first");
  }
  return {in[0]};
}

// Every replica's output is the sum of every replica's input, so the gradient of each input is
// the sum of every replica's output gradient: all_reduce again (as JAX transposes psum).
std::vector<Tensor> grad_all_reduce(const GradContext& c) {
  if (!c.output_grads[0].defined()) return {Tensor()};
  return {all_reduce(c.output_grads[0],
                     static_cast<int>(op_attrs<OpKind::all_reduce>(c.attrs).replicas))};
}

// What crosses the interconnect: the tensor in and the sum back, one add per element.
OpCost all_reduce_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                       const Attrs&) {
  return elementwise_cost(in, out, 1.0);
}

// One group of replicas 0..N-1, summed with an add region in the tensor's dtype.
std::vector<StablehloValue> lower_all_reduce(StablehloEmitter& emit,
                                             std::span<const StablehloValue> in,
                                             std::span<const TensorMeta>, const Attrs& attrs) {
  const std::int64_t replicas = op_attrs<OpKind::all_reduce>(attrs).replicas;
  const StablehloValue& x = in[0];
  std::string group;
  for (std::int64_t replica = 0; replica < replicas; ++replica)
    group += (replica ? ", " : "") + std::to_string(replica);
  const std::string type = StablehloEmitter::type(x);
  return {emit.emit("\"stablehlo.all_reduce\"(" + x.name + ") (" +
                        emit.binary_region("stablehlo.add", x.dtype) +
                        ") {replica_groups = dense<[[" + group + "]]> : tensor<1x" +
                        std::to_string(replicas) + "xi64>} : (" + type + ") -> " + type,
                    x.shape, x.dtype)};
}

}  // namespace

std::vector<OpDef> define_collective_ops() {
  return op_family<k_collective_ops>(OpRules<OpKind::all_reduce>{
      1, 1, infer_all_reduce, grad_all_reduce, all_reduce_cost, lower_all_reduce});
}

Tensor all_reduce(const Tensor& x, int replicas) {
  return call_op(OpKind::all_reduce, {x}, make_op_attrs<OpKind::all_reduce>({replicas}))[0];
}

}  // namespace tandem
