#include "tandem/device.h"

#include <utility>

#include "tandem/error.h"

namespace tandem {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::cuda:
      return "cuda";
    case DeviceType::xla:
      return "xla";
  }
  return "unknown";
}

std::string Device::str() const {
  if (type == DeviceType::cpu) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  for (const auto& [prefix, type] :
       {std::pair{"cuda", DeviceType::cuda}, std::pair{"gpu", DeviceType::cuda},
        std::pair{"xla", DeviceType::xla}}) {
    const std::string p(prefix);
    if (text == p) return {type, 0};
    if (text.rfind(p + ":", 0) == 0) {
      const std::string number = text.substr(p.size() + 1);
      if (!number.empty() && number.size() < 6 &&
          number.find_first_not_of("0123456789") == std::string::npos) {
        return {type, std::stoi(number)};
      }
    }
  }
  throw InvalidArgument("unknown device '" + text + "'; use cpu, cuda, cuda:N, xla or xla:N");
}

}  // namespace tandem
