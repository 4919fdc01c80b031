// Embedding (token ids to vectors through gather, trained through scatter-add) and
// PositionEmbedding (learned position vectors).
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class EmbeddingLayer final : public LayerBase {
 public:
  EmbeddingLayer(std::int64_t input_dim, std::int64_t output_dim, const std::string& initializer,
                 const std::string& name)
      : LayerBase("embedding", name),
        input_dim_(input_dim),
        output_dim_(output_dim),
        initializer_(
            detail::parse_argument("Embedding", [&] { return parse_initializer(initializer); })) {
    detail::require_positive("Embedding", "input_dim", input_dim);
    detail::require_positive("Embedding", "output_dim", output_dim);
  }

  const char* class_name() const override { return "Embedding"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"input_dim", input_dim_},
                       {"output_dim", output_dim_},
                       {"embeddings_initializer", std::string(initializer_name(initializer_))}};
  }

  // ids (...) -> (..., output_dim)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    Shape y = input_shapes[0];
    y.push_back(output_dim_);
    return y;
  }

  // Ids are integers; the vectors come out in the compute dtype (float32 without a policy).
  DType output_dtype(DType) const override { return compute_dtype(DType::f32); }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& ids = inputs[0];  // (...)
    if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64) {
      throw InvalidArgument(detail::describe(*this) + " takes i32 or i64 token ids, got " +
                            dtype_name(ids.dtype()) + " " + shape_str(ids.shape()) +
                            "; cast them with tandem::cast(ids, DType::i32)");
    }
    // Gather in the variables' dtype, then cast the few rows (not the whole table).
    return cast(gather(embeddings_, ids), compute_dtype(embeddings_.dtype()));  // (..., D)
  }

 protected:
  void build(std::span<const Shape>, DType dtype, Device device) override {
    embeddings_ = add_weight("embeddings", {input_dim_, output_dim_}, initializer_, dtype, device);
  }

 private:
  std::int64_t input_dim_;
  std::int64_t output_dim_;
  Initializer initializer_;
  Tensor embeddings_;  // (input_dim, output_dim)
};

class PositionEmbeddingLayer final : public LayerBase {
 public:
  PositionEmbeddingLayer(std::int64_t sequence_length, const std::string& initializer,
                         const std::string& name)
      : LayerBase("position_embedding", name),
        sequence_length_(sequence_length),
        initializer_(detail::parse_argument("PositionEmbedding",
                                            [&] { return parse_initializer(initializer); })) {
    detail::require_positive("PositionEmbedding", "sequence_length", sequence_length);
  }

  const char* class_name() const override { return "PositionEmbedding"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"sequence_length", sequence_length_},
                       {"initializer", std::string(initializer_name(initializer_))}};
  }

  // x (batch, length, features) -> the same shape
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() != 3 || x[2] <= 0) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs inputs (batch, length, features), got " + shape_str(x));
    }
    if (x[1] > sequence_length_) {
      throw InvalidArgument(detail::describe(*this) + " has " + std::to_string(sequence_length_) +
                            " positions, got sequences of " + std::to_string(x[1]) +
                            "; shorten them or make the layer with a larger sequence_length");
    }
    if (built() && x[2] != positions_.dim(1)) {
      throw InvalidArgument(detail::describe(*this) + " was built for " +
                            std::to_string(positions_.dim(1)) + " features, got inputs " +
                            shape_str(x));
    }
    return x;
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& x = inputs[0];  // (batch, length, features)
    compute_output_shape(std::vector<Shape>{x.shape()});
    const Tensor used = slice(positions_, {0, 0}, {x.dim(1), x.dim(2)});  // (length, features)
    return broadcast_to(cast(used, x.dtype()), x.shape());  // (batch, length, features)
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    positions_ = add_weight("embeddings", {sequence_length_, input_shapes[0][2]}, initializer_,
                            dtype, device);
  }

 private:
  std::int64_t sequence_length_;
  Initializer initializer_;
  Tensor positions_;  // (sequence_length, features)
};

}  // namespace

Embedding::Embedding(std::int64_t input_dim, std::int64_t output_dim,
                     const std::string& embeddings_initializer, const std::string& name)
    : Layer(std::make_shared<EmbeddingLayer>(input_dim, output_dim, embeddings_initializer, name)) {
}

PositionEmbedding::PositionEmbedding(std::int64_t sequence_length, const std::string& initializer,
                                     const std::string& name)
    : Layer(std::make_shared<PositionEmbeddingLayer>(sequence_length, initializer, name)) {}

}  // namespace tandem::nn
