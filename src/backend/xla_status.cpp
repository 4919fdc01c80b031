// What `tandem devices` says about XLA:CPU, in builds with and without the XLA backend: the
// plugin scripts/fetch-pjrt.sh fetched (the build passes its path), loaded and asked for its
// devices, or why not.
#include <sys/stat.h>

#include "tandem/xla.h"

namespace tandem::xla {

std::string fetched_cpu_plugin() {
  struct stat info {};
  const bool there = ::stat(TANDEM_PJRT_CPU_PLUGIN, &info) == 0 && S_ISREG(info.st_mode);
  return there ? TANDEM_PJRT_CPU_PLUGIN : "";
}

PlatformStatus cpu_platform_status() {
  PlatformStatus status;
  if (!build_info().built) {
    status.reason = build_info().reason;
    return status;
  }
  const std::string plugin = fetched_cpu_plugin();
  if (plugin.empty()) {
    status.reason = std::string("the XLA:CPU plugin is not at ") + TANDEM_PJRT_CPU_PLUGIN +
                    ": run scripts/fetch-pjrt.sh (it needs the Python package index)";
    return status;
  }
  try {
    const Client client(plugin);
    status.plugin = client.plugin();
    status.platform = client.platform();
    status.devices = client.devices();
    status.usable = !status.devices.empty();
    if (!status.usable) status.reason = plugin + " lists no device";
  } catch (const PjrtError& error) {
    status.reason = error.what();
  }
  return status;
}

}  // namespace tandem::xla
