#pragma once
// A traced step as a graph of op-table nodes over values. Values are single-assignment, except
// that a node which writes the inputs its outputs alias (an optimizer update) changes the buffer
// under them in place: such nodes keep their place in the order, and the passes treat them as
// effects (never removed, merged or folded).
#include <cstddef>
#include <string>
#include <vector>

#include "ops/op_table.h"
#include "tandem/spans.h"

namespace tandem::compile {

enum class ValueKind {
  input,     // an argument of the step, bound to the caller's tensor on every run
  capture,   // a tensor from outside the trace (a weight, an optimizer slot), read by reference
  constant,  // a tensor nothing outside the graph holds and no node writes
  host,      // a host operand (tandem/ops.h), filled before every run
  node,      // an output of a node
};

struct Value {
  ValueKind kind = ValueKind::node;
  TensorMeta meta;
  Device device;
  int node = -1;      // the producing node (kind node)
  int alias_of = -1;  // the value whose buffer this one shares (a view or an in-place output)
  Tensor tensor;      // capture and constant: the tensor itself
  std::string what;   // host: what the operand is
  HostFill fill;      // host: fills the operand's CPU copy
};

struct Node {
  OpKind kind{};
  Attrs attrs;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  // The phase (forward, backward, optimizer) it was traced in; a run marks the same spans.
  SpanKind phase = SpanKind::step;
  // Set by fusion: the name the listing shows instead of the op's.
  std::string label;
};

struct Graph {
  std::string name;
  Device device;
  std::vector<Value> values;
  std::vector<Node> nodes;         // in execution order
  std::vector<int> inputs;         // the step's arguments, value ids
  std::vector<int> outputs;        // what the step returns, value ids
  std::vector<int> host_operands;  // value ids, in the order their fills run
  // The replicas of the data-parallel program it was traced as (see TraceRecorder::replicas).
  int replicas = 1;

  // The value whose buffer `value` lives in: itself unless it aliases another.
  int root(int value) const;
  bool writes(const Node& node) const { return op_def(node.kind).writes_aliased_inputs; }
};

// One line per value kind and node: "%12 = conv2d(%3, %7) strides=[1, 1] -> (32, 26, 26, 32) f32".
std::string describe_value(const Graph& graph, int value);
std::string graph_listing(const Graph& graph);

}  // namespace tandem::compile
