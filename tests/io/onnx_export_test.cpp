// ONNX export, read back with the ONNX library: every zoo model passes the checker from the file,
// takes NHWC "input" with a symbolic batch and gives "output"; filters are transposed to OIHW,
// TensorFlow's asymmetric SAME padding becomes explicit pads; unsupported opsets, unbuilt models
// and custom layers are refused; a quantised model is written in QDQ form with int8 kernels.
// (tests/io/interop_test.cpp runs the files in onnxruntime.)
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "io/io_support.h"
#include "support/errors.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::ScratchDir;

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  return model;
}

std::vector<std::string> op_types(const onnx::ModelProto& model) {
  std::vector<std::string> ops;
  for (const onnx::NodeProto& node : model.graph().node())
    ops.push_back(node.op_type());
  return ops;
}

const onnx::TensorProto* initializer(const onnx::ModelProto& model, const std::string& name) {
  for (const onnx::TensorProto& tensor : model.graph().initializer()) {
    if (tensor.name() == name) return &tensor;
  }
  return nullptr;
}

TEST(OnnxExport, EveryZooModelPassesTheCheckerWithNhwcInputAndOutput) {
  ScratchDir scratch;
  for (const std::string name : {"cnn", "mlp", "resnet_small"}) {
    SCOPED_TRACE(name);
    manual_seed(1);
    const nn::Model model = nn::zoo::build(name, {28, 28, 1}, 10);
    const std::string path = scratch.file(name + ".onnx");
    io::export_onnx(model, path);
    EXPECT_NO_THROW(onnx::checker::check_model(path));
    const onnx::ModelProto proto = read_model(path);
    EXPECT_EQ(proto.opset_import(0).version(), 13);
    EXPECT_EQ(proto.producer_name(), "tandem");
    const onnx::ValueInfoProto& input = proto.graph().input(0);
    EXPECT_EQ(input.name(), "input");
    const auto& dims = input.type().tensor_type().shape().dim();
    ASSERT_EQ(dims.size(), 4);
    EXPECT_EQ(dims[0].dim_param(), "N");
    EXPECT_EQ(dims[1].dim_value(), 28);
    EXPECT_EQ(dims[3].dim_value(), 1);
    EXPECT_EQ(proto.graph().output(0).name(), "output");
    // Every weight is stored once.
    EXPECT_EQ(static_cast<std::size_t>(proto.graph().initializer_size()), model.weights().size());
  }
}

TEST(OnnxExport, TheCnnBecomesConvPoolGemmWithTransposedFilters) {
  ScratchDir scratch;
  manual_seed(1);
  const nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  io::export_onnx(model, scratch.file("cnn.onnx"));
  const onnx::ModelProto proto = read_model(scratch.file("cnn.onnx"));
  EXPECT_EQ(op_types(proto), (std::vector<std::string>{
                                 "Transpose", "Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool",
                                 "Transpose", "Flatten", "Gemm", "Relu", "Gemm", "Identity"}));
  const nn::Layer second_conv = model.layers()[2];  // conv, pool, conv
  const onnx::TensorProto* kernel = initializer(proto, second_conv.name() + "/kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(std::vector<std::int64_t>(kernel->dims().begin(), kernel->dims().end()),
            (std::vector<std::int64_t>{64, 32, 3, 3}));
  // Element (co=1, ci=2, kh=0, kw=1) is Tandem's (kh=0, kw=1, ci=2, co=1).
  const std::vector<float> tandem = second_conv.weights()[0].to_vector<float>();
  float exported = 0.0f;
  std::memcpy(&exported, kernel->raw_data().data() + sizeof(float) * ((1 * 32 + 2) * 9 + 1),
              sizeof exported);
  EXPECT_EQ(exported, tandem[((0 * 3 + 1) * 32 + 2) * 64 + 1]);
}

TEST(OnnxExport, SamePaddingBecomesTensorFlowsAsymmetricPads) {
  ScratchDir scratch;
  nn::Sequential model({nn::Conv2D(2, 2, nn::Conv2DConfig{.strides = 2, .padding = "same"})});
  model.build({5, 5, 1});
  io::export_onnx(model, scratch.file("pad.onnx"));
  const onnx::ModelProto proto = read_model(scratch.file("pad.onnx"));
  for (const onnx::NodeProto& node : proto.graph().node()) {
    if (node.op_type() != "Conv") continue;
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() != "pads") continue;
      // 5 wide, window 2, stride 2 -> 3 outputs need 1 cell of padding, all after (TF's rule).
      EXPECT_EQ(std::vector<std::int64_t>(attribute.ints().begin(), attribute.ints().end()),
                (std::vector<std::int64_t>{0, 0, 1, 1}));
    }
  }
}

TEST(OnnxExport, AQuantisedModelIsWrittenInQdqFormWithInt8Kernels) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();  // Conv2D(4), BN, ReLU, pool, Dense(8), Dense(3)
  const auto quantized = quantization::quantize_model(model, *testing::small_dataset());
  io::export_onnx(model, scratch.file("int8.onnx"));
  const onnx::ModelProto proto = read_model(scratch.file("int8.onnx"));
  onnx::checker::check_model(proto);
  const std::vector<std::string> ops = op_types(proto);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizeLinear"), 3);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "DequantizeLinear"), 6);
  const onnx::TensorProto* kernel = initializer(proto, "conv2d/kernel_int8");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(std::vector<std::int64_t>(kernel->dims().begin(), kernel->dims().end()),
            (std::vector<std::int64_t>{4, 1, 3, 3}));  // (C_out, C_in, KH, KW)
  const onnx::TensorProto* scales = initializer(proto, "conv2d/kernel_scale");
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->dims(0), 4);
  // The images are never negative: their zero point is uint8.
  const onnx::TensorProto* zero_point = initializer(proto, "conv2d/input_zero_point");
  ASSERT_NE(zero_point, nullptr);
  EXPECT_EQ(zero_point->data_type(), onnx::TensorProto::UINT8);
  EXPECT_EQ(initializer(proto, "conv2d/kernel"), nullptr) << "no float copy of the kernel";
}

TEST(OnnxExport, SixteenBitWeightsAreStoredHalfSizeAndCastBack) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  io::export_onnx(model, scratch.file("bf16.onnx"), {.weight_dtype = DType::bf16});
  const onnx::ModelProto proto = read_model(scratch.file("bf16.onnx"));
  onnx::checker::check_model(proto);
  const onnx::TensorProto* kernel = initializer(proto, "dense/kernel/bf16");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->data_type(), onnx::TensorProto::BFLOAT16);
  const std::vector<std::string> ops = op_types(proto);
  // A Cast per weight: the conv kernel, batch norm's four, two Dense kernels and biases.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Cast"), 9);
  // The CNN's 121,930 weights: half the bytes.
  const nn::Model cnn = nn::zoo::build("cnn", {28, 28, 1}, 10);
  io::export_onnx(cnn, scratch.file("cnn32.onnx"));
  io::export_onnx(cnn, scratch.file("cnn16.onnx"), {.weight_dtype = DType::f16});
  EXPECT_LT(std::filesystem::file_size(scratch.file("cnn16.onnx")),
            std::filesystem::file_size(scratch.file("cnn32.onnx")) * 51 / 100);
  EXPECT_NE(error_of([&] {
              io::export_onnx(model, scratch.file("i32.onnx"), {.weight_dtype = DType::i32});
            }).find("use f16 or bf16"),
            std::string::npos);
}

TEST(OnnxExport, RefusesWhatItCannotWriteNamingIt) {
  ScratchDir scratch;
  nn::Sequential custom({nn::Dense(2), nn::Layer(std::make_shared<testing::CustomLayer>())});
  custom.build({3});
  EXPECT_NE(error_of([&] {
              io::export_onnx(custom, scratch.file("c.onnx"));
            }).find("(Custom) is a custom layer"),
            std::string::npos);
  nn::Sequential unbuilt({nn::Dense(2)});
  EXPECT_NE(error_of([&] { io::export_onnx(unbuilt, scratch.file("u.onnx")); }).find("not built"),
            std::string::npos);
  nn::Sequential fine({nn::Dense(2)});
  fine.build({3});
  EXPECT_NE(error_of([&] {
              io::export_onnx(fine, scratch.file("o.onnx"), {.opset = 12});
            }).find("opset must be in [13, 17]"),
            std::string::npos);
  io::export_onnx(fine, scratch.file("o17.onnx"), {.opset = 17});
  EXPECT_EQ(read_model(scratch.file("o17.onnx")).opset_import(0).version(), 17);
}

}  // namespace
}  // namespace tandem
