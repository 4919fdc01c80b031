// Probe (tests/build): nn may see train.h (the one sanctioned exception), not train's folder.
#include "train/distribution.h"
