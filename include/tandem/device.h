#pragma once
#include <cstdint>
#include <string>

namespace tandem {

enum class DeviceType : std::uint8_t { cpu, cuda };
inline constexpr int kNumDeviceTypes = static_cast<int>(DeviceType::cuda) + 1;
// "cpu", "cuda"
const char* device_type_name(DeviceType type);

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  // "cpu", "cuda:0"
  std::string str() const;
  // Parses "cpu", "cuda", "cuda:1", "gpu:0"; throws InvalidArgument on anything else.
  static Device parse(const std::string& text);

  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace tandem
