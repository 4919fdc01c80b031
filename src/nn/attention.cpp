// MultiHeadAttention (self-attention): projections to per-head queries, keys and values, scaled
// dot-product attention as two batched matmuls around a softmax, and the output projection. The
// heads live in a batch axis, so one matmul serves them all: (B, H, S, K) x (B, H, S, K)^T.
#include <cmath>

#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class MultiHeadAttentionLayer final : public LayerBase {
 public:
  MultiHeadAttentionLayer(std::int64_t num_heads, std::int64_t key_dim, double dropout,
                          std::optional<std::uint64_t> seed, const std::string& name)
      : LayerBase("multi_head_attention", name),
        num_heads_(num_heads),
        key_dim_(key_dim),
        dropout_(dropout),
        generator_(seed.has_value() ? *seed : default_generator().next_seed()) {
    detail::require_positive("MultiHeadAttention", "num_heads", num_heads);
    detail::require_positive("MultiHeadAttention", "key_dim", key_dim);
    if (!(dropout >= 0.0 && dropout < 1.0)) {
      throw InvalidArgument("MultiHeadAttention: dropout must be in [0, 1), got " +
                            std::to_string(dropout));
    }
  }

  const char* class_name() const override { return "MultiHeadAttention"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"num_heads", num_heads_},
                       {"key_dim", key_dim_},
                       {"dropout", dropout_},
                       {"seed", generator_.seed()}};
  }
  Generator* generator() override { return &generator_; }

  // x (batch, length, features) -> the same shape
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() != 3 || x[2] <= 0) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs inputs (batch, length, features), got " + shape_str(x));
    }
    if (built() && x[2] != query_kernel_.dim(0)) {
      throw InvalidArgument(detail::describe(*this) + " was built for " +
                            std::to_string(query_kernel_.dim(0)) + " features, got inputs " +
                            shape_str(x));
    }
    return x;
  }

  Tensor call(std::span<const Tensor> inputs, bool training) override {
    const Tensor& x = inputs[0];  // (B, S, D)
    const std::int64_t batch = x.dim(0);
    const std::int64_t length = x.dim(1);
    // Scaling the queries costs S*H*K multiplies instead of S*S*H for the scores.
    const Tensor query = heads(project(x, query_kernel_, query_bias_), batch, length) *
                         (1.0 / std::sqrt(static_cast<double>(key_dim_)));        // (B, H, S, K)
    const Tensor key = heads(project(x, key_kernel_, key_bias_), batch, length);  // (B, H, S, K)
    const Tensor value =
        heads(project(x, value_kernel_, value_bias_), batch, length);  // (B, H, S, K)
    Tensor weights = softmax(matmul(query, key, false, true), -1);     // (B, H, S, S)
    if (training && dropout_ > 0.0) weights = dropout(weights, dropout_, generator_).y;
    const Tensor context = matmul(weights, value);  // (B, H, S, K)
    const Tensor merged =
        reshape(transpose(context, {0, 2, 1, 3}), {batch, length, num_heads_ * key_dim_});
    return project(merged, output_kernel_, output_bias_);  // (B, S, D)
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    const std::int64_t features = input_shapes[0][2];
    const std::int64_t projected = num_heads_ * key_dim_;
    query_kernel_ = add_weight("query/kernel", {features, projected}, Initializer::glorot_uniform,
                               dtype, device);
    query_bias_ = add_weight("query/bias", {projected}, Initializer::zeros, dtype, device);
    key_kernel_ =
        add_weight("key/kernel", {features, projected}, Initializer::glorot_uniform, dtype, device);
    key_bias_ = add_weight("key/bias", {projected}, Initializer::zeros, dtype, device);
    value_kernel_ = add_weight("value/kernel", {features, projected}, Initializer::glorot_uniform,
                               dtype, device);
    value_bias_ = add_weight("value/bias", {projected}, Initializer::zeros, dtype, device);
    output_kernel_ = add_weight("attention_output/kernel", {projected, features},
                                Initializer::glorot_uniform, dtype, device);
    output_bias_ =
        add_weight("attention_output/bias", {features}, Initializer::zeros, dtype, device);
  }

 private:
  // x (B, S, in) @ kernel (in, out) + bias, in x's dtype (mixed precision keeps the variables
  // in float32).
  static Tensor project(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
    return matmul(x, cast(kernel, x.dtype()), cast(bias, x.dtype()));
  }

  // (B, S, H K) -> (B, H, S, K)
  Tensor heads(const Tensor& projected, std::int64_t batch, std::int64_t length) const {
    return transpose(reshape(projected, {batch, length, num_heads_, key_dim_}), {0, 2, 1, 3});
  }

  std::int64_t num_heads_;
  std::int64_t key_dim_;
  double dropout_;
  Generator generator_;
  Tensor query_kernel_;   // (D, H K)
  Tensor query_bias_;     // (H K,)
  Tensor key_kernel_;     // (D, H K)
  Tensor key_bias_;       // (H K,)
  Tensor value_kernel_;   // (D, H K)
  Tensor value_bias_;     // (H K,)
  Tensor output_kernel_;  // (H K, D)
  Tensor output_bias_;    // (D,)
};

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::int64_t num_heads, std::int64_t key_dim, double dropout,
                                       std::optional<std::uint64_t> seed, const std::string& name)
    : Layer(std::make_shared<MultiHeadAttentionLayer>(num_heads, key_dim, dropout, seed, name)) {}

}  // namespace tandem::nn
