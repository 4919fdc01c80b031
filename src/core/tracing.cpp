#include "core/tracing.h"

#include <string>

#include "tandem/error.h"

namespace tandem::detail {
namespace {
thread_local bool tracing = false;
}  // namespace

bool tracing_on_this_thread() {
  return tracing;
}

void set_tracing_on_this_thread(bool value) {
  tracing = value;
}

void refuse_while_tracing(const char* what, const char* fix) {
  if (!tracing) return;
  throw Error(std::string(what) +
              " inside a traced step: it draws its values on the host once, when the step is "
              "traced, and every run of the compiled graph would repeat that draw instead of "
              "drawing anew as the eager step does. " +
              fix +
              ", or run the step eagerly (tandem train --jit off, "
              "CompileOptions::jit_compile = false)");
}

}  // namespace tandem::detail
