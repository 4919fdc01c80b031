// `tandem export --model DIR --format onnx --output FILE`: a saved model as an ONNX model for
// serving (onnxruntime, TensorRT, ...), checked by the ONNX checker before it is written.
#include <iostream>
#include <limits>

#include "cli/commands.h"
#include "tandem/io.h"

namespace tandem::cli {

const CommandSpec& export_spec() {
  static const CommandSpec spec{
      "export",
      "Write a saved model in another format (ONNX) for serving",
      "tandem export --model DIR --format onnx --output FILE [--opset N]",
      "Reads the model that `tandem train --save-model DIR` (or Model::save) wrote and writes it\n"
      "as an ONNX model: input \"input\" (N, H, W, C) as Tandem takes it, output \"output\";\n"
      "convolutions and pooling run in ONNX's NCHW inside, with the transposes the graph needs.\n"
      "The file passes the ONNX checker and shape inference before it is written.",
      {
          {"--model", "DIR", "the saved model's directory (required)"},
          {"--format", "NAME", "onnx (required; the only format so far)"},
          {"--output", "FILE", "where to write the model (required)"},
          {"--opset", "N", "ONNX opset, 13 to 17 (default 13)"},
      },
  };
  return spec;
}

int run_export(const ParsedArgs& args) {
  const std::optional<std::string> model_dir = args.value("--model");
  const std::optional<std::string> format = args.value("--format");
  const std::optional<std::string> output = args.value("--output");
  if (!model_dir || model_dir->empty()) {
    throw UsageError("'tandem export' needs --model DIR, the directory of a saved model");
  }
  if (!format) throw UsageError("'tandem export' needs --format onnx");
  if (*format != "onnx") {
    throw UsageError("unknown format '" + *format + "' for --format; choose onnx");
  }
  if (!output || output->empty()) throw UsageError("'tandem export' needs --output FILE");
  io::OnnxExportOptions options;
  if (auto text = args.value("--opset")) {
    const std::int64_t opset = parse_positive_integer("--opset", *text);
    if (opset < 13 || opset > 17) {
      throw UsageError("--opset must be 13 to 17 (what the ONNX library here knows), got " + *text);
    }
    options.opset = static_cast<int>(opset);
  }
  const nn::Model model = io::load_model(*model_dir);
  io::export_onnx(model, *output, options);
  std::cout << "exported: " << *output << " (ONNX opset " << options.opset << ", model '"
            << model.name() << "', input (N, " <<
      [&] {
        std::string dims;
        for (std::size_t i = 1; i < model.input_shape().size(); ++i)
          dims += (i > 1 ? ", " : "") + std::to_string(model.input_shape()[i]);
        return dims;
      }() << "))\n";
  return 0;
}

}  // namespace tandem::cli
