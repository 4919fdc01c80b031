// Probe (tests/build): the observe layer must not see the io layer beside it.
#include "io/file_io.h"
