// Importing a PyTorch state dict saved as safetensors: modules are grouped from the tensor names
// ("features.0.weight" belongs to module "features.0"), recognised by their tensors (4-D weight:
// Conv2d, 2-D weight: Linear, running_mean: BatchNorm), paired with the Tandem model's layers and
// converted to Tandem's layouts. Every problem is collected before anything is changed.
#include <algorithm>
#include <cctype>
#include <set>

#include "core/tensor_copy.h"
#include "io/weight_match.h"
#include "tandem/io.h"
#include "tandem/ops.h"

namespace tandem::io {
namespace {

enum class ModuleKind { conv, linear, batch_norm, unknown };

const char* kind_name(ModuleKind kind) {
  switch (kind) {
    case ModuleKind::conv:
      return "Conv2d";
    case ModuleKind::linear:
      return "Linear";
    case ModuleKind::batch_norm:
      return "BatchNorm";
    case ModuleKind::unknown:
      break;
  }
  return "an unrecognised module";
}

struct TorchModule {
  std::string prefix;
  std::map<std::string, Tensor> tensors;  // by member: weight, bias, running_mean, ...
  std::map<std::string, std::string> full_names;

  ModuleKind kind() const {
    if (tensors.contains("running_mean")) return ModuleKind::batch_norm;
    const auto weight = tensors.find("weight");
    if (weight == tensors.end()) return ModuleKind::unknown;
    if (weight->second.rank() == 4) return ModuleKind::conv;
    if (weight->second.rank() == 2) return ModuleKind::linear;
    return ModuleKind::unknown;
  }
};

// "conv2" < "conv10", "features.2" < "features.10": digit runs compare by value.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t end_a = i;
      std::size_t end_b = j;
      while (end_a < a.size() && std::isdigit(static_cast<unsigned char>(a[end_a])))
        ++end_a;
      while (end_b < b.size() && std::isdigit(static_cast<unsigned char>(b[end_b])))
        ++end_b;
      const std::string digits_a = a.substr(i, end_a - i);
      const std::string digits_b = b.substr(j, end_b - j);
      if (digits_a.size() != digits_b.size()) return digits_a.size() < digits_b.size();
      if (digits_a != digits_b) return digits_a < digits_b;
      i = end_a;
      j = end_b;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

ModuleKind expected_kind(const nn::Layer& layer) {
  const std::string kind = layer.impl().class_name();
  if (kind == "Conv2D") return ModuleKind::conv;
  if (kind == "Dense") return ModuleKind::linear;
  if (kind == "BatchNormalization") return ModuleKind::batch_norm;
  return ModuleKind::unknown;
}

// The (H, W, C) image a Dense reads through a Flatten, if it does.
std::optional<Shape> flattened_image(const nn::Model& model, const nn::Layer& dense) {
  for (const auto& node : model.nodes()) {
    if (node->layer.ptr() != dense.ptr() || node->inputs.size() != 1) continue;
    const nn::Node& source = *node->inputs[0].node();
    if (!source.layer.defined() || std::string(source.layer.impl().class_name()) != "Flatten") {
      continue;
    }
    const Shape& image = source.inputs.at(0).shape();  // (N, H, W, C)
    if (image.size() == 4) return Shape{image[1], image[2], image[3]};
  }
  return std::nullopt;
}

class Importer {
 public:
  Importer(const std::string& file, DType dtype) : file_(file), dtype_(dtype) {}

  // Converts `module` into `layer`'s weights, noting every problem.
  void pair(const nn::Model& model, const TorchModule& module, const nn::Layer& layer) {
    const ModuleKind kind = module.kind();
    const std::string layer_label =
        std::string(layer.impl().class_name()) + " '" + layer.name() + "'";
    if (kind != expected_kind(layer)) {
      problems_.push_back("module '" + module.prefix + "' is " + kind_name(kind) +
                          " but pairs with " + layer_label);
      return;
    }
    const std::vector<Tensor> weights = layer.weights();
    std::set<std::string> used;
    auto take = [&](const std::string& member, const Tensor& target,
                    const std::function<Tensor(const Tensor&)>& convert, const Shape& torch_shape) {
      const auto found = module.tensors.find(member);
      if (found == module.tensors.end()) {
        problems_.push_back(layer_label + "'s " + target.name() + " " + shape_str(target.shape()) +
                            " needs '" + module.prefix + "." + member + "' " +
                            shape_str(torch_shape) + ", which the file lacks");
        return;
      }
      used.insert(member);
      const Tensor& value = found->second;
      if (value.shape() != torch_shape) {
        problems_.push_back("'" + module.full_names.at(member) + "' is " +
                            shape_str(value.shape()) + " but " + layer_label + "'s " +
                            target.name() + " " + shape_str(target.shape()) + " needs " +
                            shape_str(torch_shape));
        return;
      }
      if (!is_floating(value.dtype())) {
        problems_.push_back("'" + module.full_names.at(member) + "' is " +
                            dtype_name(value.dtype()) + ", not a floating-point tensor");
        return;
      }
      const Tensor typed = value.dtype() == dtype_ ? value : cast(value, dtype_);
      assignments_.emplace_back(target, convert(typed));
    };
    const auto identity = [](const Tensor& value) { return value; };
    if (kind == ModuleKind::conv) {
      const Tensor& kernel = weights[0];  // (KH, KW, C_in, C_out)
      const Shape& k = kernel.shape();
      take("weight", kernel,
           [](const Tensor& w) {
             return transpose(w, {2, 3, 1, 0});
           },
           {k[3], k[2], k[0], k[1]});
      bias(module, layer_label, weights, used, take, identity);
    } else if (kind == ModuleKind::linear) {
      const Tensor& kernel = weights[0];  // (in, units)
      const std::int64_t inputs = kernel.dim(0);
      const std::int64_t units = kernel.dim(1);
      const std::optional<Shape> image = flattened_image(model, layer);
      take("weight", kernel,
           [&](const Tensor& w) {  // (units, in)
             if (!image) return transpose(w, {1, 0});
             // PyTorch's features are (C, H, W)-ordered, Tandem's (H, W, C)-ordered.
             const Shape& hwc = *image;
             const Tensor chw = reshape(w, {units, hwc[2], hwc[0], hwc[1]});
             return transpose(reshape(transpose(chw, {0, 2, 3, 1}), {units, inputs}), {1, 0});
           },
           {units, inputs});
      bias(module, layer_label, weights, used, take, identity);
    } else {
      const Shape channels = weights[0].shape();
      take("weight", weights[0], identity, channels);
      take("bias", weights[1], identity, channels);
      take("running_mean", weights[2], identity, channels);
      take("running_var", weights[3], identity, channels);
      used.insert("num_batches_tracked");  // PyTorch's counter for momentum=None; not a weight
    }
    for (const auto& [member, value] : module.tensors) {
      if (!used.contains(member)) {
        problems_.push_back("'" + module.full_names.at(member) + "' " + shape_str(value.shape()) +
                            " has no counterpart in " + layer_label);
      }
    }
  }

  void problem(std::string text) { problems_.push_back(std::move(text)); }

  void apply() const {
    if (!problems_.empty()) {
      detail::throw_mismatches(
          "the PyTorch weights in " + file_, problems_,
          "Build the Tandem model with the PyTorch module's architecture, or pair modules and "
          "layers explicitly with TorchImportOptions::modules");
    }
    for (const auto& [target, value] : assignments_)
      tandem::detail::copy_into(target, value, "import_torch_weights: " + target.name());
  }

 private:
  template <typename Take, typename Convert>
  void bias(const TorchModule& module, const std::string& layer_label,
            const std::vector<Tensor>& weights, std::set<std::string>& used, Take& take,
            const Convert& convert) {
    const bool torch_bias = module.tensors.contains("bias");
    if (weights.size() == 2) {
      take("bias", weights[1], convert, weights[1].shape());
    } else if (torch_bias) {
      used.insert("bias");
      problems_.push_back("'" + module.full_names.at("bias") + "' is a bias but " + layer_label +
                          " has none (use_bias=false)");
    }
  }

  std::string file_;
  DType dtype_;
  std::vector<std::string> problems_;
  std::vector<std::pair<Tensor, Tensor>> assignments_;
};

}  // namespace

void import_torch_weights(nn::Model& model, const std::string& path,
                          const TorchImportOptions& options) {
  if (!model.built()) {
    throw InvalidArgument("import_torch_weights: build the model before importing " + path);
  }
  const Safetensors file = load_safetensors(path);
  std::map<std::string, TorchModule> by_prefix;
  for (const auto& [name, tensor] : file.tensors) {
    const std::size_t dot = name.rfind('.');
    const std::string prefix = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string member = dot == std::string::npos ? name : name.substr(dot + 1);
    TorchModule& module = by_prefix[prefix];
    module.prefix = prefix;
    module.tensors[member] = tensor;
    module.full_names[member] = name;
  }
  std::vector<const TorchModule*> modules;
  for (const auto& [prefix, module] : by_prefix)
    modules.push_back(&module);
  std::sort(modules.begin(), modules.end(), [](const TorchModule* a, const TorchModule* b) {
    return natural_less(a->prefix, b->prefix);
  });
  std::vector<nn::Layer> layers;
  for (const nn::Layer& layer : model.layers()) {
    if (!layer.weights().empty()) layers.push_back(layer);
  }
  DType dtype = DType::f32;
  if (!layers.empty()) dtype = layers.front().weights().front().dtype();

  Importer importer(path, dtype);
  if (options.modules.empty()) {
    // Per kind, the i-th module (in natural order of names) goes to the i-th layer (in the
    // model's order): "features.*" and "classifier.*" pair up whatever their names sort as.
    for (const ModuleKind kind :
         {ModuleKind::conv, ModuleKind::linear, ModuleKind::batch_norm, ModuleKind::unknown}) {
      std::vector<const TorchModule*> of_kind;
      for (const TorchModule* module : modules) {
        if (module->kind() == kind) of_kind.push_back(module);
      }
      std::vector<nn::Layer> targets;
      for (const nn::Layer& layer : layers) {
        if (expected_kind(layer) == kind) targets.push_back(layer);
      }
      const std::size_t paired = std::min(of_kind.size(), targets.size());
      for (std::size_t i = 0; i < paired; ++i)
        importer.pair(model, *of_kind[i], targets[i]);
      for (std::size_t i = paired; i < targets.size(); ++i) {
        importer.problem(std::string(targets[i].impl().class_name()) + " '" + targets[i].name() +
                         "' has no " + kind_name(kind) +
                         " module in the file to take its "
                         "weights from");
      }
      for (std::size_t i = paired; i < of_kind.size(); ++i) {
        importer.problem("module '" + of_kind[i]->prefix + "' (" + kind_name(kind) + ") has " +
                         (kind == ModuleKind::unknown ? "tensors of no known layer kind"
                                                      : "no layer of its kind left in the model"));
      }
    }
  } else {
    std::set<std::string> filled;
    for (const TorchModule* module : modules) {
      const auto target = options.modules.find(module->prefix);
      if (target == options.modules.end()) {
        importer.problem("module '" + module->prefix + "' is not in TorchImportOptions::modules");
        continue;
      }
      const auto layer = std::find_if(
          layers.begin(), layers.end(),
          [&](const nn::Layer& candidate) { return candidate.name() == target->second; });
      if (layer == layers.end()) {
        importer.problem("module '" + module->prefix + "' maps to '" + target->second +
                         "', which is no layer with weights in the model");
        continue;
      }
      filled.insert(layer->name());
      importer.pair(model, *module, *layer);
    }
    for (const nn::Layer& layer : layers) {
      if (!filled.contains(layer.name())) {
        importer.problem(std::string(layer.impl().class_name()) + " '" + layer.name() +
                         "' gets no module in TorchImportOptions::modules");
      }
    }
  }
  importer.apply();
}

}  // namespace tandem::io
