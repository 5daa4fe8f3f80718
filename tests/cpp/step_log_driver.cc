// Test driver for instrument/dflash_step_log.h, run by tests/test_instrument.py.
//
//   step_log_driver MODE [ARGS...]
//
// Every mode prints one line of `key=value` pairs on stdout that the test parses. The row values
// are a fixed function of `seq` (see row_for), so the test can check every line it reads back.
#include "dflash_step_log.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace sl = dflash::step_log;

namespace {

struct Row {
  std::uint32_t proposed, accepted, emitted;
};

// Mirrored by row_for() in the test.
Row row_for(std::uint64_t seq) {
  Row r{};
  r.proposed = static_cast<std::uint32_t>(seq % 9);
  r.accepted = static_cast<std::uint32_t>((seq / 9) % (r.proposed + 1));
  r.emitted = r.accepted + 1 - static_cast<std::uint32_t>((seq / 7) % 2);
  return r;
}

// Writes `count` rows with seq base, base+1, ...: single records without and with `emitted`,
// and batches of varying size (one of them larger than the batch buffer).
void write_rows(std::uint64_t base, std::uint64_t count) {
  static const std::uint64_t kBatchSizes[] = {1, 8, 64, 3, 200, 17};
  std::uint64_t i = 0;
  std::size_t round = 0;
  while (i < count) {
    switch (round % 3) {
      case 0: {
        const std::uint64_t seq = base + i++;
        const Row r = row_for(seq);
        sl::record(seq, r.proposed, r.accepted);
        break;
      }
      case 1: {
        const std::uint64_t seq = base + i++;
        const Row r = row_for(seq);
        sl::record(seq, r.proposed, r.accepted, r.emitted);
        break;
      }
      default: {
        sl::Batch batch;
        const std::uint64_t size = kBatchSizes[(round / 3) % 6];
        for (std::uint64_t j = 0; j < size && i < count; ++j) {
          const std::uint64_t seq = base + i++;
          const Row r = row_for(seq);
          batch.add(seq, r.proposed, r.accepted, r.emitted);
        }
        if (round % 2 == 0) batch.commit();  // else the destructor commits
        break;
      }
    }
    ++round;
  }
}

std::uint64_t arg(char** argv, int i) { return std::strtoull(argv[i], nullptr, 10); }

void report(const char* extra = "") {
  std::printf("pid=%ld enabled=%d dropped=%llu%s\n", static_cast<long>(getpid()),
              sl::enabled() ? 1 : 0, static_cast<unsigned long long>(sl::dropped()), extra);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: step_log_driver MODE [ARGS...]\n");
    return 2;
  }
  const std::string mode = argv[1];

  if (mode == "rows" && argc == 4) {  // rows BASE COUNT
    write_rows(arg(argv, 2), arg(argv, 3));
    report();
    return 0;
  }

  if (mode == "threads" && argc == 4) {  // threads T COUNT_PER_THREAD; seq = thread * 1e6 + i
    const std::uint64_t threads = arg(argv, 2), count = arg(argv, 3);
    std::vector<std::thread> pool;
    for (std::uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([t, count] { write_rows(t * 1000000, count); });
    }
    for (auto& th : pool) th.join();
    report();
    return 0;
  }

  if (mode == "fork" && argc == 5) {  // fork BEFORE CHILD AFTER
    write_rows(0, arg(argv, 2));
    std::fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return 3;
    if (child == 0) {
      write_rows(1000000, arg(argv, 3));
      report(" role=child");
      std::_Exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    write_rows(2000000, arg(argv, 4));
    char extra[64];
    std::snprintf(extra, sizeof extra, " role=parent child_status=%d", status);
    report(extra);
    return 0;
  }

  if (mode == "fsize" && argc == 4) {  // fsize LIMIT_BYTES COUNT
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = arg(argv, 2);  // rlim_t is 64-bit unsigned on Linux
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
    write_rows(0, arg(argv, 3));
    report(" alive=1");
    return 0;
  }

  if (mode == "invalid" && argc == 2) {  // rows around two that have accepted > proposed
    sl::record(1, 4, 2);
    sl::record(2, 3, 4);
    sl::record(3, 4, 4, 5);
    {
      sl::Batch batch;
      batch.add(4, 2, 1);
      batch.add(5, 1, 2, 3);
      batch.add(6, 0, 0, 1);
    }
    report();
    return 0;
  }

  if (mode == "extremes" && argc == 2) {  // the widest values
    const std::uint32_t big = 4294967295u;
    sl::record(18446744073709551615ull, big, big, big);
    sl::record(0, 0, 0, 0);
    sl::record(0, 0, 0);
    sl::Batch batch;
    batch.add(18446744073709551615ull, big, big);
    batch.add(10, big, 0, big);
    batch.commit();
    report();
    return 0;
  }

  if (mode == "types" && argc == 2) {  // counts of every integer type, in and out of range
    const std::vector<int> draft(5);
    const unsigned char small = 3;
    const unsigned short medium = 2;
    const std::uint64_t too_big = 4294967296ull;  // 2^32: past the counts' field
    const int slot = 4;
    sl::record(slot, draft.size(), draft.size() - 2, small);  // int, size_t, size_t, uchar
    sl::record(1u, medium, 0L);                               // unsigned, ushort, long
    sl::record(-1, 1, 0);                                     // negative seq: dropped
    sl::record(2, too_big, 0u);                               // proposed too big: dropped
    sl::record(3, 4, -2);                                     // negative accepted: dropped
    {
      sl::Batch batch;
      batch.add(5ull, draft.size(), 1, std::uint16_t{2});
      batch.add(6, 2, 1, too_big);  // emitted too big: dropped
      batch.add(7, 2, 2);
    }
    report();
    return 0;
  }

  std::fprintf(stderr, "step_log_driver: bad arguments\n");
  return 2;
}
