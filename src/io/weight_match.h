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

// InvalidArgument: "<subject> does not fit the model (N problems): a; b; c. <advice>"
[[noreturn]] void throw_mismatches(const std::string& subject,
                                   const std::vector<std::string>& problems,
                                   const std::string& advice);

}  // namespace tandem::io::detail
