// One step line parsed as JSON, judged as orjson and fold.inputs.reader.judge_line would judge it.
// Part of fold/_native.cc, its only includer.

#ifndef FOLD_NATIVE_JSON_LINE_H_
#define FOLD_NATIVE_JSON_LINE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "json_scan.h"

namespace fold_native {

// One parsed step: what the fold needs. The label is kept as its bytes in the line, between
// its quotes, and unescaped only when it is needed (few lines need it: those in overlapping
// windows, or kept for the follower's groups).
struct Step {
  std::uint64_t writer = 0, seq = 0;
  std::int64_t n = 0, t_ns = 0, pid = 0, proposed = 0, accepted = 0, emitted = 0;
  std::int64_t draft_ns = 0, verify_ns = 0;  // the optional durations (FORMAT.md)
  bool has_emitted = false, has_label = false, label_escaped = false;
  bool has_draft = false, has_verify = false;
  const char* label_begin = nullptr;
  std::size_t label_length = 0;
  // A string request id (then seq is 0), kept as its bytes between its quotes, as the label.
  bool seq_is_string = false, seq_escaped = false;
  const char* seq_begin = nullptr;
  std::size_t seq_length = 0;
};

// A string value of the line as UTF-8: its bytes as they stand, or unescaped into `scratch`
// when it has escapes (`begin` is just past its opening quote).
inline std::string_view unescaped(const char* begin, std::size_t length, bool escaped,
                                  std::string& scratch) {
  if (!escaped) return {begin, length};
  scratch.clear();
  const char* p = begin;
  scan_string(p, &scratch);  // valid: the line was parsed
  return scratch;
}

// The step's string request id.
inline std::string_view seq_id_of(const Step& step, std::string& scratch) {
  return unescaped(step.seq_begin, step.seq_length, step.seq_escaped, scratch);
}

// The step's label.
inline std::string_view label_of(const Step& step, std::string& scratch) {
  return unescaped(step.label_begin, step.label_length, step.label_escaped, scratch);
}

// In the writers' key order (KeyOrder's first layout is this order).
enum Field {
  kV, kW, kN, kTns, kPid, kSeq, kProposed, kAccepted, kEmitted, kDraftNs, kVerifyNs, kLeg,
  kUnknown
};
constexpr unsigned kRequired = (1u << kV) | (1u << kW) | (1u << kN) | (1u << kTns) |
                               (1u << kPid) | (1u << kSeq) | (1u << kProposed) |
                               (1u << kAccepted);

inline Field field_of(const char* key, std::size_t length) {
  auto is = [&](const char* name, std::size_t size) {
    return length == size && std::memcmp(key, name, size) == 0;
  };
  switch (length) {
    case 1:
      return key[0] == 'v' ? kV : key[0] == 'w' ? kW : key[0] == 'n' ? kN : kUnknown;
    case 3:
      return is("pid", 3) ? kPid : is("seq", 3) ? kSeq : is("leg", 3) ? kLeg : kUnknown;
    case 4:
      return is("t_ns", 4) ? kTns : kUnknown;
    case 7:
      return is("emitted", 7) ? kEmitted : kUnknown;
    case 8:
      return is("proposed", 8)   ? kProposed
             : is("accepted", 8) ? kAccepted
             : is("draft_ns", 8) ? kDraftNs
                                 : kUnknown;
    case 9:
      return is("verify_ns", 9) ? kVerifyNs : kUnknown;
    default:
      return kUnknown;
  }
}

// The keys of the last line read, in their order, each as the bytes from after its opening
// quote to past its colon (at most 16): a writer keeps one key order, so the next line's key
// at the same place is one masked 16-byte compare, whatever the order and whatever the keys.
// It starts as the writers' layout with every optional key (a log without durations has its
// order learnt at its first line).
class KeyOrder {
 public:
  static constexpr int kPlaces = 16;

  KeyOrder() {
    const char* layout[] = {"v\":",       "w\":",        "n\":",         "t_ns\":",
                            "pid\":",     "seq\":",      "proposed\":",  "accepted\":",
                            "emitted\":", "draft_ns\":", "verify_ns\":", "leg\":"};
    for (int i = 0; i < 12; ++i) {
      remember(i, layout[i], std::strlen(layout[i]), static_cast<Field>(i));
    }
  }

  // The key at place i when it is the last line's: its field, and p moved past its colon.
  bool match(int place, const char*& p, Field& field) const {
    if (place >= kPlaces) return false;
    const Known& known = known_[place];
    std::uint64_t first, second;
    std::memcpy(&first, p, 8);  // readable: the caller's slack follows every line
    std::memcpy(&second, p + 8, 8);
    if (known.length == 0 || ((first ^ known.first) & known.first_mask) != 0 ||
        ((second ^ known.second) & known.second_mask) != 0) {
      return false;
    }
    field = known.field;
    p += known.length;
    return true;
  }

  void remember(int place, const char* text, std::size_t length, Field field) {
    if (place >= kPlaces) return;
    Known& known = known_[place];
    known.value_length = 0;  // another key: its value is not the last one's
    known.length = length <= 16 ? length : 0;
    if (known.length == 0) return;
    char bytes[16] = {};
    std::memcpy(bytes, text, length);
    std::memcpy(&known.first, bytes, 8);
    std::memcpy(&known.second, bytes + 8, 8);
    known.first_mask = mask(length >= 8 ? 8 : length);
    known.second_mask = mask(length > 8 ? length - 8 : 0);
    known.field = field;
  }

  // An unknown key's value at place i when its bytes are the value the last line had there,
  // which scanned whole and valid (a writer repeats its metadata, such as a host object, on
  // every line): p moved past it, with no scan. The same bytes are the same value, but for a
  // number, which the next byte could continue: that byte must end the value.
  // For a label, `escaped` gets whether it had escapes.
  bool same_value(int place, const char*& p, bool* escaped = nullptr) const {
    if (place >= kPlaces) return false;
    const Known& known = known_[place];
    std::size_t length = known.value_length;
    // Readable: a memo is at most the caller's slack long, and the line ends with its '\n'.
    if (length == 0 || std::memcmp(p, known.value, length) != 0) return false;
    char next = p[length];
    if (next != ',' && next != '}' && !kSpace.space[static_cast<unsigned char>(next)]) {
      return false;
    }
    p += length;
    if (escaped != nullptr) *escaped = known.value_escaped;
    return true;
  }

  void remember_value(int place, const char* begin, const char* end, bool escaped = false) {
    if (place >= kPlaces) return;
    Known& known = known_[place];
    auto length = static_cast<std::size_t>(end - begin);
    known.value_length = length <= kValueMemo ? length : 0;
    known.value_escaped = escaped;
    if (known.value_length != 0) std::memcpy(known.value, begin, length);
  }

  // The longest value remembered: the caller's slack after its buffer covers reading it.
  static constexpr std::size_t kValueMemo = 64;

 private:
  // Ones over the first `bytes` bytes in memory order, whatever the byte order.
  static std::uint64_t mask(std::size_t bytes) {
    unsigned char layout[8];
    for (std::size_t i = 0; i < 8; ++i) layout[i] = i < bytes ? 0xFF : 0;
    std::uint64_t value;
    std::memcpy(&value, layout, 8);
    return value;
  }

  struct Known {
    std::uint64_t first = 0, second = 0, first_mask = 0, second_mask = 0;
    std::size_t length = 0;
    Field field = kUnknown;
    std::size_t value_length = 0;  // 0: no value remembered
    bool value_escaped = false;    // a label's: whether it had escapes
    char value[kValueMemo];
  };
  Known known_[kPlaces];
};

// A key after its opening quote, up to and past the colon after it. Escaped keys are deferred.
inline Verdict read_key(const char*& p, Field& field) {
  const char* key = p;
  while (true) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
    ++p;
  }
  if (*p == '"') {
    field = field_of(key, static_cast<std::size_t>(p - key));
    ++p;
  } else {
    field = kUnknown;  // a key outside ASCII is no key of the format
    Verdict rest = scan_string(p, nullptr);
    if (rest != Verdict::kOk) return rest;
    for (const char* q = key; q < p; ++q) {
      if (*q == '\\') return Verdict::kDefer;
    }
  }
  skip_ws(p);
  if (*p != ':') return Verdict::kBad;
  ++p;
  return Verdict::kOk;
}

// One object with the whitespace around it, from p; p is left after the trailing whitespace.
// The scan stops at a line's '\n' (no token continues across it), so the caller learns where
// a valid line ends without searching for its newline first.
inline Verdict parse_object(const char*& p, Step& step, KeyOrder& order) {
  unsigned seen = 0;
  bool wrong = false;  // a field of the wrong type or range: bad unless a duplicate key
  step.has_emitted = step.has_label = step.seq_is_string = false;
  step.has_draft = step.has_verify = false;
  skip_ws(p);
  if (*p != '{') return Verdict::kBad;
  ++p;
  skip_ws(p);
  if (*p == '}') {
    ++p;
  } else {
    int place = 0;
    while (true) {
      if (*p != '"') return Verdict::kBad;
      ++p;
      Field field = kUnknown;
      if (!order.match(place, p, field)) {
        const char* key = p;
        Verdict read = read_key(p, field);
        if (read != Verdict::kOk) return read;
        order.remember(place, key, static_cast<std::size_t>(p - key), field);
      }
      const int here = place++;
      skip_ws(p);
      if (field != kUnknown) {
        if (seen & (1u << field)) return Verdict::kDefer;  // the exact reader keeps the last
        seen |= 1u << field;
      }
      Verdict value = Verdict::kOk;
      std::uint64_t number = 0;
      switch (field) {
        case kV:
          value = integer_field(p, kSignedMax, number, wrong);
          if (value == Verdict::kOk && number != 1) wrong = true;
          break;
        case kW: {
          if (*p != '"') {
            wrong = true;
            value = skip_value(p, 0);
            break;
          }
          ++p;
          std::uint64_t writer;
          if (lower_hex16(p, writer) && p[16] == '"') {
            p += 17;
            step.writer = writer;
          } else {
            value = scan_string(p, nullptr);
            if (value == Verdict::kOk) value = Verdict::kDefer;  // a string, not the writers' id
          }
          break;
        }
        case kN:
          value = integer_field(p, kSignedMax, number, wrong);
          step.n = static_cast<std::int64_t>(number);
          break;
        case kTns:
          value = integer_field(p, kSignedMax, number, wrong);
          step.t_ns = static_cast<std::int64_t>(number);
          break;
        case kPid:
          value = integer_field(p, kSignedMax, number, wrong);
          step.pid = static_cast<std::int64_t>(number);
          break;
        case kSeq:
          if (*p == '"') {  // a string request id
            step.seq = 0;
            step.seq_is_string = true;
            step.seq_begin = ++p;
            step.seq_escaped = false;
            value = scan_string(p, nullptr, &step.seq_escaped);
            step.seq_length = static_cast<std::size_t>(p - 1 - step.seq_begin);
            break;
          }
          value = integer_field(p, ~std::uint64_t{0}, number, wrong);
          step.seq = number;
          break;
        case kProposed:
          value = integer_field(p, kSignedMax, number, wrong);
          step.proposed = static_cast<std::int64_t>(number);
          break;
        case kAccepted:
          value = integer_field(p, kSignedMax, number, wrong);
          step.accepted = static_cast<std::int64_t>(number);
          break;
        case kEmitted:
          if (literal(p, "null")) break;  // null is absent
          value = integer_field(p, kSignedMax, number, wrong);
          step.emitted = static_cast<std::int64_t>(number);
          step.has_emitted = true;
          break;
        case kDraftNs:
          if (literal(p, "null")) break;  // null is absent
          value = integer_field(p, kSignedMax, number, wrong);
          step.draft_ns = static_cast<std::int64_t>(number);
          step.has_draft = true;
          break;
        case kVerifyNs:
          if (literal(p, "null")) break;
          value = integer_field(p, kSignedMax, number, wrong);
          step.verify_ns = static_cast<std::int64_t>(number);
          step.has_verify = true;
          break;
        case kLeg:
          if (literal(p, "null")) break;
          if (*p != '"') {
            wrong = true;
            value = skip_value(p, 0);
            break;
          }
          step.label_begin = p + 1;
          step.has_label = true;
          if (order.same_value(here, p, &step.label_escaped)) {
            step.label_length = static_cast<std::size_t>(p - 1 - step.label_begin);
            break;
          }
          ++p;
          step.label_escaped = false;
          value = scan_string(p, nullptr, &step.label_escaped);
          if (value != Verdict::kOk) break;
          step.label_length = static_cast<std::size_t>(p - 1 - step.label_begin);
          order.remember_value(here, step.label_begin - 1, p, step.label_escaped);
          break;
        case kUnknown: {
          if (order.same_value(here, p)) break;
          const char* begin = p;
          value = skip_value(p, 0);
          if (value == Verdict::kOk) order.remember_value(here, begin, p);
          break;
        }
      }
      if (value != Verdict::kOk) return value;
      Next next = after_member(p, '}');
      if (next == Next::kBad) return Verdict::kBad;
      if (next == Next::kClosed) break;
    }
  }
  skip_ws(p);
  if (wrong || (seen & kRequired) != kRequired) return Verdict::kBad;
  return Verdict::kOk;
}

// One line [p, end), end pointing at its '\n'.
inline Verdict parse_line(const char* p, const char* end, Step& step, KeyOrder& order) {
  Verdict verdict = parse_object(p, step, order);
  if (verdict == Verdict::kOk && p != end) return Verdict::kBad;
  return verdict;
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_JSON_LINE_H_
