#pragma once
// For tests of running out of device memory on XLA:CPU, whose device memory is the host's.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <string>

namespace tandem::testing {

// Caps this process's address space a few GiB above what it maps now, for as long as it lives,
// so that an allocation of terabytes fails at once (whatever the machine's overcommit policy)
// and can never start filling memory.
class AddressSpaceCap {
 public:
  AddressSpaceCap() {
    ::getrlimit(RLIMIT_AS, &saved_);
    std::ifstream status("/proc/self/status");
    std::string line;
    std::size_t mapped_kib = 0;
    while (std::getline(status, line)) {
      if (line.rfind("VmSize:", 0) == 0) mapped_kib = std::stoull(line.substr(7));
    }
    rlimit capped = saved_;
    capped.rlim_cur = static_cast<rlim_t>(mapped_kib * 1024 + (std::size_t{4} << 30));
    ::setrlimit(RLIMIT_AS, &capped);
  }
  ~AddressSpaceCap() { ::setrlimit(RLIMIT_AS, &saved_); }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;

 private:
  rlimit saved_{};
};

}  // namespace tandem::testing

// AddressSanitizer maps terabytes of shadow memory, which no cap leaves room for.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_WITHOUT_ADDRESS_SPACE_CAP() \
  GTEST_SKIP() << "AddressSanitizer maps terabytes of shadow memory: no address-space cap here"
#else
#define SKIP_WITHOUT_ADDRESS_SPACE_CAP() (void)0
#endif
