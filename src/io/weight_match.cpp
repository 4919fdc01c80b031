#include "io/weight_match.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>

#include "tandem/ops.h"

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

void require_unique_layer_names(const nn::Model& model, const std::string& path) {
  std::set<std::string> names;
  for (const nn::Layer& layer : model.layers()) {
    if (!names.insert(layer.name()).second) {
      throw InvalidArgument(path + ": two layers are named '" + layer.name() +
                            "'; layer names must be unique (Keras refuses such a model too): "
                            "rename one in the file");
    }
  }
}

std::int64_t non_finite_values(const Tensor& value) {
  if (!is_floating(value.dtype())) return 0;
  // f32 holds every NaN and infinity of the narrower floats; a weight past f32's range is none.
  const Tensor host = cast(value, DType::f32).to(Device::cpu());
  const std::span<const float> values(host.data<float>(), static_cast<std::size_t>(host.numel()));
  return std::count_if(values.begin(), values.end(),
                       [](float number) { return !std::isfinite(number); });
}

void require_finite(const Tensor& value, const std::string& what) {
  const std::int64_t bad = non_finite_values(value);
  if (bad == 0) return;
  throw IoError(what + " holds " + std::to_string(bad) + " NaN or infinite value" +
                (bad == 1 ? "" : "s") + " of " + std::to_string(value.numel()) +
                "; the model was saved after its training diverged: train it again (with a lower "
                "learning rate), or take an earlier checkpoint's weights");
}

}  // namespace tandem::io::detail
