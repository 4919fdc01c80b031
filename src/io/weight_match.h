#pragma once
// Matching stored tensors against a model's weights by name, shape and dtype, collecting every
// mismatch so one error lists them all (checkpoints, saved models).
#include <string>
#include <vector>

#include "tandem/io.h"

namespace tandem::io::detail {

// "f32 (3, 3, 1, 32)"
std::string describe_tensor(const Tensor& tensor);

// Appends a line per model weight missing from `stored` or stored in another shape or dtype,
// and per stored tensor the model lacks; `file` names the file in the lines.
void match_weights(const NamedTensors& model_weights, const Safetensors& stored,
                   const std::string& file, std::vector<std::string>& problems);

// Throws InvalidArgument naming `path` and the name when two layers of `model` share one, as
// Keras refuses such a model ("All layer names should be unique"): their weights could not be
// told apart in a checkpoint or a saved file.
void require_unique_layer_names(const nn::Model& model, const std::string& path);

// How many values of `value` are NaN or infinite (0 for a tensor that is not floating).
std::int64_t non_finite_values(const Tensor& value);
// Throws IoError unless every value of a floating `value` is finite: a model whose weights hold
// NaN or infinities (saved after its training diverged) would only train on NaN. `what` names
// the file and the weight: "m.keras: weight 'dense/kernel' of layer 'dense'".
void require_finite(const Tensor& value, const std::string& what);

// InvalidArgument: "<subject> does not fit the model (N problems): a; b; c. <advice>"
[[noreturn]] void throw_mismatches(const std::string& subject,
                                   const std::vector<std::string>& problems,
                                   const std::string& advice);

}  // namespace tandem::io::detail
