// The op profiler: an OpObserver that times every op (on the host clock where the kernel has
// finished when run() returns, as on the CPU; with the backend's own timer, CUDA events, where
// it has not), spans for the phases of a training step, a table of ops by total time and
// Chrome's trace event format.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "observe/trace.h"
#include "ops/backend.h"
#include "ops/fused.h"
#include "ops/op_attrs.h"
#include "tandem/runtime.h"

namespace tandem::observe {
namespace detail {
namespace {

std::atomic<std::shared_ptr<Recorder>>& recorder_slot() {
  static std::atomic<std::shared_ptr<Recorder>> slot;
  return slot;
}

// Set while a profiler runs, so TraceScope costs one relaxed load otherwise.
std::atomic<bool> profiling{false};

struct ThreadNames {
  std::mutex mutex;
  std::vector<std::string> names;
};

ThreadNames& thread_names() {
  static ThreadNames registry;
  return registry;
}

// An op between before_op and after_op.
struct PendingOp {
  std::int64_t start_ns = 0;
  std::unique_ptr<KernelTimer> timer;  // on devices that time their own kernels
};

struct ThreadState {
  std::vector<Phase> phases;       // open forward/backward/optimizer spans
  std::vector<PendingOp> pending;  // ops that have started and not finished
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

Phase phase_of(SpanKind kind) {
  switch (kind) {
    case SpanKind::forward:
      return Phase::forward;
    case SpanKind::backward:
      return Phase::backward;
    case SpanKind::optimizer:
      return Phase::optimizer;
    default:
      return Phase::other;
  }
}

bool is_phase(SpanKind kind) {
  return phase_of(kind) != Phase::other;
}

// "add+relu (fused)": a fused chain's name, kept for the process (events hold names by pointer;
// a program has few distinct chains).
const char* fused_chain_name(const Attrs& attrs, std::size_t inputs) {
  static std::mutex mutex;
  static std::set<std::string> names;
  const std::lock_guard lock(mutex);
  return names.insert(fused_label(fused_program(attrs, inputs)) + " (fused)").first->c_str();
}

// A compiled step's fused nodes are shown by what they run ("conv2d+relu"), the rest by name.
const char* shown_name(OpKind kind, const Attrs& attrs, std::size_t inputs) {
  if (kind == OpKind::fused_elementwise) return fused_chain_name(attrs, inputs);
  if (kind == OpKind::conv2d) {
    const auto fused = op_attrs<OpKind::conv2d>(attrs);
    if (fused.fused_add) return fused.fused_relu ? "conv2d+add+relu" : "conv2d+add";
    if (fused.fused_relu) return "conv2d+relu";
  }
  if (kind == OpKind::matmul) {
    const auto fused = op_attrs<OpKind::matmul>(attrs);
    if (fused.fused_add) return fused.fused_relu ? "matmul+add+relu" : "matmul+add";
    if (fused.fused_relu) return "matmul+relu";
  }
  if ((kind == OpKind::adam_update && op_attrs<OpKind::adam_update>(attrs).lanes > 1) ||
      (kind == OpKind::sgd_update && op_attrs<OpKind::sgd_update>(attrs).lanes > 1)) {
    return kind == OpKind::adam_update ? "adam_update (multi-tensor)" : "sgd_update (multi-tensor)";
  }
  if (kind == OpKind::max_pool2d_backward &&
      op_attrs<OpKind::max_pool2d_backward>(attrs).relu_masked) {
    return "max_pool2d_backward+relu_backward";
  }
  if (kind == OpKind::pooled_conv2d) {
    return op_attrs<OpKind::pooled_conv2d>(attrs).fused_relu ? "conv2d+relu+max_pool2d"
                                                             : "conv2d+max_pool2d";
  }
  if (kind == OpKind::pooled_conv2d_backward_filter) {
    return op_attrs<OpKind::pooled_conv2d_backward_filter>(attrs).relu_masked
               ? "max_pool2d_backward+relu_backward+conv2d_backward_filter"
               : "max_pool2d_backward+conv2d_backward_filter";
  }
  return op_def(kind).name;
}

// Times every op between before_op and after_op and hands it to the running recorder. One
// instance for the process: it is never destroyed while a thread may still be inside it.
class ProfilerHook final : public OpObserver {
 public:
  void before_op(OpKind, std::span<const Tensor> inputs, const Attrs&) override {
    PendingOp op;
    const Device device = inputs.empty() ? Device::cpu() : inputs[0].device();
    if (device.type != DeviceType::cpu) {
      op.timer = backend_for(device).make_kernel_timer(device);
      if (op.timer) op.timer->start();
    }
    op.start_ns = now_ns();
    thread_state().pending.push_back(std::move(op));
  }

  void after_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                const Attrs& attrs) override {
    const std::int64_t end = now_ns();
    ThreadState& state = thread_state();
    if (state.pending.empty()) return;  // the profiler started while this op ran
    PendingOp op = std::move(state.pending.back());
    state.pending.pop_back();
    if (op.timer) op.timer->stop();
    const std::shared_ptr<Recorder> recorder = recorder_slot().load();
    if (!recorder) return;
    OpEvent event;
    event.start_ns = op.start_ns;
    event.end_ns = end;
    event.timer = std::move(op.timer);
    event.thread = thread_index();
    event.kind = kind;
    event.name = shown_name(kind, attrs, inputs.size());
    event.phase = state.phases.empty() ? Phase::other : state.phases.back();
    event.device = !outputs.empty()  ? outputs[0].device()
                   : !inputs.empty() ? inputs[0].device()
                                     : Device::cpu();
    event.inputs = metas_of(inputs);
    event.cost = op_cost(kind, event.inputs, metas_of(outputs), attrs);
    recorder->check_placement(event);
    recorder->add_op(std::move(event));
  }
};

ProfilerHook& hook() {
  static ProfilerHook instance;
  return instance;
}

}  // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
    case Phase::other:
      break;
  }
  return "other";
}

std::uint32_t thread_index() {
  thread_local const std::uint32_t index = [] {
    ThreadNames& registry = thread_names();
    char name[64] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::lock_guard lock(registry.mutex);
    registry.names.emplace_back(name);
    return static_cast<std::uint32_t>(registry.names.size() - 1);
  }();
  return index;
}

std::string thread_name(std::uint32_t index) {
  ThreadNames& registry = thread_names();
  std::lock_guard lock(registry.mutex);
  const std::string& name = index < registry.names.size() ? registry.names[index] : "";
  return "thread " + std::to_string(index) + (name.empty() ? "" : " (" + name + ")");
}

Recorder::Recorder(ProfilerOptions options)
    : options_(options), origin_ns_(now_ns()), warned_(kNumOps, false) {}

void Recorder::add_op(OpEvent event) {
  std::lock_guard lock(mutex_);
  ops_.push_back(std::move(event));
}

void Recorder::add_span(SpanEvent event) {
  std::lock_guard lock(mutex_);
  spans_.push_back(std::move(event));
}

void Recorder::check_placement(const OpEvent& event) {
  // Another GPU of a data-parallel run is no fallback; another kind of device is.
  const bool fallback =
      options_.expected_device && event.device.type != options_.expected_device->type;
  if (!options_.log_device_placement && !fallback) return;
  std::ostream& log = options_.log != nullptr ? *options_.log : std::cerr;
  const char* name = event.name;
  std::lock_guard lock(mutex_);
  if (options_.log_device_placement) {
    log << "placement: " << name << " (" << phase_name(event.phase) << ") on " << event.device.str()
        << " [" << backend_for(event.device).name() << "]\n";
  }
  if (fallback) {
    ++fallbacks_;
    const auto slot = static_cast<std::size_t>(event.kind);
    if (!warned_[slot]) {
      warned_[slot] = true;
      log << "warning: op " << name << " ran on " << event.device.str() << ", not on "
          << options_.expected_device->str()
          << " (a fallback: its inputs were there, or that device has no kernel for it); "
             "later fallbacks of this op are counted in the profile without a warning\n";
    }
  }
}

Recorder::Snapshot Recorder::snapshot() const {
  std::lock_guard lock(mutex_);
  return Snapshot{ops_, spans_, origin_ns_, fallbacks_};
}

void Recorder::resolve_device_times() {
  std::lock_guard lock(mutex_);
  for (OpEvent& op : ops_) {
    if (!op.timer) continue;
    op.device_seconds = op.timer->seconds();
    op.timer.reset();
  }
}

void Recorder::clear() {
  std::lock_guard lock(mutex_);
  ops_.clear();
  spans_.clear();
  fallbacks_ = 0;
  origin_ns_ = now_ns();
  std::fill(warned_.begin(), warned_.end(), false);
}

std::shared_ptr<Recorder> active_recorder() {
  if (!profiling.load(std::memory_order_relaxed)) return nullptr;
  return recorder_slot().load();
}

void record_span(SpanKind kind, std::string label, std::int64_t start_ns, std::int64_t end_ns) {
  if (const std::shared_ptr<Recorder> recorder = active_recorder()) {
    recorder->add_span(SpanEvent{start_ns, end_ns, thread_index(), kind, std::move(label)});
  }
}

}  // namespace detail

namespace {

using detail::OpEvent;
using detail::SpanEvent;

const char* span_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::step:
      return "step";
    case SpanKind::forward:
      return "forward";
    case SpanKind::backward:
      return "backward";
    case SpanKind::optimizer:
      return "optimizer";
    case SpanKind::input_wait:
      return "input wait";
    case SpanKind::user:
      break;
  }
  return "span";
}

bool inside(std::int64_t start, std::int64_t end, const SpanEvent& span) {
  return start >= span.start_ns && end <= span.end_ns;
}

// Total length of the union of [start, end) intervals.
double covered_seconds(std::vector<std::pair<std::int64_t, std::int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::int64_t covered = 0;
  std::int64_t reach = std::numeric_limits<std::int64_t>::min();
  for (const auto& [start, end] : intervals) {
    const std::int64_t from = std::max(start, reach);
    if (end > from) covered += end - from;
    reach = std::max(reach, end);
  }
  return static_cast<double>(covered) * 1e-9;
}

std::string printf_string(const char* pattern, auto... args) {
  const int size = std::snprintf(nullptr, 0, pattern, args...);
  std::string text(static_cast<std::size_t>(std::max(size, 0)) + 1, '\0');
  std::snprintf(text.data(), text.size(), pattern, args...);
  text.pop_back();
  return text;
}

// `text` as a JSON string, quotes included (bytes that are not UTF-8 become U+FFFD).
std::string json_string(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string inputs_text(const std::vector<TensorMeta>& inputs) {
  std::string text;
  for (const TensorMeta& input : inputs) {
    if (!text.empty()) text += ", ";
    text += shape_str(input.shape) + " " + dtype_name(input.dtype);
  }
  return text;
}

}  // namespace

// ---- Spans (tandem/spans.h) ----

namespace {

// The span observer while a profiler runs: keeps the thread's open phases, so its ops are
// attributed to the innermost one, and records each span as it closes.
class SpanHook final : public SpanObserver {
 public:
  std::int64_t span_begin(SpanKind kind) override {
    if (detail::is_phase(kind)) detail::thread_state().phases.push_back(detail::phase_of(kind));
    return detail::now_ns();
  }

  void span_end(SpanKind kind, std::string label, std::int64_t start_ns) override {
    const std::int64_t end = detail::now_ns();
    if (detail::is_phase(kind)) detail::thread_state().phases.pop_back();
    detail::record_span(kind, label.empty() ? span_name(kind) : std::move(label), start_ns, end);
  }
};

SpanHook& span_hook() {
  static SpanHook hook;
  return hook;
}

}  // namespace

// ---- Profiler ----

struct Profiler::Impl {
  std::shared_ptr<detail::Recorder> recorder;
  bool running = false;
};

Profiler::Profiler(ProfilerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->recorder = std::make_shared<detail::Recorder>(options);
}

Profiler::~Profiler() {
  if (impl_->running) stop();
}

void Profiler::start() {
  if (impl_->running) return;
  std::shared_ptr<detail::Recorder> expected;
  if (!detail::recorder_slot().compare_exchange_strong(expected, impl_->recorder)) {
    throw Error("Profiler::start: another profiler is running; stop it first");
  }
  impl_->running = true;
  add_op_observer(&detail::hook());
  detail::profiling.store(true);
  set_span_observer(&span_hook());
}

void Profiler::stop() {
  if (!impl_->running) return;
  set_span_observer(nullptr);
  detail::profiling.store(false);
  remove_op_observer(&detail::hook());
  detail::recorder_slot().store(nullptr);
  impl_->running = false;
  impl_->recorder->resolve_device_times();
}

bool Profiler::running() const {
  return impl_->running;
}

void Profiler::clear() {
  impl_->recorder->clear();
}

ProfileReport Profiler::report() const {
  const detail::Recorder::Snapshot data = impl_->recorder->snapshot();
  ProfileReport report;
  report.fallbacks = data.fallbacks;

  std::vector<const SpanEvent*> steps;
  for (const SpanEvent& span : data.spans) {
    if (span.kind == SpanKind::step) steps.push_back(&span);
  }
  // With step spans, the table is about the steps: ops between them (validation, epoch-end
  // callbacks) are left out of its rows.
  const auto in_a_step = [&](const OpEvent& op) {
    return steps.empty() || std::any_of(steps.begin(), steps.end(), [&](const SpanEvent* step) {
             return inside(op.start_ns, op.end_ns, *step);
           });
  };
  using Key = std::tuple<std::string, std::string, std::string>;  // op, phase, device
  std::map<Key, OpProfile> rows;
  for (const OpEvent& op : data.ops) {
    const double seconds = op.seconds();
    report.op_seconds += seconds;
    if (!in_a_step(op)) continue;
    const Key key{op.name, detail::phase_name(op.phase), op.device.str()};
    OpProfile& row = rows[key];
    row.op = std::get<0>(key);
    row.phase = std::get<1>(key);
    row.device = std::get<2>(key);
    ++row.calls;
    row.seconds += seconds;
    row.flops += op.cost.flops;
    row.bytes += op.cost.bytes;
  }
  for (auto& [key, row] : rows)
    report.ops.push_back(std::move(row));
  std::sort(report.ops.begin(), report.ops.end(),
            [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });

  for (const SpanEvent* step_span : steps) {
    const SpanEvent& step = *step_span;
    ++report.steps;
    report.step_seconds += static_cast<double>(step.end_ns - step.start_ns) * 1e-9;
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (const OpEvent& op : data.ops) {
      if (op.thread != step.thread || !inside(op.start_ns, op.end_ns, step)) continue;
      report.step_op_seconds += op.seconds();
      busy.emplace_back(op.start_ns, op.end_ns);
    }
    for (const SpanEvent& span : data.spans) {
      if (span.thread != step.thread || !inside(span.start_ns, span.end_ns, step)) continue;
      const double seconds = static_cast<double>(span.end_ns - span.start_ns) * 1e-9;
      if (span.kind == SpanKind::input_wait) {
        report.input_wait_seconds += seconds;
        busy.emplace_back(span.start_ns, span.end_ns);
      } else if (span.kind == SpanKind::optimizer) {
        report.optimizer_seconds += seconds;
      }
    }
    report.step_accounted_seconds += covered_seconds(std::move(busy));
  }
  return report;
}

std::string ProfileReport::table(std::size_t max_rows) const {
  std::ostringstream out;
  const double steps_count = static_cast<double>(std::max<std::int64_t>(steps, 1));
  const auto ms_per_step = [&](double seconds) { return seconds * 1e3 / steps_count; };
  const auto share = [&](double seconds) {
    return step_seconds > 0.0 ? 100.0 * seconds / step_seconds : 0.0;
  };
  if (steps > 0) {
    out << printf_string("profile: %lld step%s, %.3f ms per step\n", static_cast<long long>(steps),
                         steps == 1 ? "" : "s", ms_per_step(step_seconds));
    out << printf_string(
        "  ops %.3f ms (%.1f%%), input wait %.3f ms (%.1f%%), optimizer step %.3f ms (%.1f%%, "
        "its ops included)\n",
        ms_per_step(step_op_seconds), share(step_op_seconds), ms_per_step(input_wait_seconds),
        share(input_wait_seconds), ms_per_step(optimizer_seconds), share(optimizer_seconds));
    out << printf_string(
        "  accounted for %.1f%% of the step time; the other %.3f ms per step is dispatch, tape "
        "bookkeeping and callbacks\n",
        share(step_accounted_seconds), ms_per_step(step_seconds - step_accounted_seconds));
  } else {
    out << printf_string("profile: no step spans; ops took %.3f ms in all\n", op_seconds * 1e3);
  }
  if (fallbacks > 0) {
    out << "  " << fallbacks << " op runs fell back to another device than the one expected\n";
  }
  const double denominator = steps > 0 ? step_seconds : op_seconds;
  // Columns as wide as the longest op and device names shown.
  int op_width = 2;
  int device_width = 6;
  for (std::size_t i = 0; i < std::min(max_rows, ops.size()); ++i) {
    op_width = std::max(op_width, static_cast<int>(ops[i].op.size()));
    device_width = std::max(device_width, static_cast<int>(ops[i].device.size()));
  }
  out << printf_string("%-*s %-9s %-*s %7s %10s %7s %10s %9s %9s\n", op_width, "op", "phase",
                       device_width, "device", "calls", "total ms", "% step", "us/call", "GFLOP",
                       "GFLOP/s");
  std::size_t shown = 0;
  OpProfile rest;
  std::size_t rest_rows = 0;
  for (const OpProfile& row : ops) {
    if (shown >= max_rows) {
      rest.calls += row.calls;
      rest.seconds += row.seconds;
      ++rest_rows;
      continue;
    }
    ++shown;
    const double percent = denominator > 0.0 ? 100.0 * row.seconds / denominator : 0.0;
    const double per_call_us = row.calls > 0 ? row.seconds * 1e6 / row.calls : 0.0;
    const std::string gflop = row.flops > 0.0 ? printf_string("%.3f", row.flops * 1e-9) : "-";
    const std::string rate = row.flops > 0.0 && row.seconds > 0.0
                                 ? printf_string("%.1f", row.flops * 1e-9 / row.seconds)
                                 : "-";
    out << printf_string("%-*s %-9s %-*s %7lld %10.3f %6.1f%% %10.1f %9s %9s\n", op_width,
                         row.op.c_str(), row.phase.c_str(), device_width, row.device.c_str(),
                         static_cast<long long>(row.calls), row.seconds * 1e3, percent, per_call_us,
                         gflop.c_str(), rate.c_str());
  }
  if (rest_rows > 0) {
    const double percent = denominator > 0.0 ? 100.0 * rest.seconds / denominator : 0.0;
    out << printf_string("%-*s %7lld %10.3f %6.1f%%\n", op_width + device_width + 11,
                         ("(" + std::to_string(rest_rows) + " more rows)").c_str(),
                         static_cast<long long>(rest.calls), rest.seconds * 1e3, percent);
  }
  return out.str();
}

void Profiler::write_chrome_trace(const std::string& path) const {
  const detail::Recorder::Snapshot data = impl_->recorder->snapshot();
  const auto micros = [&](std::int64_t ns) {
    return printf_string("%.3f", static_cast<double>(ns - data.origin_ns) * 1e-3);
  };
  const int pid = static_cast<int>(getpid());
  std::ostringstream out;
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"tandem " << version()
      << "\"},\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
      << ",\"tid\":0,\"args\":{\"name\":\"tandem\"}}";
  std::vector<std::uint32_t> threads;
  for (const OpEvent& op : data.ops)
    threads.push_back(op.thread);
  for (const SpanEvent& span : data.spans)
    threads.push_back(span.thread);
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  for (std::uint32_t thread : threads) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << thread
        << ",\"args\":{\"name\":" << json_string(detail::thread_name(thread)) << "}}";
  }
  for (const SpanEvent& span : data.spans) {
    out << ",\n{\"name\":" << json_string(span.label) << ",\"cat\":\"" << span_name(span.kind)
        << "\",\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << span.thread
        << ",\"ts\":" << micros(span.start_ns)
        << ",\"dur\":" << printf_string("%.3f", (span.end_ns - span.start_ns) * 1e-3) << "}";
  }
  for (const OpEvent& op : data.ops) {
    out << ",\n{\"name\":\"" << op.name << "\",\"cat\":\"op," << detail::phase_name(op.phase)
        << "\",\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << op.thread
        << ",\"ts\":" << micros(op.start_ns)
        << ",\"dur\":" << printf_string("%.3f", (op.end_ns - op.start_ns) * 1e-3)
        << ",\"args\":{\"phase\":\"" << detail::phase_name(op.phase) << "\",\"device\":\""
        << op.device.str() << "\",\"inputs\":" << json_string(inputs_text(op.inputs))
        << ",\"flops\":" << printf_string("%.0f", op.cost.flops)
        << ",\"bytes\":" << printf_string("%.0f", op.cost.bytes)
        << (op.device_seconds >= 0.0
                ? ",\"device_us\":" + printf_string("%.3f", op.device_seconds * 1e6)
                : std::string())
        << "}}";
  }
  out << "\n]}\n";
  write_file_atomically(path, out.str());
}

// ---- ProfilerCallback ----

ProfilerCallback::ProfilerCallback(std::shared_ptr<Profiler> profiler, std::int64_t first_step,
                                   std::int64_t last_step, std::string trace_path,
                                   std::ostream* table_out)
    : profiler_(std::move(profiler)),
      first_step_(first_step),
      last_step_(last_step),
      trace_path_(std::move(trace_path)),
      table_out_(table_out) {
  if (!profiler_) throw InvalidArgument("ProfilerCallback: the profiler is null");
  if (first_step < 0 || last_step < first_step) {
    throw InvalidArgument(
        "ProfilerCallback: the steps to profile must satisfy 0 <= first <= "
        "last, got " +
        std::to_string(first_step) + ".." + std::to_string(last_step));
  }
}

void ProfilerCallback::on_train_begin(const train::Logs&) {
  global_step_ = 0;
  finished_ = false;
}

void ProfilerCallback::on_epoch_begin(int, const train::Logs&) {
  if (global_step_ == first_step_ && !profiler_->running() && !finished_) begin_window();
  step_start_ns_ = detail::now_ns();
}

void ProfilerCallback::on_train_batch_end(std::int64_t, const train::Logs&) {
  const std::int64_t now = detail::now_ns();
  if (profiler_->running()) {
    detail::record_span(SpanKind::step, "step " + std::to_string(global_step_), step_start_ns_,
                        now);
  }
  ++global_step_;
  if (global_step_ == last_step_ + 1 && profiler_->running()) end_window();
  // The next step starts now: its batch is fetched after the callbacks return.
  if (global_step_ == first_step_ && !finished_) begin_window();
  step_start_ns_ = detail::now_ns();
}

void ProfilerCallback::on_train_end(const train::Logs&) {
  if (profiler_->running()) end_window();
}

void ProfilerCallback::begin_window() {
  profiler_->clear();
  profiler_->start();
}

void ProfilerCallback::end_window() {
  profiler_->stop();
  finished_ = true;
  if (!trace_path_.empty()) {
    trace_guard_.run([&] {
      profiler_->write_chrome_trace(trace_path_);
      trace_written_ = true;
    });
  }
  if (table_out_ != nullptr) *table_out_ << profiler_->report().table();
}

}  // namespace tandem::observe
