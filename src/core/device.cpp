#include "tandem/device.h"

#include "tandem/error.h"

namespace tandem {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::cuda:
      return "cuda";
  }
  return "unknown";
}

std::string Device::str() const {
  if (type == DeviceType::cpu) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  for (const char* prefix : {"cuda", "gpu"}) {
    const std::string p(prefix);
    if (text == p) return cuda(0);
    if (text.rfind(p + ":", 0) == 0) {
      const std::string number = text.substr(p.size() + 1);
      if (!number.empty() && number.find_first_not_of("0123456789") == std::string::npos) {
        return cuda(std::stoi(number));
      }
    }
  }
  throw InvalidArgument("unknown device '" + text + "'; use cpu, cuda or cuda:N");
}

}  // namespace tandem
