#pragma once
// The tests that run XLA:CPU, through the plugin scripts/fetch-pjrt.sh fetches (make does), skip
// with the reason where this build has no XLA backend or the plugin is not there.
#include <string>

#include "tandem/xla.h"

namespace tandem::testing {

// Why XLA:CPU cannot run here, or "".
inline std::string xla_cpu_unavailable() {
  if (!xla::build_info().built) return xla::build_info().reason;
  if (xla::fetched_cpu_plugin().empty()) return "no XLA:CPU plugin: run scripts/fetch-pjrt.sh";
  return "";
}

}  // namespace tandem::testing

#define SKIP_WITHOUT_XLA_CPU()                                                        \
  if (const std::string why = ::tandem::testing::xla_cpu_unavailable(); !why.empty()) \
  GTEST_SKIP() << why
