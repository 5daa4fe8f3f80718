// dflash_step_log.h - per-step speculative-decoding acceptance log (step-log format v1).
//
// Header-only, C++17, standard library + POSIX. When the environment variable DFLASH_STEP_LOG
// names a file, every verify step of every request appends one JSON line to it:
//
//   {"v":1,"w":"5f0c1a2b3c4d5e6f","n":0,"t_ns":1764450000123456789,"pid":4242,"seq":7,
//    "proposed":7,"accepted":3,"emitted":4,"leg":"warm"}
//
// (one line in the file). The format, its key order and the reader's rules are the contract in
// instrument/FORMAT.md; readers tell a lost line by the gap it leaves in `n` (per writer `w`).
// A step whose parts were timed also carries, after "emitted", how long its forward spent
// drafting and in the target's verify, in nanoseconds of a monotonic clock the engine reads:
//
//   ...,"accepted":3,"emitted":4,"draft_ns":81234,"verify_ns":402211,"leg":"warm"}
//
// (optional keys of the same version 1: lines without them are what they always were).
//
// Environment (each read once, at the first call of any function below):
//   DFLASH_STEP_LOG        path to append to; unset or empty: disabled (each call is one branch).
//                          `%p` expands to the pid, `%h` to the hostname (as NCCL_DEBUG_FILE);
//                          other `%` sequences stay as written. Relative paths use the cwd.
//   DFLASH_STEP_LEG        optional leg label, written as "leg" (JSON-escaped; invalid UTF-8
//                          bytes become U+FFFD, one per byte; at most 1024 bytes escaped).
//                          Unset or empty: no "leg" key.
//   DFLASH_STEP_LOG_FSYNC  "1": fdatasync(2) after every write. Slow (a disk flush per verify
//                          step); only for runs that must survive a machine crash.
//
// API (namespace dflash::step_log; the C functions below do the same for C engines and ctypes):
//   enabled()                          true when lines are written; lets callers skip work.
//   record(seq, proposed, accepted[, emitted])   (any integer types; see below)
//                                      one line, one write(2), for one request's verify step.
//                                      `seq` may instead be a string id (std::string_view,
//                                      std::string, const char*): written as a JSON string.
//   record(seq, proposed, accepted, emitted, StepTimes{draft_ns, verify_ns})
//                                      the same, with the durations of the step's drafting and
//                                      verify (either may be kNoTime: not measured).
//   Batch b; b.add(seq, ...); ...; b.commit();
//                                      the rows of one verify forward (sharing one t_ns, taken
//                                      at commit), written by one write(2) (past 64 rows or
//                                      16 KiB of text: split on line bounds). Destruction
//                                      commits what is left.
//   b.set_times(StepTimes{draft_ns, verify_ns})
//                                      the forward's durations, written on every row of the
//                                      batch's next commit (the rows of one forward share them).
//   dropped()                          lines of this writer that never reached the file.
//
// Usage:
//   #include "dflash_step_log.h"
//   namespace sl = dflash::step_log;
//   if (sl::enabled()) {                      // optional: skips the loop when disabled
//     sl::Batch batch;
//     for (const auto& r : running)           // one verify forward over the running requests
//       batch.add(r.seq, r.num_draft, r.num_accepted, r.num_appended);
//   }                                         // ~Batch: one write(2) for all rows
//
// With durations (the clock is the engine's; steady_clock or CLOCK_MONOTONIC, not the wall clock):
//   const auto t0 = std::chrono::steady_clock::now();
//   draft(...);                               // the drafter's part of this step
//   const auto t1 = std::chrono::steady_clock::now();
//   verify(...);                              // the target's verify forward
//   const auto t2 = std::chrono::steady_clock::now();
//   sl::Batch batch;
//   batch.set_times(sl::StepTimes::of(t1 - t0, t2 - t1));  // any integer or chrono duration
//   for (const auto& r : running) batch.add(r.seq, r.num_draft, r.num_accepted, r.num_appended);
//   batch.commit();
//
// Exactly one translation unit of a program defines DFLASH_STEP_LOG_IMPLEMENTATION before
// including this header; it gets the C-linkage functions dflash_step_log_enabled(),
// dflash_step_log_record(), dflash_step_log_record_emitted(), dflash_step_log_record_id(),
// dflash_step_log_record_id_emitted(), dflash_step_log_record_timed(),
// dflash_step_log_record_id_timed() and dflash_step_log_dropped().
// The C++ API is inline and works in every translation unit. From C, including this header
// declares the eight C functions and DFLASH_STEP_LOG_NO_TIME only.
//
// Failure behaviour: no function throws, aborts, blocks on anything but its own write(2) or
// changes what the engine computes.
//   - An unopenable path (or an over-long path or leg label): one warning on stderr naming it
//     and the reason, then disabled.
//   - A failed or short write (ENOSPC, EFBIG past RLIMIT_FSIZE when SIGXFSZ is ignored, EINTR):
//     the lines not fully written are counted in dropped(), never retried (a second write
//     could land between other writers' lines); one warning on stderr for the first failure.
//     A short write leaves at most one torn line, which readers skip. (The header never changes
//     signal dispositions: past RLIMIT_FSIZE the default SIGXFSZ ends the process, as it would
//     for any other write of the engine; ignore SIGXFSZ to get EFBIG instead.)
//   - accepted > proposed, or proposed or emitted past 65536 (the most tokens one step may
//     carry, FORMAT.md): the row violates the format, so nothing is written for it. It still
//     takes its `n` and counts in dropped(), so readers see a lost line instead of a false one;
//     one warning on stderr. (Clamping would invent a plausible number; writing it would make
//     readers refuse the whole file.) So is a duration of 2^63 ns or more other than kNoTime
//     (a negative difference of unsigned clock readings wraps there; FORMAT.md's limit).
// After fork(2) the child is a new writer: its own pid, a new `w`, `n` from 0, dropped() from 0,
// and its own file when the path holds `%p` (pthread_atfork; the child reopens at its first
// call). Threads share one writer; with several threads `n` order and file order may differ.

#ifndef DFLASH_STEP_LOG_H
#define DFLASH_STEP_LOG_H

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define DFLASH_STEP_LOG_EXPORT __attribute__((visibility("default")))
#else
#define DFLASH_STEP_LOG_EXPORT
#endif

// A part of a step that was not measured: its key is not written.
#define DFLASH_STEP_LOG_NO_TIME UINT64_MAX

#ifdef __cplusplus
extern "C" {
#endif
// C linkage, defined in the translation unit that defines DFLASH_STEP_LOG_IMPLEMENTATION.
DFLASH_STEP_LOG_EXPORT int dflash_step_log_enabled(void);
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record(uint64_t seq, uint32_t proposed,
                                                   uint32_t accepted);
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_emitted(uint64_t seq, uint32_t proposed,
                                                           uint32_t accepted, uint32_t emitted);
// A string request id: `id_len` bytes at `id` (any bytes; written JSON-escaped, each invalid
// UTF-8 byte as U+FFFD). A null `id` drops the row (counted in dflash_step_log_dropped()).
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id(const char* id, size_t id_len,
                                                      uint32_t proposed, uint32_t accepted);
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id_emitted(const char* id, size_t id_len,
                                                              uint32_t proposed,
                                                              uint32_t accepted,
                                                              uint32_t emitted);
// As the _emitted forms, with the step's durations in nanoseconds: `draft_ns` drafting,
// `verify_ns` the target's verify forward; DFLASH_STEP_LOG_NO_TIME for a part not measured.
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_timed(uint64_t seq, uint32_t proposed,
                                                         uint32_t accepted, uint32_t emitted,
                                                         uint64_t draft_ns, uint64_t verify_ns);
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id_timed(const char* id, size_t id_len,
                                                            uint32_t proposed, uint32_t accepted,
                                                            uint32_t emitted, uint64_t draft_ns,
                                                            uint64_t verify_ns);
DFLASH_STEP_LOG_EXPORT uint64_t dflash_step_log_dropped(void);
#ifdef __cplusplus
}  // extern "C"
#endif

#ifdef __cplusplus

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <string_view>
#include <type_traits>

#include <fcntl.h>
#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------
namespace dflash::step_log {

// True when DFLASH_STEP_LOG is set and its file is open (reads the environment on first use).
bool enabled() noexcept;

// One line for one verify step of request `seq`: `proposed` draft tokens verified, `accepted`
// of them accepted (bonus/correction token excluded) and, optionally, `emitted` tokens appended
// to the output (normally accepted + 1, fewer when EOS or max_tokens cut the step).
// Each argument may be of any integer type (`draft.size()`, an `int` slot id, ...): call sites
// need no casts and compile clean under -Wconversion. A value that does not fit its field
// (`seq` in 0..2^64-1, the counts in 0..2^32-1; so any negative value) would make a false row:
// nothing is written, the row takes its `n` and counts in dropped(), as accepted > proposed and
// a count past kMaxStepTokens (65536) do.
// `seq` may also be a string id (anything that converts to std::string_view: the engine's
// `req_ids[i]`, a `cmpl-...` id), written as a JSON string escaped as the leg label is; an id
// longer than 256 bytes once escaped, or a null `const char*`, is dropped the same way.
template <typename Seq, typename Proposed, typename Accepted>
void record(const Seq& seq, Proposed proposed, Accepted accepted) noexcept;
template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
void record(const Seq& seq, Proposed proposed, Accepted accepted, Emitted emitted) noexcept;

// A part of a step that was not measured (DFLASH_STEP_LOG_NO_TIME): its key is not written.
inline constexpr std::uint64_t kNoTime = std::numeric_limits<std::uint64_t>::max();

// How long one verify forward spent drafting and in the target's verify, in nanoseconds of a
// monotonic clock; kNoTime for a part not measured. Every row of the forward carries both.
// A value of 2^63 or more other than kNoTime breaks the format: the row is dropped (dropped()).
struct StepTimes {
  std::uint64_t draft_ns = kNoTime;
  std::uint64_t verify_ns = kNoTime;

  // From any integer type (nanoseconds) or std::chrono::duration, without casts at the call
  // site; a negative value (a clock read out of order) becomes one the format forbids, so the
  // row is dropped, never written with a made-up time.
  template <typename Draft, typename Verify>
  static StepTimes of(Draft draft, Verify verify) noexcept;
};

// As above, with the step's durations (the rows of one forward share them).
template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
void record(const Seq& seq, Proposed proposed, Accepted accepted, Emitted emitted,
            StepTimes times) noexcept;

// Lines this writer (process; a forked child starts at 0) issued that never reached the file.
std::uint64_t dropped() noexcept;

namespace detail {
inline constexpr std::size_t kMaxLegEscaped = 1024;  // bytes of the escaped label, at most
inline constexpr std::size_t kMaxIdEscaped = 256;    // bytes of an escaped string id, at most
// The most tokens one step may carry (FORMAT.md; fold.inputs.limits.MAX_STEP_TOKENS): readers
// refuse a log with a larger `proposed` or `emitted`, so such a row is dropped, not written.
inline constexpr std::uint32_t kMaxStepTokens = 65536;
// The largest time a line may carry (FORMAT.md): every integer but seq is below 2^63.
inline constexpr std::uint64_t kMaxNs = std::numeric_limits<std::int64_t>::max();
// 183 bytes without id, label and times; the two times add at most 63.
inline constexpr std::size_t kMaxLine = 256 + 64 + kMaxLegEscaped + kMaxIdEscaped;
inline constexpr std::size_t kBatchBytes = 16384;  // text handed to one write(2), at most
inline constexpr std::size_t kBatchRows = 64;      // rows a Batch holds before it commits
inline constexpr std::size_t kBatchIdBytes = 4096;  // escaped string ids a Batch holds
struct Row {
  std::uint64_t seq;
  std::uint32_t proposed, accepted, emitted, has_emitted;
  const char* id;        // the escaped string id, or null: the integer `seq`
  std::uint32_t id_len;  // its bytes
};

template <typename Seq>
inline constexpr bool kIsStringId =
    std::is_convertible_v<const Seq&, std::string_view> && !std::is_same_v<Seq, std::nullptr_t>;

template <typename Int>
inline constexpr bool kIsInteger =
    std::is_integral_v<Int> && !std::is_same_v<std::remove_cv_t<Int>, bool>;

template <typename T>
struct IsDuration : std::false_type {};
template <typename Rep, typename Period>
struct IsDuration<std::chrono::duration<Rep, Period>> : std::true_type {};

// Stores `value` in `out` when it is within 0..max of Field; false when it is not. No branch of
// it casts a type to itself, so -Wuseless-cast stays quiet for every argument type.
template <typename Field, typename Int>
constexpr bool narrow(Int value, Field& out) noexcept {
  static_assert(kIsInteger<Int>,
                "dflash::step_log: the counts must be integers, seq an integer or a string");
  if constexpr (std::is_signed_v<Int>) {
    if (value < 0) return false;
    return narrow(static_cast<std::make_unsigned_t<Int>>(value), out);
  } else if constexpr (sizeof(Int) <= sizeof(Field)) {
    out = value;  // widening: every value fits
    return true;
  } else {
    if (value > std::numeric_limits<Field>::max()) return false;
    out = static_cast<Field>(value);
    return true;
  }
}

inline bool escape_json(const char* text, std::size_t size, char* out, std::size_t cap,
                        std::size_t* out_len) noexcept;

// The row's request id: an integer narrowed into row.seq, or a string id escaped into `buf`
// (kMaxIdEscaped bytes), which row.id then points at. False when it does not fit.
template <typename Seq>
inline bool put_seq(const Seq& seq, Row& row, char* buf) noexcept {
  if constexpr (kIsStringId<Seq>) {
    if constexpr (std::is_pointer_v<Seq>) {
      if (seq == nullptr) return false;
    }
    const std::string_view id(seq);
    std::size_t len = 0;
    if (!escape_json(id.data(), id.size(), buf, kMaxIdEscaped, &len)) return false;
    row.id = buf;
    row.id_len = static_cast<std::uint32_t>(len);
    return true;
  } else {
    return narrow(seq, row.seq);
  }
}

// Nanoseconds from an integer or a chrono duration; kMaxNs + 1 (a value the format forbids)
// for a negative one or one past uint64.
template <typename Time>
constexpr std::uint64_t to_ns(Time value) noexcept {
  if constexpr (IsDuration<Time>::value) {
    return to_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(value).count());
  } else {
    std::uint64_t out = 0;
    return narrow(value, out) ? out : kMaxNs + 1;
  }
}
}  // namespace detail

template <typename Draft, typename Verify>
inline StepTimes StepTimes::of(Draft draft, Verify verify) noexcept {
  return StepTimes{detail::to_ns(draft), detail::to_ns(verify)};
}

// The rows of one verify forward, one per request, handed to the kernel by one write(2).
// add() only stores the row; commit() reads the clock once and takes the rows' `n` values at
// once (the rows of one forward share their `t_ns`), formats them on the stack and writes them.
// A batch of more than 64 rows, or of more than 16 KiB of text (long leg labels), is written in
// several writes, each of whole lines. Not thread-safe: one Batch per thread.
class Batch {
 public:
  Batch() noexcept = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() { commit(); }

  // The arguments as for record(): any integer types or a string id, a value that does not
  // fit is dropped. A string id is copied (escaped) into the batch, so it need not outlive add().
  template <typename Seq, typename Proposed, typename Accepted>
  void add(const Seq& seq, Proposed proposed, Accepted accepted) noexcept;
  template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
  void add(const Seq& seq, Proposed proposed, Accepted accepted, Emitted emitted) noexcept;
  void commit() noexcept;  // ONE write(2) for all rows added since the last commit
  // The forward's durations, written on every row of the next commit (added before or after
  // this call; a batch past 64 rows writes its first rows early, with the times set by then,
  // so set them before the first add()). commit() clears them: each forward sets its own.
  void set_times(StepTimes times) noexcept { times_ = times; }

 private:
  template <typename Seq>
  void add_seq(const Seq& seq, detail::Row& row, bool fits) noexcept;
  void add_row(const detail::Row& row, bool fits) noexcept;
  void write_held() noexcept;
  // Out of line: the rare full-batch write, which GCC's flow analysis misreads when inlined.
  [[gnu::noinline]] void commit_full() noexcept { write_held(); }

  std::size_t count_ = 0;
  std::size_t id_bytes_ = 0;  // of ids_, used by the rows held
  StepTimes times_{};
  detail::Row rows_[detail::kBatchRows];
  char ids_[detail::kBatchIdBytes];
};

}  // namespace dflash::step_log

// ---------------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------------
namespace dflash::step_log::detail {

enum : unsigned char {
  kUnknown = 0,  // environment not read yet
  kOff = 1,      // disabled: every call returns after one load and one branch
  kOn = 2,       // writing
  kForked = 3,   // child of a writing process: becomes a new writer at its first call
};

inline constexpr std::size_t kMaxPath = 4096;

// All of it is constant-initialized (no static-initialization order, no guard variable). The
// plain fields are written under `mu` before `state` is release-stored as kOn and read only
// after an acquire load of kOn, so they never race.
struct State {
  std::atomic<unsigned char> state{kUnknown};
  std::atomic<std::uint64_t> next_n{0};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<bool> warned_write{false};
  std::atomic<bool> warned_invalid{false};
  bool atfork_registered = false;
  bool fsync_each = false;
  bool path_has_pid = false;
  int fd = -1;
  std::size_t prefix_len = 0;  // {"v":1,"w":"<16 hex>","n":
  std::size_t pid_len = 0;     // ,"pid":<pid>,"seq":
  std::size_t tail_len = 0;    // ,"leg":"<label>"}\n  or  }\n
  char prefix[40] = {};
  char pid_part[40] = {};
  char tail[kMaxLegEscaped + 16] = {};
  char path_template[kMaxPath] = {};
  char path[kMaxPath] = {};
  char hostname[256] = {};
};

inline State g;
// glibc's initializer spells null pointers as 0; the engine may build with
// -Wzero-as-null-pointer-constant, and the macro is the only static initializer POSIX has.
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wzero-as-null-pointer-constant"
#endif
inline pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline void append(char*& out, const char* text, std::size_t len) noexcept {
  std::memcpy(out, text, len);
  out += len;
}

template <std::size_t N>
inline void append_literal(char*& out, const char (&text)[N]) noexcept {
  append(out, text, N - 1);
}

inline void append_uint(char*& out, std::uint64_t value) noexcept {
  out = std::to_chars(out, out + 20, value).ptr;  // 20 digits hold any 64-bit value
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
inline void warn(const char* fmt, ...) noexcept {
  char msg[kMaxPath + 512];
  std::va_list args;
  va_start(args, fmt);
  int len = std::vsnprintf(msg, sizeof msg, fmt, args);
  va_end(args);
  if (len <= 0) return;
  std::size_t n = static_cast<std::size_t>(len) < sizeof msg ? static_cast<std::size_t>(len)
                                                             : sizeof msg - 1;
  ssize_t ignored = ::write(STDERR_FILENO, msg, n);  // one write, so warnings do not interleave
  (void)ignored;
}

inline std::uint64_t now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 64 random bits from /dev/urandom, mixed with the pid and clocks so that a missing device still
// gives distinct ids to distinct processes.
inline std::uint64_t random_id() noexcept {
  std::uint64_t bits = 0;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = ::read(fd, &bits, sizeof bits);
    (void)got;
    ::close(fd);
  }
  timespec mono{};
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  std::uint64_t salt = splitmix64(now_ns() ^ (static_cast<std::uint64_t>(::getpid()) << 32) ^
                                  static_cast<std::uint64_t>(mono.tv_nsec));
  return bits ^ salt;
}

// Decodes one well-formed UTF-8 sequence at `p` (shortest form, no surrogates, <= U+10FFFF) and
// returns its length, or 0 when the byte at `p` does not start one.
inline std::size_t utf8_sequence_length(const unsigned char* p, const unsigned char* end) noexcept {
  unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (static_cast<std::size_t>(end - p) < len) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i) {
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  }
  return len;
}

// Writes the `size` bytes at `text` JSON-escaped as FORMAT.md says; false when they do not fit
// in `cap` bytes.
inline bool escape_json(const char* text, std::size_t size, char* out, std::size_t cap,
                        std::size_t* out_len) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(text);
  const unsigned char* end = p + size;
  std::size_t n = 0;
  while (p < end) {
    char esc[6];
    std::size_t esc_len = 0;
    const char* src = esc;
    unsigned char c = *p;
    std::size_t consumed = 1;
    switch (c) {
      case '"': esc_len = 2; esc[0] = '\\'; esc[1] = '"'; break;
      case '\\': esc_len = 2; esc[0] = '\\'; esc[1] = '\\'; break;
      case 0x08: esc_len = 2; esc[0] = '\\'; esc[1] = 'b'; break;
      case 0x09: esc_len = 2; esc[0] = '\\'; esc[1] = 't'; break;
      case 0x0A: esc_len = 2; esc[0] = '\\'; esc[1] = 'n'; break;
      case 0x0C: esc_len = 2; esc[0] = '\\'; esc[1] = 'f'; break;
      case 0x0D: esc_len = 2; esc[0] = '\\'; esc[1] = 'r'; break;
      default:
        if (c < 0x20) {
          std::memcpy(esc, "\\u00", 4);
          esc[4] = kHex[c >> 4];
          esc[5] = kHex[c & 0xF];
          esc_len = 6;
        } else if (std::size_t len = utf8_sequence_length(p, end); len > 0) {
          src = reinterpret_cast<const char*>(p);  // ASCII or valid UTF-8: copied as is
          esc_len = len;
          consumed = len;
        } else {
          src = "\xEF\xBF\xBD";  // U+FFFD for this one invalid byte
          esc_len = 3;
        }
    }
    if (n + esc_len > cap) return false;
    std::memcpy(out + n, src, esc_len);
    n += esc_len;
    p += consumed;
  }
  *out_len = n;
  return true;
}

// Expands %p and %h of the template into g.path; false when the result is too long.
inline bool expand_path(pid_t pid) noexcept {
  char* out = g.path;
  char* const limit = g.path + kMaxPath - 1;
  for (const char* t = g.path_template; *t != '\0'; ++t) {
    char piece[32];
    const char* src = t;
    std::size_t len = 1;
    if (t[0] == '%' && t[1] == 'p') {
      src = piece;
      len = static_cast<std::size_t>(
          std::to_chars(piece, piece + sizeof piece, static_cast<long long>(pid)).ptr - piece);
      ++t;
    } else if (t[0] == '%' && t[1] == 'h') {
      src = g.hostname;
      len = std::strlen(g.hostname);
      ++t;
    }
    if (static_cast<std::size_t>(limit - out) < len) return false;
    append(out, src, len);
  }
  *out = '\0';
  return true;
}

// Becomes the writer of this process: pid, new writer id, n and dropped from 0, and the file
// opened when `reopen`. Called under g_mu. Returns the new state.
inline unsigned char become_writer(bool reopen) noexcept {
  const pid_t pid = ::getpid();
  if (reopen) {
    if (g.fd >= 0) {
      ::close(g.fd);
      g.fd = -1;
    }
    if (!expand_path(pid)) {
      warn("dflash_step_log: DFLASH_STEP_LOG path '%s' is too long once expanded; "
           "step logging disabled\n", g.path_template);
      return kOff;
    }
    g.fd = ::open(g.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g.fd < 0) {
      warn("dflash_step_log: cannot open DFLASH_STEP_LOG file '%s': %s; step logging disabled\n",
           g.path, std::strerror(errno));
      return kOff;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  const std::uint64_t id = random_id();
  char* out = g.prefix;
  append_literal(out, "{\"v\":1,\"w\":\"");
  for (int shift = 60; shift >= 0; shift -= 4) *out++ = kHex[(id >> shift) & 0xF];
  append_literal(out, "\",\"n\":");
  g.prefix_len = static_cast<std::size_t>(out - g.prefix);
  out = g.pid_part;
  append_literal(out, ",\"pid\":");
  append_uint(out, static_cast<std::uint64_t>(pid));
  append_literal(out, ",\"seq\":");
  g.pid_len = static_cast<std::size_t>(out - g.pid_part);
  g.next_n.store(0, std::memory_order_relaxed);
  g.dropped.store(0, std::memory_order_relaxed);
  g.warned_write.store(false, std::memory_order_relaxed);
  g.warned_invalid.store(false, std::memory_order_relaxed);
  return kOn;
}

inline void atfork_prepare() noexcept { pthread_mutex_lock(&g_mu); }
inline void atfork_parent() noexcept { pthread_mutex_unlock(&g_mu); }
inline void atfork_child() noexcept {
  // Only marks the child; the work (pid, id, reopen) happens at its first call, outside the
  // restricted post-fork context.
  if (g.state.load(std::memory_order_relaxed) == kOn) {
    g.state.store(kForked, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&g_mu);
}

// Reads the environment. Called under g_mu. Returns the new state.
inline unsigned char init_from_environment() noexcept {
  const char* path = std::getenv("DFLASH_STEP_LOG");
  if (path == nullptr || path[0] == '\0') return kOff;
  if (std::strlen(path) >= kMaxPath) {
    warn("dflash_step_log: DFLASH_STEP_LOG path is longer than %zu bytes; "
         "step logging disabled\n", kMaxPath - 1);
    return kOff;
  }
  std::strcpy(g.path_template, path);
  g.path_has_pid = std::strstr(path, "%p") != nullptr;
  if (::gethostname(g.hostname, sizeof g.hostname - 1) != 0) std::strcpy(g.hostname, "unknown");
  g.hostname[sizeof g.hostname - 1] = '\0';

  const char* sync = std::getenv("DFLASH_STEP_LOG_FSYNC");
  g.fsync_each = sync != nullptr && std::strcmp(sync, "1") == 0;

  const char* leg = std::getenv("DFLASH_STEP_LEG");
  char* out = g.tail;
  if (leg != nullptr && leg[0] != '\0') {
    append_literal(out, ",\"leg\":\"");
    std::size_t len = 0;
    if (!escape_json(leg, std::strlen(leg), out, kMaxLegEscaped, &len)) {
      warn("dflash_step_log: DFLASH_STEP_LEG is longer than %zu bytes once escaped; "
           "step logging disabled\n", kMaxLegEscaped);
      return kOff;
    }
    out += len;
    *out++ = '"';
  }
  append_literal(out, "}\n");
  g.tail_len = static_cast<std::size_t>(out - g.tail);

  unsigned char next = become_writer(/*reopen=*/true);
  if (next == kOn && !g.atfork_registered) {
    // Registered once per process image; a child inherits the registration.
    g.atfork_registered = pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0;
  }
  return next;
}

// The slow path: first use, or first use after fork. True when writing.
[[gnu::noinline]] inline bool ensure_ready() noexcept {
  pthread_mutex_lock(&g_mu);
  unsigned char s = g.state.load(std::memory_order_acquire);
  if (s == kUnknown) {
    s = init_from_environment();
    g.state.store(s, std::memory_order_release);
  } else if (s == kForked) {
    s = become_writer(/*reopen=*/g.path_has_pid);
    g.state.store(s, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_mu);
  return s == kOn;
}

// True when lines may be written now. The disabled case costs one load and one branch.
inline bool ready() noexcept {
  const unsigned char s = g.state.load(std::memory_order_acquire);
  if (s == kOff) return false;
  if (s == kOn) return true;
  return ensure_ready();
}

// A row whose counts the format forbids: accepted > proposed, or a count past kMaxStepTokens.
inline bool breaks_format(const Row& row) noexcept {
  return row.accepted > row.proposed || row.proposed > kMaxStepTokens ||
         (row.has_emitted != 0 && row.emitted > kMaxStepTokens);
}

// Times the format forbids: 2^63 or more, other than kNoTime.
inline bool times_break_format(const StepTimes& times) noexcept {
  return (times.draft_ns != kNoTime && times.draft_ns > kMaxNs) ||
         (times.verify_ns != kNoTime && times.verify_ns > kMaxNs);
}

// Counts `count` rows whose times break the format: each takes an `n`, none is written.
[[gnu::noinline]] inline void drop_timed(std::size_t count, const StepTimes& times) noexcept {
  g.next_n.fetch_add(count, std::memory_order_relaxed);
  g.dropped.fetch_add(count, std::memory_order_relaxed);
  if (g.warned_invalid.exchange(true, std::memory_order_relaxed)) return;
  warn("dflash_step_log: a step with draft_ns=%" PRIu64 " or verify_ns=%" PRIu64 " at or past "
       "2^63 (a negative or wrapped duration) was not written and counts in dropped(); further "
       "ones are counted silently\n",
       times.draft_ns, times.verify_ns);
}

// Counts a row that would break the format (breaks_format, or a value that does not fit its
// field): it takes an `n` (so readers see the gap) but is not written.
[[gnu::noinline]] inline void drop_row(const Row& row, bool fits) noexcept {
  g.next_n.fetch_add(1, std::memory_order_relaxed);
  g.dropped.fetch_add(1, std::memory_order_relaxed);
  if (g.warned_invalid.exchange(true, std::memory_order_relaxed)) return;
  if (!fits) {
    warn("dflash_step_log: a step with a negative seq or count, one past its field (seq "
         "2^64-1, counts 2^32-1), or a string id null or over 256 bytes escaped, was not "
         "written and counts in dropped(); further ones are counted silently\n");
  } else if (row.accepted > row.proposed) {
    warn("dflash_step_log: a step with accepted=%" PRIu32 " > proposed=%" PRIu32 " was not "
         "written and counts in dropped(); further ones are counted silently\n",
         row.accepted, row.proposed);
  } else {
    warn("dflash_step_log: a step with proposed=%" PRIu32 " or emitted=%" PRIu32 " past %" PRIu32
         ", the most tokens one step may carry, was not written and counts in dropped(); "
         "further ones are counted silently\n",
         row.proposed, row.emitted, kMaxStepTokens);
  }
}

// `,"t_ns":<now>` once, for every line of one write.
struct Time {
  char text[32];
  std::size_t len;
  Time() noexcept {
    char* out = text;
    append_literal(out, ",\"t_ns\":");
    append_uint(out, now_ns());
    len = static_cast<std::size_t>(out - text);
  }
};

// `,"draft_ns":<d>,"verify_ns":<v>` (each only when measured) once, for every line of one write.
struct Durations {
  char text[64];
  std::size_t len;
  explicit Durations(const StepTimes& times) noexcept {
    char* out = text;
    if (times.draft_ns != kNoTime) {
      append_literal(out, ",\"draft_ns\":");
      append_uint(out, times.draft_ns);
    }
    if (times.verify_ns != kNoTime) {
      append_literal(out, ",\"verify_ns\":");
      append_uint(out, times.verify_ns);
    }
    len = static_cast<std::size_t>(out - text);
  }
};

// Formats one line at `out` (at most kMaxLine bytes) and returns its end.
inline char* format_line(char* out, std::uint64_t n, const Time& time, const Row& row,
                         const Durations& durations) noexcept {
  append(out, g.prefix, g.prefix_len);
  append_uint(out, n);
  append(out, time.text, time.len);
  append(out, g.pid_part, g.pid_len);
  if (row.id != nullptr) {
    *out++ = '"';
    append(out, row.id, row.id_len);
    *out++ = '"';
  } else {
    append_uint(out, row.seq);
  }
  const std::uint32_t proposed = row.proposed, accepted = row.accepted, emitted = row.emitted;
  const bool has_emitted = row.has_emitted != 0;
  append_literal(out, ",\"proposed\":");
  append_uint(out, proposed);
  append_literal(out, ",\"accepted\":");
  append_uint(out, accepted);
  if (has_emitted) {
    append_literal(out, ",\"emitted\":");
    append_uint(out, emitted);
  }
  append(out, durations.text, durations.len);
  append(out, g.tail, g.tail_len);
  return out;
}

// One write(2) of `len` bytes holding `lines` whole lines. Never retried: the lines that did
// not fully reach the file are counted in dropped().
inline void write_lines(const char* buf, std::size_t len, std::size_t lines) noexcept {
  const ssize_t written = ::write(g.fd, buf, len);
  if (written == static_cast<ssize_t>(len)) {
    if (g.fsync_each) ::fdatasync(g.fd);
    return;
  }
  const int err = errno;
  std::size_t lost = lines;
  if (written > 0) {  // a short write: the lines whose newline did not make it are lost
    lost = 0;
    for (std::size_t i = static_cast<std::size_t>(written); i < len; ++i) lost += buf[i] == '\n';
  }
  g.dropped.fetch_add(lost, std::memory_order_relaxed);
  if (!g.warned_write.exchange(true, std::memory_order_relaxed)) {
    char reason[160];
    if (written < 0) {
      std::snprintf(reason, sizeof reason, "%s", std::strerror(err));
    } else {
      std::snprintf(reason, sizeof reason, "short write, %lld of %zu bytes",
                    static_cast<long long>(written), len);
    }
    warn("dflash_step_log: write to '%s' failed (%s); the lines are dropped, not retried, and "
         "counted in dropped(); further failures are counted silently\n", g.path, reason);
  }
}

[[gnu::noinline]] inline void record_enabled(const Row& row, bool fits,
                                            const StepTimes& times) noexcept {
  if (!ready()) return;
  if (!fits || breaks_format(row)) {
    drop_row(row, fits);
    return;
  }
  if (times_break_format(times)) {
    drop_timed(1, times);
    return;
  }
  const std::uint64_t n = g.next_n.fetch_add(1, std::memory_order_relaxed);
  const Time time;
  const Durations durations(times);
  char line[kMaxLine];
  char* end = format_line(line, n, time, row, durations);
  write_lines(line, static_cast<std::size_t>(end - line), 1);
}

// record() with `emitted` and the step's times, once the writer is known not to be disabled.
template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
inline void record_emitted(const Seq& seq, Proposed proposed, Accepted accepted, Emitted emitted,
                           const StepTimes& times) noexcept {
  Row row{};
  row.has_emitted = 1;
  char id[kMaxIdEscaped];
  const bool fits = put_seq(seq, row, id) && narrow(proposed, row.proposed) &&
                    narrow(accepted, row.accepted) && narrow(emitted, row.emitted);
  record_enabled(row, fits, times);
}

// Formats and writes the rows of a batch: one clock read, one fetch_add, one write(2) per
// kBatchBytes of text.
[[gnu::noinline]] inline void write_rows(const Row* rows, std::size_t count,
                                        const StepTimes& times) noexcept {
  if (times_break_format(times)) {
    drop_timed(count, times);
    return;
  }
  std::uint64_t n = g.next_n.fetch_add(count, std::memory_order_relaxed);
  const Time time;
  const Durations durations(times);
  char buf[kBatchBytes];
  std::size_t len = 0, lines = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (len + kMaxLine > sizeof buf) {  // full: write the whole lines so far
      write_lines(buf, len, lines);
      len = lines = 0;
    }
    const Row& r = rows[i];
    char* end = format_line(buf + len, n++, time, r, durations);
    len = static_cast<std::size_t>(end - buf);
    ++lines;
  }
  write_lines(buf, len, lines);
}

}  // namespace dflash::step_log::detail

namespace dflash::step_log {

inline bool enabled() noexcept { return detail::ready(); }

template <typename Seq, typename Proposed, typename Accepted>
inline void record(const Seq& seq, Proposed proposed, Accepted accepted) noexcept {
  if (detail::g.state.load(std::memory_order_relaxed) == detail::kOff) return;
  detail::Row row{};
  char id[detail::kMaxIdEscaped];
  const bool fits = detail::put_seq(seq, row, id) && detail::narrow(proposed, row.proposed) &&
                    detail::narrow(accepted, row.accepted);
  detail::record_enabled(row, fits, StepTimes{});
}

template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
inline void record(const Seq& seq, Proposed proposed, Accepted accepted,
                   Emitted emitted) noexcept {
  // The disabled check first, in the caller: the rest may not be inlined.
  if (detail::g.state.load(std::memory_order_relaxed) == detail::kOff) return;
  detail::record_emitted(seq, proposed, accepted, emitted, StepTimes{});
}

template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
inline void record(const Seq& seq, Proposed proposed, Accepted accepted, Emitted emitted,
                   StepTimes times) noexcept {
  if (detail::g.state.load(std::memory_order_relaxed) == detail::kOff) return;
  detail::record_emitted(seq, proposed, accepted, emitted, times);
}

inline std::uint64_t dropped() noexcept {
  return detail::g.dropped.load(std::memory_order_relaxed);
}

template <typename Seq, typename Proposed, typename Accepted>
inline void Batch::add(const Seq& seq, Proposed proposed, Accepted accepted) noexcept {
  if (detail::g.state.load(std::memory_order_relaxed) == detail::kOff) return;
  detail::Row row{};
  const bool fits = detail::narrow(proposed, row.proposed) && detail::narrow(accepted, row.accepted);
  add_seq(seq, row, fits);
}

template <typename Seq, typename Proposed, typename Accepted, typename Emitted>
inline void Batch::add(const Seq& seq, Proposed proposed, Accepted accepted,
                       Emitted emitted) noexcept {
  if (detail::g.state.load(std::memory_order_relaxed) == detail::kOff) return;
  detail::Row row{};
  row.has_emitted = 1;
  const bool fits = detail::narrow(proposed, row.proposed) &&
                    detail::narrow(accepted, row.accepted) && detail::narrow(emitted, row.emitted);
  add_seq(seq, row, fits);
}

template <typename Seq>
inline void Batch::add_seq(const Seq& seq, detail::Row& row, bool fits) noexcept {
  if constexpr (detail::kIsStringId<Seq>) {
    // Room for the longest id and one more row first: a commit after the id is escaped would
    // let the next rows' ids overwrite it.
    if (count_ == detail::kBatchRows || detail::kBatchIdBytes - id_bytes_ < detail::kMaxIdEscaped) {
      commit_full();
    }
    const bool id_fits = detail::put_seq(seq, row, ids_ + id_bytes_);
    const std::size_t held = count_;
    add_row(row, fits && id_fits);
    if (count_ > held) id_bytes_ += row.id_len;
  } else {
    add_row(row, fits && detail::put_seq(seq, row, nullptr));
  }
}

inline void Batch::add_row(const detail::Row& row, bool fits) noexcept {
  if (!detail::ready()) return;
  if (!fits || detail::breaks_format(row)) {
    detail::drop_row(row, fits);
    return;
  }
  if (count_ == detail::kBatchRows) commit_full();  // full: write these rows, keep collecting
  rows_[count_++] = row;
}

inline void Batch::write_held() noexcept {
  if (count_ == 0) return;
  // Rows are only stored while writing; a fork between add() and commit() leaves the child to
  // write them as its own.
  if (detail::ready()) detail::write_rows(rows_, count_, times_);
  count_ = 0;
  id_bytes_ = 0;
}

inline void Batch::commit() noexcept {
  write_held();
  times_ = StepTimes{};
}

}  // namespace dflash::step_log

#ifdef DFLASH_STEP_LOG_IMPLEMENTATION
extern "C" {
DFLASH_STEP_LOG_EXPORT int dflash_step_log_enabled(void) {
  return dflash::step_log::enabled() ? 1 : 0;
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record(uint64_t seq, uint32_t proposed,
                                                   uint32_t accepted) {
  dflash::step_log::record(seq, proposed, accepted);
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_emitted(uint64_t seq, uint32_t proposed,
                                                           uint32_t accepted, uint32_t emitted) {
  dflash::step_log::record(seq, proposed, accepted, emitted);
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id(const char* id, size_t id_len,
                                                      uint32_t proposed, uint32_t accepted) {
  if (id == nullptr) {
    dflash::step_log::record(static_cast<const char*>(nullptr), proposed, accepted);
    return;
  }
  dflash::step_log::record(std::string_view(id, id_len), proposed, accepted);
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id_emitted(const char* id, size_t id_len,
                                                              uint32_t proposed,
                                                              uint32_t accepted,
                                                              uint32_t emitted) {
  if (id == nullptr) {
    dflash::step_log::record(static_cast<const char*>(nullptr), proposed, accepted, emitted);
    return;
  }
  dflash::step_log::record(std::string_view(id, id_len), proposed, accepted, emitted);
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_timed(uint64_t seq, uint32_t proposed,
                                                         uint32_t accepted, uint32_t emitted,
                                                         uint64_t draft_ns, uint64_t verify_ns) {
  dflash::step_log::record(seq, proposed, accepted, emitted,
                           dflash::step_log::StepTimes{draft_ns, verify_ns});
}
DFLASH_STEP_LOG_EXPORT void dflash_step_log_record_id_timed(const char* id, size_t id_len,
                                                            uint32_t proposed, uint32_t accepted,
                                                            uint32_t emitted, uint64_t draft_ns,
                                                            uint64_t verify_ns) {
  const dflash::step_log::StepTimes times{draft_ns, verify_ns};
  if (id == nullptr) {
    dflash::step_log::record(static_cast<const char*>(nullptr), proposed, accepted, emitted,
                             times);
    return;
  }
  dflash::step_log::record(std::string_view(id, id_len), proposed, accepted, emitted, times);
}
DFLASH_STEP_LOG_EXPORT uint64_t dflash_step_log_dropped(void) {
  return dflash::step_log::dropped();
}
}  // extern "C"
#endif  // DFLASH_STEP_LOG_IMPLEMENTATION

#endif  // __cplusplus
#endif  // DFLASH_STEP_LOG_H
