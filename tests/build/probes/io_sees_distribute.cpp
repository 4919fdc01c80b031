// Probe (tests/build): the io layer must not see the distribute layer beside it.
#include "tandem/distribute.h"
