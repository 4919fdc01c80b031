#include "ops/trace_hook.h"

#include "core/tracing.h"

namespace tandem {
namespace {
thread_local TraceRecorder* current_recorder = nullptr;
}  // namespace

TraceRecorder* active_trace_recorder() {
  return current_recorder;
}

bool tracing() {
  return current_recorder != nullptr;
}

TraceRecorderScope::TraceRecorderScope(TraceRecorder* recorder) : outer_(current_recorder) {
  current_recorder = recorder;
  detail::set_tracing_on_this_thread(recorder != nullptr);
}

TraceRecorderScope::~TraceRecorderScope() {
  current_recorder = outer_;
  detail::set_tracing_on_this_thread(outer_ != nullptr);
}

Tensor host_operand(const char* what, const Shape& shape, DType dtype, Device device,
                    HostFill fill) {
  if (TraceRecorder* recorder = active_trace_recorder()) {
    return recorder->record_host_operand(what, TensorMeta{shape, dtype}, device, std::move(fill));
  }
  Tensor host = Tensor::empty(shape, dtype, Device::cpu());
  fill(host);
  return host.to(device);
}

}  // namespace tandem
