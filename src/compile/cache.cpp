// The cache of compiled steps by signature, its messages, and tandem::function.
#include <algorithm>
#include <iostream>
#include <mutex>

#include "tandem/compile.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

std::mutex& log_mutex() {
  static std::mutex mutex;
  return mutex;
}

void write_to_stderr(const std::string& line) {
  std::cerr << line << "\n";
}

CompileLog& compile_log() {
  static CompileLog log = write_to_stderr;
  return log;
}

void log_line(const std::string& line) {
  std::lock_guard lock(log_mutex());
  compile_log()(line);
}

// "input 0: (32, 784) f32 on cpu:0 -> (16, 784) f32 on cpu:0; precision: ..."
std::string what_changed(const StepSignature& before, const StepSignature& after) {
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  for (const SignaturePart& part : after) {
    const auto old = std::find_if(before.begin(), before.end(),
                                  [&](const SignaturePart& p) { return p.name == part.name; });
    if (old == before.end()) {
      add(part.name + ": new, " + part.value);
    } else if (old->value != part.value) {
      add(part.name + ": " + old->value + " -> " + part.value);
    }
  }
  for (const SignaturePart& part : before) {
    const bool kept = std::any_of(after.begin(), after.end(),
                                  [&](const SignaturePart& p) { return p.name == part.name; });
    if (!kept) add(part.name + ": gone");
  }
  return text;
}

}  // namespace

void set_compile_log(CompileLog log) {
  std::lock_guard lock(log_mutex());
  compile_log() = log ? std::move(log) : CompileLog(write_to_stderr);
}

void write_compile_log(const std::string& line) {
  log_line(line);
}

StepSignature input_signature(const std::vector<Tensor>& inputs) {
  StepSignature signature;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    signature.push_back({"input " + std::to_string(i), input.defined()
                                                           ? shape_str(input.shape()) + " " +
                                                                 dtype_name(input.dtype()) +
                                                                 " on " + input.device().str()
                                                           : "undefined"});
  }
  return signature;
}

StepCache::StepCache(std::string name) : name_(std::move(name)) {}

void StepCache::clear() {
  steps_.clear();
  last_returned_ = 0;
}

CompiledStep StepCache::get(const StepSignature& signature,
                            const std::function<CompiledStep()>& compile) {
  const auto switch_to = [&](std::size_t index) {
    if (index != last_returned_ && last_returned_ < steps_.size())
      steps_[last_returned_].second.release_memory();
    last_returned_ = index;
    return steps_[index].second;
  };
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].first == signature) return switch_to(i);
  if (last_returned_ < steps_.size()) steps_[last_returned_].second.release_memory();
  CompiledStep step = compile();
  ++compiles_;
  if (compiles_ > 1) {
    log_line("tandem: compiling step '" + name_ + "' again (compile " + std::to_string(compiles_) +
             "): " + what_changed(last_compiled_, signature));
  }
  if (compiles_ == 3) {
    log_line("WARNING: step '" + name_ +
             "' has been compiled 3 times; every new signature traces and plans it again. "
             "The usual cause is a partial last batch (a batch shape seen once per epoch): drop "
             "it (Dataset::batch(size, /*drop_remainder=*/true)) or pad it to the batch size; a "
             "step that varies by design runs faster eagerly (--jit off)");
  }
  last_compiled_ = signature;
  steps_.emplace_back(signature, step);
  last_returned_ = steps_.size() - 1;
  return step;
}

Function::Function(std::string name, StepBody body)
    : body_(std::move(body)), cache_(std::make_shared<StepCache>(name)) {
  if (!body_) throw InvalidArgument("tandem::function '" + name + "': the step body is empty");
  name_ = std::move(name);
}

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& inputs) {
  // Called inside another step's trace: its ops become part of that graph, as tf.function
  // inlines a function called from another.
  if (tracing()) return body_(inputs);
  CompiledStep step =
      cache_->get(input_signature(inputs), [&] { return trace_step(name_, body_, inputs); });
  last_ = step;
  return step.run(inputs);
}

Function function(std::string name, StepBody body) {
  return Function(std::move(name), std::move(body));
}

}  // namespace tandem
