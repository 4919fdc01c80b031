// Probe (tests/build): the data layer depends only on core: no nn.
#include "tandem/nn.h"
