#include "train/kernel_layers.h"

#include <set>

namespace tandem::train::detail {

std::vector<KernelLayer> kernel_layers(const nn::Model& model,
                                       const std::vector<std::string>& names,
                                       const std::string& what, const std::string& verb) {
  const std::set<std::string> named(names.begin(), names.end());
  std::set<std::string> seen;
  std::vector<KernelLayer> found;
  for (const nn::Layer& layer : model.layers()) {
    const bool asked = named.contains(layer.name());
    if (!named.empty() && !asked) continue;
    seen.insert(layer.name());
    const std::string kind = layer.impl().class_name();
    if (kind != "Dense" && kind != "Conv2D") {
      if (asked) {
        throw InvalidArgument(what + ": layer '" + layer.name() + "' (" + kind +
                              ") has no kernel to " + verb + "; " + verb +
                              " Dense and Conv2D layers");
      }
      continue;
    }
    Tensor kernel;
    for (const Tensor& weight : layer.weights()) {
      if (weight.name() == layer.name() + "/kernel") kernel = weight;
    }
    if (!kernel.defined()) {
      throw InvalidArgument(what + ": layer '" + layer.name() +
                            "' is not built; build the model "
                            "first");
    }
    if (!is_floating(kernel.dtype())) {
      throw InvalidArgument(what + ": layer '" + layer.name() + "' has a " +
                            dtype_name(kernel.dtype()) + " kernel; " + verb + " floating weights");
    }
    found.push_back({layer, kernel, asked});
  }
  for (const std::string& name : named) {
    if (!seen.contains(name))
      throw InvalidArgument(what + ": the model has no layer '" + name + "'");
  }
  if (found.empty()) {
    throw InvalidArgument(what + ": model '" + model.name() + "' has no Dense or Conv2D layer to " +
                          verb);
  }
  return found;
}

}  // namespace tandem::train::detail
