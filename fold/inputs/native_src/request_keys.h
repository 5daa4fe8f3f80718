// Requests named from Python by their key (writer, integer id or string id, leg), found again
// from a parsed step: the seeds a read continues requests from (Seeds), and the requests whose
// lines a collect reads back. Part of fold/_native.cc, its only includer; no Python.

#ifndef FOLD_NATIVE_REQUEST_KEYS_H_
#define FOLD_NATIVE_REQUEST_KEYS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json_line.h"
#include "line_parse.h"

namespace fold_native {

class RequestKeys {
 public:
  // `sid`: the string id, or nullptr for an integer id (`seq`).
  void add(std::uint64_t writer, std::uint64_t seq, const std::string* sid, std::int64_t leg) {
    std::string key;
    compose(key, writer, seq, leg, sid != nullptr, sid != nullptr ? *sid : std::string_view());
    index_.emplace(std::move(key), static_cast<std::int64_t>(index_.size()));
  }

  // The step's request in `leg`: its index in the order added, or -1. `scratch` and `key`
  // are the caller's, so that threads share the keys.
  std::int64_t find(const Step& step, std::int64_t leg, std::string& scratch,
                    std::string& key) const {
    std::string_view sid;
    if (step.seq_is_string) sid = seq_id_of(step, scratch);
    compose(key, step.writer, step.seq, leg, step.seq_is_string, sid);
    auto found = index_.find(key);
    return found == index_.end() ? -1 : found->second;
  }

  bool empty() const { return index_.empty(); }
  std::size_t size() const { return index_.size(); }

 private:
  static void compose(std::string& out, std::uint64_t writer, std::uint64_t seq,
                      std::int64_t leg, bool is_string, std::string_view sid) {
    out.assign(25, '\0');
    std::memcpy(&out[0], &writer, 8);
    std::memcpy(&out[8], &leg, 8);
    out[16] = is_string ? 1 : 0;
    if (is_string) {
      out.append(sid.data(), sid.size());
    } else {
      std::memcpy(&out[17], &seq, 8);
    }
  }

  std::unordered_map<std::string, std::int64_t> index_;
};

// The steps of named requests among whole lines: each line parsed, judged and attributed as the
// fold does (lines it does not fold pass by), and handed to `take(index, step, offset, end)`
// when its request is one of `keys` (index: in the order added). What reads a request's lines
// again does it this way: the requests a later range continues (Continuation), and the
// requests whose lines Python reads back (Collector).
class NamedSteps {
 public:
  NamedSteps(const Legs& legs, const RequestKeys& keys) : attribution_(legs), keys_(keys) {}

  // As Folder::lines: [p, end) whole lines, `base` the file offset of p; false when `take`
  // says stop.
  template <class Take>
  bool lines(const char* p, const char* end, std::int64_t base, Take&& take) {
    const char* begin = p;
    while (p < end) {
      const char* newline;
      bool glued;
      Verdict verdict = read_line(p, end, step_, order_, newline, glued);
      if (verdict == Verdict::kOk && step_rule(step_) == StepRule::kNone) {
        std::int64_t leg = attribution_.of(step_).second;
        std::int64_t at = leg < 0 ? -1 : keys_.find(step_, leg, scratch_, key_);
        std::int64_t offset = base + (p - begin);
        if (at >= 0 && !take(at, step_, offset, offset + (newline - p) + 1)) return false;
      }
      p = newline + 1;
    }
    return true;
  }

 private:
  Attribution attribution_;
  const RequestKeys& keys_;
  Step step_;
  KeyOrder order_;
  std::string scratch_, key_;
};

// Where earlier reads of the same file left requests (LineOrder's state after their last
// line): a read continues each from there, as if it had read on, so that the figures by
// output position and per draft length of a file read in pieces (a follower's polls) add up
// piece by piece. By RequestKeys index.
struct Seeds {
  RequestKeys keys;
  std::vector<std::int64_t> last_t, last_packed, emitted_before, bucket, unordered;
};

}  // namespace fold_native

#endif  // FOLD_NATIVE_REQUEST_KEYS_H_
