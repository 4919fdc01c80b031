// Probe (tests/build): the train layer must not see the observe layer's folder.
#include "observe/trace.h"
