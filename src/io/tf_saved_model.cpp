// TensorFlow SavedModel export: saved_model.pb (one MetaGraph tagged "serve" whose GraphDef
// computes the model in inference form with TensorFlow's own ops, and a "serving_default"
// signature) and an empty variables/ folder. The weights are Const nodes in the graph, not
// variables: the model is for serving, TensorFlow and TensorFlow Serving load a SavedModel
// without a checkpoint as it is, and constants spare a writer for TensorFlow's checkpoint format
// (the tensor bundle and its table index). The cost is protobuf's 2 GB limit on saved_model.pb.
//
// Tandem's layouts are TensorFlow's (NHWC activations, (KH, KW, C_in, C_out) filters, (in, out)
// Dense kernels) and its "same" padding is TensorFlow's, so every layer maps to TensorFlow ops
// with its weights as they are.
#include <cmath>
#include <limits>
#include <map>

#include "io/file_io.h"
#include "io/layer_config.h"
#include "io/proto/saved_model.pb.h"
#include "ops/window.h"
#include "tandem/io.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"

namespace tandem::io {
namespace {

namespace tf = tandem::tensorflow;
using detail::activation_of;
using detail::builtin_config;
using detail::config_value;
using detail::pair_of;

// The GraphDef version of TensorFlow 2.15 (TF_GRAPH_DEF_VERSION): the op semantics this graph
// is written for.
constexpr int kGraphDefProducer = 1645;
constexpr std::int64_t kSavedModelSchemaVersion = 1;
constexpr const char* kServeTag = "serve";
constexpr const char* kPredictMethod = "tensorflow/serving/predict";
constexpr const char* kExporter = "export_saved_model";

tf::DataType tf_dtype(DType dtype, const std::string& what) {
  switch (dtype) {
    case DType::f32:
      return tf::DT_FLOAT;
    case DType::f64:
      return tf::DT_DOUBLE;
    default:
      throw InvalidArgument(std::string(kExporter) + ": " + what + " is " + dtype_name(dtype) +
                            "; SavedModel export covers f32 and f64 models (cast a bf16/f16 "
                            "model's weights to f32 first)");
  }
}

void set_shape(tf::TensorShapeProto& proto, const Shape& shape) {
  for (const std::int64_t extent : shape)
    proto.add_dim()->set_size(extent);
}

// Builds the GraphDef: node names are unique, each value is referred to by its node's name
// (output 0).
class TfGraph {
 public:
  TfGraph(tf::GraphDef& graph, DType dtype) : graph_(graph), dtype_(tf_dtype(dtype, "the model")) {}

  tf::NodeDef& node(const std::string& op, const std::string& base,
                    const std::vector<std::string>& inputs, bool typed = true) {
    tf::NodeDef& added = *graph_.add_node();
    added.set_op(op);
    added.set_name(fresh(base));
    for (const std::string& input : inputs)
      added.add_input(input);
    if (typed) type(added, "T", dtype_);
    return added;
  }

  std::string constant(const std::string& base, const Tensor& value) {
    const Tensor host = value.to(Device::cpu());
    tf::NodeDef& added = node("Const", base, {}, false);
    const tf::DataType dtype =
        host.dtype() == DType::i32 ? tf::DT_INT32 : tf_dtype(host.dtype(), "weight '" + base + "'");
    type(added, "dtype", dtype);
    tf::TensorProto& tensor = *(*added.mutable_attr())["value"].mutable_tensor();
    tensor.set_dtype(dtype);
    set_shape(*tensor.mutable_tensor_shape(), host.shape());
    tensor.set_tensor_content(
        std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
    return added.name();
  }

  // A scalar of the model's dtype.
  std::string scalar(const std::string& base, double value) {
    return constant(base,
                    cast(Tensor::scalar(value), dtype_ == tf::DT_FLOAT ? DType::f32 : DType::f64));
  }

  std::string int32s(const std::string& base, const std::vector<std::int64_t>& values) {
    std::vector<std::int32_t> narrowed(values.begin(), values.end());
    return constant(base, Tensor::from_vector<std::int32_t>(
                              narrowed, {static_cast<std::int64_t>(narrowed.size())}));
  }

  static void type(tf::NodeDef& node, const std::string& name, tf::DataType value) {
    (*node.mutable_attr())[name].set_type(value);
  }
  static void ints(tf::NodeDef& node, const std::string& name,
                   const std::vector<std::int64_t>& values) {
    tf::AttrValue::ListValue& list = *(*node.mutable_attr())[name].mutable_list();
    for (const std::int64_t value : values)
      list.add_i(value);
  }
  static void text(tf::NodeDef& node, const std::string& name, const std::string& value) {
    (*node.mutable_attr())[name].set_s(value);
  }
  static void real(tf::NodeDef& node, const std::string& name, double value) {
    (*node.mutable_attr())[name].set_f(static_cast<float>(value));
  }
  static void flag(tf::NodeDef& node, const std::string& name, bool value) {
    (*node.mutable_attr())[name].set_b(value);
  }

  tf::DataType dtype() const { return dtype_; }

 private:
  std::string fresh(const std::string& base) {
    const int count = used_[base]++;
    return count == 0 ? base : base + "_" + std::to_string(count);
  }

  tf::GraphDef& graph_;
  tf::DataType dtype_;
  std::map<std::string, int> used_;
};

std::string padding_name(const nn::LayerConfig& config) {
  return parse_padding(config_value<std::string>(config, "padding")) == Padding::same ? "SAME"
                                                                                      : "VALID";
}

std::string activation(TfGraph& graph, const std::string& x, nn::ActivationFunction function,
                       const std::string& base) {
  switch (function) {
    case nn::ActivationFunction::linear:
      return x;
    case nn::ActivationFunction::relu:
      return graph.node("Relu", base + "/Relu", {x}).name();
    case nn::ActivationFunction::sigmoid:
      return graph.node("Sigmoid", base + "/Sigmoid", {x}).name();
    case nn::ActivationFunction::tanh:
      return graph.node("Tanh", base + "/Tanh", {x}).name();
    case nn::ActivationFunction::softmax:  // over the last axis, as Tandem's
      return graph.node("Softmax", base + "/Softmax", {x}).name();
    case nn::ActivationFunction::elu:
      return graph.node("Elu", base + "/Elu", {x}).name();
    case nn::ActivationFunction::selu:
      return graph.node("Selu", base + "/Selu", {x}).name();
    case nn::ActivationFunction::softplus:
      return graph.node("Softplus", base + "/Softplus", {x}).name();
    case nn::ActivationFunction::softsign:
      return graph.node("Softsign", base + "/Softsign", {x}).name();
    case nn::ActivationFunction::swish: {
      const std::string gate = graph.node("Sigmoid", base + "/swish/Sigmoid", {x}).name();
      return graph.node("Mul", base + "/swish/mul", {x, gate}).name();
    }
    case nn::ActivationFunction::exponential:
      return graph.node("Exp", base + "/Exp", {x}).name();
    case nn::ActivationFunction::hard_sigmoid: {
      // Keras 2's: clip(0.2 x + 0.5, 0, 1).
      const std::string scaled = graph
                                     .node("Mul", base + "/hard_sigmoid/mul",
                                           {x, graph.scalar(base + "/hard_sigmoid/slope", 0.2)})
                                     .name();
      const std::string shifted =
          graph
              .node("AddV2", base + "/hard_sigmoid/add",
                    {scaled, graph.scalar(base + "/hard_sigmoid/half", 0.5)})
              .name();
      const std::string floored =
          graph
              .node("Maximum", base + "/hard_sigmoid/Maximum",
                    {shifted, graph.scalar(base + "/hard_sigmoid/zero", 0.0)})
              .name();
      return graph
          .node("Minimum", base + "/hard_sigmoid/Minimum",
                {floored, graph.scalar(base + "/hard_sigmoid/one", 1.0)})
          .name();
    }
    case nn::ActivationFunction::mish: {
      const std::string softplus = graph.node("Softplus", base + "/mish/Softplus", {x}).name();
      const std::string gate = graph.node("Tanh", base + "/mish/Tanh", {softplus}).name();
      return graph.node("Mul", base + "/mish/mul", {x, gate}).name();
    }
    case nn::ActivationFunction::relu6:
      return graph.node("Relu6", base + "/Relu6", {x}).name();
    case nn::ActivationFunction::leaky_relu: {
      tf::NodeDef& leaky = graph.node("LeakyRelu", base + "/LeakyRelu", {x});
      TfGraph::real(leaky, "alpha", nn::kLeakyReluSlope);
      return leaky.name();
    }
    case nn::ActivationFunction::gelu: {
      // Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as tf.nn.gelu(approximate=False) builds it.
      const std::string scaled =
          graph
              .node("Mul", base + "/Gelu/mul",
                    {x, graph.scalar(base + "/Gelu/rsqrt2", 1.0 / std::sqrt(2.0))})
              .name();
      const std::string erf = graph.node("Erf", base + "/Gelu/Erf", {scaled}).name();
      const std::string shifted =
          graph.node("AddV2", base + "/Gelu/add", {erf, graph.scalar(base + "/Gelu/one", 1.0)})
              .name();
      const std::string half =
          graph.node("Mul", base + "/Gelu/mul_1", {x, graph.scalar(base + "/Gelu/half", 0.5)})
              .name();
      return graph.node("Mul", base + "/Gelu/mul_2", {half, shifted}).name();
    }
  }
  throw InvalidArgument(std::string(kExporter) + ": unknown activation");
}

std::string export_layer(TfGraph& graph, const nn::Layer& layer,
                         const std::vector<std::string>& inputs,
                         const std::vector<Shape>& input_shapes) {
  const std::string name = layer.name();
  const std::string kind = layer.impl().class_name();
  const nn::LayerConfig config = builtin_config(layer, kExporter, "SavedModel");
  const std::vector<Tensor> weights = layer.weights();
  const std::string& x = inputs.front();
  const Shape& x_shape = input_shapes.front();

  const auto bias_add = [&](const std::string& value) {
    if (weights.size() < 2) return value;
    tf::NodeDef& added = graph.node("BiasAdd", name + "/BiasAdd",
                                    {value, graph.constant(name + "/bias", weights[1])});
    TfGraph::text(added, "data_format", "NHWC");
    return added.name();
  };

  if (kind == "Conv2D") {
    tf::NodeDef& conv =
        graph.node("Conv2D", name + "/Conv2D",
                   {x, graph.constant(name + "/kernel", weights[0])});  // (KH, KW, C_in, C_out)
    const auto strides = pair_of(config, "strides");
    const auto dilations = pair_of(config, "dilation_rate");
    TfGraph::ints(conv, "strides", {1, strides[0], strides[1], 1});
    TfGraph::ints(conv, "dilations", {1, dilations[0], dilations[1], 1});
    TfGraph::text(conv, "padding", padding_name(config));
    TfGraph::text(conv, "data_format", "NHWC");
    return activation(graph, bias_add(conv.name()), activation_of(config), name);
  }
  if (kind == "MaxPooling2D" || kind == "AveragePooling2D") {
    // AvgPool leaves padded cells out of the mean, as Tandem does.
    tf::NodeDef& pool =
        graph.node(kind == "MaxPooling2D" ? "MaxPool" : "AvgPool", name + "/Pool", {x});
    const auto window = pair_of(config, "pool_size");
    const auto strides = pair_of(config, "strides");
    TfGraph::ints(pool, "ksize", {1, window[0], window[1], 1});
    TfGraph::ints(pool, "strides", {1, strides[0], strides[1], 1});
    TfGraph::text(pool, "padding", padding_name(config));
    TfGraph::text(pool, "data_format", "NHWC");
    return pool.name();
  }
  if (kind == "GlobalAveragePooling2D") {
    tf::NodeDef& mean =
        graph.node("Mean", name + "/Mean", {x, graph.int32s(name + "/axes", {1, 2})});
    TfGraph::type(mean, "Tidx", tf::DT_INT32);
    TfGraph::flag(mean, "keep_dims", false);
    return mean.name();
  }
  if (kind == "Flatten") {
    std::int64_t features = 1;
    for (std::size_t axis = 1; axis < x_shape.size(); ++axis)
      features *= x_shape[axis];
    tf::NodeDef& reshape = graph.node("Reshape", name + "/Reshape",
                                      {x, graph.int32s(name + "/shape", {-1, features})});
    TfGraph::type(reshape, "Tshape", tf::DT_INT32);
    return reshape.name();
  }
  if (kind == "Dense") {
    const std::string kernel = graph.constant(name + "/kernel", weights[0]);  // (in, units)
    // MatMul for (N, in); BatchMatMulV2 broadcasts the kernel over the leading axes otherwise.
    const std::string product =
        graph.node(x_shape.size() == 2 ? "MatMul" : "BatchMatMulV2", name + "/MatMul", {x, kernel})
            .name();
    return activation(graph, bias_add(product), activation_of(config), name);
  }
  if (kind == "BatchNormalization") {
    const double epsilon = config_value<double>(config, "epsilon");
    if (x_shape.size() == 4) {
      tf::NodeDef& norm = graph.node("FusedBatchNormV3", name + "/FusedBatchNormV3",
                                     {x, graph.constant(name + "/gamma", weights[0]),
                                      graph.constant(name + "/beta", weights[1]),
                                      graph.constant(name + "/moving_mean", weights[2]),
                                      graph.constant(name + "/moving_variance", weights[3])});
      TfGraph::type(norm, "U", graph.dtype());
      TfGraph::real(norm, "epsilon", epsilon);
      TfGraph::flag(norm, "is_training", false);
      TfGraph::text(norm, "data_format", "NHWC");
      return norm.name();  // output 0, y
    }
    // Other ranks: x * scale + offset over the last axis, folded as Keras' inference form is.
    const Tensor scale = weights[0] * rsqrt(weights[3] + epsilon);  // (C,)
    const Tensor offset = weights[1] - weights[2] * scale;          // (C,)
    const std::string scaled =
        graph.node("Mul", name + "/mul", {x, graph.constant(name + "/scale", scale)}).name();
    return graph.node("AddV2", name + "/add", {scaled, graph.constant(name + "/offset", offset)})
        .name();
  }
  if (kind == "Activation") return activation(graph, x, activation_of(config), name);
  if (kind == "Dropout") return x;  // the identity in inference
  if (kind == "Add") {
    std::string total = inputs[0];
    for (std::size_t i = 1; i < inputs.size(); ++i)
      total = graph.node("AddV2", name + "/add", {total, inputs[i]}).name();
    return total;
  }
  throw InvalidArgument(std::string(kExporter) + ": layer '" + name + "' (" + kind +
                        ") has no SavedModel translation yet; export the model as ONNX or "
                        "Tandem's own format instead, or leave the layer out");
}

tf::TensorInfo tensor_info(const std::string& node, tf::DataType dtype, const Shape& shape) {
  tf::TensorInfo info;
  info.set_name(node + ":0");
  info.set_dtype(dtype);
  set_shape(*info.mutable_tensor_shape(), shape);
  return info;
}

}  // namespace

void export_saved_model(const nn::Model& model, const std::string& directory) {
  if (!model.built()) {
    throw InvalidArgument(std::string(kExporter) + ": model '" + model.name() +
                          "' is not built; build it or run it on data first");
  }
  if (!quantization::quantized_inputs(model).empty()) {
    throw InvalidArgument(std::string(kExporter) + ": model '" + model.name() +
                          "' is quantised to int8, and SavedModel export writes float graphs; "
                          "export it as ONNX (QDQ form), or export the model saved before "
                          "quantising");
  }
  DType dtype = DType::f32;
  if (const std::vector<Tensor> weights = model.weights(); !weights.empty()) {
    dtype = weights.front().dtype();
  }
  tf::SavedModel saved_model;
  saved_model.set_saved_model_schema_version(kSavedModelSchemaVersion);
  tf::MetaGraphDef& meta_graph = *saved_model.add_meta_graphs();
  meta_graph.mutable_meta_info_def()->add_tags(kServeTag);
  tf::GraphDef& graph_proto = *meta_graph.mutable_graph_def();
  graph_proto.mutable_versions()->set_producer(kGraphDefProducer);
  TfGraph graph(graph_proto, dtype);

  tf::NodeDef& input = graph.node("Placeholder", "input", {}, false);
  TfGraph::type(input, "dtype", graph.dtype());
  set_shape(*(*input.mutable_attr())["shape"].mutable_shape(), model.input_shape());

  // The model's graph in its evaluation order: node 0 is the input.
  const std::vector<std::shared_ptr<const nn::Node>>& nodes = model.nodes();
  std::map<const nn::Node*, std::string> values{{nodes.front().get(), input.name()}};
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    std::vector<std::string> inputs;
    std::vector<Shape> input_shapes;
    for (const nn::SymbolicTensor& source : nodes[i]->inputs) {
      inputs.push_back(values.at(source.node().get()));
      input_shapes.push_back(source.node()->shape);
    }
    values[nodes[i].get()] = export_layer(graph, nodes[i]->layer, inputs, input_shapes);
  }
  const std::string output =
      graph.node("Identity", "output", {values.at(nodes.back().get())}).name();

  tf::SignatureDef& signature = (*meta_graph.mutable_signature_def())["serving_default"];
  signature.set_method_name(kPredictMethod);
  (*signature.mutable_inputs())["input"] =
      tensor_info(input.name(), graph.dtype(), model.input_shape());
  (*signature.mutable_outputs())["output"] =
      tensor_info(output, graph.dtype(), model.output_shape());

  if (saved_model.ByteSizeLong() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw InvalidArgument(std::string(kExporter) + ": model '" + model.name() + "' has " +
                          std::to_string(saved_model.ByteSizeLong()) +
                          " bytes of graph and weights; a SavedModel with its weights as "
                          "constants stays under protobuf's 2 GB; export it as ONNX instead");
  }
  std::string bytes;
  if (!saved_model.SerializeToString(&bytes)) {
    throw Error(std::string(kExporter) + ": protobuf could not serialise the SavedModel");
  }

  // Staged beside the target and swapped in whole: a crash leaves the old folder or the new.
  detail::require_replaceable(directory,
                              {"saved_model.pb", "variables", "assets", "fingerprint.pb"},
                              kExporter, "SavedModel");
  try {
    detail::write_directory(directory,
                            {{"saved_model.pb", detail::as_bytes(bytes)}, {"variables/", {}}});
  } catch (const IoError& failure) {
    throw IoError(std::string(kExporter) + ": " + failure.what() + " (nothing was changed in " +
                  directory + ")");
  }
}

}  // namespace tandem::io
