// Probe (tests/build), the positive control of the sanctioned exception: nn.h includes train.h
// and mixed_precision.h, so the nn layer sees those two public headers.
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/train.h"
