// instrument_cost: what instrument/dflash_step_log.h costs an engine, as ratios against
// baselines measured in the same run.
//
// Build and run (from the repository root; or `python benchmarks/instrument_cost.py`):
//   g++ -std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror -Iinstrument benchmarks/instrument_cost.cc -o /tmp/instrument_cost
//   /tmp/instrument_cost [DIR]        # files go to DIR (default /tmp) and are removed at the end
//
// 1. disabled record(), per call, against a loop of volatile stores (target: < 2 ns per call).
//    Measured in a forked child that never sets DFLASH_STEP_LOG, since the gate is read once.
// 2. enabled single-line record() against fprintf + fflush of the same line to a FILE opened in
//    append mode (target: no more than the baseline).
// 3. per-row cost of a committed Batch of 64 rows against single-line record() (target: at most
//    1/10), next to the floor any writer of those bytes pays: write(2) of 64 ready-made lines.
// 4. The same two, in a child writing to /dev/null: the instrument's own cost (formatting, clock,
//    syscall) without the file system's cost of storing the bytes.
// Each figure is the median of 5 rounds; the rounds of a comparison alternate.
#include "dflash_step_log.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sl = dflash::step_log;

namespace {

constexpr int kRounds = 5;
constexpr std::uint32_t kBatchRows = 64;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

volatile std::uint64_t g_sink;

// ns per iteration of a loop of volatile stores: the floor any per-call cost is compared with.
double volatile_store_ns(std::uint64_t iters) {
  const double t0 = now_s();
  for (std::uint64_t i = 0; i < iters; ++i) g_sink = i;
  return (now_s() - t0) * 1e9 / static_cast<double>(iters);
}

double disabled_record_ns(std::uint64_t iters) {
  const double t0 = now_s();
  for (std::uint64_t i = 0; i < iters; ++i) {
    sl::record(i, 4, static_cast<std::uint32_t>(i & 3), 3);
    g_sink = i;  // the same store as the baseline loop, so the difference is record()
  }
  return (now_s() - t0) * 1e9 / static_cast<double>(iters);
}

double enabled_record_ns(std::uint64_t lines) {
  const double t0 = now_s();
  for (std::uint64_t i = 0; i < lines; ++i) sl::record(i, 4, static_cast<std::uint32_t>(i & 3), 3);
  return (now_s() - t0) * 1e9 / static_cast<double>(lines);
}

// The same line, built with fprintf (clock read included), then fflush: what an engine would do
// by hand to get each line to the kernel.
double fprintf_fflush_ns(std::FILE* f, std::uint64_t lines) {
  const int pid = static_cast<int>(getpid());
  const double t0 = now_s();
  for (std::uint64_t i = 0; i < lines; ++i) {
    std::fprintf(f,
                 "{\"v\":1,\"w\":\"%s\",\"n\":%llu,\"t_ns\":%llu,\"pid\":%d,\"seq\":%llu,"
                 "\"proposed\":%u,\"accepted\":%u,\"emitted\":%u}\n",
                 "5f0c1a2b3c4d5e6f", static_cast<unsigned long long>(i),
                 static_cast<unsigned long long>(realtime_ns()), pid,
                 static_cast<unsigned long long>(i), 4u, static_cast<unsigned>(i & 3), 3u);
    std::fflush(f);
  }
  return (now_s() - t0) * 1e9 / static_cast<double>(lines);
}

// write(2) of 64 lines already formatted: the file system's per-row cost, without formatting.
double raw_write_row_ns(int fd, std::uint64_t batches) {
  std::string text;
  for (std::uint32_t r = 0; r < kBatchRows; ++r) {
    text += "{\"v\":1,\"w\":\"5f0c1a2b3c4d5e6f\",\"n\":1234567,\"t_ns\":1764450000123456789,"
            "\"pid\":4242,\"seq\":" + std::to_string(1000000 + r) +
            ",\"proposed\":4,\"accepted\":" + std::to_string(r & 3) + ",\"emitted\":3}\n";
  }
  const double t0 = now_s();
  for (std::uint64_t b = 0; b < batches; ++b) {
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return -1;
  }
  return (now_s() - t0) * 1e9 / static_cast<double>(batches * kBatchRows);
}

double batch_row_ns(std::uint64_t batches) {
  const double t0 = now_s();
  for (std::uint64_t b = 0; b < batches; ++b) {
    sl::Batch batch;
    for (std::uint32_t r = 0; r < kBatchRows; ++r) batch.add(b * kBatchRows + r, 4, r & 3, 3);
    batch.commit();
  }
  return (now_s() - t0) * 1e9 / static_cast<double>(batches * kBatchRows);
}

void row(const char* what, double value, const char* unit, const char* baseline, double base,
         const char* base_unit, const char* target) {
  std::printf("%-28s %9.2f %-8s | %-26s %9.2f %-8s | ratio %7.4f | %s\n", what, value, unit,
              baseline, base, base_unit, value / base, target);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp";
  const std::string log = dir + "/instrument_cost-" + std::to_string(getpid()) + ".jsonl";
  const std::string base_path =
      dir + "/instrument_cost-" + std::to_string(getpid()) + "-baseline.jsonl";
  std::printf("instrument_cost: medians of %d rounds; files under %s (removed at the end)\n",
              kRounds, dir.c_str());
  std::fflush(stdout);

  // 1. Disabled, in a child that reads an environment without DFLASH_STEP_LOG.
  const pid_t child = fork();
  if (child == 0) {
    unsetenv("DFLASH_STEP_LOG");
    const std::uint64_t iters = 200000000;
    std::vector<double> off, base;
    sl::record(0, 1, 0);  // reads the environment: disabled from here on
    for (int r = 0; r < kRounds; ++r) {
      base.push_back(volatile_store_ns(iters));
      off.push_back(disabled_record_ns(iters));
    }
    const double extra = median(off) - median(base);
    row("disabled record()", median(off), "ns/call", "volatile-store loop", median(base),
        "ns/iter", "target < 2 ns per call");
    std::printf("%-28s %9.2f ns/call   (record() minus the loop; enabled()=%d dropped()=%llu)\n",
                "  of which record()", extra < 0 ? 0.0 : extra, sl::enabled() ? 1 : 0,
                static_cast<unsigned long long>(sl::dropped()));
    std::fflush(stdout);
    std::_Exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);

  // 4. Enabled, writing to /dev/null: no file-system cost.
  const pid_t null_child = fork();
  if (null_child == 0) {
    setenv("DFLASH_STEP_LOG", "/dev/null", 1);
    std::vector<double> rec, bat;
    for (int r = 0; r < kRounds; ++r) {
      rec.push_back(enabled_record_ns(100000));
      bat.push_back(batch_row_ns(100000 / kBatchRows * 4));
    }
    row("/dev/null: Batch, per row", median(bat), "ns/row", "/dev/null: record()", median(rec),
        "ns/line", "the instrument's own cost");
    std::fflush(stdout);
    std::_Exit(0);
  }
  int null_status = 0;
  waitpid(null_child, &null_status, 0);

  // 2 and 3. Enabled.
  setenv("DFLASH_STEP_LOG", log.c_str(), 1);
  unsetenv("DFLASH_STEP_LEG");
  unsetenv("DFLASH_STEP_LOG_FSYNC");
  if (!sl::enabled()) {
    std::fprintf(stderr, "instrument_cost: cannot write %s\n", log.c_str());
    return 1;
  }
  std::FILE* f = std::fopen(base_path.c_str(), "a");
  if (f == nullptr) {
    std::perror(base_path.c_str());
    return 1;
  }
  const int raw_fd = open(base_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  const std::uint64_t lines = 100000, batches = 100000 / kBatchRows * 4;
  std::vector<double> rec, fpf, bat, raw;
  for (int r = 0; r < kRounds; ++r) {
    fpf.push_back(fprintf_fflush_ns(f, lines));
    rec.push_back(enabled_record_ns(lines));
    raw.push_back(raw_write_row_ns(raw_fd, batches));
    bat.push_back(batch_row_ns(batches));
    truncate(log.c_str(), 0);  // O_APPEND writes continue at the new end
    truncate(base_path.c_str(), 0);
  }
  std::fclose(f);
  close(raw_fd);
  row("enabled record()", median(rec), "ns/line", "fprintf+fflush, append", median(fpf),
      "ns/line", "target ratio <= 1");
  row("Batch of 64, per row", median(bat), "ns/row", "enabled record()", median(rec), "ns/line",
      "target ratio <= 0.1");
  row("Batch of 64, per row", median(bat), "ns/row", "write(2) of 64 ready lines", median(raw),
      "ns/row", "the file system's floor");
  std::printf("dropped() = %llu\n", static_cast<unsigned long long>(sl::dropped()));
  unlink(log.c_str());
  unlink(base_path.c_str());
  return status == 0 && null_status == 0 ? 0 : 1;
}
