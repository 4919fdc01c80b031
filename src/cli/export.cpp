// `tandem export --model DIR --format onnx|savedmodel|keras --output PATH`: a saved model as an
// ONNX model for serving (onnxruntime, TensorRT, ...), checked by the ONNX checker before it is
// written, as a TensorFlow SavedModel folder (TensorFlow Serving, tf.saved_model.load) or as a
// .keras file (tf.keras.models.load_model).
#include <iostream>
#include <limits>

#include "cli/commands.h"
#include "core/files.h"
#include "tandem/io.h"

namespace tandem::cli {

namespace {

struct ExportOptions {
  std::string model_dir;
  std::string format;
  std::string output;
  io::OnnxExportOptions onnx;
};

const OptionTable<ExportOptions>& export_options() {
  using O = ExportOptions;
  static const OptionTable<O> table(
      {
          {"--model", "DIR", "the saved model's directory (required)", into(&O::model_dir)},
          {"--format", "NAME",
           "onnx (a file), savedmodel (a TensorFlow SavedModel folder) or keras (a .keras file "
           "for tf.keras.models.load_model) (required)",
           into(&O::format, one_of({"onnx", "savedmodel", "keras"}, "format"))},
          {"--output", "PATH",
           "where to write the model: a file, or a folder for savedmodel "
           "(required)",
           into(&O::output)},
          {"--opset", "N",
           "ONNX opset, 13 to 17 (default " + std::to_string(O{}.onnx.opset) + "; onnx only)",
           [](O& options, const std::string& option, const std::string& text) {
             const std::int64_t opset = parse_positive_integer(option, text);
             if (opset < 13 || opset > 17) {
               throw UsageError(
                   option + " must be 13 to 17 (what the ONNX library here knows), got " + text);
             }
             options.onnx.opset = static_cast<int>(opset);
           }},
          {"--weights-dtype", "f16|bf16",
           "onnx only: store the weights in 16 bits, each cast back to f32 in the graph (half the "
           "file; default: f32)",
           [](O& options, const std::string& option, const std::string& text) {
             options.onnx.weight_dtype =
                 parse_dtype(one_of({"f16", "bf16"}, "weights dtype")(option, text));
           }},
      },
      {[](O& options, const ParsedArgs& args) {
        if (options.model_dir.empty()) {
          throw UsageError("'tandem export' needs --model DIR, the directory of a saved model");
        }
        if (options.format.empty()) {
          throw UsageError("'tandem export' needs --format onnx, savedmodel or keras");
        }
        if (options.output.empty()) throw UsageError("'tandem export' needs --output PATH");
        for (const char* option : {"--opset", "--weights-dtype"}) {
          if (args.has(option) && options.format != "onnx") {
            throw UsageError(std::string(option) + " applies to --format onnx only, not " +
                             options.format);
          }
        }
      }});
  return table;
}

}  // namespace

const CommandSpec& export_spec() {
  static const CommandSpec spec{
      "export",
      "Write a saved model in another format (ONNX, TensorFlow SavedModel, Keras) for serving",
      "tandem export --model DIR --format onnx|savedmodel|keras --output PATH [--opset N]\n"
      "       [--weights-dtype f16|bf16]",
      "Reads the model that `tandem train --save-model DIR` (or Model::save) wrote and writes it\n"
      "in the format --format names. Each takes input \"input\" (N, H, W, C) as Tandem does and\n"
      "give \"output\".\n"
      "  onnx        one file; convolutions and pooling run in ONNX's NCHW inside, with the\n"
      "              transposes the graph needs. It passes the ONNX checker and shape inference\n"
      "              before it is written.\n"
      "  savedmodel  a folder (saved_model.pb, variables/) for TensorFlow Serving and\n"
      "              tf.saved_model.load: MetaGraph \"serve\", signature \"serving_default\",\n"
      "              TensorFlow's ops with the weights as constants. An existing SavedModel at\n"
      "              PATH is replaced whole; any other non-empty folder is an error.\n"
      "  keras       a .keras file (config.json, model.weights.h5) that TensorFlow 2.15's\n"
      "              tf.keras.models.load_model opens.",
      export_options().specs(),
  };
  return spec;
}

int run_export(const ParsedArgs& args) {
  const ExportOptions options = export_options().read(args);
  // Before any work: what is there must be what the format writes (a SavedModel is a folder,
  // whose parents it makes, as TensorFlow Serving's model/version layout wants; the others files).
  require_replaceable(options.output,
                      options.format == "savedmodel" ? Destination::folder : Destination::file,
                      "--output");
  const nn::Model model = io::load_model(options.model_dir);
  std::string input_dims;
  for (std::size_t i = 1; i < model.input_shape().size(); ++i)
    input_dims += (i > 1 ? ", " : "") + std::to_string(model.input_shape()[i]);
  std::string format;
  if (options.format == "onnx") {
    io::export_onnx(model, options.output, options.onnx);
    format = "ONNX opset " + std::to_string(options.onnx.opset) +
             (quantization::quantized_inputs(model).empty() ? "" : ", int8 in QDQ form") +
             (options.onnx.weight_dtype
                  ? std::string(", ") + dtype_name(*options.onnx.weight_dtype) + " weights"
                  : "");
  } else if (options.format == "savedmodel") {
    io::export_saved_model(model, options.output);
    format = "TensorFlow SavedModel, signature serving_default";
  } else {
    io::export_keras(model, options.output);
    format = "Keras 2.15 .keras file";
  }
  std::cout << "exported: " << options.output << " (" << format << ", model '" << model.name()
            << "', input (N, " << input_dims << "))\n";
  return 0;
}

}  // namespace tandem::cli
