// ONNX export with the protobuf classes and checker of the ONNX library (Debian's libonnx-dev).
// Tandem works in NHWC with (KH, KW, C_in, C_out) filters; ONNX's Conv and pooling work in NCHW
// with (C_out, C_in, KH, KW). The exported graph keeps Tandem's NHWC input and output and tracks
// each value's layout: convolutions, pooling and batch norm run in NCHW, a Transpose is inserted
// only where a layer needs the other layout (Flatten reads NHWC order, as Tandem flattens), and
// filters are transposed once, into the initializers. A quantised model is written in QDQ form
// (tandem/io.h).
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/files.h"
#include "io/file_io.h"
#include "io/layer_config.h"
#include "ops/window.h"
#include "tandem/io.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"

namespace tandem::io {
namespace {

using detail::activation_of;
using detail::builtin_config;
using detail::config_value;
using detail::pair_of;

constexpr int kMinOpset = 13;
constexpr int kMaxOpset = 17;  // the newest opset the ONNX library here (1.12) knows
// The IR version each opset came with: 7 for opset 13, 8 for 14 to 17.
std::int64_t ir_version(int opset) {
  return opset <= 13 ? 7 : 8;
}
constexpr const char* kBatchDimension = "N";

// A value of the graph: its ONNX name, its shape as Tandem sees it (NHWC, batch -1) and whether
// ONNX holds it transposed to NCHW.
struct Value {
  std::string name;
  Shape shape;
  bool nchw = false;
};

int onnx_element_type(DType dtype, const std::string& what) {
  switch (dtype) {
    case DType::f32:
      return onnx::TensorProto::FLOAT;
    case DType::f64:
      return onnx::TensorProto::DOUBLE;
    case DType::f16:
      return onnx::TensorProto::FLOAT16;
    case DType::bf16:
      return onnx::TensorProto::BFLOAT16;
    default:
      throw InvalidArgument("export_onnx: " + what + " is " + dtype_name(dtype) +
                            "; ONNX export stores f32, f64, f16 and bf16 values");
  }
}

class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto& graph, DType dtype, DType weight_dtype)
      : graph_(graph), dtype_(dtype), weight_dtype_(weight_dtype) {}

  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& output) {
    onnx::NodeProto& added = *graph_.add_node();
    added.set_op_type(op);
    added.set_name(output);
    for (const std::string& input : inputs)
      added.add_input(input);
    added.add_output(output);
    return added;
  }

  // A fresh value name derived from `base`.
  std::string fresh(const std::string& base) {
    const int count = used_[base]++;
    return count == 0 ? base : base + "_" + std::to_string(count);
  }

  // A weight (or constant) stored in the model.
  std::string initializer(const std::string& name, const Tensor& value) {
    const Tensor host = value.to(Device::cpu());
    onnx::TensorProto& tensor = *graph_.add_initializer();
    tensor.set_name(name);
    tensor.set_data_type(onnx_element_type(host.dtype(), "weight '" + name + "'"));
    for (const std::int64_t extent : host.shape())
      tensor.add_dims(extent);
    tensor.set_raw_data(std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
    return name;
  }

  // A layer's weight: an initializer in the model's dtype, or in the export's weight dtype (f16,
  // bf16) with a Cast back to the model's dtype, so the file holds half the bytes and the graph
  // computes as before on the rounded weights.
  std::string weight(const std::string& name, const Tensor& value) {
    if (weight_dtype_ == dtype_) return initializer(name, value);
    const std::string stored =
        initializer(name + "/" + dtype_name(weight_dtype_), cast(value, weight_dtype_));
    integer(node("Cast", {stored}, name), "to", onnx_element_type(dtype_, "model"));
    return name;
  }

  std::string scalar(const std::string& name, double value) {
    return initializer(fresh(name), cast(Tensor::scalar(value), dtype_));
  }

  // An 8-bit initializer (ONNX's INT8 or UINT8) of `dims` from raw bytes.
  std::string bytes_initializer(const std::string& name, int element_type, const void* data,
                                std::size_t size, const std::vector<std::int64_t>& dims) {
    onnx::TensorProto& tensor = *graph_.add_initializer();
    tensor.set_name(name);
    tensor.set_data_type(element_type);
    for (const std::int64_t extent : dims)
      tensor.add_dims(extent);
    tensor.set_raw_data(std::string(static_cast<const char*>(data), size));
    return name;
  }

  // `value` through QuantizeLinear and DequantizeLinear with a per-tensor scale and zero point
  // 0: the values an int8 kernel sees.
  std::string quantize_dequantize(const std::string& value,
                                  const quantization::InputQuantization& input,
                                  const std::string& base) {
    const std::string scale =
        initializer(fresh(base + "/input_scale"),
                    Tensor::from_vector<float>({static_cast<float>(input.scale)}, {}));
    const std::uint8_t zero = 0;
    const std::string zero_point = bytes_initializer(
        fresh(base + "/input_zero_point"),
        input.is_unsigned ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8, &zero, 1, {});
    const std::string quantized = fresh(base + "/input_quantized");
    node("QuantizeLinear", {value, scale, zero_point}, quantized);
    const std::string dequantized = fresh(base + "/input_dequantized");
    node("DequantizeLinear", {quantized, scale, zero_point}, dequantized);
    return dequantized;
  }

  // An int8 kernel of `dims` with one scale per index of `axis`, DequantizeLinear'd to float.
  std::string dequantized_kernel(const std::string& base, const std::vector<std::int8_t>& values,
                                 const std::vector<float>& scales,
                                 const std::vector<std::int64_t>& dims, std::int64_t axis) {
    const auto channels = static_cast<std::int64_t>(scales.size());
    const std::string quantized = bytes_initializer(base + "/kernel_int8", onnx::TensorProto::INT8,
                                                    values.data(), values.size(), dims);
    const std::string scale =
        initializer(base + "/kernel_scale", Tensor::from_vector<float>(scales, {channels}));
    const std::vector<std::int8_t> zeros(scales.size(), 0);
    const std::string zero_point =
        bytes_initializer(base + "/kernel_zero_point", onnx::TensorProto::INT8, zeros.data(),
                          zeros.size(), {channels});
    const std::string dequantized = fresh(base + "/kernel_dequantized");
    integer(node("DequantizeLinear", {quantized, scale, zero_point}, dequantized), "axis", axis);
    return dequantized;
  }

  Value as_nhwc(const Value& value) {
    if (!value.nchw) return value;
    return transposed(value, {0, 2, 3, 1}, false);
  }

  Value as_nchw(const Value& value, const std::string& layer) {
    if (value.shape.size() != 4) {
      throw InvalidArgument("export_onnx: layer '" + layer + "' needs an NHWC input, got " +
                            shape_str(value.shape));
    }
    if (value.nchw) return value;
    return transposed(value, {0, 3, 1, 2}, true);
  }

  static void ints(onnx::NodeProto& node, const std::string& name,
                   const std::vector<std::int64_t>& values) {
    onnx::AttributeProto& attribute = *node.add_attribute();
    attribute.set_name(name);
    attribute.set_type(onnx::AttributeProto::INTS);
    for (const std::int64_t value : values)
      attribute.add_ints(value);
  }
  static void integer(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
    onnx::AttributeProto& attribute = *node.add_attribute();
    attribute.set_name(name);
    attribute.set_type(onnx::AttributeProto::INT);
    attribute.set_i(value);
  }
  static void real(onnx::NodeProto& node, const std::string& name, double value) {
    onnx::AttributeProto& attribute = *node.add_attribute();
    attribute.set_name(name);
    attribute.set_type(onnx::AttributeProto::FLOAT);
    attribute.set_f(static_cast<float>(value));
  }

  DType dtype() const { return dtype_; }

 private:
  Value transposed(const Value& value, const std::vector<std::int64_t>& permutation, bool nchw) {
    const auto cached = transposes_.find({value.name, nchw});
    if (cached != transposes_.end()) return cached->second;
    const std::string name = fresh(value.name + (nchw ? "/nchw" : "/nhwc"));
    ints(node("Transpose", {value.name}, name), "perm", permutation);
    Value result{name, value.shape, nchw};
    transposes_[{value.name, nchw}] = result;
    return result;
  }

  onnx::GraphProto& graph_;
  DType dtype_;
  DType weight_dtype_;
  std::map<std::string, int> used_;
  std::map<std::pair<std::string, bool>, Value> transposes_;
};

// The geometry at batch 1 (the batch does not change windows).
Shape probe_shape(const Shape& shape) {
  Shape probe = shape;
  probe[0] = 1;
  return probe;
}

std::vector<std::int64_t> onnx_pads(const Window2D& window) {
  return {window.pad_before[0], window.pad_before[1], window.pad_after[0], window.pad_after[1]};
}

Value activation(GraphBuilder& graph, const Value& x, nn::ActivationFunction function,
                 const std::string& base) {
  const std::string output = graph.fresh(base);
  switch (function) {
    case nn::ActivationFunction::linear:
      return x;
    case nn::ActivationFunction::relu:
      graph.node("Relu", {x.name}, output);
      break;
    case nn::ActivationFunction::sigmoid:
      graph.node("Sigmoid", {x.name}, output);
      break;
    case nn::ActivationFunction::tanh:
      graph.node("Tanh", {x.name}, output);
      break;
    case nn::ActivationFunction::softmax:
      // Over the channels: the last axis in NHWC, axis 1 in NCHW.
      GraphBuilder::integer(graph.node("Softmax", {x.name}, output), "axis",
                            x.nchw ? 1 : static_cast<std::int64_t>(x.shape.size()) - 1);
      break;
    case nn::ActivationFunction::elu:
      GraphBuilder::real(graph.node("Elu", {x.name}, output), "alpha", 1.0);
      break;
    case nn::ActivationFunction::selu: {
      onnx::NodeProto& selu = graph.node("Selu", {x.name}, output);
      GraphBuilder::real(selu, "alpha", nn::kSeluAlpha);
      GraphBuilder::real(selu, "gamma", nn::kSeluScale);
      break;
    }
    case nn::ActivationFunction::softplus:
      graph.node("Softplus", {x.name}, output);
      break;
    case nn::ActivationFunction::softsign:
      graph.node("Softsign", {x.name}, output);
      break;
    case nn::ActivationFunction::swish: {
      const std::string gate = graph.fresh(base + "/sigmoid");
      graph.node("Sigmoid", {x.name}, gate);
      graph.node("Mul", {x.name, gate}, output);
      break;
    }
    case nn::ActivationFunction::exponential:
      graph.node("Exp", {x.name}, output);
      break;
    case nn::ActivationFunction::hard_sigmoid: {
      onnx::NodeProto& hard = graph.node("HardSigmoid", {x.name}, output);
      GraphBuilder::real(hard, "alpha", 0.2);
      GraphBuilder::real(hard, "beta", 0.5);
      break;
    }
    case nn::ActivationFunction::mish: {
      // The Mish op only arrives in opset 18.
      const std::string softplus = graph.fresh(base + "/softplus");
      graph.node("Softplus", {x.name}, softplus);
      const std::string gate = graph.fresh(base + "/tanh");
      graph.node("Tanh", {softplus}, gate);
      graph.node("Mul", {x.name, gate}, output);
      break;
    }
    case nn::ActivationFunction::relu6:
      graph.node("Clip",
                 {x.name, graph.scalar(base + "/zero", 0.0), graph.scalar(base + "/six", 6.0)},
                 output);
      break;
    case nn::ActivationFunction::leaky_relu:
      GraphBuilder::real(graph.node("LeakyRelu", {x.name}, output), "alpha", nn::kLeakyReluSlope);
      break;
    case nn::ActivationFunction::gelu: {
      // Exact GELU, 0.5 x (1 + erf(x / sqrt 2)); the Gelu op only arrives in opset 20.
      const std::string scaled = graph.fresh(base + "/scaled");
      graph.node("Mul", {x.name, graph.scalar(base + "/rsqrt2", 1.0 / std::sqrt(2.0))}, scaled);
      const std::string erf = graph.fresh(base + "/erf");
      graph.node("Erf", {scaled}, erf);
      const std::string shifted = graph.fresh(base + "/one_plus");
      graph.node("Add", {erf, graph.scalar(base + "/one", 1.0)}, shifted);
      const std::string half = graph.fresh(base + "/half_x");
      graph.node("Mul", {x.name, graph.scalar(base + "/half", 0.5)}, half);
      graph.node("Mul", {half, shifted}, output);
      break;
    }
  }
  return {output, x.shape, x.nchw};
}

// A Conv2D filter (KH, KW, C_in, C_out) in int8 as ONNX's Conv takes it, (C_out, C_in, KH, KW).
std::vector<std::int8_t> oihw(const std::vector<std::int8_t>& hwio, const Shape& shape) {
  const std::int64_t kh = shape[0], kw = shape[1], in = shape[2], out = shape[3];
  std::vector<std::int8_t> transposed(hwio.size());
  for (std::int64_t h = 0; h < kh; ++h)
    for (std::int64_t w = 0; w < kw; ++w)
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t o = 0; o < out; ++o)
          transposed[static_cast<std::size_t>(((o * in + i) * kh + h) * kw + w)] =
              hwio[static_cast<std::size_t>(((h * kw + w) * in + i) * out + o)];
  return transposed;
}

// `quantized`: the layer's calibrated input when the model is exported quantised, else nullptr.
Value export_layer(GraphBuilder& graph, const nn::Layer& layer, const std::vector<Value>& inputs,
                   const Shape& output_shape, const quantization::InputQuantization* quantized) {
  const std::string name = layer.name();
  const std::string kind = layer.impl().class_name();
  const nn::LayerConfig config = builtin_config(layer, "export_onnx", "ONNX");
  const std::vector<Tensor> weights = layer.weights();
  const Value& x = inputs.front();

  if (kind == "Conv2D") {
    const Value input = graph.as_nchw(x, name);
    const Tensor& kernel = weights[0];  // (KH, KW, C_in, C_out)
    Conv2DOptions options;
    options.strides = pair_of(config, "strides");
    options.padding = parse_padding(config_value<std::string>(config, "padding"));
    options.dilations = pair_of(config, "dilation_rate");
    const Window2D window =
        conv_window(name.c_str(), probe_shape(x.shape), kernel.shape(), options);
    std::vector<std::string> arguments;
    if (quantized) {
      const quantization::Int8Kernel int8 = quantization::quantize_kernel(kernel);
      const Shape& k = kernel.shape();
      arguments = {graph.quantize_dequantize(input.name, *quantized, name),
                   graph.dequantized_kernel(name, oihw(int8.values, k), int8.scales,
                                            {k[3], k[2], k[0], k[1]}, 0)};
    } else {
      arguments = {input.name,
                   graph.weight(name + "/kernel",
                                transpose(kernel, {3, 2, 0, 1}))};  // (C_out, C_in, KH, KW)
    }
    if (weights.size() == 2) arguments.push_back(graph.weight(name + "/bias", weights[1]));
    const std::string output = graph.fresh(name + "/conv");
    onnx::NodeProto& conv = graph.node("Conv", arguments, output);
    GraphBuilder::ints(conv, "kernel_shape", {window.k_h, window.k_w});
    GraphBuilder::ints(conv, "strides", {window.strides[0], window.strides[1]});
    GraphBuilder::ints(conv, "dilations", {window.dilations[0], window.dilations[1]});
    GraphBuilder::ints(conv, "pads", onnx_pads(window));
    return activation(graph, {output, output_shape, true}, activation_of(config), name);
  }
  if (kind == "MaxPooling2D" || kind == "AveragePooling2D") {
    const Value input = graph.as_nchw(x, name);
    Pool2DOptions options;
    options.window = pair_of(config, "pool_size");
    options.strides = pair_of(config, "strides");
    options.padding = parse_padding(config_value<std::string>(config, "padding"));
    const Window2D window = pool_window(name.c_str(), probe_shape(x.shape), options);
    const std::string output = graph.fresh(name);
    // AveragePool leaves padded cells out of the mean by default (count_include_pad 0), as
    // TensorFlow and Tandem do.
    onnx::NodeProto& pool =
        graph.node(kind == "MaxPooling2D" ? "MaxPool" : "AveragePool", {input.name}, output);
    GraphBuilder::ints(pool, "kernel_shape", {window.k_h, window.k_w});
    GraphBuilder::ints(pool, "strides", {window.strides[0], window.strides[1]});
    GraphBuilder::ints(pool, "pads", onnx_pads(window));
    return {output, output_shape, true};
  }
  if (kind == "GlobalAveragePooling2D") {
    const Value input = graph.as_nchw(x, name);
    const std::string pooled = graph.fresh(name + "/pooled");  // (N, C, 1, 1)
    graph.node("GlobalAveragePool", {input.name}, pooled);
    const std::string output = graph.fresh(name);
    GraphBuilder::integer(graph.node("Flatten", {pooled}, output), "axis", 1);
    return {output, output_shape, false};
  }
  if (kind == "Flatten") {
    // Tandem flattens (H, W, C) in NHWC order.
    const Value input = graph.as_nhwc(x);
    const std::string output = graph.fresh(name);
    GraphBuilder::integer(graph.node("Flatten", {input.name}, output), "axis", 1);
    return {output, output_shape, false};
  }
  if (kind == "Dense") {
    Value input = graph.as_nhwc(x);
    std::string kernel;  // (in, units)
    if (quantized) {
      const quantization::Int8Kernel int8 = quantization::quantize_kernel(weights[0]);
      input.name = graph.quantize_dequantize(input.name, *quantized, name);
      kernel = graph.dequantized_kernel(name, int8.values, int8.scales, weights[0].shape(),
                                        weights[0].rank() - 1);
    } else {
      kernel = graph.weight(name + "/kernel", weights[0]);
    }
    const bool use_bias = weights.size() == 2;
    std::string output = graph.fresh(name + "/matmul");
    if (input.shape.size() == 2) {
      std::vector<std::string> arguments{input.name, kernel};
      if (use_bias) arguments.push_back(graph.weight(name + "/bias", weights[1]));
      graph.node("Gemm", arguments, output);
    } else {
      graph.node("MatMul", {input.name, kernel}, output);
      if (use_bias) {
        const std::string biased = graph.fresh(name + "/biased");
        graph.node("Add", {output, graph.weight(name + "/bias", weights[1])}, biased);
        output = biased;
      }
    }
    return activation(graph, {output, output_shape, false}, activation_of(config), name);
  }
  if (kind == "BatchNormalization") {
    // weights: gamma, beta, moving_mean, moving_variance; the channel axis is 1 in ONNX.
    Value input = x;
    if (x.shape.size() == 4) {
      input = graph.as_nchw(x, name);
    } else if (x.shape.size() != 2) {
      throw InvalidArgument("export_onnx: BatchNormalization '" + name + "' on " +
                            shape_str(x.shape) + " inputs; export covers (N, C) and (N, H, W, C)");
    }
    const std::string output = graph.fresh(name);
    onnx::NodeProto& norm = graph.node(
        "BatchNormalization",
        {input.name, graph.weight(name + "/gamma", weights[0]),
         graph.weight(name + "/beta", weights[1]), graph.weight(name + "/moving_mean", weights[2]),
         graph.weight(name + "/moving_variance", weights[3])},
        output);
    GraphBuilder::real(norm, "epsilon", config_value<double>(config, "epsilon"));
    return {output, output_shape, input.nchw};
  }
  if (kind == "Activation") {
    return activation(graph, x, activation_of(config), name);
  }
  if (kind == "Dropout") return x;  // the identity in inference
  if (kind == "Add") {
    // Every input in the first one's layout.
    std::string total = inputs[0].name;
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      const Value other =
          inputs[0].nchw ? graph.as_nchw(inputs[i], name) : graph.as_nhwc(inputs[i]);
      const std::string sum = graph.fresh(name);
      graph.node("Add", {total, other.name}, sum);
      total = sum;
    }
    return {total, output_shape, inputs[0].nchw};
  }
  throw InvalidArgument("export_onnx: layer '" + name + "' (" + kind +
                        ") has no ONNX translation yet");
}

void set_tensor_type(onnx::ValueInfoProto& info, const std::string& name, int element_type,
                     const Shape& shape) {
  info.set_name(name);
  onnx::TypeProto_Tensor& tensor = *info.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(element_type);
  for (const std::int64_t extent : shape) {
    onnx::TensorShapeProto_Dimension& dimension = *tensor.mutable_shape()->add_dim();
    if (extent < 0) {
      dimension.set_dim_param(kBatchDimension);
    } else {
      dimension.set_dim_value(extent);
    }
  }
}

}  // namespace

void export_onnx(const nn::Model& model, const std::string& path,
                 const OnnxExportOptions& options) {
  if (options.opset < kMinOpset || options.opset > kMaxOpset) {
    throw InvalidArgument("export_onnx: opset must be in [" + std::to_string(kMinOpset) + ", " +
                          std::to_string(kMaxOpset) + "], got " + std::to_string(options.opset));
  }
  if (!model.built()) {
    throw InvalidArgument("export_onnx: model '" + model.name() +
                          "' is not built; build it or run it on data first");
  }
  const Shape& input_shape = model.input_shape();
  DType dtype = DType::f32;
  if (const std::vector<Tensor> weights = model.weights(); !weights.empty()) {
    dtype = weights.front().dtype();
  }
  if (dtype != DType::f32 && dtype != DType::f64) {
    throw InvalidArgument("export_onnx: model '" + model.name() + "' has " + dtype_name(dtype) +
                          " weights; ONNX export takes f32 and f64 models (cast a bf16/f16 "
                          "model's weights to f32 first, and pass weight_dtype to store them in "
                          "16 bits)");
  }
  const DType weight_dtype = options.weight_dtype.value_or(dtype);
  if (weight_dtype != dtype && weight_dtype != DType::f16 && weight_dtype != DType::bf16) {
    throw InvalidArgument(std::string("export_onnx: weight_dtype ") + dtype_name(weight_dtype) +
                          " is not one ONNX export stores weights in; use f16 or bf16");
  }
  const int element_type = onnx_element_type(dtype, "model '" + model.name() + "'");

  onnx::ModelProto proto;
  proto.set_ir_version(ir_version(options.opset));
  proto.set_producer_name("tandem");
  proto.set_producer_version(options.producer_version.empty() ? version()
                                                              : options.producer_version);
  proto.set_model_version(1);
  onnx::OperatorSetIdProto& opset = *proto.add_opset_import();
  opset.set_domain("");
  opset.set_version(options.opset);
  onnx::GraphProto& graph_proto = *proto.mutable_graph();
  graph_proto.set_name(model.name());
  GraphBuilder graph(graph_proto, dtype, weight_dtype);
  set_tensor_type(*graph_proto.add_input(), "input", element_type, input_shape);

  // The model's graph in its evaluation order: node 0 is the input.
  const std::vector<std::shared_ptr<const nn::Node>>& nodes = model.nodes();
  const std::vector<quantization::InputQuantization> quantized_inputs =
      quantization::quantized_inputs(model);
  std::map<const nn::Node*, Value> values{{nodes.front().get(), {"input", input_shape, false}}};
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    std::vector<Value> inputs;
    for (const nn::SymbolicTensor& source : nodes[i]->inputs)
      inputs.push_back(values.at(source.node().get()));
    const auto found = std::find_if(quantized_inputs.begin(), quantized_inputs.end(),
                                    [&](const quantization::InputQuantization& input) {
                                      return input.layer == nodes[i]->layer.name();
                                    });
    const quantization::InputQuantization* quantized =
        found == quantized_inputs.end() ? nullptr : &*found;
    if (quantized && dtype != DType::f32) {
      throw InvalidArgument("export_onnx: model '" + model.name() + "' is " + dtype_name(dtype) +
                            "; a quantised model is exported from f32 weights");
    }
    values[nodes[i].get()] =
        export_layer(graph, nodes[i]->layer, inputs, nodes[i]->shape, quantized);
  }
  const Value result = graph.as_nhwc(values.at(nodes.back().get()));
  graph.node("Identity", {result.name}, "output");
  set_tensor_type(*graph_proto.add_output(), "output", element_type, model.output_shape());

  try {
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true,
                                                                   /*strict_mode=*/1));
  } catch (const std::exception& error) {
    throw Error("export_onnx: the ONNX checker rejected the exported graph of model '" +
                model.name() + "' (a bug in Tandem's exporter; please report it): " + error.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    throw Error("export_onnx: protobuf could not serialise the model (it may pass 2 GB)");
  }
  write_file_atomically(path, std::string_view(bytes));
}

}  // namespace tandem::io
