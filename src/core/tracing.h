#pragma once
// Whether the calling thread is tracing a step (the ops layer's TraceRecorderScope sets it).
// Core functions that compute values on the host, which a compiled graph would freeze at trace
// time and repeat on every run, refuse while it is set rather than give different results.
namespace tandem::detail {

bool tracing_on_this_thread();
void set_tracing_on_this_thread(bool tracing);

// Throws Error naming `what`, why it cannot be traced and `fix`, while the thread traces.
void refuse_while_tracing(const char* what, const char* fix);

}  // namespace tandem::detail
