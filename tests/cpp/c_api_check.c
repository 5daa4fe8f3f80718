/* Compiled as C by the tests: the header must declare the C API to a C engine. */
#include "dflash_step_log.h"

int main(void) {
  if (dflash_step_log_enabled()) dflash_step_log_record_emitted(1, 4, 2, 3);
  dflash_step_log_record(2, 4, 2);
  dflash_step_log_record_id("cmpl-3", 6, 4, 1);
  dflash_step_log_record_id_emitted("cmpl-4\"x", 6, 3, 3, 4); /* the first 6 bytes */
  dflash_step_log_record_id(0, 0, 1, 0);                     /* null: dropped */
  dflash_step_log_record_id("", 0, 2, 0);                    /* the empty string id */
  dflash_step_log_record_timed(5, 4, 3, 4, 81234, 402211);
  dflash_step_log_record_timed(6, 2, 1, 2, DFLASH_STEP_LOG_NO_TIME, 0); /* verify only */
  dflash_step_log_record_id_timed("cmpl-7", 6, 3, 0, 1, 17, DFLASH_STEP_LOG_NO_TIME);
  dflash_step_log_record_id_timed(0, 0, 1, 0, 1, 5, 5);     /* null: dropped */
  dflash_step_log_record_timed(8, 1, 1, 2, 9223372036854775808u, 1); /* 2^63: dropped */
  return dflash_step_log_dropped() == (dflash_step_log_enabled() ? 3u : 0u) ? 0 : 1;
}
