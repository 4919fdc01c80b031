#pragma once
// The passes over a traced graph, in the order compile_graph runs them.
#include <cstddef>

#include "compile/graph.h"

namespace tandem::compile {

struct PassCounts {
  std::size_t constants = 0;  // captures found to be constants
  std::size_t folded = 0;     // nodes evaluated at compile time
  std::size_t merged = 0;     // nodes that repeated an earlier one
  std::size_t removed = 0;    // nodes whose results nothing used
  std::size_t fused = 0;      // nodes folded into another (activations, element-wise chains)
  std::size_t grouped = 0;    // optimizer updates merged into multi-tensor ones
};

// A capture that nothing outside the graph holds (no other handle, no view of its storage), that
// is not a variable and that no node writes can never change: it becomes a constant.
void find_constants(Graph& graph, PassCounts& counts);
// Runs, once, every node whose inputs are all constants (on the graph's device, with the same
// kernels a run would use) and makes its outputs constants.
void fold_constants(Graph& graph, PassCounts& counts);
// Merges a node into an earlier one of the same op, attributes and inputs, when no write to
// those inputs' buffers came between them.
void merge_common_subexpressions(Graph& graph, PassCounts& counts);
// Drops nodes whose outputs neither the step's results nor a writing node need.
void remove_dead_nodes(Graph& graph, PassCounts& counts);
// On the CPU, an f32 add of a convolution's or product's result that nothing else reads and
// another value of its shape (a block's shortcut) becomes that node's fused residual
// (Conv2DAttrs/MatmulAttrs::fused_add, a oneDNN binary post-op): the sum is made as the product is
// stored, one pass and one buffer fewer; a relu after it then fuses too. The residual must be
// made before the product runs and left alone by in-place writes until the add. Same bits.
void fuse_residual_adds(Graph& graph, PassCounts& counts);
// On the CPU, a relu whose input is a convolution's or product's result that nothing else reads
// becomes that node's oneDNN post-op (Conv2DAttrs/MatmulAttrs::fused_relu): one pass over the
// activation instead of two, and one buffer fewer. The results are the same bits (relu commutes
// with rounding to the storage type). Likewise relu's backward pass after max pooling's, over the
// same relu output, becomes the pooling's mask (MaxPool2DBackwardAttrs::relu_masked).
void fuse_activations(Graph& graph, PassCounts& counts);
// On the CPU, an f32 convolution's filter gradient whose dy is max pooling's backward pass that
// nothing else reads (a first layer followed by pooling: its input needs no gradient) becomes one
// pooled_conv2d_backward_filter node (ops/fused.h) over the pooled gradient and the pooling's
// input: where the CPU's few-channel loops run it, dy is formed a few rows at a time and summed
// from there instead of written whole and read back. The pooling's inputs must be left alone by
// in-place writes until the filter gradient runs.
void fuse_pooled_filter_gradients(Graph& graph, PassCounts& counts);
// On the CPU, an f32 convolution (relu fused or not, no residual) whose result y only a max
// pooling reads becomes one pooled_conv2d node (ops/fused.h) at the convolution's place, making
// the pooled result and the pooling's winners, where the backend's kernel gains on its shapes
// (Backend::fused_kernel_gains; the CPU's few-channel loops: y pooled a few rows at a time from
// the cache instead of written whole and read back). y may also
// be read by the pooled filter gradient of the same pooling (fuse_pooled_filter_gradients) whose
// relu mask is the convolution's relu: that node then reads the winners instead of y
// (from_winners), and y is never in memory. Same bits.
void fuse_pooled_convolutions(Graph& graph, PassCounts& counts);
// On the CPU, chains of correctly rounded element-wise ops (add, mul, relu, relu_backward, ...;
// ops/fused.h) become one fused_elementwise node: each element goes through the whole chain in
// registers instead of one pass over memory per op, and the chain's intermediate buffers go. A
// node joins the chain that makes one of its inputs when nothing else reads that input, it has
// the same shape, and no in-place write between the chain's nodes and this one touches what
// they read (they run at the chain's end). Same bits as the ops one by one.
void fuse_elementwise_chains(Graph& graph, PassCounts& counts);
// On the CPU, the optimizer's updates of one op, options, schedule and dtype (every weight's
// Adam step, say) become one multi-tensor update (SgdUpdateAttrs/AdamUpdateAttrs::lanes): one
// parallel region over all their tensors, split evenly across the threads, instead of one per
// tensor, in which the small ones run on one thread. It takes the place of the last of them; an
// update whose buffers a node between it and that place touches keeps its own node. The
// results are the same bits (each element is updated by the same formula).
void group_optimizer_updates(Graph& graph, PassCounts& counts);

}  // namespace tandem::compile
