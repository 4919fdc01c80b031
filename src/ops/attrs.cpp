#include "tandem/attrs.h"

#include <sstream>

#include "tandem/error.h"

namespace tandem {

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> entries)
    : entries_(entries) {}

Attrs& Attrs::set(const std::string& key, AttrValue value) {
  for (auto& [existing_key, existing_value] : entries_) {
    if (existing_key == key) {
      existing_value = std::move(value);
      return *this;
    }
  }
  entries_.emplace_back(key, std::move(value));
  return *this;
}

const AttrValue* Attrs::find(std::string_view key) const {
  for (const auto& [existing_key, value] : entries_) {
    if (existing_key == key) return &value;
  }
  return nullptr;
}

bool Attrs::has(std::string_view key) const {
  return find(key) != nullptr;
}

namespace {
template <typename T>
const T& get_as(const AttrValue* value, std::string_view key, const char* type_name) {
  TANDEM_ASSERT(value != nullptr, "missing op attribute '" + std::string(key) + "'");
  const T* typed = std::get_if<T>(value);
  TANDEM_ASSERT(typed != nullptr,
                "op attribute '" + std::string(key) + "' is not of type " + type_name);
  return *typed;
}
}  // namespace

std::int64_t Attrs::get_int(std::string_view key) const {
  return get_as<std::int64_t>(find(key), key, "int");
}
std::int64_t Attrs::get_int(std::string_view key, std::int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double Attrs::get_float(std::string_view key) const {
  const AttrValue* value = find(key);
  if (value != nullptr && std::holds_alternative<std::int64_t>(*value)) {
    return static_cast<double>(std::get<std::int64_t>(*value));
  }
  return get_as<double>(value, key, "float");
}
double Attrs::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool Attrs::get_bool(std::string_view key) const {
  return get_as<bool>(find(key), key, "bool");
}
bool Attrs::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
const std::string& Attrs::get_string(std::string_view key) const {
  return get_as<std::string>(find(key), key, "string");
}
const std::vector<std::int64_t>& Attrs::get_ints(std::string_view key) const {
  return get_as<std::vector<std::int64_t>>(find(key), key, "int list");
}
DType Attrs::get_dtype(std::string_view key) const {
  return get_as<DType>(find(key), key, "dtype");
}

std::string Attrs::str() const {
  std::ostringstream out;
  bool first = true;
  for (const auto& [key, value] : entries_) {
    if (!first) out << ", ";
    first = false;
    out << key << '=';
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) {
            out << '[';
            for (std::size_t i = 0; i < v.size(); ++i)
              out << (i ? ", " : "") << v[i];
            out << ']';
          } else if constexpr (std::is_same_v<V, DType>) {
            out << dtype_name(v);
          } else if constexpr (std::is_same_v<V, bool>) {
            out << (v ? "true" : "false");
          } else {
            out << v;
          }
        },
        value);
  }
  return out.str();
}

}  // namespace tandem
