#include "io/weight_match.h"

#include <set>

namespace tandem::io::detail {

std::string describe_tensor(const Tensor& tensor) {
  return std::string(dtype_name(tensor.dtype())) + " " + shape_str(tensor.shape());
}

void match_weights(const NamedTensors& model_weights, const Safetensors& stored,
                   const std::string& file, std::vector<std::string>& problems) {
  std::set<std::string> names;
  for (const auto& [name, weight] : model_weights) {
    names.insert(name);
    const Tensor* saved = stored.find(name);
    if (saved == nullptr) {
      problems.push_back("the model's weight '" + name + "' (" + describe_tensor(weight) +
                         ") is not in " + file);
    } else if (saved->shape() != weight.shape() || saved->dtype() != weight.dtype()) {
      problems.push_back("'" + name + "' is " + describe_tensor(weight) + " in the model but " +
                         describe_tensor(*saved) + " in " + file);
    }
  }
  for (const auto& [name, tensor] : stored.tensors) {
    if (!names.contains(name)) {
      problems.push_back(file + " holds '" + name + "' (" + describe_tensor(tensor) +
                         "), which the model does not have");
    }
  }
}

void throw_mismatches(const std::string& subject, const std::vector<std::string>& problems,
                      const std::string& advice) {
  std::string text = subject + " does not fit the model (" + std::to_string(problems.size()) +
                     " problem" + (problems.size() == 1 ? "" : "s") + "): ";
  for (std::size_t i = 0; i < problems.size(); ++i)
    text += (i ? "; " : "") + problems[i];
  throw InvalidArgument(text + ". " + advice);
}

}  // namespace tandem::io::detail
