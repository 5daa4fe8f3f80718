/* Compiled as C by the tests: the header must declare the C API to a C engine. */
#include "dflash_step_log.h"

int main(void) {
  if (dflash_step_log_enabled()) dflash_step_log_record_emitted(1, 4, 2, 3);
  dflash_step_log_record(2, 4, 2);
  return dflash_step_log_dropped() == 0 ? 0 : 1;
}
