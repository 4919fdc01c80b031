#pragma once
// Umbrella header: everything a Tandem user needs.
#include "tandem/attrs.h"
#include "tandem/autodiff.h"
#include "tandem/data.h"
#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/error.h"
#include "tandem/nn.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/tensor.h"
#include "tandem/train.h"
