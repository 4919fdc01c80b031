#pragma once
// A shared library opened at run time (dlopen), so Tandem starts on machines without the
// vendor libraries (CUDA, NCCL, cuDNN, PJRT plugins) and says why one is missing. A loaded
// library is never unloaded: the CUDA driver and NCCL keep threads and exit handlers that must
// outlive any handle.
#include <string>
#include <vector>

namespace tandem::distribute::detail {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary() = default;
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Opens the first of `candidates` (paths or sonames) that loads. On failure, `error` says what
  // each attempt gave, e.g. "libcuda.so.1: cannot open shared object file".
  static DynamicLibrary open_first(const std::vector<std::string>& candidates, std::string& error);

  bool loaded() const { return handle_ != nullptr; }
  // The file the loader actually mapped (dlinfo), or the name it was opened by.
  const std::string& path() const { return path_; }
  // The address of `name`, or nullptr.
  void* symbol(const char* name) const;
  // The symbol as a function pointer of type F, or nullptr.
  template <typename F>
  F function(const char* name) const {
    return reinterpret_cast<F>(symbol(name));
  }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace tandem::distribute::detail
