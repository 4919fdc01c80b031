#pragma once
// Element types. bf16 and f16 are storage types: arithmetic on them converts to float.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tandem {

// i8 came last so that dtypes stored by number (the data cache) keep their meaning.
enum class DType : std::uint8_t { f32, f64, bf16, f16, i32, i64, u8, boolean, i8 };
inline constexpr int kNumDTypes = 9;

// bfloat16: the top 16 bits of an IEEE float32; conversion rounds to nearest even.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float value) {
    std::uint32_t word = std::bit_cast<std::uint32_t>(value);
    if (std::isnan(value)) {
      bits = static_cast<std::uint16_t>((word >> 16) | 0x40);  // keep it a quiet NaN
    } else {
      word += 0x7FFF + ((word >> 16) & 1);
      bits = static_cast<std::uint16_t>(word >> 16);
    }
  }
  explicit operator float() const { return std::bit_cast<float>(std::uint32_t(bits) << 16); }
};

// IEEE 754 binary16; conversion rounds to nearest even, overflow goes to infinity.
struct float16 {
  std::uint16_t bits = 0;
  float16() = default;
  explicit float16(float value) { bits = from_float(value); }
  explicit operator float() const { return to_float(bits); }

  static std::uint16_t from_float(float value);
  static float to_float(std::uint16_t bits);
};

inline std::uint16_t float16::from_float(float value) {
  const std::uint32_t word = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (word >> 16) & 0x8000;
  const std::uint32_t abs_word = word & 0x7FFFFFFF;
  if (abs_word >= 0x7F800000) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7C00 | (abs_word > 0x7F800000 ? 0x200 : 0));
  }
  if (abs_word >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // overflow
  if (abs_word < 0x38800000) {  // subnormal half (or zero): scale into the 10-bit mantissa
    const float magnitude = std::bit_cast<float>(abs_word);
    const auto mantissa = static_cast<std::uint32_t>(std::nearbyint(magnitude * 16777216.0f));
    return static_cast<std::uint16_t>(sign | mantissa);
  }
  std::uint32_t rounded = abs_word + 0xFFF + ((abs_word >> 13) & 1);
  rounded -= 0x38000000;  // rebias exponent 127 -> 15
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

inline float float16::to_float(std::uint16_t half) {
  const std::uint32_t sign = std::uint32_t(half & 0x8000) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1F;
  const std::uint32_t mantissa = half & 0x3FF;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) / 16777216.0f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000 | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses "f32", "float32", "bf16", "bfloat16", ...; throws InvalidArgument naming the choices.
DType parse_dtype(const std::string& name);
bool is_floating(DType dtype);

template <typename T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::i8; };
template <typename T>
inline constexpr DType dtype_v = dtype_of<T>::value;

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <typename T>
using compute_type_t =
    std::conditional_t<std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>, float, T>;

// Calls fn(T{}) with T the C++ type of `dtype`; covers every dtype.
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::bf16: return fn(bfloat16{});
    case DType::f16: return fn(float16{});
    case DType::i32: return fn(std::int32_t{});
    case DType::i64: return fn(std::int64_t{});
    case DType::u8: return fn(std::uint8_t{});
    case DType::boolean: return fn(bool{});
    case DType::i8: return fn(std::int8_t{});
  }
  return fn(float{});
}

// Converts between any two element types through double (exact for every supported type).
template <typename To, typename From>
inline To convert_element(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(static_cast<compute_type_t<From>>(value)) != 0.0;
  } else if constexpr (std::is_same_v<To, bfloat16> || std::is_same_v<To, float16>) {
    return To(static_cast<float>(static_cast<compute_type_t<From>>(value)));
  } else {
    return static_cast<To>(static_cast<compute_type_t<From>>(value));
  }
}

}  // namespace tandem
