#pragma once
#include <cstdint>
#include <string>

namespace tandem {

// xla: a device of a PJRT plugin (XLA:CPU, XLA:GPU, a TPU core) running ops one by one
// (tandem/xla.h says which plugin).
enum class DeviceType : std::uint8_t { cpu, cuda, xla };
inline constexpr int kNumDeviceTypes = static_cast<int>(DeviceType::xla) + 1;
// "cpu", "cuda", "xla"
const char* device_type_name(DeviceType type);

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static Device xla(int index = 0) { return {DeviceType::xla, index}; }
  // "cpu", "cuda:0", "xla:0"
  std::string str() const;
  // Parses "cpu", "cuda", "cuda:1", "gpu:0", "xla", "xla:1"; throws InvalidArgument on anything
  // else.
  static Device parse(const std::string& text);

  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace tandem
