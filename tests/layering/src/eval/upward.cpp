// A fixture for Layering.RefusesAnUpwardInclude, never compiled: eval may not include train.
#include "qtft/data/features/dataset.h"
#include "qtft/train/workflow.h"
