// Memory handed back to the system as an array's values are used up (UsedPages): the line
// arrays as their lines are placed (step_export.h), the request table as its columns are made
// (request_columns.h), a merged range's table as it is merged (fold_pass.h merge_into). Part of
// fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_USED_PAGES_H_
#define FOLD_NATIVE_USED_PAGES_H_

#include <sys/mman.h>  // madvise
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace fold_native {

// The whole pages of an array's bytes handed back to the system as its values are used up,
// front to back. The line arrays' placed lines are never read again, so the requests'
// intervals they go to are not held beside them whole. Pages the array shares with anything
// else (its first and last) are left to the array's own free.
class UsedPages {
 public:
  UsedPages(const void* begin, std::size_t bytes)
      : page_(page_size()),
        next_(round_up(reinterpret_cast<std::uintptr_t>(begin))),
        end_(reinterpret_cast<std::uintptr_t>(begin) + bytes) {}

  // Every value before `upto` is used up.
  void before(const void* upto) {
#ifdef MADV_DONTNEED
    if (page_ == 0) return;
    std::uintptr_t stop = std::min(reinterpret_cast<std::uintptr_t>(upto), end_);
    stop -= stop % page_;
    if (stop <= next_) return;
    // Only advice: memory the kernel does not take back stays the array's until it is freed.
    madvise(reinterpret_cast<void*>(next_), stop - next_, MADV_DONTNEED);
    next_ = stop;
#else
    (void)upto;
#endif
  }

 private:
  static std::uintptr_t page_size() {
    long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::uintptr_t>(size) : 0;  // 0: nothing is handed back
  }
  std::uintptr_t round_up(std::uintptr_t at) const {
    return page_ == 0 ? at : (at + page_ - 1) / page_ * page_;
  }
  std::uintptr_t page_, next_, end_;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_USED_PAGES_H_
