// CIFAR-10 batches: every record read, bad ones skipped and counted, nothing else.
#include "memory_file.h"
#include "tandem/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tandem::fuzzing::MemoryFile file(data, size);
  try {
    namespace data = tandem::data;
    data::ElementIterator elements =
        data::Pipeline::cifar10({file.path()}, {.on_error = data::OnError::skip}).start();
    while (elements.next()) {
    }
    (void)elements.stats().skipped_summary();
  } catch (const tandem::Error&) {
  }
  return 0;
}
