// Probe (tests/build), the positive control: the run layer sees the layers it depends on (observe,
// io, distribute) and theirs, so these must compile with its include view.
#include "core/parse.h"
#include "distribute/dynamic_library.h"
#include "io/file_io.h"
#include "observe/trace.h"
#include "run/settings_table.h"
#include "tandem/distribute.h"
#include "tandem/io.h"
#include "tandem/observe.h"
#include "tandem/run.h"
