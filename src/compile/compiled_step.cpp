// Compiling a traced graph (the passes, then the static memory plan) and running it.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "compile/passes.h"
#include "compile/stablehlo_module.h"
#include "compile/tracer.h"
#include "core/tensor_copy.h"
#include "ops/backend.h"
#include "tandem/autodiff.h"
#include "tandem/compile.h"

namespace tandem {
namespace {

using compile::Graph;
using compile::Value;
using compile::ValueKind;

constexpr std::size_t kAlignment = 64;  // as the CPU allocator aligns every buffer

std::size_t exact_bytes(const TensorMeta& meta) {
  return static_cast<std::size_t>(shape_numel(meta.shape)) * dtype_size(meta.dtype);
}

std::size_t aligned_bytes(const TensorMeta& meta) {
  return (exact_bytes(meta) + kAlignment - 1) / kAlignment * kAlignment;
}

std::string mebibytes(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Where a root buffer lives.
enum class Home {
  arena,    // in the step's block, at an offset the plan chose
  result,   // a buffer of its own that a result of the step views, reused once it is dropped
  outside,  // the caller's input, a capture, a constant or a host operand
  unused,   // a result no node makes or reads any more: a fusion pass took it over
};

}  // namespace

struct CompiledStep::Impl {
  Graph graph;
  CompiledStepStats stats;
  Backend* backend = nullptr;
  Tensor arena;                     // u8 (arena_bytes,)
  std::vector<int> root;            // per value
  std::vector<Home> home;           // per root value
  std::vector<std::size_t> offset;  // per arena root
  std::vector<int> arena_roots;
  std::vector<int> result_roots;
  std::vector<long> result_own_refs;       // per result root: storage references the step holds
  std::vector<std::vector<int>> views_of;  // per root: the values viewing its buffer
  std::vector<const Storage*> built_on;    // per root outside the arena: views made on this
  std::vector<Tensor> handles;             // per value
  std::vector<Tensor> host_staging;        // per host operand: its CPU copy
  std::vector<Tensor> scratch_inputs, scratch_outputs;
  std::vector<std::unique_ptr<KernelState>> kernel_states;  // per node (KernelContext::state)
  // Replaying recorded kernels (Backend::record: a CUDA graph) from the second run on, where the
  // backend records and no observer (the profiler) watches the ops. A recording holds the
  // buffers' addresses, so the inputs are copied into buffers of the step's own (except those
  // the step writes in place), results are returned as copies, and any buffer that moved (a
  // weight given new storage, the block released) makes a new recording.
  bool replays = false;      // decided at the first run
  std::string not_recorded;  // why the step runs op by op, once known
  std::unique_ptr<RecordedWork> recording;
  std::vector<const void*> recorded_at;  // per value: its buffer's address when recorded
  std::vector<Tensor> own_inputs;        // per input: the step's copy, or none (read in place)
  std::int64_t runs = 0;

  Tensor view_of_root(int value) const {
    const Value& v = graph.values[static_cast<std::size_t>(value)];
    const Tensor& base = handles[static_cast<std::size_t>(root[static_cast<std::size_t>(value)])];
    return Tensor::from_storage(base.storage(), base.storage_offset(), v.meta.shape, v.meta.dtype);
  }
  void rebuild_views(int root_value) {
    for (int view : views_of[static_cast<std::size_t>(root_value)])
      handles[static_cast<std::size_t>(view)] = view_of_root(view);
    built_on[static_cast<std::size_t>(root_value)] =
        handles[static_cast<std::size_t>(root_value)].storage().get();
  }
  void merge_in_place_outputs(std::vector<int>& last, const std::vector<bool>& is_result_root);
  void plan();
  void ensure_arena();
  void ensure_results();
  void release_arena();
  void bind(const std::vector<Tensor>& inputs);
  void issue_nodes(const std::vector<OpObserver*>& observers);
  const void* address_of(std::size_t value) const {
    return handles[value].defined() ? handles[value].raw_data() : nullptr;
  }
  // Why the recording no longer matches the buffers ("" when it does).
  std::string moved_buffer() const;
  void make_own_inputs();
  std::vector<Tensor> own_bound(const std::vector<Tensor>& inputs);
  void replay(const std::vector<Tensor>& inputs);
  void fill_host_operands() {
    for (std::size_t k = 0; k < graph.host_operands.size(); ++k)
      graph.values[static_cast<std::size_t>(graph.host_operands[k])].fill(host_staging[k]);
  }
};

// The block is allocated at a step's first run, and again after release_arena.
void CompiledStep::Impl::ensure_arena() {
  if (arena.defined()) return;
  arena = Tensor::empty({static_cast<std::int64_t>(std::max(stats.arena_bytes, kAlignment))},
                        DType::u8, graph.device);
  for (int r : arena_roots) {
    const Value& value = graph.values[static_cast<std::size_t>(r)];
    handles[static_cast<std::size_t>(r)] = Tensor::from_storage(
        arena.storage(), offset[static_cast<std::size_t>(r)], value.meta.shape, value.meta.dtype);
    rebuild_views(r);
  }
}

// The results' buffers too are made at the first run: a step only lowered to XLA never runs
// here, and its outputs (a batch's logits) would hold host memory for nothing.
void CompiledStep::Impl::ensure_results() {
  if (!result_own_refs.empty() || result_roots.empty()) return;
  for (int r : result_roots) {
    const Value& value = graph.values[static_cast<std::size_t>(r)];
    handles[static_cast<std::size_t>(r)] =
        Tensor::empty(value.meta.shape, value.meta.dtype, graph.device);
    rebuild_views(r);
  }
  for (int r : result_roots)
    result_own_refs.push_back(handles[static_cast<std::size_t>(r)].storage().use_count());
}

void CompiledStep::Impl::release_arena() {
  recording.reset();      // its kernels point into the block
  kernel_states.clear();  // and what they kept with it (scratch buffers, reordered constants)
  for (int r : arena_roots) {
    handles[static_cast<std::size_t>(r)] = Tensor();
    for (int view : views_of[static_cast<std::size_t>(r)])
      handles[static_cast<std::size_t>(view)] = Tensor();
  }
  arena = Tensor();
}

// An output written into the buffer of an input that dies at its node (OpDef::in_place_input):
// the two values become one buffer, live from the input's first use to the output's last. The
// input must be a buffer of the step's own that the node reads only there (a convolution's input
// that is also its residual would be overwritten while read).
void CompiledStep::Impl::merge_in_place_outputs(std::vector<int>& last,
                                                const std::vector<bool>& is_result_root) {
  const auto own_buffer = [&](int value) {
    const auto v = static_cast<std::size_t>(value);
    return graph.values[v].kind == ValueKind::node && !is_result_root[v];
  };
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const compile::Node& node = graph.nodes[n];
    const OpDef& def = op_def(node.kind);
    if (def.in_place_input == nullptr || node.outputs.empty()) continue;
    std::vector<TensorMeta> inputs;
    for (int input : node.inputs)
      inputs.push_back(graph.values[static_cast<std::size_t>(input)].meta);
    const int k = def.in_place_input(inputs, node.attrs);
    if (k < 0) continue;
    const int input = node.inputs[static_cast<std::size_t>(k)];
    const int input_root = root[static_cast<std::size_t>(input)];
    const int output = node.outputs[0];
    const auto in = static_cast<std::size_t>(input_root);
    const auto out = static_cast<std::size_t>(output);
    const bool read_elsewhere = std::ranges::count_if(node.inputs, [&](int other) {
                                  return root[static_cast<std::size_t>(other)] == input_root;
                                }) > 1;
    // The input must be its whole buffer (the root or a reshaped view of it, not a part).
    const std::size_t bytes = exact_bytes(graph.values[out].meta);
    if (root[out] != output || !own_buffer(input_root) || !own_buffer(output) ||
        last[in] != static_cast<int>(n) || read_elsewhere ||
        exact_bytes(graph.values[in].meta) != bytes ||
        exact_bytes(graph.values[static_cast<std::size_t>(input)].meta) != bytes) {
      continue;
    }
    for (std::size_t v = 0; v < root.size(); ++v)
      if (root[v] == output) root[v] = input_root;
    last[in] = last[out];
    ++stats.in_place;
  }
}

void CompiledStep::Impl::plan() {
  const std::size_t count = graph.values.size();
  root.resize(count);
  for (std::size_t v = 0; v < count; ++v)
    root[v] = graph.root(static_cast<int>(v));
  home.assign(count, Home::outside);
  offset.assign(count, 0);
  views_of.assign(count, {});
  built_on.assign(count, nullptr);
  handles.assign(count, Tensor());

  // Liveness of each buffer the nodes make: from its node to the last node touching a value in
  // it. A buffer a result views leaves the block: the caller may keep it past the run.
  std::vector<int> first(count, -1), last(count, -1);
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const compile::Node& node = graph.nodes[n];
    const auto touch = [&](int value) {
      const auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(value)]);
      if (first[r] < 0) first[r] = static_cast<int>(n);
      last[r] = static_cast<int>(n);
    };
    for (int input : node.inputs)
      touch(input);
    for (int output : node.outputs)
      touch(output);
  }
  std::vector<bool> is_result_root(count, false);
  for (int output : graph.outputs)
    is_result_root[static_cast<std::size_t>(root[static_cast<std::size_t>(output)])] = true;
  merge_in_place_outputs(last, is_result_root);
  for (std::size_t v = 0; v < count; ++v) {
    if (root[v] != static_cast<int>(v))
      views_of[static_cast<std::size_t>(root[v])].push_back(static_cast<int>(v));
  }

  struct Buffer {
    int value;
    std::size_t bytes;
  };
  std::vector<Buffer> buffers;
  for (std::size_t v = 0; v < count; ++v) {
    const Value& value = graph.values[v];
    if (value.kind != ValueKind::node || graph.root(static_cast<int>(v)) != static_cast<int>(v))
      continue;
    // A result a fusion pass took over (a product's own before its fused relu, the pooling's
    // gradient a pooled filter gradient forms itself): no node makes or reads it any more. Left
    // in, such buffers had no liveness, overlapped one another and were stacked in the block
    // (the main job's CNN: 9.82 MiB with them, 5.78 MiB without).
    if (first[v] < 0 && !is_result_root[v]) {
      home[v] = Home::unused;
      continue;
    }
    const std::size_t bytes = aligned_bytes(value.meta);
    stats.unplanned_bytes += bytes;  // what a buffer each would take, in-place outputs included
    if (root[v] != static_cast<int>(v)) continue;  // written into a dead input's buffer
    if (is_result_root[v]) {
      home[v] = Home::result;
      result_roots.push_back(static_cast<int>(v));
      stats.output_bytes += bytes;
    } else {
      home[v] = Home::arena;
      buffers.push_back({static_cast<int>(v), bytes});
    }
  }
  // Largest first, each at the lowest offset clear of every placed buffer alive at the same time.
  std::stable_sort(buffers.begin(), buffers.end(),
                   [](const Buffer& a, const Buffer& b) { return a.bytes > b.bytes; });
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& buffer = buffers[i];
    const auto v = static_cast<std::size_t>(buffer.value);
    std::vector<std::pair<std::size_t, std::size_t>> taken;  // [begin, end) of overlapping ones
    for (std::size_t k = 0; k < i; ++k) {                    // the buffers placed so far
      const Buffer& other = buffers[k];
      const auto o = static_cast<std::size_t>(other.value);
      if (first[o] <= last[v] && first[v] <= last[o])
        taken.emplace_back(offset[o], offset[o] + other.bytes);
    }
    std::sort(taken.begin(), taken.end());
    std::size_t candidate = 0;
    for (const auto& [begin, end] : taken) {
      if (candidate + buffer.bytes <= begin) break;
      candidate = std::max(candidate, end);
    }
    offset[v] = candidate;
    stats.arena_bytes = std::max(stats.arena_bytes, candidate + buffer.bytes);
    arena_roots.push_back(buffer.value);
  }

  const Device device = graph.device;
  for (std::size_t v = 0; v < count; ++v) {
    Value& value = graph.values[v];
    switch (value.kind) {
      case ValueKind::capture:
      case ValueKind::constant:
        handles[v] = value.tensor;
        stats.capture_bytes += value.tensor.nbytes();
        break;
      case ValueKind::host:  // below, in the order their fills run
        break;
      case ValueKind::node:  // made at the first run (ensure_arena, ensure_results)
        break;
      case ValueKind::input:
        break;
    }
  }
  // A host operand's CPU copy is its value on the CPU, and staged for a copy elsewhere.
  for (int id : graph.host_operands) {
    const Value& value = graph.values[static_cast<std::size_t>(id)];
    Tensor staging = Tensor::empty(value.meta.shape, value.meta.dtype, Device::cpu());
    host_staging.push_back(staging);
    handles[static_cast<std::size_t>(id)] =
        device.type == DeviceType::cpu ? staging
                                       : Tensor::empty(value.meta.shape, value.meta.dtype, device);
    stats.peak_bytes += aligned_bytes(value.meta);
  }
  for (std::size_t v = 0; v < count; ++v) {
    if (graph.values[v].kind != ValueKind::input && root[v] == static_cast<int>(v) &&
        home[v] == Home::outside && !views_of[v].empty()) {
      rebuild_views(static_cast<int>(v));
    }
  }
  stats.peak_bytes += stats.arena_bytes + stats.output_bytes;
  stats.nodes = graph.nodes.size();
  stats.host_operands = graph.host_operands.size();
  scratch_inputs.reserve(8);
  scratch_outputs.reserve(8);
}

void CompiledStep::Impl::bind(const std::vector<Tensor>& inputs) {
  if (graph.replicas > 1) {
    throw InvalidArgument("compiled step '" + graph.name + "' was traced as one of " +
                          std::to_string(graph.replicas) +
                          " replicas and runs only lowered to XLA (lower_to_stablehlo)");
  }
  ensure_arena();
  ensure_results();
  if (inputs.size() != graph.inputs.size()) {
    throw InvalidArgument("compiled step '" + graph.name + "' takes " +
                          std::to_string(graph.inputs.size()) + " inputs, got " +
                          std::to_string(inputs.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const int id = graph.inputs[i];
    const Value& expected = graph.values[static_cast<std::size_t>(id)];
    const Tensor& given = inputs[i];
    if (!given.defined() || given.is_symbolic() || given.shape() != expected.meta.shape ||
        given.dtype() != expected.meta.dtype || given.device() != expected.device) {
      throw InvalidArgument(
          "compiled step '" + graph.name + "': input " + std::to_string(i) + " was traced as " +
          shape_str(expected.meta.shape) + " " + dtype_name(expected.meta.dtype) + " on " +
          expected.device.str() + ", got " +
          (given.defined() && !given.is_symbolic()
               ? shape_str(given.shape()) + " " + dtype_name(given.dtype()) + " on " +
                     given.device().str()
               : std::string("no value")) +
          "; call it through a tandem::function or StepCache, which retrace for a new shape");
    }
    handles[static_cast<std::size_t>(id)] = given;
  }
  // Views of buffers from outside follow them: a new batch, a weight given new storage by
  // set_data (a checkpoint restored, a strategy binding a replica's copy).
  for (std::size_t v = 0; v < graph.values.size(); ++v) {
    if (home[v] != Home::outside || root[v] != static_cast<int>(v) || views_of[v].empty()) continue;
    if (handles[v].storage().get() != built_on[v]) rebuild_views(static_cast<int>(v));
  }
  // A result buffer the caller still holds from the last run is left to the caller.
  for (std::size_t k = 0; k < result_roots.size(); ++k) {
    const auto r = static_cast<std::size_t>(result_roots[k]);
    if (handles[r].storage().use_count() > result_own_refs[k]) {
      const Value& value = graph.values[r];
      handles[r] = Tensor::empty(value.meta.shape, value.meta.dtype, graph.device);
      rebuild_views(static_cast<int>(r));
    }
  }
  fill_host_operands();
  if (graph.device.type != DeviceType::cpu) {
    for (std::size_t k = 0; k < graph.host_operands.size(); ++k) {
      const auto id = static_cast<std::size_t>(graph.host_operands[k]);
      tandem::detail::copy_into(handles[id], host_staging[k], graph.values[id].what);
    }
  }
}

void CompiledStep::Impl::issue_nodes(const std::vector<OpObserver*>& observers) {
  std::optional<SpanScope> phase;  // the span of the nodes' phase, as the eager step marks it
  SpanKind phase_kind = SpanKind::step;
  kernel_states.resize(graph.nodes.size());
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const compile::Node& node = graph.nodes[n];
    if (node.phase != phase_kind) {
      phase.reset();
      phase_kind = node.phase;
      if (phase_kind != SpanKind::step) phase.emplace(phase_kind);
    }
    scratch_inputs.clear();
    scratch_outputs.clear();
    for (int input : node.inputs)
      scratch_inputs.push_back(handles[static_cast<std::size_t>(input)]);
    for (int output : node.outputs)
      scratch_outputs.push_back(handles[static_cast<std::size_t>(output)]);
    for (OpObserver* observer : observers)
      observer->before_op(node.kind, scratch_inputs, node.attrs);
    backend->run(
        KernelContext{node.kind, scratch_inputs, scratch_outputs, node.attrs, &kernel_states[n]});
    for (OpObserver* observer : observers)
      observer->after_op(node.kind, scratch_inputs, scratch_outputs, node.attrs);
  }
  phase.reset();
  scratch_inputs.clear();
  scratch_outputs.clear();
}

std::string CompiledStep::Impl::moved_buffer() const {
  for (std::size_t v = 0; v < handles.size(); ++v) {
    if (address_of(v) == recorded_at[v]) continue;
    const Value& value = graph.values[v];
    const std::string shape = shape_str(value.meta.shape);
    switch (value.kind) {
      case ValueKind::input:
        return "the input " + shape;
      case ValueKind::capture:
        return "the captured tensor " + shape + " (a weight or slot given new storage)";
      case ValueKind::constant:
        return "the constant " + shape;
      case ValueKind::host:
        return "the host operand " + value.what;
      case ValueKind::node:
        return "the intermediate " + shape + " (its block was released)";
    }
  }
  return "";
}

// Inputs the step only reads get buffers of its own that each run copies the caller's into;
// those a node writes in place (an update of an input variable) stay the caller's.
void CompiledStep::Impl::make_own_inputs() {
  std::vector<bool> written(graph.values.size(), false);
  for (const compile::Node& node : graph.nodes) {
    if (!graph.writes(node)) continue;
    for (int output : node.outputs)
      written[static_cast<std::size_t>(root[static_cast<std::size_t>(output)])] = true;
  }
  for (int id : graph.inputs) {
    const Value& value = graph.values[static_cast<std::size_t>(id)];
    own_inputs.push_back(written[static_cast<std::size_t>(id)]
                             ? Tensor()
                             : Tensor::empty(value.meta.shape, value.meta.dtype, value.device));
  }
}

std::vector<Tensor> CompiledStep::Impl::own_bound(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> bound = inputs;
  for (std::size_t i = 0; i < inputs.size() && i < own_inputs.size(); ++i) {
    if (!own_inputs[i].defined() || !inputs[i].defined() ||
        inputs[i].shape() != own_inputs[i].shape() || inputs[i].dtype() != own_inputs[i].dtype() ||
        inputs[i].device() != own_inputs[i].device()) {
      continue;  // bind() names the mismatch
    }
    tandem::detail::copy_into(own_inputs[i], inputs[i], "a compiled step's input");
    bound[i] = own_inputs[i];
  }
  return bound;
}

// Binds the inputs to the step's own buffers (copies, stream-ordered before the replay), then
// replays the recording, recording first where there is none or a buffer moved; where the backend
// cannot record this step, runs it op by op from now on and says why once.
void CompiledStep::Impl::replay(const std::vector<Tensor>& inputs) {
  bind(own_bound(inputs));
  if (recording != nullptr) {
    const std::string moved = moved_buffer();
    if (moved.empty()) {
      recording->replay();
      return;
    }
    write_compile_log("tandem: recording step '" + graph.name + "' again: " + moved +
                      " is in another buffer than when it was recorded");
  }
  recording = backend->record(
      graph.device, [&] { issue_nodes({}); }, not_recorded);
  if (recording == nullptr) {
    write_compile_log("tandem: step '" + graph.name +
                      "' runs op by op, not as one recorded graph: " + not_recorded);
    replays = false;
    own_inputs.clear();
    issue_nodes({});
    return;
  }
  write_compile_log("tandem: step '" + graph.name + "' recorded as one unit on " +
                    graph.device.str() + "; its runs replay it");
  recorded_at.resize(handles.size());
  for (std::size_t v = 0; v < handles.size(); ++v)
    recorded_at[v] = address_of(v);
  recording->replay();
}

std::vector<Tensor> CompiledStep::run(const std::vector<Tensor>& inputs) {
  Impl& step = *impl_;
  // An enclosing tape must not record the nodes: their buffers are reused within the run. The
  // profiler does see them, as it sees eager ops.
  NoGradGuard no_grad;
  const auto observers = current_op_observers();
  if (step.runs++ == 0) {
    step.replays = step.graph.replicas == 1 && step.backend->records_kernels();
    if (step.replays) step.make_own_inputs();
  }
  // The first run goes op by op: it makes the kernels' one-time choices (cuDNN's algorithms,
  // cuBLASLt's plans) that a recording must not contain.
  const bool watched = std::ranges::any_of(
      *observers, [](const OpObserver* observer) { return observer->watches_this_thread(); });
  if (step.replays && step.runs > 1 && !watched) {
    step.replay(inputs);
  } else {
    step.bind(step.replays ? step.own_bound(inputs) : inputs);
    step.issue_nodes(*observers);
  }
  std::vector<Tensor> results;
  results.reserve(step.graph.outputs.size());
  for (int output : step.graph.outputs) {
    const auto v = static_cast<std::size_t>(output);
    const Value& value = step.graph.values[v];
    const Home home = step.home[static_cast<std::size_t>(step.root[v])];
    if (home == Home::result) {
      // A replayed step keeps its results' buffers where it recorded them.
      results.push_back(step.replays ? step.view_of_root(output).clone()
                                     : step.view_of_root(output));
    } else if (value.kind == ValueKind::host) {
      results.push_back(step.handles[v].clone());
    } else {
      results.push_back(step.handles[v]);
    }
  }
  return results;
}

void CompiledStep::release_memory() {
  impl_->release_arena();
}

const std::string& CompiledStep::name() const {
  return impl_->graph.name;
}

const CompiledStepStats& CompiledStep::stats() const {
  return impl_->stats;
}

CompiledStep::Stablehlo CompiledStep::lower_to_stablehlo() const {
  const Graph& graph = impl_->graph;
  compile::LoweredGraph lowered = compile::lower_graph(graph);
  Stablehlo program{
      std::move(lowered.module), {}, graph.host_operands.size(), std::move(lowered.updated)};
  const std::size_t captures_end = lowered.arguments.size() - graph.host_operands.size();
  for (std::size_t i = graph.inputs.size(); i < captures_end; ++i)
    program.captured.push_back(graph.values[static_cast<std::size_t>(lowered.arguments[i])].tensor);
  return program;
}

const std::vector<Tensor>& CompiledStep::fill_host_operands() {
  impl_->fill_host_operands();
  return impl_->host_staging;
}

std::string CompiledStep::listing() const {
  const Impl& step = *impl_;
  const CompiledStepStats& s = step.stats;
  std::string text = "compiled step '" + step.graph.name + "' on " + step.graph.device.str() +
                     ": " + std::to_string(s.nodes) + " nodes (traced " +
                     std::to_string(s.traced_nodes) + "; " + std::to_string(s.folded) +
                     " folded, " + std::to_string(s.merged) + " merged, " +
                     std::to_string(s.removed) + " removed, " + std::to_string(s.fused) +
                     " fused, " + std::to_string(s.grouped) + " updates grouped), " +
                     std::to_string(s.host_operands) + " host operands\n";
  text += compile::graph_listing(step.graph);
  text += "memory plan: intermediates in one block of " + mebibytes(s.arena_bytes) + " (" +
          mebibytes(s.unplanned_bytes - s.output_bytes) + " with a buffer each; " +
          std::to_string(s.in_place) + " written in place), results " + mebibytes(s.output_bytes) +
          ", peak " + mebibytes(s.peak_bytes) + " beyond the captured " +
          mebibytes(s.capture_bytes) + "\n";
  if (step.recording != nullptr) {
    text += "recorded: its kernels replay as one unit a run (" + std::string(step.backend->name()) +
            ")\n";
  } else if (!step.not_recorded.empty()) {
    text += "not recorded, runs op by op: " + step.not_recorded + "\n";
  }
  return text;
}

CompiledStep trace_step(const std::string& name, const StepBody& body,
                        const std::vector<Tensor>& examples, int replicas) {
  if (replicas < 1) {
    throw InvalidArgument("trace_step '" + name + "': replicas must be at least 1, got " +
                          std::to_string(replicas));
  }
  compile::Tracer tracer(name, replicas);
  std::vector<Tensor> outputs;
  {
    std::vector<Tensor> inputs;
    for (const Tensor& example : examples)
      inputs.push_back(tracer.add_input(example));
    TraceRecorderScope scope(&tracer);
    outputs = body(inputs);
  }
  auto impl = std::make_shared<CompiledStep::Impl>();
  impl->graph = tracer.finish(outputs);
  outputs.clear();
  Graph& graph = impl->graph;
  impl->stats.traced_nodes = graph.nodes.size();
  compile::PassCounts counts;
  compile::find_constants(graph, counts);
  compile::fold_constants(graph, counts);
  compile::merge_common_subexpressions(graph, counts);
  compile::remove_dead_nodes(graph, counts);
  compile::fuse_residual_adds(graph, counts);
  compile::fuse_activations(graph, counts);
  compile::fuse_pooled_filter_gradients(graph, counts);
  compile::fuse_pooled_convolutions(graph, counts);
  compile::fuse_elementwise_chains(graph, counts);
  compile::group_optimizer_updates(graph, counts);
  impl->stats.constants = counts.constants;
  impl->stats.grouped = counts.grouped;
  impl->stats.fused = counts.fused;
  impl->stats.folded = counts.folded;
  impl->stats.merged = counts.merged;
  impl->stats.removed = counts.removed;
  impl->backend = &backend_for(graph.device);
  impl->plan();
  return CompiledStep(std::move(impl));
}

}  // namespace tandem
