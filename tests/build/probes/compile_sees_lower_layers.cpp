// Probe (tests/build), the positive control: the compile layer sees the layers below it.
#include "compile/graph.h"
#include "core/tensor_copy.h"
#include "ops/backend.h"
#include "ops/trace_hook.h"
#include "tandem/autodiff.h"
#include "tandem/compile.h"
