// `tandem export --model DIR --format onnx --output FILE`: a saved model as an ONNX model for
// serving (onnxruntime, TensorRT, ...), checked by the ONNX checker before it is written.
#include <iostream>
#include <limits>

#include "cli/commands.h"
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
          {"--format", "NAME", "onnx (required; the only format so far)",
           into(&O::format, one_of({"onnx"}, "format"))},
          {"--output", "FILE", "where to write the model (required)", into(&O::output)},
          {"--opset", "N", "ONNX opset, 13 to 17 (default " + std::to_string(O{}.onnx.opset) + ")",
           [](O& options, const std::string& option, const std::string& text) {
             const std::int64_t opset = parse_positive_integer(option, text);
             if (opset < 13 || opset > 17) {
               throw UsageError(
                   option + " must be 13 to 17 (what the ONNX library here knows), got " + text);
             }
             options.onnx.opset = static_cast<int>(opset);
           }},
      },
      {[](O& options, const ParsedArgs&) {
        if (options.model_dir.empty()) {
          throw UsageError("'tandem export' needs --model DIR, the directory of a saved model");
        }
        if (options.format.empty()) throw UsageError("'tandem export' needs --format onnx");
        if (options.output.empty()) throw UsageError("'tandem export' needs --output FILE");
      }});
  return table;
}

}  // namespace

const CommandSpec& export_spec() {
  static const CommandSpec spec{
      "export",
      "Write a saved model in another format (ONNX) for serving",
      "tandem export --model DIR --format onnx --output FILE [--opset N]",
      "Reads the model that `tandem train --save-model DIR` (or Model::save) wrote and writes it\n"
      "as an ONNX model: input \"input\" (N, H, W, C) as Tandem takes it, output \"output\";\n"
      "convolutions and pooling run in ONNX's NCHW inside, with the transposes the graph needs.\n"
      "The file passes the ONNX checker and shape inference before it is written.",
      export_options().specs(),
  };
  return spec;
}

int run_export(const ParsedArgs& args) {
  const ExportOptions options = export_options().read(args);
  const nn::Model model = io::load_model(options.model_dir);
  io::export_onnx(model, options.output, options.onnx);
  std::cout << "exported: " << options.output << " (ONNX opset " << options.onnx.opset
            << ", model '" << model.name() << "', input (N, " <<
      [&] {
        std::string dims;
        for (std::size_t i = 1; i < model.input_shape().size(); ++i)
          dims += (i > 1 ? ", " : "") + std::to_string(model.input_shape()[i]);
        return dims;
      }() << "))\n";
  return 0;
}

}  // namespace tandem::cli
