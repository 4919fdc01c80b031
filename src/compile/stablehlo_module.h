#pragma once
// A graph as one StableHLO module, written with each op's lowering rule (ops/stablehlo.h).
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tandem::compile {

struct LoweredGraph {
  std::string module;          // MLIR text: func.func @main
  std::vector<int> arguments;  // the value of each argument of @main, in order
};

// @main's arguments are the graph's inputs, then its captures and constants (in value order);
// its results are the graph's outputs. Throws InvalidArgument naming the first op without a
// lowering rule, or a host operand (not lowered yet).
LoweredGraph lower_graph(const Graph& graph);

}  // namespace tandem::compile
