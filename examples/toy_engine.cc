// toy_engine: a seeded stand-in for a speculative-decoding engine, instrumented with
// instrument/dflash_step_log.h. One process serves one prompt; it runs `--runs` repetitions of a
// generate call, each decoding `--concurrency` requests to `--max-tokens` with `--k` drafts per
// verify step (or, with `--ks 2,4,6`, each forward the next of those draft lengths in turn; a
// forward then also takes `--draft-us` per token of its longest draft). Every verify forward
// records its rows through one dflash::step_log::Batch.
//
// Build (from the repository root):
//   g++ -std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror -Iinstrument examples/toy_engine.cc -o toy_engine
//
// Per run it prints one JSON line: the fields a benchmark gate records for a leg (run,
// finish_reason, prompt_tokens, completion_tokens, secs, tok_s, generate_start_unix,
// generate_end_unix) and the engine's own counters for the run (requests, rows, steps = rows with
// proposed > 0, proposed, accepted, emitted, dropped). completion_tokens counts each request's
// prefill token plus every emitted token, so it equals requests + emitted.
#include "dflash_step_log.h"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  std::uint64_t seed = 1;
  int runs = 3;
  int concurrency = 2;
  int max_tokens = 64;
  int k = 4;
  double accept = 0.7;    // chance a draft position is accepted, given the previous one was
  double eos = 0.02;      // chance per verify step that one of its tokens is EOS
  int forward_us = 200;   // sleep per verify forward
  int cold_us = 3000;     // extra sleep before the first run's first forward (a cold start)
  int draft_us = 0;       // extra sleep per token of a forward's longest draft
  std::vector<int> ks;    // draft lengths taken in turn, forward by forward (empty: k)
  std::uint64_t first_seq = 1;
};

// "2,4,6" -> {2, 4, 6}; false on anything but non-negative integers separated by commas.
bool parse_ks(const char* text, std::vector<int>& ks) {
  ks.clear();
  const char* p = text;
  while (*p != '\0') {
    char* end = nullptr;
    long value = std::strtol(p, &end, 10);
    if (end == p || value < 0 || value > 1024) return false;
    ks.push_back(static_cast<int>(value));
    p = end;
    if (*p == ',') ++p;
    else if (*p != '\0') return false;
  }
  return !ks.empty();
}

// splitmix64: small, seeded and the same on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

struct Request {
  std::uint64_t seq = 0;
  int generated = 0;  // tokens in the output so far, the prefill token included
  bool done = false;
  bool eos = false;
};

struct RunCounters {
  std::uint64_t rows = 0, steps = 0, proposed = 0, accepted = 0, emitted = 0;
};

std::uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void sleep_us(int us) {
  timespec ts{us / 1000000, static_cast<long>(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// Epoch seconds with microsecond precision, as the gate records them.
void print_seconds(const char* key, std::uint64_t ns) {
  const std::uint64_t us = (ns + 500) / 1000;
  std::printf("\"%s\":%llu.%06llu", key, static_cast<unsigned long long>(us / 1000000),
              static_cast<unsigned long long>(us % 1000000));
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* v = argv[i + 1];
    if (key == "--seed") o.seed = std::strtoull(v, nullptr, 10);
    else if (key == "--runs") o.runs = std::atoi(v);
    else if (key == "--concurrency") o.concurrency = std::atoi(v);
    else if (key == "--max-tokens") o.max_tokens = std::atoi(v);
    else if (key == "--k") o.k = std::atoi(v);
    else if (key == "--accept") o.accept = std::atof(v);
    else if (key == "--eos") o.eos = std::atof(v);
    else if (key == "--forward-us") o.forward_us = std::atoi(v);
    else if (key == "--cold-us") o.cold_us = std::atoi(v);
    else if (key == "--first-seq") o.first_seq = std::strtoull(v, nullptr, 10);
    else if (key == "--draft-us") o.draft_us = std::atoi(v);
    else if (key == "--ks") {
      if (!parse_ks(v, o.ks)) return false;
    } else return false;
  }
  return argc % 2 == 1 && o.runs >= 1 && o.concurrency >= 1 && o.max_tokens >= 1 && o.k >= 0 &&
         o.forward_us >= 0 && o.cold_us >= 0 && o.draft_us >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: toy_engine [--seed N] [--runs R] [--concurrency C] [--max-tokens M] "
                 "[--k K] [--accept P] [--eos P] [--forward-us US] [--cold-us US] "
                 "[--first-seq S] [--ks K1,K2,...] [--draft-us US]\n");
    return 2;
  }
  namespace sl = dflash::step_log;
  Rng rng(o.seed);
  const int prompt_tokens = 16 + rng.below(240);  // this process's prompt
  std::uint64_t next_seq = o.first_seq;
  std::size_t forward = 0;

  for (int run = 1; run <= o.runs; ++run) {
    std::vector<Request> requests(static_cast<std::size_t>(o.concurrency));
    for (auto& r : requests) r.seq = next_seq++;
    RunCounters c;
    const std::uint64_t start_ns = realtime_ns();
    if (run == 1) sleep_us(o.cold_us);
    for (auto& r : requests) r.generated = 1;  // prefill gives each request its first token

    for (;;) {
      bool any = false;
      for (const auto& r : requests) any = any || (!r.done && r.generated < o.max_tokens);
      if (!any) break;
      const int k = o.ks.empty() ? o.k : o.ks[forward++ % o.ks.size()];
      int longest = 0;
      for (const auto& r : requests) {
        if (r.done) continue;
        const int remaining = o.max_tokens - r.generated;
        longest = std::max(longest, remaining - 1 < k ? remaining - 1 : k);
      }
      sleep_us(o.forward_us + o.draft_us * longest);  // drafting and the verify forward
      sl::Batch batch;  // its rows, one write(2)
      for (auto& r : requests) {
        if (r.done) continue;
        const int remaining = o.max_tokens - r.generated;
        const int proposed = remaining - 1 < k ? remaining - 1 : k;
        int accepted = 0;
        while (accepted < proposed && rng.uniform() < o.accept) ++accepted;
        int emitted = accepted + 1;  // the accepted drafts and the bonus/correction token
        if (rng.uniform() < o.eos) {  // EOS among this step's tokens ends the request there
          emitted = 1 + rng.below(emitted);
          r.eos = true;
        }
        r.generated += emitted;
        r.done = r.eos || r.generated >= o.max_tokens;
        batch.add(r.seq, static_cast<std::uint32_t>(proposed),
                  static_cast<std::uint32_t>(accepted), static_cast<std::uint32_t>(emitted));
        c.rows += 1;
        c.steps += proposed > 0 ? 1 : 0;
        c.proposed += static_cast<std::uint64_t>(proposed);
        c.accepted += static_cast<std::uint64_t>(accepted);
        c.emitted += static_cast<std::uint64_t>(emitted);
      }
    }
    const std::uint64_t end_ns = realtime_ns();

    bool any_eos = false;
    std::uint64_t completion = 0;
    for (const auto& r : requests) {
      any_eos = any_eos || r.eos;
      completion += static_cast<std::uint64_t>(r.generated);
    }
    // Both stamps are rounded to the microsecond first, so secs is their exact difference.
    const std::uint64_t start_us = (start_ns + 500) / 1000, end_us = (end_ns + 500) / 1000;
    const double secs = static_cast<double>(end_us - start_us) / 1e6;
    std::printf("{\"run\":%d,\"finish_reason\":\"%s\",\"prompt_tokens\":%d,"
                "\"completion_tokens\":%llu,\"secs\":%.6f,\"tok_s\":%.3f,",
                run, any_eos ? "stop" : "length", prompt_tokens * o.concurrency,
                static_cast<unsigned long long>(completion), secs,
                secs > 0 ? static_cast<double>(completion) / secs : 0.0);
    print_seconds("generate_start_unix", start_ns);
    std::printf(",");
    print_seconds("generate_end_unix", end_ns);
    std::printf(",\"requests\":%d,\"rows\":%llu,\"steps\":%llu,\"proposed\":%llu,"
                "\"accepted\":%llu,\"emitted\":%llu,\"dropped\":%llu}\n",
                o.concurrency, static_cast<unsigned long long>(c.rows),
                static_cast<unsigned long long>(c.steps),
                static_cast<unsigned long long>(c.proposed),
                static_cast<unsigned long long>(c.accepted),
                static_cast<unsigned long long>(c.emitted),
                static_cast<unsigned long long>(sl::dropped()));
    std::fflush(stdout);
  }
  return 0;
}
