#include "ops/op_attrs.h"

#include "tandem/error.h"

namespace tandem::detail {

AttrValue to_attr_value(const std::array<std::int64_t, 2>& pair) {
  return std::vector<std::int64_t>{pair[0], pair[1]};
}

AttrValue to_attr_value(Padding padding) {
  return std::string(padding_name(padding));
}

void read_attr(const Attrs& attrs, const char* key, std::int64_t& out) {
  out = attrs.get_int(key);
}
void read_attr(const Attrs& attrs, const char* key, double& out) {
  out = attrs.get_float(key);
}
void read_attr(const Attrs& attrs, const char* key, bool& out) {
  out = attrs.get_bool(key);
}
void read_attr(const Attrs& attrs, const char* key, std::vector<std::int64_t>& out) {
  out = attrs.get_ints(key);
}
void read_attr(const Attrs& attrs, const char* key, DType& out) {
  out = attrs.get_dtype(key);
}
void read_attr(const Attrs& attrs, const char* key, std::array<std::int64_t, 2>& out) {
  const std::vector<std::int64_t>& values = attrs.get_ints(key);
  TANDEM_ASSERT(values.size() == 2,
                std::string("the 2-D window attribute '") + key + "' needs two values");
  out = {values[0], values[1]};
}
void read_attr(const Attrs& attrs, const char* key, Padding& out) {
  out = parse_padding(attrs.get_string(key));
}

}  // namespace tandem::detail

namespace tandem {
namespace {

template <typename Struct>
std::vector<std::string_view> keys_of() {
  return std::apply(
      [](const auto&... field) { return std::vector<std::string_view>{field.key...}; },
      attr_fields(std::type_identity<Struct>{}));
}

}  // namespace

std::vector<std::string_view> op_attr_keys(OpKind kind) {
  switch (kind) {
#define TANDEM_OP_ATTR_KEYS(op) \
  case OpKind::op:              \
    return keys_of<OpAttrs<OpKind::op>>();
    TANDEM_OPS(TANDEM_OP_ATTR_KEYS)
#undef TANDEM_OP_ATTR_KEYS
  }
  return {};
}

}  // namespace tandem
