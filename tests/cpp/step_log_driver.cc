// Test driver for instrument/dflash_step_log.h, run by tests/test_instrument.py.
//
//   step_log_driver MODE [ARGS...]
//
// Every mode prints one line of `key=value` pairs on stdout that the test parses. The row values
// are a fixed function of `seq` (see row_for), so the test can check every line it reads back.
#include "dflash_step_log.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
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

// The string id of seq in the modes that write string ids (mirrored by id_for() in the test).
std::string id_for(std::uint64_t seq) { return "r" + std::to_string(seq); }

// Request `seq` as an integer id or, with `ids`, as its string id.
template <typename... Counts>
void record_one(bool ids, std::uint64_t seq, Counts... counts) {
  if (ids) {
    sl::record(id_for(seq), counts...);
  } else {
    sl::record(seq, counts...);
  }
}

// Writes `count` rows with seq base, base+1, ...: single records without and with `emitted`,
// and batches of varying size (one of them larger than the batch buffer). With `ids`, each
// request is named by its string id instead.
void write_rows(std::uint64_t base, std::uint64_t count, bool ids = false) {
  static const std::uint64_t kBatchSizes[] = {1, 8, 64, 3, 200, 17};
  std::uint64_t i = 0;
  std::size_t round = 0;
  while (i < count) {
    switch (round % 3) {
      case 0: {
        const std::uint64_t seq = base + i++;
        const Row r = row_for(seq);
        record_one(ids, seq, r.proposed, r.accepted);
        break;
      }
      case 1: {
        const std::uint64_t seq = base + i++;
        const Row r = row_for(seq);
        record_one(ids, seq, r.proposed, r.accepted, r.emitted);
        break;
      }
      default: {
        sl::Batch batch;
        const std::uint64_t size = kBatchSizes[(round / 3) % 6];
        for (std::uint64_t j = 0; j < size && i < count; ++j) {
          const std::uint64_t seq = base + i++;
          const Row r = row_for(seq);
          if (ids) {
            batch.add(id_for(seq), r.proposed, r.accepted, r.emitted);  // a temporary: copied
          } else {
            batch.add(seq, r.proposed, r.accepted, r.emitted);
          }
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

  if (mode == "id_rows" && argc == 4) {  // id_rows BASE COUNT: string ids
    write_rows(arg(argv, 2), arg(argv, 3), true);
    report();
    return 0;
  }

  if ((mode == "threads" || mode == "id_threads") && argc == 4) {
    // threads T COUNT_PER_THREAD; seq = thread * 1e6 + i (id_threads: as string ids)
    const std::uint64_t threads = arg(argv, 2), count = arg(argv, 3);
    const bool ids = mode == "id_threads";
    std::vector<std::thread> pool;
    for (std::uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([t, count, ids] { write_rows(t * 1000000, count, ids); });
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

  if (mode == "past_cap" && argc == 2) {  // counts one past the cap and far past it: dropped
    const std::uint32_t past = 65537u, widest = 4294967295u;
    sl::record(1, 7, 3, 4);
    sl::record(2, past, 0);
    sl::record(3, 1, 1, past);
    sl::record(4, widest, widest, widest);
    {
      sl::Batch batch;
      batch.add(5, past, 1);
      batch.add(6, 2, 2, widest);
      batch.add(7, 65536u, 0, 65536u);
    }
    report();
    return 0;
  }

  if (mode == "extremes" && argc == 2) {  // the widest values written: counts at the cap
    const std::uint32_t big = 65536u;
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

  if (mode == "id_kinds" && argc == 2) {  // every kind of string id, and the ones dropped
    const std::string owned = "cmpl-1";
    const char* pointer = "cmpl-2";
    const char* none = nullptr;
    const char array[] = "cmpl-3";
    sl::record(owned, 4, 2);                            // std::string
    sl::record(pointer, 4, 1, 2);                       // const char*
    sl::record(std::string_view("cmpl-4"), 3, 3);       // std::string_view
    sl::record(array, 2, 0, 1);                         // char array
    sl::record("say \"hi\"\\\t\x01", 1, 1);           // escaped like the leg label
    sl::record(std::string("nul\0in", 6), 1, 0);        // a NUL byte inside the id
    sl::record("bad \xff byte", 2, 1);                  // invalid UTF-8: U+FFFD
    sl::record("7", 5, 2);                              // the string "7", not the integer 7
    sl::record(7, 5, 1);
    sl::record(none, 1, 0);                             // null: dropped
    sl::record(std::string(257, 'x'), 1, 0);            // over 256 bytes: dropped
    sl::record(std::string(128, '"'), 1, 0);            // 256 bytes escaped: written
    sl::record(std::string(129, '"'), 1, 0);            // 258 bytes escaped: dropped
    {
      // 40 rows of 250-byte ids: the batch's id buffer fills (16 ids) before its rows do.
      sl::Batch batch;
      for (int i = 0; i < 40; ++i) {
        std::string id = "long-" + std::to_string(i) + "-";
        id.resize(250, 'y');
        batch.add(id, 3, static_cast<unsigned>(i % 4), static_cast<unsigned>(i % 4 + 1));
      }
      batch.add(none, 1, 0);  // dropped
      batch.add(8, 1, 1);     // an integer id between string ones
      batch.add("after", 2, 2);
    }
    report();
    return 0;
  }

  if (mode == "timed" && argc == 2) {  // durations: single records, batches, the ones dropped
    const sl::StepTimes both{81234, 402211}, draft_only{7, sl::kNoTime}, verify_only{};
    sl::record(1, 4, 3, 4, both);
    sl::record("r2", 4, 1, 2, sl::StepTimes{sl::kNoTime, 0});      // verify only, of 0 ns
    sl::record(3, 2, 2, 3, draft_only);
    sl::record(4, 2, 0, 1, verify_only);                           // neither: no keys
    sl::record(5, 1, 1, 2, sl::StepTimes{9223372036854775807ull, 0});  // 2^63 - 1: written
    sl::record(6, 1, 1, 2, sl::StepTimes{9223372036854775808ull, 0});  // 2^63: dropped
    sl::record(7, 1, 1, 2, sl::StepTimes{1, sl::kNoTime - 1});         // dropped
    sl::record(8, 1, 1, 2, sl::StepTimes::of(-5, 3));                  // negative: dropped
    sl::record(9, 3, 1, 2, sl::StepTimes::of(std::chrono::microseconds(12), 40u));
    {
      sl::Batch batch;  // times set after the rows were added: the commit writes them on all
      batch.add(10, 3, 2, 3);
      batch.add("r11", 3, 3);
      batch.set_times(sl::StepTimes{100, 200});
      batch.commit();
      batch.add(12, 1, 0, 1);  // the next commit has no times: commit() cleared them
      batch.commit();
      batch.set_times(sl::StepTimes{sl::kNoTime, 9223372036854775808ull});
      batch.add(13, 1, 0, 1);  // dropped with its batch's invalid times
      batch.add(14, 1, 1, 2);
      batch.commit();
      batch.set_times(sl::StepTimes{300, sl::kNoTime});
      for (std::uint64_t seq = 100; seq < 250; ++seq) {  // past 64 rows: written in parts
        const Row r = row_for(seq);
        batch.add(seq, r.proposed, r.accepted, r.emitted);
      }
    }  // the destructor commits the last part, with the times
    report();
    return 0;
  }

  if ((mode == "timed_threads") && argc == 4) {
    // timed_threads T COUNT_PER_THREAD: times (seq*10, seq*10+1) of the row or its batch's first
    const std::uint64_t threads = arg(argv, 2), count = arg(argv, 3);
    std::vector<std::thread> pool;
    for (std::uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back([t, count] {
        std::uint64_t i = 0;
        while (i < count) {
          const std::uint64_t first = t * 1000000 + i;
          if (i % 9 == 0) {  // every 9th a single record, then a batch of 8
            const Row r = row_for(first);
            sl::record(first, r.proposed, r.accepted, r.emitted,
                       sl::StepTimes{first * 10, first * 10 + 1});
            ++i;
            continue;
          }
          sl::Batch batch;
          batch.set_times(sl::StepTimes{first * 10, first * 10 + 1});
          for (std::uint64_t j = 0; j < 8 && i < count; ++j, ++i) {
            const std::uint64_t seq = t * 1000000 + i;
            const Row r = row_for(seq);
            batch.add(seq, r.proposed, r.accepted, r.emitted);
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    report();
    return 0;
  }

  std::fprintf(stderr, "step_log_driver: bad arguments\n");
  return 2;
}
