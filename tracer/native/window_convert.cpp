// dfcompass's window converter for the op observer: drained rows (tracer/torch_observer.py) into the
// packed records of dfc:node_begin, node_args, tensor_edge, collective, node_end, mem_alloc/mem_free
// and annotation_begin/end, with the exact edges of tracer/torch_convert.py.
//
// Why: the same conversion in Python costs ~60 us per op, five times an op of the LSTM loop of
// time_sequence_prediction (issue 35). The rules are those of ObservedWalk.collect
// (window_walk.cpp) and _WindowWriter.write_nodes (window_edges.cpp);
// tests/test_tracer/test_window_convert.py feeds the same drained windows to both and compares the
// records. Nothing here knows torch: Python classifies each op name once, gives the written
// arguments of each op schema, and numbers what this code only counts: strings are handles (Python
// interns them), devices are handles (Python describes them), node, tensor and annotation ids are
// local to the window (Python takes them from the session's counters). emit() patches them in.
//
// This file: strings, devices, the records and their packing, and the C ABI for ctypes.
#include <cstring>
#include <map>
#include <new>

#include "window_convert.h"

namespace dfc {

Converter::Converter() = default;

Converter::~Converter() {
  for (Node* node : nodes) delete node;
  for (Node* node : spare_nodes) delete node;
  open_nodes.each([](i64, Node*& node) { delete node; });
}

i64 Converter::intern(const std::string& text) {
  auto found = string_ids.find(text);
  if (found != string_ids.end()) return found->second;
  strings.push_back(text);
  return string_ids[text] = static_cast<i64>(strings.size()) - 1;
}

i64 Converter::device(i64 kind, i64 index) {
  i64 key = (kind << 32) ^ (index & 0xFFFFFFFF);
  bool added = false;
  i64& handle = device_ids.get(key, 0, &added);
  if (added) {
    device_keys.emplace_back(kind, index);
    handle = static_cast<i64>(device_keys.size()) - 1;
  }
  return handle;
}

const std::string& Converter::text(i64 handle) const {
  static const std::string empty;
  return handle < 0 ? empty : strings[handle];
}

// A string is defined just before its earliest use in the window (tracer.batch.Batch's rule).
// It goes into the string stream of that use's thread: a thread's uses come in time order from
// window to window, those of all threads together do not (tracer.batch.Batch).
void Converter::use_string(i64 handle, i64 define_at, i64 tid) {
  bool added = false;
  i64& earliest = string_define_at.get(handle, define_at, &added);
  if (added) {
    used_strings.push_back(handle);
    string_define_tid.set(handle, tid);
  } else if (define_at < earliest) {
    earliest = define_at;
    string_define_tid.set(handle, tid);
  }
}

void Converter::add(i64 cls, i64 tid, i64 epoch_ns, std::initializer_list<i64> values) {
  events.push_back(Event{cls, tid, std::max(epoch_ns - offset, floor_ts), {0}});
  Event& event = events.back();
  const ClassLayout& layout = layouts.at(cls);
  size_t i = 0;
  for (i64 value : values) {
    event.values[i] = value;
    if (layout.kinds[i] == kString) {
      use_string(value, std::max(event.ts - 1, floor_ts), tid);
    } else if (layout.kinds[i] == kDevice) {
      bool added = false;
      devices_used.get(value, 1, &added);
      if (added) used_devices.push_back(value);
    }
    ++i;
  }
}

static i64 patched(i64 id, const i64* global) { return id < 0 ? global[-id - 1] : id; }

// Local ids to global ones (Python took them from the session), everywhere they outlive the window.
void Converter::number(const i64* node_global, const i64* tensor_global, const i64* annotation_global) {
  auto fix = [&](Entry& e) { e.node = patched(e.node, node_global); e.tensor = patched(e.tensor, tensor_global); };
  carried.each([&](i64, Entry& entry) { fix(entry); });
  for (auto& [impl, bound] : rebound) fix(bound.entry);
  std::unordered_set<i64> numbered;
  for (i64 id : fresh) numbered.insert(patched(id, tensor_global));
  fresh = std::move(numbered);
  auto fix_sparse = [&](SparseEntry& e) {
    e.node = patched(e.node, node_global);
    e.tensor = patched(e.tensor, tensor_global);
  };
  for (auto& [impl, made] : sparse_made) fix_sparse(made.second);
  for (auto& pending : sparse_pending) fix_sparse(std::get<2>(pending));
  for (auto& [key, local] : annotations_begun) std::get<3>(open_annotations[key]) = patched(local, annotation_global);
  annotations_begun.clear();
}

// Per stream (class, thread): the records in time order (equal times in the order they were added,
// as Python's stable sort), patched and packed as tracer.ctf.pack_fixed packs them.
void Converter::emit(const i64* node_global, const i64* tensor_global, const i64* annotation_global,
                     const i64* string_sid, const i64* device_index) {
  // Streams by (class, thread); each stream's events are added nearly in time order.
  std::map<std::pair<i64, i64>, std::vector<uint32_t>> streams;
  for (uint32_t i = 0; i < events.size(); ++i) streams[{events[i].cls, events[i].tid}].push_back(i);
  stream_keys.clear();
  stream_ts.clear();
  stream_records.clear();
  for (auto& [key, order] : streams) {
    auto by_time = [&](uint32_t a, uint32_t b) { return events[a].ts < events[b].ts; };
    if (!std::is_sorted(order.begin(), order.end(), by_time)) std::stable_sort(order.begin(), order.end(), by_time);
    const ClassLayout& layout = layouts.at(key.first);
    std::string records(order.size() * layout.record_size, '\0');
    std::vector<i64> ts;
    ts.reserve(order.size());
    char* out = records.data();
    for (uint32_t index : order) {
      const Event& event = events[index];
      uint16_t cls = static_cast<uint16_t>(event.cls);
      std::memcpy(out, &cls, 2);
      std::memcpy(out + 2, &event.ts, 8);
      out += 10;
      ts.push_back(event.ts);
      for (size_t f = 0; f < layout.sizes.size(); ++f) {
        i64 value = event.values[f];
        switch (layout.kinds[f]) {
          case kString: value = string_sid[value]; break;
          case kDevice: value = device_index[value]; break;
          case kNodeId: value = patched(value, node_global); break;
          case kTensorId: value = patched(value, tensor_global); break;
          case kAnnotationId: value = patched(value, annotation_global); break;
          default: break;
        }
        std::memcpy(out, &value, layout.sizes[f]);  // little-endian: the low bytes
        out += layout.sizes[f];
      }
    }
    stream_keys.push_back(key);
    stream_ts.push_back(std::move(ts));
    stream_records.push_back(std::move(records));
  }
  number(node_global, tensor_global, annotation_global);
  events.clear();
}

}  // namespace dfc

using dfc::Converter;
using dfc::i64;

extern "C" {

// Each call returns 0 (or a count), or -1 after a C++ exception: the window is then lost, never the program.
#define DFC_GUARD(...) try { __VA_ARGS__; return 0; } catch (...) { return -1; }

void* dfc_convert_new() { return new (std::nothrow) Converter(); }
void dfc_convert_free(void* c) { delete static_cast<Converter*>(c); }

int dfc_convert_class(void* c, int64_t cls, int64_t nfields, const int64_t* sizes, const int64_t* kinds) {
  DFC_GUARD({
    dfc::ClassLayout layout;
    layout.sizes.assign(sizes, sizes + nfields);
    layout.kinds.assign(kinds, kinds + nfields);
    for (i64 size : layout.sizes) layout.record_size += size;
    static_cast<Converter*>(c)->layouts[cls] = layout;
  })
}

int dfc_convert_dtype(void* c, int64_t code, int64_t itemsize, const char* name) {
  DFC_GUARD({
    auto* conv = static_cast<Converter*>(c);
    if (static_cast<i64>(conv->itemsize.size()) <= code) {
      conv->itemsize.resize(code + 1, 0);
      conv->dtype_names.resize(code + 1);
    }
    conv->itemsize[code] = itemsize;
    conv->dtype_names[code] = name;
  })
}

// The next op name (ids in drain order): its text, flags, and the texts its flags need.
int dfc_convert_name(void* c, const char* text, int64_t flags, const char* extra, const char* collective) {
  DFC_GUARD({
    auto* conv = static_cast<Converter*>(c);
    dfc::NameInfo info{flags, text, extra, -1, conv->intern(text)};
    if (flags & dfc::kCollective) info.collective = conv->intern(collective);
    conv->names.push_back(std::move(info));
  })
}

// One window: rows as drained, and the step windows (begin, end, step; none: steps are not the user's).
// Returns how many (op, overload, arity) still need their written arguments (dfc_convert_missing), or -1.
int64_t dfc_convert_collect(void* c, const int64_t* begins, int64_t nbegins, const int64_t* ends, int64_t nends,
                            const int64_t* values, const int64_t* sizes, const int64_t* allocs, int64_t nallocs,
                            const int64_t* steps, int64_t nsteps) {
  try {
    auto* conv = static_cast<Converter*>(c);
    conv->collect(begins, nbegins, ends, nends, values, sizes, allocs, nallocs);
    conv->number_steps(steps, nsteps);
    return conv->find_missing_written();
  } catch (...) {
    return -1;
  }
}

void dfc_convert_missing(void* c, int64_t index, int64_t* out) {
  auto& missing = static_cast<Converter*>(c)->missing_written[index];
  out[0] = std::get<0>(missing);
  out[1] = std::get<1>(missing);
  out[2] = std::get<2>(missing);
}

int dfc_convert_written(void* c, int64_t op, int64_t overload, int64_t arity, int64_t n, const int64_t* args) {
  DFC_GUARD({ static_cast<Converter*>(c)->written[Converter::written_key(op, overload, arity)].assign(args, args + n); })
}

// The window's records, with local ids. counts: nodes, node ids, tensor ids, annotation ids, edges,
// strings used, devices used.
int dfc_convert_write(void* c, int64_t rank, int64_t world, int64_t memory, int64_t floor, int64_t offset,
                      int64_t* counts) {
  DFC_GUARD({
    auto* conv = static_cast<Converter*>(c);
    conv->floor_ts = floor;
    conv->offset = offset;
    conv->write(rank, world, memory != 0);
    i64 values[] = {static_cast<i64>(conv->nodes.size()), conv->node_ids, conv->tensor_ids, conv->annotation_ids,
                    conv->edges, static_cast<i64>(conv->used_strings.size()),
                    static_cast<i64>(conv->used_devices.size())};
    std::memcpy(counts, values, sizeof values);
  })
}

// The i-th string used: its handle, earliest definition time and that use's thread, and its text
// (valid until the next write).
const char* dfc_convert_used_string(void* c, int64_t index, int64_t* handle, int64_t* define_at, int64_t* tid) {
  auto* conv = static_cast<Converter*>(c);
  *handle = conv->used_strings[index];
  *define_at = *conv->string_define_at.find(*handle);
  *tid = *conv->string_define_tid.find(*handle);
  return conv->strings[*handle].c_str();
}

void dfc_convert_used_device(void* c, int64_t index, int64_t* handle, int64_t* kind, int64_t* device_index) {
  auto* conv = static_cast<Converter*>(c);
  *handle = conv->used_devices[index];
  *kind = conv->device_keys[*handle].first;
  *device_index = conv->device_keys[*handle].second;
}

// How many string (which 0) or device (1) handles exist.
int64_t dfc_convert_handles(void* c, int64_t which) {
  auto* conv = static_cast<Converter*>(c);
  return which == 0 ? static_cast<i64>(conv->strings.size()) : static_cast<i64>(conv->device_keys.size());
}

// Global ids and the sid and device index of each handle; returns the number of streams, or -1.
int64_t dfc_convert_emit(void* c, const int64_t* nodes, const int64_t* tensors, const int64_t* annotations,
                         const int64_t* sids, const int64_t* devices) {
  try {
    auto* conv = static_cast<Converter*>(c);
    conv->emit(nodes, tensors, annotations, sids, devices);
    return static_cast<i64>(conv->stream_keys.size());
  } catch (...) {
    return -1;
  }
}

// The i-th stream: class, thread, record count; its times and records (valid until the next emit).
const char* dfc_convert_stream(void* c, int64_t index, int64_t* cls, int64_t* tid, int64_t* count,
                               const int64_t** ts, int64_t* nbytes) {
  auto* conv = static_cast<Converter*>(c);
  *cls = conv->stream_keys[index].first;
  *tid = conv->stream_keys[index].second;
  *count = static_cast<i64>(conv->stream_ts[index].size());
  *ts = conv->stream_ts[index].data();
  *nbytes = static_cast<i64>(conv->stream_records[index].size());
  return conv->stream_records[index].data();
}

}  // extern "C"
