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
