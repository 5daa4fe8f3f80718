// Memory running out on a thread of the extension's own (native_src/parallel.h, in_parallel,
// which the cadence and the export of a fold's lines run on): the failure reaches the caller
// as std::bad_alloc once every thread is joined, where an exception leaving a thread would end
// the process. First the export (step_export.h, export_times) under an address-space limit,
// then a part that throws it outright. Built and run by tests/test_native_memory.py
// under a small stack limit, so that the thread starts and the lists' counters are what
// fails. Exit 0: reported; 2: nothing failed; 3: no limit set; 4: a thrown part unreported.

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <new>
#include <string>

#include "inputs/native_src/read_range.h"
#include "inputs/native_src/step_export.h"

using namespace fold_native;

namespace {

// The address space the process holds now (VmSize), in bytes.
long long address_space() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return -1;
}

void fill(Fold& fold, std::size_t requests) {
  for (std::size_t i = 0; i < requests; ++i) fold.requests.index(Key{1, i, 0});
  fold.line_times.add(0, 1, true, 0);
}

}  // namespace

int main() {
  // The merged range's own places (all one request of the first's): its `placed` is 1.6 MB,
  // made on its own thread; what the export makes on this one is small.
  constexpr std::size_t kRequests = 200000;
  RangeResult result;
  fill(result.fold, 1);
  result.others.resize(1);
  Fold& other = result.others[0];
  fill(other, 1);
  other.merged = true;
  other.merged_place.assign(kRequests, 0);
  other.merged_before.assign(kRequests, 1);
  const std::vector<std::uint32_t> rows{0};
  const std::vector<std::int64_t> offsets{0, 1};
  StepIntervals out;
  // Room for a small thread stack (the caller sets `ulimit -s`), none for `placed`.
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(address_space() + (1 << 20));
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 3;
  try {
    export_times(result, rows, offsets, out);
    std::puts("no allocation failed");
    return 2;
  } catch (const std::bad_alloc&) {
  }
  // After the export: a thread started earlier would leave an arena behind for the export's
  // thread to allocate from.
  try {
    in_parallel(3, [](std::size_t part) {
      if (part == 1) throw std::bad_alloc();
    });
    return 4;
  } catch (const std::bad_alloc&) {
  }
  std::puts("out of memory, reported");
  return 0;
}
