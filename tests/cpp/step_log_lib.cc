// The one translation unit of the test shared library: it defines the C-linkage functions
// (dflash_step_log_enabled, _record, _record_emitted, _dropped) that ctypes calls.
#define DFLASH_STEP_LOG_IMPLEMENTATION
#include "dflash_step_log.h"
