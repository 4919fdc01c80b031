#include "tandem/random.h"

#include <cmath>
#include <numbers>

#include "core/tracing.h"

namespace tandem {

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) {
  default_generator().set_state(seed, 0);
}

namespace {

template <typename Draw>
Tensor fill_host(const Shape& shape, DType dtype, Device device, Draw&& draw) {
  if (!is_floating(dtype)) {
    throw InvalidArgument(std::string("random tensors need a floating dtype, got ") +
                          dtype_name(dtype));
  }
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(host.raw_data());
    const std::int64_t count = host.numel();
    for (std::int64_t i = 0; i < count; ++i)
      out[i] = convert_element<T>(draw(i));
  });
  return host.to(device);
}

// Box-Muller on two uniforms; (0, 1] for the first keeps the log finite.
double standard_normal(std::uint64_t seed, std::uint64_t start, std::uint64_t pair_index) {
  const double u1 = 1.0 - uniform_from_bits(philox_word(seed, start, 2 * pair_index));
  const double u2 = uniform_from_bits(philox_word(seed, start, 2 * pair_index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// What to do instead of drawing inside a traced step.
constexpr const char* kTracingFix =
    "Draw random values outside the step and pass them in as inputs, build the model (model.build) "
    "before its first traced call so its initial weights are drawn eagerly, or use dropout, whose "
    "draw is a host operand";

}  // namespace

Tensor random_uniform(const Shape& shape, double low, double high, DType dtype,
                      Generator& generator, Device device) {
  detail::refuse_while_tracing("random_uniform", kTracingFix);
  const std::uint64_t seed = generator.seed();
  const std::uint64_t start = generator.reserve(static_cast<std::uint64_t>(shape_numel(shape)));
  return fill_host(shape, dtype, device, [&](std::int64_t i) {
    return low + (high - low) * uniform_from_bits(philox_word(seed, start, i));
  });
}

Tensor random_normal(const Shape& shape, double mean, double stddev, DType dtype,
                     Generator& generator, Device device) {
  detail::refuse_while_tracing("random_normal", kTracingFix);
  const std::uint64_t seed = generator.seed();
  const std::uint64_t start = generator.reserve(2 * static_cast<std::uint64_t>(shape_numel(shape)));
  return fill_host(shape, dtype, device, [&](std::int64_t i) {
    return mean + stddev * standard_normal(seed, start, static_cast<std::uint64_t>(i));
  });
}

Tensor truncated_normal(const Shape& shape, double mean, double stddev, DType dtype,
                        Generator& generator, Device device) {
  detail::refuse_while_tracing("truncated_normal", kTracingFix);
  // Each element gets its own sub-stream of attempts so the result does not depend on how many
  // redraws other elements needed.
  const std::uint64_t seed = generator.next_seed();
  return fill_host(shape, dtype, device, [&](std::int64_t i) {
    const std::uint64_t element_start = static_cast<std::uint64_t>(i) << 20;
    for (std::uint64_t attempt = 0;; ++attempt) {
      const double z = standard_normal(seed, element_start, attempt);
      if (std::abs(z) <= 2.0) return mean + stddev * z;
    }
  });
}

}  // namespace tandem
