// A fixture for Layering.RefusesAnUpwardIncludeBetweenDataRooms, never compiled: bars may
// not include features.
#include "qtft/data/bars/bars.h"
#include "qtft/data/features/dataset.h"
