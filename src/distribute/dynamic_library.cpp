#include "distribute/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

#include <utility>

namespace tandem::distribute::detail {

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  handle_ = std::exchange(other.handle_, nullptr);
  path_ = std::move(other.path_);
  return *this;
}

DynamicLibrary DynamicLibrary::open_first(const std::vector<std::string>& candidates,
                                          std::string& error) {
  DynamicLibrary library;
  error.clear();
  for (const std::string& candidate : candidates) {
    dlerror();
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      error += (error.empty() ? "" : "; ") + std::string(why != nullptr ? why : candidate);
      continue;
    }
    library.handle_ = handle;
    const link_map* map = nullptr;
    library.path_ = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
                            map->l_name != nullptr && map->l_name[0] != '\0'
                        ? map->l_name
                        : candidate;
    error.clear();
    return library;
  }
  if (candidates.empty()) error = "no candidate file to load";
  return library;
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

}  // namespace tandem::distribute::detail
