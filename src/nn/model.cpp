// Models: the layer graph shared by functional models and Sequential, the forward pass over it,
// weights and the summary table. Training methods are in src/train/fit.cpp.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "nn/layer_util.h"
#include "nn/model_state.h"

namespace tandem::nn {
namespace {

// "(None, 26, 26, 32)": the unknown batch size shown as None, as Keras does.
std::string symbolic_shape_str(const Shape& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += shape[i] < 0 ? "None" : std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

std::string model_label(const Model::State& state) {
  return std::string(state.sequential ? "Sequential" : "Model") + " '" + state.name + "'";
}

// Orders the nodes the output depends on so every node follows its inputs, with the model input
// first, and works out when each intermediate value can be released during a forward pass.
void link_graph(Model::State& state) {
  std::unordered_map<const Node*, std::size_t> index{{state.input.node().get(), 0}};
  std::vector<std::shared_ptr<const Node>> order{state.input.node()};
  auto visit = [&](auto& self, const std::shared_ptr<const Node>& node) -> void {
    if (index.contains(node.get())) return;
    if (!node->layer.defined()) {
      throw InvalidArgument(model_label(state) + ": the outputs depend on the input '" +
                            node->name + "', which is not the model's input '" +
                            state.input.node()->name + "'; pass that input to the model");
    }
    for (const SymbolicTensor& input : node->inputs)
      self(self, input.node());
    index.emplace(node.get(), order.size());
    order.push_back(node);
  };
  visit(visit, state.output.node());

  std::vector<std::vector<std::size_t>> node_inputs(order.size());
  std::vector<std::size_t> last_use(order.size(), 0);
  for (std::size_t i = 1; i < order.size(); ++i) {
    for (const SymbolicTensor& input : order[i]->inputs) {
      const std::size_t source = index.at(input.node().get());
      node_inputs[i].push_back(source);
      last_use[source] = i;
    }
  }
  std::vector<std::vector<std::size_t>> release_after(order.size());
  for (std::size_t source = 0; source + 1 < order.size(); ++source) {
    release_after[last_use[source]].push_back(source);
  }
  state.nodes = std::move(order);
  state.node_inputs = std::move(node_inputs);
  state.release_after = std::move(release_after);
}

void require_built(const Model::State& state, const char* what) {
  if (!state.built()) {
    throw InvalidArgument(model_label(state) + "." + what +
                          ": the model is not built yet; call build(input_shape) or run it on "
                          "data first");
  }
}

// Matching extents after the batch dimension, and the dtype.
bool accepts(const SymbolicTensor& input, const Shape& shape, DType dtype) {
  const Shape& expected = input.shape();
  if (shape.size() != expected.size() || dtype != input.dtype()) return false;
  return std::equal(expected.begin() + 1, expected.end(), shape.begin() + 1);
}

std::string with_thousands(std::int64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

// Keras' readable_memory_size: 364.54 KB.
std::string readable_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << bytes << ' ' << units[unit];
  return out.str();
}

std::string repeat(const char* piece, std::size_t count) {
  std::string text;
  for (std::size_t i = 0; i < count; ++i)
    text += piece;
  return text;
}

// A box-drawn table like the one Keras 3 prints (rich's SIMPLE_HEAVY head, rows ruled apart).
class SummaryTable {
 public:
  SummaryTable(std::vector<std::string> headers, std::vector<std::size_t> min_widths,
               std::vector<bool> right_aligned)
      : headers_(std::move(headers)),
        widths_(std::move(min_widths)),
        right_aligned_(std::move(right_aligned)) {
    for (std::size_t c = 0; c < headers_.size(); ++c)
      widths_[c] = std::max(widths_[c], headers_[c].size() + 2);
  }

  void add_row(std::vector<std::string> cells) {
    for (std::size_t c = 0; c < cells.size(); ++c)
      widths_[c] = std::max(widths_[c], cells[c].size() + 2);
    rows_.push_back(std::move(cells));
  }

  void print(std::ostream& out) const {
    out << rule("┏", "━", "┳", "┓") << '\n'
        << line(headers_, "┃") << '\n'
        << rule("┡", "━", "╇", "┩") << '\n';
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      if (r) out << rule("├", "─", "┼", "┤") << '\n';
      out << line(rows_[r], "│") << '\n';
    }
    out << rule("└", "─", "┴", "┘") << '\n';
  }

 private:
  std::string rule(const char* left, const char* fill, const char* join, const char* right) const {
    std::string text = left;
    for (std::size_t c = 0; c < widths_.size(); ++c) {
      text += repeat(fill, widths_[c]) + (c + 1 < widths_.size() ? join : right);
    }
    return text;
  }

  std::string line(const std::vector<std::string>& cells, const char* bar) const {
    std::string text = bar;
    for (std::size_t c = 0; c < widths_.size(); ++c) {
      const std::string padding(widths_[c] - 2 - cells[c].size(), ' ');
      text += ' ';
      text += right_aligned_[c] ? padding : cells[c];
      text += right_aligned_[c] ? cells[c] : padding;
      text += ' ';
      text += bar;
    }
    return text;
  }

  std::vector<std::string> headers_;
  std::vector<std::size_t> widths_;
  std::vector<bool> right_aligned_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

// ---- SymbolicTensor and Input ----

SymbolicTensor::SymbolicTensor(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

const Shape& SymbolicTensor::shape() const {
  if (!node_) throw InvalidArgument("SymbolicTensor::shape: the tensor is empty");
  return node_->shape;
}

DType SymbolicTensor::dtype() const {
  if (!node_) throw InvalidArgument("SymbolicTensor::dtype: the tensor is empty");
  return node_->dtype;
}

SymbolicTensor Input(const Shape& shape, DType dtype, const std::string& name) {
  for (std::int64_t extent : shape) {
    if (extent <= 0) {
      throw InvalidArgument("nn::Input: shape " + shape_str(shape) +
                            " must have positive extents; give it without the batch dimension, "
                            "e.g. {28, 28, 1}");
    }
  }
  auto node = std::make_shared<Node>();
  node->shape = {-1};
  node->shape.insert(node->shape.end(), shape.begin(), shape.end());
  node->dtype = dtype;
  node->name = name.empty() ? detail::unique_name("input_layer") : name;
  return SymbolicTensor(std::move(node));
}

// ---- Model ----

Model::Model(const std::string& name) : state_(std::make_unique<State>()) {
  state_->name = name;
}

Model::Model(const SymbolicTensor& inputs, const SymbolicTensor& outputs, const std::string& name)
    : Model(name.empty() ? detail::unique_name("functional") : name) {
  if (!inputs.node() || inputs.node()->layer.defined()) {
    throw InvalidArgument(model_label(*state_) +
                          ": `inputs` must be the tensor that nn::Input(shape) returned");
  }
  if (!outputs.node()) throw InvalidArgument(model_label(*state_) + ": `outputs` is empty");
  state_->input = inputs;
  state_->output = outputs;
  link_graph(*state_);
}

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const std::string& Model::name() const {
  return state_->name;
}

bool Model::built() const {
  return state_->built();
}

void Model::build(const Shape& input_shape, DType dtype) {
  State& state = *state_;
  if (state.built()) {
    Shape with_batch{-1};
    with_batch.insert(with_batch.end(), input_shape.begin(), input_shape.end());
    if (!accepts(state.input, with_batch, dtype)) {
      throw InvalidArgument(model_label(state) + " is already built for inputs " +
                            symbolic_shape_str(state.input.shape()) + " " +
                            dtype_name(state.input.dtype()) + ", not " +
                            symbolic_shape_str(with_batch) + " " + dtype_name(dtype));
    }
    return;
  }
  TANDEM_ASSERT(state.sequential, "a functional model is built when it is made");
  if (state.sequential_layers.empty()) {
    throw InvalidArgument(model_label(state) + " has no layers; add() some before using it");
  }
  const SymbolicTensor input = Input(input_shape, dtype);
  SymbolicTensor x = input;
  for (const Layer& layer : state.sequential_layers)
    x = layer(x);
  state.input = input;
  state.output = x;
  link_graph(state);
}

const Shape& Model::input_shape() const {
  require_built(*state_, "input_shape");
  return state_->input.shape();
}

const Shape& Model::output_shape() const {
  require_built(*state_, "output_shape");
  return state_->output.shape();
}

Tensor Model::call(const Tensor& x, bool training) {
  State& state = *state_;
  if (!x.defined()) throw InvalidArgument(model_label(state) + ": the input tensor is undefined");
  if (!state.built()) {
    if (x.rank() < 1) {
      throw InvalidArgument(model_label(state) + ": inputs need a batch dimension, got a scalar");
    }
    build(Shape(x.shape().begin() + 1, x.shape().end()), x.dtype());
  }
  if (!accepts(state.input, x.shape(), x.dtype())) {
    throw InvalidArgument(model_label(state) + " expects inputs " +
                          symbolic_shape_str(state.input.shape()) + " " +
                          dtype_name(state.input.dtype()) + ", got " + shape_str(x.shape()) + " " +
                          dtype_name(x.dtype()) + "; reshape or cast the data to match");
  }
  std::vector<Tensor> values(state.nodes.size());
  values[0] = x;
  std::vector<Tensor> gathered;
  for (std::size_t i = 1; i < state.nodes.size(); ++i) {
    LayerBase& layer = state.nodes[i]->layer.impl();
    const std::vector<std::size_t>& inputs = state.node_inputs[i];
    if (inputs.size() == 1) {
      values[i] = layer.invoke({&values[inputs[0]], 1}, training);
    } else {
      gathered.clear();
      for (std::size_t source : inputs)
        gathered.push_back(values[source]);
      values[i] = layer.invoke(gathered, training);
    }
    for (std::size_t done : state.release_after[i])
      values[done] = Tensor();
  }
  return values.back();
}

std::vector<Layer> Model::layers() const {
  const State& state = *state_;
  if (!state.built()) return state.sequential_layers;
  std::vector<Layer> unique;
  std::unordered_set<const LayerBase*> seen;
  for (std::size_t i = 1; i < state.nodes.size(); ++i) {
    const Layer& layer = state.nodes[i]->layer;
    if (seen.insert(layer.ptr().get()).second) unique.push_back(layer);
  }
  return unique;
}

const std::vector<std::shared_ptr<const Node>>& Model::nodes() const {
  require_built(*state_, "nodes");
  return state_->nodes;
}

Layer Model::get_layer(const std::string& name) const {
  std::string names;
  for (const Layer& layer : layers()) {
    if (layer.name() == name) return layer;
    names += (names.empty() ? "" : ", ") + layer.name();
  }
  throw InvalidArgument(model_label(*state_) + " has no layer named '" + name +
                        "'; its layers: " + (names.empty() ? "none" : names));
}

std::vector<Tensor> Model::weights() const {
  std::vector<Tensor> all;
  for (const Layer& layer : layers()) {
    for (Tensor& weight : layer.weights())
      all.push_back(std::move(weight));
  }
  return all;
}

std::vector<Tensor> Model::trainable_weights() const {
  std::vector<Tensor> trainable;
  for (const Layer& layer : layers()) {
    for (Tensor& weight : layer.trainable_weights())
      trainable.push_back(std::move(weight));
  }
  return trainable;
}

std::vector<Tensor> Model::non_trainable_weights() const {
  std::vector<Tensor> frozen;
  for (const Layer& layer : layers()) {
    for (Tensor& weight : layer.non_trainable_weights())
      frozen.push_back(std::move(weight));
  }
  return frozen;
}

std::int64_t Model::count_params() const {
  std::int64_t count = 0;
  for (const Tensor& weight : weights())
    count += weight.numel();
  return count;
}

void Model::summary(std::ostream& out) const {
  const State& state = *state_;
  require_built(state, "summary");
  const bool functional = !state.sequential;
  SummaryTable table =
      functional ? SummaryTable({"Layer (type)", "Output Shape", "Param #", "Connected to"},
                                {31, 24, 11, 24}, {false, false, true, false})
                 : SummaryTable({"Layer (type)", "Output Shape", "Param #"}, {33, 24, 15},
                                {false, false, true});
  if (functional) {
    table.add_row({state.nodes[0]->name + " (InputLayer)",
                   symbolic_shape_str(state.nodes[0]->shape), "0", "-"});
  }
  std::unordered_set<const LayerBase*> listed;
  for (std::size_t i = 1; i < state.nodes.size(); ++i) {
    const Node& node = *state.nodes[i];
    if (!listed.insert(node.layer.ptr().get()).second) continue;
    std::vector<std::string> row{node.layer.name() + " (" + node.layer.impl().class_name() + ")",
                                 symbolic_shape_str(node.shape),
                                 with_thousands(node.layer.count_params())};
    if (functional) {
      std::string sources;
      for (const SymbolicTensor& input : node.inputs) {
        sources += (sources.empty() ? "" : ", ") + input.node()->name + "[0][0]";
      }
      row.push_back(sources);
    }
    table.add_row(std::move(row));
  }

  std::int64_t trainable = 0;
  std::int64_t frozen = 0;
  double trainable_bytes = 0;
  double frozen_bytes = 0;
  for (const Tensor& weight : trainable_weights()) {
    trainable += weight.numel();
    trainable_bytes += static_cast<double>(weight.nbytes());
  }
  for (const Tensor& weight : non_trainable_weights()) {
    frozen += weight.numel();
    frozen_bytes += static_cast<double>(weight.nbytes());
  }
  out << "Model: \"" << state.name << "\"\n";
  table.print(out);
  out << " Total params: " << with_thousands(trainable + frozen) << " ("
      << readable_bytes(trainable_bytes + frozen_bytes) << ")\n"
      << " Trainable params: " << with_thousands(trainable) << " ("
      << readable_bytes(trainable_bytes) << ")\n"
      << " Non-trainable params: " << with_thousands(frozen) << " (" << readable_bytes(frozen_bytes)
      << ")\n";
}

void Model::summary() const {
  summary(std::cout);
}

std::string Model::summary_string() const {
  std::ostringstream out;
  summary(out);
  return out.str();
}

// ---- Sequential ----

Sequential::Sequential(std::vector<Layer> layers, const std::string& name)
    : Model(name.empty() ? detail::unique_name("sequential") : name) {
  state().sequential = true;
  for (const Layer& layer : layers)
    add(layer);
}

void Sequential::add(const Layer& layer) {
  Model::State& graph = state();
  layer.impl();  // an empty handle throws here, naming the problem
  if (graph.built()) {
    graph.output = layer(graph.output);
    link_graph(graph);
  }
  graph.sequential_layers.push_back(layer);
}

}  // namespace tandem::nn
