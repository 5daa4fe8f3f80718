/* Compiled as C by the tests: the header must declare the C API to a C engine. */
#include "dflash_step_log.h"

int main(void) {
  if (dflash_step_log_enabled()) dflash_step_log_record_emitted(1, 4, 2, 3);
  dflash_step_log_record(2, 4, 2);
  dflash_step_log_record_id("cmpl-3", 6, 4, 1);
  dflash_step_log_record_id_emitted("cmpl-4\"x", 6, 3, 3, 4); /* the first 6 bytes */
  dflash_step_log_record_id(0, 0, 1, 0);                     /* null: dropped */
  dflash_step_log_record_id("", 0, 2, 0);                    /* the empty string id */
  return dflash_step_log_dropped() == (dflash_step_log_enabled() ? 1u : 0u) ? 0 : 1;
}
