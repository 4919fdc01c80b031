#include "compile/passes.h"

#include <algorithm>
#include <map>
#include <span>
#include <unordered_map>

#include "ops/backend.h"
#include "ops/fused.h"
#include "ops/op_attrs.h"

namespace tandem::compile {
namespace {

bool is_constant(const Graph& graph, int value) {
  return graph.values[static_cast<std::size_t>(value)].kind == ValueKind::constant;
}

// Renames uses of values (inputs of later nodes, aliases, the step's outputs) by `renamed`.
void rename_uses(Graph& graph, const std::unordered_map<int, int>& renamed) {
  if (renamed.empty()) return;
  const auto rename = [&](int& value) {
    if (const auto found = renamed.find(value); found != renamed.end()) value = found->second;
  };
  for (Node& node : graph.nodes)
    for (int& input : node.inputs)
      rename(input);
  for (Value& value : graph.values)
    if (value.alias_of >= 0) rename(value.alias_of);
  for (int& output : graph.outputs)
    rename(output);
}

// The products the CPU fuses a residual add and a relu into (oneDNN post-ops): conv2d and matmul,
// and their integer forms.
bool is_product(OpKind kind) {
  return kind == OpKind::conv2d || kind == OpKind::matmul || kind == OpKind::quantized_conv2d ||
         kind == OpKind::quantized_matmul;
}

// Calls fn(std::integral_constant<OpKind, kind>) for a product's kind.
template <typename Fn>
decltype(auto) visit_product(OpKind kind, Fn&& fn) {
  switch (kind) {
    case OpKind::conv2d:
      return fn(std::integral_constant<OpKind, OpKind::conv2d>{});
    case OpKind::quantized_conv2d:
      return fn(std::integral_constant<OpKind, OpKind::quantized_conv2d>{});
    case OpKind::quantized_matmul:
      return fn(std::integral_constant<OpKind, OpKind::quantized_matmul>{});
    default:
      return fn(std::integral_constant<OpKind, OpKind::matmul>{});
  }
}

// Sets the fused_relu attribute of a product node; false when it was set already.
template <OpKind Kind>
bool fuse_relu_into(Node& node) {
  auto attrs = op_attrs<Kind>(node.attrs);
  if (attrs.fused_relu) return false;
  attrs.fused_relu = true;
  node.attrs = make_op_attrs<Kind>(attrs);
  return true;
}

// The fused flags of a product node.
struct ProductFusion {
  bool relu = false;
  bool add = false;
};
ProductFusion product_fusion(const Node& node) {
  return visit_product(node.kind, [&](auto kind) {
    const auto attrs = op_attrs<decltype(kind)::value>(node.attrs);
    return ProductFusion{attrs.fused_relu, attrs.fused_add};
  });
}

// "conv2d+bias+add+relu": what a fused product node runs, for the listing. The integer products
// always add a bias.
std::string product_label(const Node& node) {
  const ProductFusion fusion = product_fusion(node);
  const bool bias = node.kind == OpKind::quantized_conv2d ||
                    node.kind == OpKind::quantized_matmul ||
                    has_bias_input(node.inputs.size(), fusion.add);
  return std::string(op_name(node.kind)) + (bias ? "+bias" : "") + (fusion.add ? "+add" : "") +
         (fusion.relu ? "+relu" : "");
}

// Sets the fused_add attribute of a product node.
template <OpKind Kind>
void fuse_add_into(Node& node) {
  auto attrs = op_attrs<Kind>(node.attrs);
  attrs.fused_add = true;
  node.attrs = make_op_attrs<Kind>(attrs);
}

// Sets relu_masked on a max_pool2d_backward node; false when it was set already.
bool mask_by_relu(Node& node) {
  auto attrs = op_attrs<OpKind::max_pool2d_backward>(node.attrs);
  if (attrs.relu_masked) return false;
  attrs.relu_masked = true;
  node.attrs = make_op_attrs<OpKind::max_pool2d_backward>(attrs);
  return true;
}

}  // namespace

void find_constants(Graph& graph, PassCounts& counts) {
  std::vector<bool> written(graph.values.size(), false);
  for (const Node& node : graph.nodes) {
    if (!graph.writes(node)) continue;
    for (int output : node.outputs)
      if (graph.values[static_cast<std::size_t>(output)].alias_of >= 0)
        written[static_cast<std::size_t>(graph.root(output))] = true;
  }
  for (std::size_t i = 0; i < graph.values.size(); ++i) {
    Value& value = graph.values[i];
    if (value.kind != ValueKind::capture || written[i] || value.tensor.is_variable()) continue;
    // One handle (the graph's) and one holder of its storage: nothing else can reach it.
    if (value.tensor.use_count() == 1 && value.tensor.storage().use_count() == 1) {
      value.kind = ValueKind::constant;
      ++counts.constants;
    }
  }
}

void fold_constants(Graph& graph, PassCounts& counts) {
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    const OpDef& def = op_def(node.kind);
    bool foldable = !graph.writes(node);
    for (int input : node.inputs)
      foldable = foldable && is_constant(graph, input);
    if (!foldable) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<Tensor> inputs;
    for (int input : node.inputs)
      inputs.push_back(graph.values[static_cast<std::size_t>(input)].tensor);
    std::vector<Tensor> outputs;
    for (std::size_t k = 0; k < node.outputs.size(); ++k) {
      const Value& value = graph.values[static_cast<std::size_t>(node.outputs[k])];
      const int alias = k < def.output_aliases.size() ? def.output_aliases[k] : -1;
      outputs.push_back(
          alias >= 0 ? Tensor::from_storage(inputs[alias].storage(), inputs[alias].storage_offset(),
                                            value.meta.shape, value.meta.dtype)
                     : Tensor::empty(value.meta.shape, value.meta.dtype, value.device));
    }
    backend_for(graph.device).run(KernelContext{node.kind, inputs, outputs, node.attrs});
    for (std::size_t k = 0; k < node.outputs.size(); ++k) {
      Value& value = graph.values[static_cast<std::size_t>(node.outputs[k])];
      value.kind = ValueKind::constant;
      value.node = -1;
      value.alias_of = -1;  // a constant holds its own tensor (a view shares the input's storage)
      value.tensor = outputs[k];
    }
    ++counts.folded;
  }
  graph.nodes = std::move(kept);
}

void merge_common_subexpressions(Graph& graph, PassCounts& counts) {
  // Per buffer, how many writes came so far: a read after a write is another value.
  std::vector<int> version(graph.values.size(), 0);
  std::map<std::string, int> seen;  // key -> index into kept
  std::unordered_map<int, int> renamed;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    for (int& input : node.inputs)
      if (const auto found = renamed.find(input); found != renamed.end()) input = found->second;
    for (int output : node.outputs) {
      Value& value = graph.values[static_cast<std::size_t>(output)];
      if (value.alias_of >= 0)
        if (const auto found = renamed.find(value.alias_of); found != renamed.end())
          value.alias_of = found->second;
    }
    if (graph.writes(node)) {
      for (int output : node.outputs)
        if (graph.values[static_cast<std::size_t>(output)].alias_of >= 0)
          ++version[static_cast<std::size_t>(graph.root(output))];
      kept.push_back(std::move(node));
      continue;
    }
    std::string key = std::to_string(static_cast<int>(node.kind)) + "|" + node.attrs.str();
    for (int input : node.inputs) {
      key += "|" + std::to_string(input) + "@" +
             std::to_string(version[static_cast<std::size_t>(graph.root(input))]);
    }
    const auto [entry, inserted] = seen.try_emplace(key, static_cast<int>(kept.size()));
    if (inserted) {
      kept.push_back(std::move(node));
      continue;
    }
    const Node& earlier = kept[static_cast<std::size_t>(entry->second)];
    for (std::size_t k = 0; k < node.outputs.size(); ++k)
      renamed[node.outputs[k]] = earlier.outputs[k];
    ++counts.merged;
  }
  graph.nodes = std::move(kept);
  rename_uses(graph, renamed);
}

void remove_dead_nodes(Graph& graph, PassCounts& counts) {
  std::vector<bool> live(graph.values.size(), false);
  const auto mark = [&](int value) {
    // A live view keeps the buffer it views (and what made it) live.
    for (; value >= 0; value = graph.values[static_cast<std::size_t>(value)].alias_of)
      live[static_cast<std::size_t>(value)] = true;
  };
  for (int output : graph.outputs)
    mark(output);
  std::vector<bool> keep(graph.nodes.size(), false);
  for (std::size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    bool needed = graph.writes(node);
    for (int output : node.outputs)
      needed = needed || live[static_cast<std::size_t>(output)];
    if (!needed) continue;
    keep[n] = true;
    for (int input : node.inputs)
      mark(input);
  }
  std::vector<Node> kept;
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    if (keep[n]) {
      kept.push_back(std::move(graph.nodes[n]));
    } else {
      ++counts.removed;
    }
  }
  graph.nodes = std::move(kept);
}

namespace {

// How many places read each value: node inputs, the step's results, views of it.
std::vector<int> count_readers(const Graph& graph) {
  std::vector<int> readers(graph.values.size(), 0);
  for (const Node& node : graph.nodes)
    for (int input : node.inputs)
      ++readers[static_cast<std::size_t>(input)];
  for (int output : graph.outputs)
    ++readers[static_cast<std::size_t>(output)];
  for (const Value& value : graph.values)
    if (value.alias_of >= 0) ++readers[static_cast<std::size_t>(value.alias_of)];
  return readers;
}

// value -> index of the node making it
std::unordered_map<int, std::size_t> find_producers(const Graph& graph) {
  std::unordered_map<int, std::size_t> producer;
  for (std::size_t n = 0; n < graph.nodes.size(); ++n)
    for (int output : graph.nodes[n].outputs)
      producer[output] = n;
  return producer;
}

// Whether `node` reads or writes the buffer `root` (a root value).
bool touches(const Graph& graph, const Node& node, int root) {
  for (int value : node.inputs)
    if (graph.root(value) == root) return true;
  for (int value : node.outputs)
    if (graph.root(value) == root) return true;
  return false;
}

// Whether no node strictly between `after` and `before` writes in place to a buffer that one of
// `values` lives in: a node that reads them can move from `after` to `before`.
bool unwritten_between(const Graph& graph, std::size_t after, std::size_t before,
                       std::span<const int> values) {
  for (std::size_t between = after + 1; between < before; ++between) {
    if (!graph.writes(graph.nodes[between])) continue;
    for (int value : values)
      if (touches(graph, graph.nodes[between], graph.root(value))) return false;
  }
  return true;
}

// The nodes left after dropping those marked removed, with `replaced` taking the place of theirs.
void keep_nodes(Graph& graph, const std::vector<bool>& removed,
                std::map<std::size_t, Node>& replaced) {
  std::vector<Node> kept;
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    if (const auto found = replaced.find(n); found != replaced.end()) {
      kept.push_back(std::move(found->second));
    } else if (!removed[n]) {
      kept.push_back(std::move(graph.nodes[n]));
    }
  }
  graph.nodes = std::move(kept);
}

}  // namespace

void fuse_residual_adds(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  const std::vector<int> readers = count_readers(graph);
  std::unordered_map<int, std::size_t> producer = find_producers(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& add = graph.nodes[n];
    if (add.kind != OpKind::add) continue;
    const TensorMeta& sum = graph.values[static_cast<std::size_t>(add.outputs[0])].meta;
    // f32 only: a 16-bit product would add the residual before rounding, not after.
    if (sum.dtype != DType::f32) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      const int made = add.inputs[side];
      const int residual = add.inputs[1 - side];
      const auto found = producer.find(made);
      if (made == residual || found == producer.end() ||
          readers[static_cast<std::size_t>(made)] != 1) {
        continue;
      }
      const std::size_t place = found->second;
      Node& maker = graph.nodes[place];
      if (!is_product(maker.kind)) continue;
      const ProductFusion fusion = product_fusion(maker);
      if (fusion.add || fusion.relu) continue;
      const TensorMeta& residual_meta = graph.values[static_cast<std::size_t>(residual)].meta;
      if (residual_meta.shape != sum.shape || residual_meta.dtype != sum.dtype) continue;
      // The product reads the residual where it runs: it must exist by then, and no in-place
      // write between there and the add may change it.
      const auto residual_maker = producer.find(residual);
      if (residual_maker != producer.end() && residual_maker->second > place) continue;
      if (!unwritten_between(graph, place, n, std::span<const int>(&residual, 1))) continue;
      visit_product(maker.kind, [&](auto kind) { fuse_add_into<decltype(kind)::value>(maker); });
      maker.inputs.push_back(residual);
      maker.outputs[0] = add.outputs[0];
      maker.label = product_label(maker);
      producer[add.outputs[0]] = place;
      removed[n] = true;
      ++counts.fused;
      break;
    }
  }
  std::map<std::size_t, Node> replaced;
  keep_nodes(graph, removed, replaced);
}

void fuse_activations(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  const std::vector<int> readers = count_readers(graph);
  std::unordered_map<int, std::size_t> producer = find_producers(graph);

  std::vector<bool> removed(graph.nodes.size(), false);
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& activation = graph.nodes[n];
    if (activation.kind != OpKind::relu && activation.kind != OpKind::relu_backward) continue;
    const int made = activation.inputs[0];
    const auto found = producer.find(made);
    if (found == producer.end() || readers[static_cast<std::size_t>(made)] != 1) continue;
    Node& maker = graph.nodes[found->second];
    bool fused = false;
    if (activation.kind == OpKind::relu) {
      fused = is_product(maker.kind) && visit_product(maker.kind, [&](auto kind) {
                return fuse_relu_into<decltype(kind)::value>(maker);
              });
      if (fused) maker.label = product_label(maker);
    } else if (maker.kind == OpKind::max_pool2d_backward &&
               maker.inputs[1] == activation.inputs[1]) {
      // relu_backward(max_pool2d_backward(dy, y), y), y a relu's output: the pooling's backward
      // pass masks the few cells it writes instead of a second pass over all of them.
      fused = mask_by_relu(maker);
      if (fused) maker.label = "max_pool2d_backward+relu_backward";
    }
    if (!fused) continue;
    // The maker now makes the activation's result; its own is gone (nothing else read it).
    maker.outputs[0] = activation.outputs[0];
    producer[activation.outputs[0]] = found->second;
    removed[n] = true;
    ++counts.fused;
  }
  std::map<std::size_t, Node> replaced;
  keep_nodes(graph, removed, replaced);
}

void fuse_pooled_filter_gradients(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  const std::vector<int> readers = count_readers(graph);
  const std::unordered_map<int, std::size_t> producer = find_producers(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& gradient = graph.nodes[n];
    if (gradient.kind != OpKind::conv2d_backward_filter) continue;
    const int dy = gradient.inputs[1];
    const auto found = producer.find(dy);
    if (found == producer.end() || readers[static_cast<std::size_t>(dy)] != 1 ||
        graph.values[static_cast<std::size_t>(dy)].meta.dtype != DType::f32) {
      continue;
    }
    const std::size_t place = found->second;
    const Node& pooling = graph.nodes[place];
    if (pooling.kind != OpKind::max_pool2d_backward) continue;
    // The pooling's backward pass will run here: no write to what it reads may come in between.
    if (!unwritten_between(graph, place, n, pooling.inputs)) continue;
    gradient.attrs = pooled_conv2d_backward_filter_attrs(pooling.attrs, gradient.attrs);
    gradient.inputs = {gradient.inputs[0], pooling.inputs[0], pooling.inputs[1]};
    gradient.kind = OpKind::pooled_conv2d_backward_filter;
    gradient.label = (pooling.label.empty() ? std::string(op_name(pooling.kind)) : pooling.label) +
                     "+conv2d_backward_filter";
    removed[place] = true;
    ++counts.fused;
  }
  std::map<std::size_t, Node> replaced;
  keep_nodes(graph, removed, replaced);
}

namespace {

// Whether a pooled filter gradient's pooling is `pooling`'s (max_pool2d's attributes).
bool same_pooling(const Node& gradient, const Attrs& pooling) {
  const auto pooled = op_attrs<OpKind::pooled_conv2d_backward_filter>(gradient.attrs);
  const Pool2DOptions pool = op_attrs<OpKind::max_pool2d>(pooling);
  return pooled.pool_window == pool.window && pooled.pool_strides == pool.strides &&
         pooled.pool_padding == pool.padding;
}

}  // namespace

void fuse_pooled_convolutions(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  const std::vector<int> readers = count_readers(graph);
  const std::unordered_map<int, std::size_t> producer = find_producers(graph);
  std::unordered_map<int, std::size_t> gradient_over;  // y -> the pooled filter gradient over it
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.kind == OpKind::pooled_conv2d_backward_filter &&
        !op_attrs<OpKind::pooled_conv2d_backward_filter>(node.attrs).from_winners) {
      gradient_over[node.inputs[2]] = n;
    }
  }
  std::vector<bool> removed(graph.nodes.size(), false);
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& pooling = graph.nodes[n];
    if (pooling.kind != OpKind::max_pool2d) continue;
    const int y = pooling.inputs[0];
    const auto found = producer.find(y);
    if (found == producer.end() ||
        graph.values[static_cast<std::size_t>(y)].meta.dtype != DType::f32)
      continue;
    Node& convolution = graph.nodes[found->second];
    if (convolution.kind != OpKind::conv2d) continue;
    const Conv2DAttrs conv = op_attrs<OpKind::conv2d>(convolution.attrs);
    const Pool2DOptions pool = op_attrs<OpKind::max_pool2d>(pooling.attrs);
    if (conv.fused_add || pool.window[0] * pool.window[1] > 127) continue;
    // The pooling reads y, and at most a pooled filter gradient besides, which can take the
    // winners instead where its relu mask is the convolution's relu.
    const auto gradient = gradient_over.find(y);
    const bool with_gradient = gradient != gradient_over.end();
    if (readers[static_cast<std::size_t>(y)] != (with_gradient ? 2 : 1)) continue;
    if (with_gradient) {
      const Node& pooled_gradient = graph.nodes[gradient->second];
      const auto attrs = op_attrs<OpKind::pooled_conv2d_backward_filter>(pooled_gradient.attrs);
      if (attrs.relu_masked != conv.fused_relu || !same_pooling(pooled_gradient, pooling.attrs))
        continue;
    }
    // Only where the backend's kernel forms the convolution in bands; elsewhere it would run
    // the two ops with the convolution's result between them, and find the winners besides.
    const Attrs fused_attrs = pooled_conv2d_attrs(convolution.attrs, pooling.attrs);
    std::vector<TensorMeta> input_metas;
    for (int input : convolution.inputs)
      input_metas.push_back(graph.values[static_cast<std::size_t>(input)].meta);
    if (!backend_for(graph.device)
             .fused_kernel_gains(OpKind::pooled_conv2d, input_metas, fused_attrs)) {
      continue;
    }
    Value winners;
    winners.meta = {graph.values[static_cast<std::size_t>(pooling.outputs[0])].meta.shape,
                    DType::i8};
    winners.device = graph.values[static_cast<std::size_t>(pooling.outputs[0])].device;
    const auto winners_id = static_cast<int>(graph.values.size());
    graph.values.push_back(std::move(winners));
    convolution.attrs = fused_attrs;
    convolution.kind = OpKind::pooled_conv2d;
    convolution.outputs = {pooling.outputs[0], winners_id};
    convolution.label =
        (convolution.label.empty() ? std::string("conv2d") : convolution.label) + "+max_pool2d";
    if (with_gradient) {
      Node& pooled_gradient = graph.nodes[gradient->second];
      auto attrs = op_attrs<OpKind::pooled_conv2d_backward_filter>(pooled_gradient.attrs);
      attrs.from_winners = true;
      pooled_gradient.attrs = make_op_attrs<OpKind::pooled_conv2d_backward_filter>(attrs);
      pooled_gradient.inputs[2] = winners_id;
    }
    removed[n] = true;
    ++counts.fused;
  }
  std::map<std::size_t, Node> replaced;
  keep_nodes(graph, removed, replaced);
}

namespace {

// A node the chain pass may take: a correctly rounded element-wise op on floats whose inputs
// each repeat into its output (fused_elementwise's rule).
bool chainable(const Graph& graph, const Node& node) {
  if (!fusible_elementwise(node.kind) || node.outputs.size() != 1) return false;
  const Value& output = graph.values[static_cast<std::size_t>(node.outputs[0])];
  if (!is_floating(output.meta.dtype)) return false;
  for (int input : node.inputs) {
    const TensorMeta& meta = graph.values[static_cast<std::size_t>(input)].meta;
    if (meta.dtype != output.meta.dtype || !repeats_into(meta.shape, output.meta.shape))
      return false;
  }
  return true;
}

// A chain being formed: its nodes in graph order, the last one making its result.
struct Chain {
  std::vector<std::size_t> members;
  std::vector<int> inputs;  // values from outside the chain, each once
};

}  // namespace

void fuse_elementwise_chains(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  const std::vector<int> readers = count_readers(graph);
  const std::unordered_map<int, std::size_t> producer = find_producers(graph);
  std::map<std::size_t, Chain> chain_at;  // the node that ends a chain -> the chain
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (!chainable(graph, node)) continue;
    const Shape& shape = graph.values[static_cast<std::size_t>(node.outputs[0])].meta.shape;
    Chain chain;
    std::vector<int> own_inputs;  // this node's inputs that no absorbed chain makes
    for (int input : node.inputs) {
      const auto made = producer.find(input);
      const auto earlier = made == producer.end() ? chain_at.end() : chain_at.find(made->second);
      bool absorb = earlier != chain_at.end() && readers[static_cast<std::size_t>(input)] == 1 &&
                    graph.values[static_cast<std::size_t>(input)].meta.shape == shape;
      if (absorb) {
        const Chain& other = earlier->second;
        absorb = chain.members.size() + other.members.size() + 1 <= kMaxFusedInstructions;
        // Its nodes will run here: no write to the buffers they read may come in between.
        for (const std::size_t member : other.members)
          absorb = absorb && unwritten_between(graph, member, n, graph.nodes[member].inputs);
      }
      if (!absorb) {
        own_inputs.push_back(input);
        continue;
      }
      Chain other = std::move(earlier->second);
      chain_at.erase(earlier);
      chain.members.insert(chain.members.end(), other.members.begin(), other.members.end());
      chain.inputs.insert(chain.inputs.end(), other.inputs.begin(), other.inputs.end());
    }
    std::sort(chain.members.begin(), chain.members.end());
    chain.members.push_back(n);
    chain.inputs.insert(chain.inputs.end(), own_inputs.begin(), own_inputs.end());
    std::vector<int> unique_inputs;
    for (int input : chain.inputs)
      if (std::find(unique_inputs.begin(), unique_inputs.end(), input) == unique_inputs.end())
        unique_inputs.push_back(input);
    if (unique_inputs.size() > kMaxFusedInputs) continue;  // this node starts no chain either
    chain.inputs = std::move(unique_inputs);
    chain_at.emplace(n, std::move(chain));
  }

  std::vector<bool> removed(graph.nodes.size(), false);
  std::map<std::size_t, Node> replaced;
  for (const auto& [end, chain] : chain_at) {
    if (chain.members.size() < 2) continue;
    // Slots: the chain's inputs, then each member's result in order.
    std::unordered_map<int, std::int64_t> slot_of;
    for (std::size_t i = 0; i < chain.inputs.size(); ++i)
      slot_of[chain.inputs[i]] = static_cast<std::int64_t>(i);
    std::vector<FusedInstruction> program;
    for (const std::size_t member : chain.members) {
      const Node& node = graph.nodes[member];
      FusedInstruction instruction{node.kind, slot_of.at(node.inputs[0]), -1};
      if (node.inputs.size() > 1) instruction.b = slot_of.at(node.inputs[1]);
      slot_of[node.outputs[0]] = static_cast<std::int64_t>(chain.inputs.size() + program.size());
      program.push_back(instruction);
      removed[member] = true;
    }
    const Node& last = graph.nodes[end];
    Node fused{OpKind::fused_elementwise,
               fused_elementwise_attrs(program),
               chain.inputs,
               last.outputs,
               last.phase,
               fused_label(program)};
    replaced.emplace(end, std::move(fused));
    counts.fused += chain.members.size() - 1;
  }
  keep_nodes(graph, removed, replaced);
}

namespace {

// The lanes of an optimizer update node (1 unless already grouped).
std::int64_t update_lanes(const Node& node) {
  return node.kind == OpKind::adam_update ? op_attrs<OpKind::adam_update>(node.attrs).lanes
                                          : op_attrs<OpKind::sgd_update>(node.attrs).lanes;
}

// `lanes` set on an update's attributes.
Attrs with_lanes(const Node& node, std::int64_t lanes) {
  if (node.kind == OpKind::adam_update) {
    auto attrs = op_attrs<OpKind::adam_update>(node.attrs);
    attrs.lanes = lanes;
    return make_op_attrs<OpKind::adam_update>(attrs);
  }
  auto attrs = op_attrs<OpKind::sgd_update>(node.attrs);
  attrs.lanes = lanes;
  return make_op_attrs<OpKind::sgd_update>(attrs);
}

}  // namespace

void group_optimizer_updates(Graph& graph, PassCounts& counts) {
  if (graph.device.type != DeviceType::cpu) return;
  // Candidates by what must be equal: op, attributes, schedule value, dtype and input count.
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if ((node.kind != OpKind::adam_update && node.kind != OpKind::sgd_update) ||
        update_lanes(node) != 1) {
      continue;
    }
    const Value& param = graph.values[static_cast<std::size_t>(node.inputs[0])];
    const std::string key = std::string(op_name(node.kind)) + " " + node.attrs.str() +
                            " schedule %" + std::to_string(node.inputs[2]) + " " +
                            dtype_name(param.meta.dtype) + " " + std::to_string(node.inputs.size());
    groups[key].push_back(n);
  }
  std::vector<bool> removed(graph.nodes.size(), false);
  std::map<std::size_t, Node> grouped_at;  // node index -> the multi-tensor node replacing it
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const std::size_t place = members.back();
    std::vector<std::size_t> movable;
    for (const std::size_t n : members) {
      bool safe = true;
      for (std::size_t between = n + 1; between < place && safe; ++between) {
        if (std::find(members.begin(), members.end(), between) != members.end()) continue;
        for (int output : graph.nodes[n].outputs)
          safe = safe && !touches(graph, graph.nodes[between], graph.root(output));
      }
      if (safe) movable.push_back(n);
    }
    if (movable.size() < 2) continue;
    Node group = graph.nodes[place];
    group.inputs.clear();
    group.outputs.clear();
    for (const std::size_t n : movable) {
      const Node& member = graph.nodes[n];
      group.inputs.insert(group.inputs.end(), member.inputs.begin(), member.inputs.end());
      group.outputs.insert(group.outputs.end(), member.outputs.begin(), member.outputs.end());
      removed[n] = true;
    }
    const auto lanes = static_cast<std::int64_t>(movable.size());
    group.attrs = with_lanes(group, lanes);
    group.label = std::string(op_name(group.kind)) + " x" + std::to_string(lanes);
    grouped_at.emplace(movable.back(), std::move(group));
    counts.grouped += movable.size();
  }
  keep_nodes(graph, removed, grouped_at);
}

}  // namespace tandem::compile
