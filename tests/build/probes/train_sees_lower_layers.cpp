// Probe (tests/build), the positive control: the train layer sees the layers below it, so these
// must compile with its include view (else the negative probes would pass for a broken setup).
#include "core/files.h"
#include "core/tensor_copy.h"
#include "nn/model_state.h"
#include "ops/backend.h"
#include "tandem/autodiff.h"
#include "tandem/data.h"
#include "tandem/nn.h"
#include "tandem/spans.h"
#include "tandem/train.h"
#include "train/progress_bar.h"
