#pragma once
// Op attributes: the non-tensor arguments of an op (axes, strides, epsilon, ...), kept as a small
// ordered list of named values so every op has the same signature in the op table, and so a
// recorded op can be printed, profiled or serialised later.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tandem/dtype.h"

namespace tandem {

using AttrValue =
    std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> entries);

  Attrs& set(const std::string& key, AttrValue value);
  bool has(std::string_view key) const;

  // Getters throw an internal error when the key is missing or of another type: attributes are
  // filled by Tandem's own op wrappers, never directly by users.
  std::int64_t get_int(std::string_view key) const;
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool fallback) const;
  const std::string& get_string(std::string_view key) const;
  const std::vector<std::int64_t>& get_ints(std::string_view key) const;
  DType get_dtype(std::string_view key) const;

  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  // "strides=[1, 1], padding=same"
  std::string str() const;

 private:
  const AttrValue* find(std::string_view key) const;
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

}  // namespace tandem
