#pragma once
// The layers model optimisation works on (pruning, quantisation): Dense and Conv2D, the layers
// with a kernel whose output channels are its last axis.
#include <string>
#include <vector>

#include "tandem/nn.h"

namespace tandem::train::detail {

struct KernelLayer {
  nn::Layer layer;
  Tensor kernel;       // "<layer>/kernel": (in, units) or (KH, KW, C_in, C_out)
  bool named = false;  // picked by name rather than by default
};

// The model's Dense and Conv2D layers named in `names` (empty: all of them), in the model's
// order. Throws InvalidArgument starting "<what>: " for a name the model lacks, a named layer of
// another kind (saying that only Dense and Conv2D layers can be `verb`ed), a kernel that is not
// floating, and a model with no such layer.
std::vector<KernelLayer> kernel_layers(const nn::Model& model,
                                       const std::vector<std::string>& names,
                                       const std::string& what, const std::string& verb);

}  // namespace tandem::train::detail
