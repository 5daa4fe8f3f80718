// Reading named requests' lines back from a step log (collect_lines): each line of [begin,
// end) that the fold would fold into one of the requests, parsed and attributed as the fold
// does, handed back as its request's index, time and packed counts. Part of fold/_native.cc,
// its only includer.

#ifndef FOLD_NATIVE_COLLECT_H_
#define FOLD_NATIVE_COLLECT_H_

#include <Python.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "arrow_export.h"
#include "fold_pass.h"
#include "python_values.h"
#include "read_range.h"
#include "request_keys.h"

namespace fold_native {

class Collector {
 public:
  // `firsts`, `ends` (empty: no bounds): by request, the bytes its lines are taken from, the
  // span the fold met them in. A read of several requests' spans at once covers bytes outside
  // each one's, where a request a fold goes on reading has lines it already holds.
  Collector(const Legs& legs, const RequestKeys& keys, std::vector<std::int64_t> firsts,
            std::vector<std::int64_t> ends)
      : steps_(legs, keys), firsts_(std::move(firsts)), ends_(std::move(ends)) {}

  std::vector<std::int64_t> request, t_ns, tokens;  // the lines, in file order

  bool lines(const char* p, const char* end, std::int64_t base) {
    return steps_.lines(p, end, base,
                        [this](std::int64_t at, const Step& step, std::int64_t offset,
                               std::int64_t line_end) {
                          auto index = static_cast<std::size_t>(at);
                          if (!firsts_.empty() &&
                              (offset < firsts_[index] || line_end > ends_[index])) {
                            return true;  // outside its span: not this read's line
                          }
                          request.push_back(at);
                          t_ns.push_back(step.t_ns);
                          tokens.push_back(packed_tokens(step));
                          return true;
                        });
  }

 private:
  NamedSteps steps_;
  std::vector<std::int64_t> firsts_, ends_;
};

inline const char kCollectDoc[] =
    "collect_lines(path, begin, end, points, segment_leg, segment_status, segment_labels,\n"
    "              w, seq, sid, leg[, first_offset, last_end]) -> dict\n\n"
    "The lines of path[begin:end] (whole lines; begin a line start) that the fold folds into\n"
    "the named requests (w and seq as int64 bits, sid str or None, leg), parsed and attributed\n"
    "as fold_range does (lines it does not fold pass by); with first_offset and last_end (by\n"
    "request), only a request's lines within those bytes: 'request' (index), 't_ns',\n"
    "'tokens' (packed) per line in file order. 'complete': the whole range was read.";

inline PyObject* collect_lines_py(PyObject*, PyObject* args) {
  PyObject* path_bytes = nullptr;
  long long begin, end;
  PyObject *points, *segment_leg, *segment_status, *segment_labels, *w, *seq, *sid, *leg;
  PyObject *first_offset = nullptr, *last_end = nullptr;
  if (!PyArg_ParseTuple(args, "O&LLOOOOOOOO|OO:collect_lines", PyUnicode_FSConverter,
                        &path_bytes, &begin, &end, &points, &segment_leg, &segment_status,
                        &segment_labels, &w, &seq, &sid, &leg, &first_offset, &last_end)) {
    return nullptr;
  }
  std::unique_ptr<PyObject, void (*)(PyObject*)> path_owner(path_bytes,
                                                           [](PyObject* o) { Py_DECREF(o); });
  Legs legs;
  RequestKeys keys;
  if (!read_int64s(points, legs.points) || !read_int64s(segment_leg, legs.segment_leg) ||
      !read_int64s(segment_status, legs.segment_status) ||
      !read_segment_labels(segment_labels, legs) || !read_request_keys(w, seq, sid, leg, keys)) {
    return nullptr;
  }
  std::vector<std::int64_t> firsts, ends;
  if ((first_offset != nullptr && !read_int64s(first_offset, firsts)) ||
      (last_end != nullptr && !read_int64s(last_end, ends))) {
    return nullptr;
  }
  if (firsts.size() != ends.size() || (!firsts.empty() && firsts.size() != keys.size())) {
    PyErr_SetString(PyExc_ValueError, "one first_offset and last_end per request");
    return nullptr;
  }
  if (legs.segment_leg.size() != 2 * legs.points.size() + 1 ||
      legs.segment_status.size() != legs.segment_leg.size() || begin < 0 || end < begin) {
    PyErr_SetString(PyExc_ValueError, "segments do not match the points, or a bad range");
    return nullptr;
  }
  const char* path = PyBytes_AS_STRING(path_bytes);
  Collector collector(legs, keys, std::move(firsts), std::move(ends));
  bool opened = false, out_of_memory = false, io_error = false;
  std::int64_t read = begin;
  Py_BEGIN_ALLOW_THREADS;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    opened = true;
    try {
      read = read_lines(fd, begin, end, std::size_t{1} << 20, collector, io_error);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
    close(fd);
  }
  Py_END_ALLOW_THREADS;
  if (out_of_memory) return PyErr_NoMemory();
  if (!opened) return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_bytes);
  PyObject* complete = PyBool_FromLong(!io_error && read >= end);
  return dict_of({
      {"request", arrow_column(std::move(collector.request), false)},
      {"t_ns", arrow_column(std::move(collector.t_ns), false)},
      {"tokens", arrow_column(std::move(collector.tokens), false)},
      {"complete", complete},
  });
}

}  // namespace fold_native

#endif  // FOLD_NATIVE_COLLECT_H_
