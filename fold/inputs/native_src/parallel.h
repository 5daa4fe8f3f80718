// Work in parts on threads of their own, and memory running out on one of them. Part of
// fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_PARALLEL_H_
#define FOLD_NATIVE_PARALLEL_H_

#include <algorithm>
#include <cstddef>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace fold_native {

// work(part) for every part in [0, parts): parts 1... on threads of their own, part 0 on this
// one (all on this one when no thread is to be had). Out of memory in any part reaches the
// caller as std::bad_alloc once every thread is joined: an exception leaving a thread would
// end the process.
template <typename Work>
void in_parallel(std::size_t parts, Work work) {
  std::vector<char> failed(parts, 0);
  auto guarded = [&](std::size_t part) {
    try {
      work(part);
    } catch (const std::bad_alloc&) {
      failed[part] = 1;
    }
  };
  std::vector<std::thread> started;
  started.reserve(parts);  // before any thread starts: adding one must not throw past it
  std::size_t part = 1;
  try {
    for (; part < parts; ++part) started.emplace_back(guarded, part);
  } catch (const std::system_error&) {  // no thread to be had: the rest on this one
    for (; part < parts; ++part) guarded(part);
  }
  if (parts > 0) guarded(0);
  for (auto& thread : started) thread.join();
  if (std::find(failed.begin(), failed.end(), 1) != failed.end()) throw std::bad_alloc();
}

// Threads for `work` units (lines, intervals): one per 2^20, up to the cores.
inline unsigned threads_for(std::size_t work) {
  return static_cast<unsigned>(std::min<std::size_t>(
      std::max(1u, std::thread::hardware_concurrency()), work / (std::size_t{1} << 20) + 1));
}

// `parts` shares of items whose work before each is `before` (a running sum from 0, one value
// more than the items, the total last): [0, cut 1, ..., items], each cut the first item whose
// work before reaches its share's part, so each share holds about the same work however it
// is spread over the items.
template <typename Sum>
std::vector<std::size_t> shares(const std::vector<Sum>& before, unsigned parts) {
  parts = std::max(1u, parts);
  std::vector<std::size_t> cuts = {0};
  for (unsigned part = 1; part < parts; ++part) {
    Sum wanted = before.back() / static_cast<Sum>(parts) * static_cast<Sum>(part);
    cuts.push_back(static_cast<std::size_t>(
        std::lower_bound(before.begin(), before.end() - 1, wanted) - before.begin()));
  }
  cuts.push_back(before.size() - 1);
  return cuts;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_PARALLEL_H_
