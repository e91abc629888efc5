// dfcompass's window converter for the op observer: drained rows (tracer/torch_observer.py) into the
// packed records of dfc:node_begin, node_args, tensor_edge, collective, node_end, mem_alloc/mem_free
// and annotation_begin/end, with the exact edges of tracer/torch_convert.py.
//
// Why: the same conversion in Python costs ~60 us per op, 5x the LSTM loop's own op (issue 35).
// The rules are those of ObservedWalk.collect and _WindowWriter.write_nodes, line for line;
// tests/test_tracer/test_window_convert.py feeds the same drained windows to both and compares the
// records. Nothing here knows torch: Python classifies each op name once (NameInfo), gives the
// written arguments of each op schema, and numbers what this file only counts: strings are handles
// (Python interns them), devices are handles (Python describes them), node, tensor and annotation
// ids are local (Python takes them from the session's counters). emit() patches them in.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <initializer_list>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace {

using i64 = int64_t;
constexpr int kBegin = 12, kEnd = 3, kValue = 12, kAlloc = 9;  // columns, as in op_observer.cpp
constexpr int kBackwardScope = 1, kUserScope = 7;                 // at::RecordScope
constexpr i64 kNoStep = 0xFFFFFFFFLL;
constexpr size_t kMaxRebound = 100000, kMaxPendingSparse = 64, kMaxSeqScopes = 200000;

// Name flags, set by Python (tracer/observed_convert.py) from the rules of tracer/torch_events.py.
enum : i64 {
  kNode = 1, kModuleMark = 2, kThreadMark = 4, kCompileScope = 8, kCompiledCall = 16, kCompiledFunction = 32,
  kSparseBuilder = 64, kFreshInput = 128, kSetStorage = 256, kHashScope = 512, kCollective = 1024,
};

struct NameInfo {
  i64 flags = 0;
  std::string text;
  std::string extra;     // module mark: the scope; compiled call: the graph's key
  i64 collective = -1;   // string handle of the collective kind
};

struct Meta {
  i64 ptr = 0, impl = 0, dtype = 0, layout = 0, device = 0;  // device: a device handle
  std::vector<i64> sizes;
};
using Arg = std::vector<Meta>;  // the tensors of one input: none, one, or a list's
using Args = std::vector<Arg>;

// An id is global (>= 0) once Python numbered it, local to the window being written (< 0) before.
struct Entry { i64 node = 0, device = 0, tensor = 0; };
struct SparseEntry { i64 node = 0, device = 0, tensor = 0, bytes = 0; };

struct Allocation { i64 net = 0, ptr = 0, at = 0; };
struct Read { i64 at; i64 ptr; Meta meta; };

struct Node {
  i64 start = 0, end = 0, tid = 0, op = -1, overload = -1, label = 0, step = kNoStep, device = 0;
  bool compiled = false;
  Args inputs;
  std::vector<std::pair<i64, Allocation>> allocations;  // by allocation id, in first-seen order
  std::unordered_map<i64, size_t> allocation_at;
  std::vector<Read> inner_reads;
  std::unordered_set<i64> read_storages;
  std::vector<i64> sparse_built;  // value dtypes
};
using NodePtr = std::shared_ptr<Node>;

struct Context {
  i64 scope = -1, backward = -1;  // string handles, -1: ""
  NodePtr node;
  bool skip = false;
  std::shared_ptr<Args> compiled_inputs;
};

struct Annotation { i64 begin, tid, name; };

struct Event {  // one record before packing: ids, strings and devices still to patch
  i64 cls, tid, ts;
  i64 values[8];
};

struct StorageWrites {
  std::vector<i64> times;
  std::vector<Entry> entries;
  const Entry* last_at(i64 at, i64* when) const {
    size_t k = std::upper_bound(times.begin(), times.end(), at) - times.begin();
    if (!k) return nullptr;
    *when = times[k - 1];
    return &entries[k - 1];
  }
  void record(i64 at, const Entry& entry) {
    size_t k = std::upper_bound(times.begin(), times.end(), at) - times.begin();
    times.insert(times.begin() + k, at);
    entries.insert(entries.begin() + k, entry);
  }
};

bool freed_between(const std::vector<i64>* frees, i64 after, i64 before, bool to_end = false) {
  if (!frees || frees->empty()) return false;
  size_t at = std::upper_bound(frees->begin(), frees->end(), after) - frees->begin();
  return at < frees->size() && (to_end || (*frees)[at] <= before);
}

bool is_sparse(const Meta& meta) {  // sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc
  return !meta.ptr && (meta.layout == 1 || meta.layout == 2 || meta.layout == 4 || meta.layout == 5 ||
                       meta.layout == 6);
}

// Field kinds, per event class, from tracer/schema.py (given by Python).
enum FieldKind : i64 { kPlain = 0, kString = 1, kDevice = 2, kNodeId = 3, kTensorId = 4, kAnnotationId = 5 };
struct ClassLayout { std::vector<i64> sizes, kinds; size_t record_size = 10; };

enum Class : i64 { kNodeBegin = 6, kNodeEnd = 7, kTensorEdge = 8, kMemAlloc = 17, kMemFree = 18, kNodeArgs = 19,
                   kAnnotationBegin = 25, kAnnotationEnd = 26, kCollectiveEvent = 28 };

class Converter {
 public:
  // ---- set-up, by Python
  std::vector<NameInfo> names;
  std::vector<i64> itemsize;                    // by dtype code
  std::vector<std::string> dtype_names;         // by dtype code, as node_args shows them
  std::map<i64, ClassLayout> layouts;
  std::map<std::tuple<i64, i64, i64>, std::vector<i64>> written;  // (op, overload, arity) -> written args

  // ---- strings and devices: handles
  std::vector<std::string> strings;
  std::unordered_map<std::string, i64> string_ids;
  std::vector<std::pair<i64, i64>> device_keys;  // handle -> (kind, index)
  std::unordered_map<i64, i64> device_ids;

  i64 intern(const std::string& text) {
    auto found = string_ids.find(text);
    if (found != string_ids.end()) return found->second;
    strings.push_back(text);
    return string_ids[text] = static_cast<i64>(strings.size()) - 1;
  }
  i64 device(i64 kind, i64 index) {
    i64 key = (kind << 32) ^ (index & 0xFFFFFFFF);
    auto found = device_ids.find(key);
    if (found != device_ids.end()) return found->second;
    device_keys.emplace_back(kind, index);
    return device_ids[key] = static_cast<i64>(device_keys.size()) - 1;
  }
  const std::string& text(i64 handle) const { static const std::string empty; return handle < 0 ? empty : strings[handle]; }

  // ---- what outlives a window
  std::unordered_map<i64, Context> contexts;
  std::unordered_map<i64, NodePtr> open_nodes;
  std::unordered_map<i64, Annotation> open_annotations;
  std::unordered_map<i64, i64> seq_scope;
  std::unordered_map<i64, Entry> carried;
  std::unordered_set<i64> fresh;
  std::unordered_map<i64, std::pair<i64, SparseEntry>> sparse_made;  // impl -> (time, entry)
  std::vector<std::tuple<i64, i64, SparseEntry>> sparse_pending;      // (time, dtype, entry)
  struct Rebound { i64 at; Entry entry; i64 order; };
  std::unordered_map<i64, Rebound> rebound;  // TensorImpl address -> the set_ that gave it a storage
  i64 rebound_order = 0;
  std::unordered_map<i64, i64> unwritten;
  i64 collectives = 0;

  // ---- this window
  std::vector<NodePtr> nodes;
  std::vector<std::tuple<i64, i64, i64, i64, i64, i64>> memory;  // at, tid, device, ptr, size, total
  std::vector<std::tuple<i64, i64, i64, i64>> annotations;       // begin, end, tid, name
  std::vector<std::tuple<i64, i64, i64, i64>> missing_written;   // (op, overload, arity, 0) to ask Python for
  std::vector<Event> events;
  i64 node_ids = 0, tensor_ids = 0, annotation_ids = 0, edges = 0;
  std::vector<i64> used_strings, used_devices;        // first use order
  std::unordered_map<i64, i64> string_define_at;      // handle -> earliest definition time
  std::unordered_set<i64> devices_used;
  i64 floor_ts = 0, offset = 0;
  // emit(): per stream (class, tid), its timestamps and packed records
  std::vector<std::pair<i64, i64>> stream_keys;
  std::vector<std::vector<i64>> stream_ts;
  std::vector<std::string> stream_records;

  Meta meta(const i64* values, const i64* sizes, i64 row) {
    const i64* v = values + row * kValue;
    Meta m;
    m.ptr = v[4];
    m.impl = v[5];
    m.dtype = (v[6] >= 0 && v[6] < static_cast<i64>(itemsize.size())) ? v[6] : 0;
    m.device = device(v[7], v[8]);
    m.layout = v[9];
    m.sizes.assign(sizes + v[11], sizes + v[11] + v[10]);
    return m;
  }

  Args inputs(const i64* values, const i64* sizes, i64 first, i64 count, i64 arity,
              std::unordered_set<i64>* read) {
    // As the profiler lists them; only the tensors matter downstream (tracer.torch_events._tensors).
    std::vector<std::vector<std::pair<i64, Meta>>> given(std::max<i64>(arity, 0));
    std::vector<bool> single(given.size(), false);
    for (i64 at = first; at < first + count; ++at) {
      const i64* v = values + at * kValue;
      i64 arg = v[2], pos = v[3];
      if (read) read->insert(v[4]);
      if (arg >= static_cast<i64>(given.size())) { given.resize(arg + 1); single.resize(arg + 1, false); }
      if (pos < 0) {
        given[arg].clear();
        given[arg].emplace_back(-1, meta(values, sizes, at));
        single[arg] = true;
      } else {
        if (single[arg]) { given[arg].clear(); single[arg] = false; }
        auto& items = given[arg];
        auto slot = std::find_if(items.begin(), items.end(), [pos](auto& item) { return item.first == pos; });
        if (slot != items.end()) slot->second = meta(values, sizes, at);
        else items.emplace_back(pos, meta(values, sizes, at));
      }
    }
    Args out(given.size());
    for (size_t i = 0; i < given.size(); ++i) {
      std::stable_sort(given[i].begin(), given[i].end(), [](auto& a, auto& b) { return a.first < b.first; });
      for (auto& item : given[i]) out[i].push_back(std::move(item.second));
    }
    return out;
  }

  void seq_scope_default(i64 sequence, i64 scope) {
    if (sequence >= 0 && scope >= 0) seq_scope.emplace(sequence, scope);
  }

  // ObservedWalk.collect
  void collect(const i64* begins, i64 nbegins, const i64* ends, i64 nends, const i64* values, const i64* sizes,
               const i64* allocs, i64 nallocs) {
    nodes.clear();
    memory.clear();
    annotations.clear();
    for (i64 r = 0; r < nbegins; ++r) {
      const i64* b = begins + r * kBegin;
      i64 tid = b[0], serial = b[1], parent = b[2], start = b[4], name_id = b[5], overload = b[6];
      i64 scope_kind = b[7], sequence = b[8], arity = b[9], first = b[10], count = b[11];
      i64 key = (tid << 40) | serial;
      Context context;
      if (parent >= 0) {
        auto found = contexts.find((tid << 40) | parent);
        if (found != contexts.end()) context = found->second;
      }
      const NameInfo& name = names.at(name_id);
      if (context.skip || context.node) {
        if (context.node && !context.skip) inner(*context.node, context, values, sizes, first, count, start, name, sequence);
        contexts[key] = context;
        continue;
      }
      contexts[key] = above(context, key, tid, start, name_id, overload, scope_kind, sequence,
                            values, sizes, first, count, arity);
    }
    for (i64 r = 0; r < nallocs; ++r) {
      const i64* a = allocs + r * kAlloc;
      i64 tid = a[0], at = a[1], ptr = a[2], size = a[3], total = a[4], innermost = a[7], allocation = a[8];
      i64 dev = device(a[5], a[6]);
      const Context* owner = nullptr;
      if (innermost >= 0) {
        auto found = contexts.find((tid << 40) | innermost);
        if (found != contexts.end()) owner = &found->second;
      }
      if (owner && owner->skip) continue;
      memory.emplace_back(at, tid, dev, ptr, size, total);
      if (owner && owner->node && allocation >= 0) node_allocation(*owner->node, allocation, ptr, size, at, dev);
    }
    for (i64 r = 0; r < nends; ++r) {
      const i64* e = ends + r * kEnd;
      i64 key = (e[0] << 40) | e[1];
      contexts.erase(key);
      auto node = open_nodes.find(key);
      if (node != open_nodes.end()) {
        node->second->end = e[2];
        nodes.push_back(node->second);
        open_nodes.erase(node);
      }
      auto annotation = open_annotations.find(key);
      if (annotation != open_annotations.end()) {
        annotations.emplace_back(annotation->second.begin, e[2], annotation->second.tid, annotation->second.name);
        open_annotations.erase(annotation);
      }
    }
  }

  static void node_allocation(Node& node, i64 allocation, i64 ptr, i64 size, i64 at, i64 dev) {
    auto found = node.allocation_at.find(allocation);
    size_t index;
    if (found == node.allocation_at.end()) {
      index = node.allocations.size();
      node.allocation_at[allocation] = index;
      node.allocations.push_back({allocation, Allocation{0, ptr, 0}});
    } else {
      index = found->second;
    }
    Allocation& entry = node.allocations[index].second;
    entry.net += size;
    if (size > 0) {
      entry.at = at;  // when: a buffer freed earlier in the op may have had this address
      node.device = dev;
    }
  }

  void inner(Node& node, const Context& context, const i64* values, const i64* sizes, i64 first, i64 count,
             i64 start, const NameInfo& name, i64 sequence) {
    if (context.backward < 0) seq_scope_default(sequence, context.scope);
    if (!count) return;
    if (name.flags & kSparseBuilder) node.sparse_built.push_back(meta(values, sizes, first + count - 1).dtype);
    for (i64 at = first; at < first + count; ++at) {
      i64 ptr = values[at * kValue + 4];
      if (ptr) {
        if (!node.read_storages.insert(ptr).second) continue;
      }
      node.inner_reads.push_back(Read{start, ptr, meta(values, sizes, at)});
    }
  }

  Context above(const Context& context, i64 key, i64 tid, i64 start, i64 name_id, i64 overload, i64 scope_kind,
                i64 sequence, const i64* values, const i64* sizes, i64 first, i64 count, i64 arity) {
    const NameInfo& name = names[name_id];
    i64 scope = context.scope, backward = context.backward;
    if (name.flags & kCompileScope) return Context{scope, backward, nullptr, true, nullptr};
    if (name.flags & kCompiledCall) {
      std::string outer = backward >= 0 ? text(backward) : scope >= 0 ? text(scope) : "";
      auto node = std::make_shared<Node>();
      node->start = node->end = start;
      node->tid = tid;
      node->compiled = true;
      node->label = intern((outer.empty() ? "compiled" : outer) + " [graph " + name.extra + "]");
      node->device = device(0, -1);
      if (context.compiled_inputs) node->inputs = *context.compiled_inputs;
      open_nodes[key] = node;
      return Context{backward >= 0 ? -1 : scope, backward, node, false, nullptr};
    }
    std::shared_ptr<Args> compiled = context.compiled_inputs;
    if (name.flags & kCompiledFunction)
      compiled = std::make_shared<Args>(inputs(values, sizes, first, count, arity, nullptr));
    if (name.flags & kModuleMark) {
      scope = intern(name.extra);
    } else if (name.flags & kThreadMark) {
      return Context{scope, backward, nullptr, true, nullptr};
    } else if (scope_kind == kBackwardScope) {
      i64 forward = -1;
      if (sequence >= 0) {
        auto found = seq_scope.find(sequence);
        if (found != seq_scope.end()) forward = found->second;
      }
      backward = intern((forward >= 0 && !text(forward).empty() ? text(forward) : name.text) + " (backward)");
    } else if (name.flags & kNode) {
      auto node = std::make_shared<Node>();
      node->start = node->end = start;
      node->tid = tid;
      node->op = name_id;
      node->overload = overload;
      node->label = backward >= 0 ? backward : scope >= 0 ? scope : intern(name.text);
      node->device = device(0, -1);
      node->inputs = inputs(values, sizes, first, count, arity, &node->read_storages);
      open_nodes[key] = node;
      if (backward < 0) seq_scope_default(sequence, scope);
      return Context{backward >= 0 ? -1 : scope, backward, node, false, nullptr};
    } else if (scope_kind == kUserScope && !(name.flags & kHashScope)) {
      scope = intern(name.text);
      open_annotations[key] = Annotation{start, tid, scope};
    }
    if (backward < 0) seq_scope_default(sequence, scope);
    return Context{scope, backward, nullptr, false, compiled};
  }

  // steps: begin, end, step per window of the marking thread (tracer.torch_events.steps_by_time)
  void number_steps(const i64* steps, i64 nsteps) {
    std::vector<std::tuple<i64, i64, i64>> windows;
    for (i64 s = 0; s < nsteps; ++s) windows.emplace_back(steps[s * 3], steps[s * 3 + 1], steps[s * 3 + 2]);
    std::sort(windows.begin(), windows.end());
    for (auto& node : nodes) {
      node->step = kNoStep;
      auto at = std::upper_bound(windows.begin(), windows.end(), node->start,
                                 [](i64 t, auto& w) { return t < std::get<0>(w); });
      if (at != windows.begin()) {
        --at;
        if (node->start <= std::get<1>(*at)) node->step = std::get<2>(*at);
      }
    }
  }

  // Written arguments still unknown for the nodes that ended: Python looks them up before write().
  i64 find_missing_written() {
    missing_written.clear();
    for (auto& node : nodes) {
      if (node->compiled) continue;
      auto key = std::make_tuple(node->op, node->overload, static_cast<i64>(node->inputs.size()));
      if (!written.count(key)) {
        written[key] = {};  // filled by Python before write()
        missing_written.emplace_back(node->op, node->overload, static_cast<i64>(node->inputs.size()), 0);
      }
    }
    return static_cast<i64>(missing_written.size());
  }

  // ---- events
  void use_string(i64 handle, i64 define_at) {
    auto found = string_define_at.find(handle);
    if (found == string_define_at.end()) {
      string_define_at[handle] = define_at;
      used_strings.push_back(handle);
    } else if (define_at < found->second) {
      found->second = define_at;
    }
  }

  void add(i64 cls, i64 tid, i64 epoch_ns, std::initializer_list<i64> values) {
    Event event{cls, tid, std::max(epoch_ns - offset, floor_ts), {0}};
    const ClassLayout& layout = layouts.at(cls);
    size_t i = 0;
    for (i64 value : values) {
      event.values[i] = value;
      if (layout.kinds[i] == kString) use_string(value, std::max(event.ts - 1, floor_ts));
      if (layout.kinds[i] == kDevice && devices_used.insert(value).second) used_devices.push_back(value);
      ++i;
    }
    events.push_back(event);
  }

  i64 new_node() { return -(++node_ids); }
  i64 new_tensor() { return -(++tensor_ids); }

  i64 nbytes(const Meta& meta) const {
    i64 count = 1;
    for (i64 dim : meta.sizes) count *= dim;
    return count * itemsize[meta.dtype];
  }

  std::string shapes_text(const Args& tensors) const {
    std::string out = "[";
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (i) out += ", ";
      out += "[";
      if (!tensors[i].empty()) {
        const auto& sizes = tensors[i][0].sizes;
        for (size_t d = 0; d < sizes.size(); ++d) out += (d ? ", " : "") + std::to_string(sizes[d]);
      }
      out += "]";
    }
    return out + "]";
  }

  std::string dtypes_text(const Args& tensors) const {
    std::string out;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (i) out += ",";
      if (!tensors[i].empty()) out += dtype_names[tensors[i][0].dtype];
    }
    return out;
  }

  void edge(i64 tid, i64 at, const Entry& producer, i64 consumer, i64 bytes, i64 dev) {
    add(kTensorEdge, tid, at, {producer.node, consumer, producer.tensor, bytes, producer.device, dev});
    ++edges;
  }

  // _WindowWriter.write_nodes and write_memory, then the annotations
  void write(i64 rank, i64 world, bool memory_events) {
    events.clear();
    used_strings.clear();
    used_devices.clear();
    string_define_at.clear();
    devices_used.clear();
    node_ids = tensor_ids = annotation_ids = edges = 0;
    std::unordered_map<i64, StorageWrites> writes;
    std::unordered_map<i64, std::vector<i64>> frees;
    std::unordered_map<i64, std::vector<std::pair<i64, bool>>> freed;
    for (auto& [at, tid, dev, ptr, size, total] : memory) {
      if (size) {
        frees[ptr].push_back(at);
        freed[ptr].emplace_back(at, size < 0);
      }
    }
    for (auto& [ptr, times] : frees) std::sort(times.begin(), times.end());
    for (auto& [ptr, list] : freed) std::sort(list.begin(), list.end());
    auto frees_of = [&](i64 ptr) -> const std::vector<i64>* {
      auto found = frees.find(ptr);
      return found == frees.end() ? nullptr : &found->second;
    };
    for (auto& [ptr, entry] : carried) writes[ptr] = StorageWrites{{-1}, {entry}};
    std::stable_sort(nodes.begin(), nodes.end(), [](const NodePtr& a, const NodePtr& b) {
      return a->start != b->start ? a->start < b->start : a->tid < b->tid;
    });
    i64 empty = intern("");
    for (auto& node_ptr : nodes) {
      Node& node = *node_ptr;
      i64 tid = node.tid;
      const Args& tensors = node.inputs;
      i64 dev = node.device;
      for (auto& arg : tensors) if (!arg.empty()) { dev = arg[0].device; break; }
      i64 node_id = new_node();
      i64 op = node.compiled ? intern("inductor::compiled_graph") : intern(names[node.op].text);
      add(kNodeBegin, tid, node.start, {node_id, op, node.label, dev, tid, node.step});
      add(kNodeArgs, tid, node.start, {node_id, intern(shapes_text(tensors)), intern(dtypes_text(tensors))});
      const NameInfo* name = node.compiled ? nullptr : &names[node.op];
      if (name && (name->flags & kCollective)) {
        i64 payload = 0;
        if (!tensors.empty()) for (auto& m : tensors[0]) payload += nbytes(m);
        add(kCollectiveEvent, tid, node.start, {node_id, rank, name->collective, empty, world, collectives, payload});
        ++collectives;
      }
      // A buffer made outside any op enters the graph at the op that takes it (_made_outside_ops).
      std::vector<i64> outside;
      if (name && (name->flags & kFreshInput) && !tensors.empty()) {
        for (auto& m : tensors[0]) {
          if (!m.ptr) continue;
          auto history = writes.find(m.ptr);
          i64 when = 0;
          const Entry* found = history != writes.end() ? history->second.last_at(node.start, &when) : nullptr;
          if (!found || fresh.count(found->tensor) || freed_between(frees_of(m.ptr), when, node.start))
            outside.push_back(m.ptr);
        }
      }
      std::unordered_set<i64> seen(outside.begin(), outside.end());
      std::vector<const Read*> reads;
      std::vector<Read> own;
      for (auto& arg : tensors) for (auto& m : arg) own.push_back(Read{node.start, m.ptr, m});
      std::unordered_set<i64> own_sparse;
      for (auto& r : own) if (!r.ptr && is_sparse(r.meta)) own_sparse.insert(r.meta.impl);
      for (auto& r : own) reads.push_back(&r);
      for (auto& r : node.inner_reads) reads.push_back(&r);
      for (const Read* r : reads) {
        i64 at = r->at, ptr = r->ptr;
        const Meta& m = r->meta;
        if (!ptr && own_sparse.count(m.impl) && !seen.count(-m.impl)) {
          seen.insert(-m.impl);
          const SparseEntry* made = sparse_maker(m, at);
          if (made) {
            add(kTensorEdge, tid, node.start, {made->node, node_id, made->tensor, made->bytes, made->device, dev});
            ++edges;
          }
          continue;
        }
        if (!ptr || seen.count(ptr)) continue;
        seen.insert(ptr);
        auto history = writes.find(ptr);
        i64 when = 0;
        const Entry* found = history != writes.end() ? history->second.last_at(at, &when) : nullptr;
        Entry producer;
        if (!found || freed_between(frees_of(ptr), when, at)) {
          auto bound = rebound.find(m.impl);  // no replay: the observer records CPU only
          if (bound == rebound.end()) continue;
          Rebound taken = bound->second;
          rebound.erase(bound);
          if (taken.at > at || !bound_by_set(ptr, at, taken.at, freed)) continue;
          writes[ptr].record(taken.at, taken.entry);  // the storage it was given is now known
          producer = taken.entry;
        } else {
          producer = *found;
        }
        edge(tid, node.start, producer, node_id, nbytes(m), dev);
      }
      for (i64 ptr : outside) {
        Entry entry{node_id, dev, new_tensor()};
        fresh.insert(entry.tensor);
        writes[ptr].record(node.start, entry);
      }
      for (auto& [id, allocation] : node.allocations)
        if (allocation.net > 0 && allocation.ptr) writes[allocation.ptr].record(allocation.at, Entry{node_id, dev, new_tensor()});
      bool inner_sparse = false;
      for (auto& r : node.inner_reads) if (!r.ptr && is_sparse(r.meta)) { inner_sparse = true; break; }
      if (!node.sparse_built.empty() || inner_sparse) {
        i64 kept = 0;
        for (auto& [id, allocation] : node.allocations) if (allocation.net > 0) kept += allocation.net;
        sparse_add(node, own_sparse, SparseEntry{node_id, dev, new_tensor(), kept});
      }
      if (name) {
        auto found = written.find(std::make_tuple(node.op, node.overload, static_cast<i64>(tensors.size())));
        if (found != written.end()) {
          for (i64 index : found->second) {
            if (index >= static_cast<i64>(tensors.size())) continue;
            for (auto& m : tensors[index]) {
              if (m.ptr) {
                writes[m.ptr].record(node.start, Entry{node_id, dev, new_tensor()});
              } else if (name->flags & kSetStorage) {
                Entry entry{node_id, dev, new_tensor()};
                auto old = rebound.find(m.impl);
                i64 order = old != rebound.end() ? old->second.order : rebound_order++;
                rebound[m.impl] = Rebound{node.start, entry, order};
              }
            }
          }
        }
      }
      add(kNodeEnd, tid, node.end, {node_id, dev, tid});
    }
    if (memory_events) {
      for (auto& [at, tid, dev, ptr, size, total] : memory)
        add(size > 0 ? kMemAlloc : kMemFree, tid, at, {dev, ptr, size < 0 ? -size : size, std::max<i64>(total, 0)});
    }
    i64 cpu = device(0, -1);
    for (auto& [begin, end, tid, name] : annotations) {
      i64 annotation = -(++annotation_ids);
      add(kAnnotationBegin, tid, begin, {cpu, tid, annotation, name});
      add(kAnnotationEnd, tid, end, {cpu, tid, annotation});
    }
    end_window(writes, frees, freed);
  }

  bool bound_by_set(i64 ptr, i64 at, i64 set_at,
                    const std::unordered_map<i64, std::vector<std::pair<i64, bool>>>& freed) const {
    auto found = freed.find(ptr);
    i64 k = -1;
    if (found != freed.end()) {
      const auto& list = found->second;
      k = static_cast<i64>(std::upper_bound(list.begin(), list.end(), std::make_pair(at, true)) - list.begin()) - 1;
    }
    if (k < 0) {  // no memory event here before the read: alive since an earlier window
      auto allocated = unwritten.find(ptr);
      return allocated != unwritten.end() && allocated->second <= set_at;
    }
    const auto& event = found->second[k];
    return !event.second && event.first <= set_at;
  }

  const SparseEntry* sparse_maker(const Meta& meta, i64 at) {
    auto known = sparse_made.find(meta.impl);
    if (known != sparse_made.end()) return &known->second.second;
    for (size_t i = 0; i < sparse_pending.size(); ++i) {  // built first, read first
      auto [time, dtype, entry] = sparse_pending[i];
      if (time < at && dtype == meta.dtype) {
        sparse_pending.erase(sparse_pending.begin() + i);
        auto& made = sparse_made[meta.impl] = {time, entry};
        return &made.second;
      }
    }
    return nullptr;
  }

  void sparse_add(const Node& node, const std::unordered_set<i64>& own, const SparseEntry& entry) {
    std::unordered_set<i64> inner;
    for (auto& r : node.inner_reads) if (!r.ptr && is_sparse(r.meta) && !own.count(r.meta.impl)) inner.insert(r.meta.impl);
    for (i64 impl : inner) sparse_made[impl] = {node.start, entry};
    if (!node.sparse_built.empty() && inner.empty()) {
      for (i64 dtype : node.sparse_built) sparse_pending.emplace_back(node.start, dtype, entry);
      if (sparse_pending.size() > kMaxPendingSparse)
        sparse_pending.erase(sparse_pending.begin(), sparse_pending.end() - kMaxPendingSparse);
    }
  }

  void end_window(std::unordered_map<i64, StorageWrites>& writes, std::unordered_map<i64, std::vector<i64>>& frees,
                  std::unordered_map<i64, std::vector<std::pair<i64, bool>>>& freed) {
    if (rebound.size() > kMaxRebound) {  // never read: keep the newest
      std::vector<std::pair<i64, i64>> order;
      for (auto& [impl, entry] : rebound) order.emplace_back(entry.order, impl);
      std::sort(order.begin(), order.end());
      for (size_t i = 0; i < order.size() / 2; ++i) rebound.erase(order[i].second);
    }
    carried.clear();
    for (auto& [ptr, history] : writes) {
      auto found = frees.find(ptr);
      if (!freed_between(found == frees.end() ? nullptr : &found->second, history.times.back(), 0, true))
        carried[ptr] = history.entries.back();
    }
    std::unordered_set<i64> kept;
    for (auto& [ptr, entry] : carried) kept.insert(entry.tensor);
    for (auto it = fresh.begin(); it != fresh.end();) it = kept.count(*it) ? std::next(it) : fresh.erase(it);
    std::unordered_map<i64, i64> still;
    for (auto& [ptr, at] : unwritten) if (!freed.count(ptr) && !carried.count(ptr)) still[ptr] = at;
    for (auto& [ptr, list] : freed) if (!list.back().second && !carried.count(ptr)) still[ptr] = list.back().first;
    if (still.size() > kMaxRebound) {  // keep the newest
      std::vector<std::pair<i64, i64>> order;
      for (auto& [ptr, at] : still) order.emplace_back(at, ptr);
      std::sort(order.begin(), order.end());
      for (size_t i = 0; i < order.size() / 2; ++i) still.erase(order[i].second);
    }
    unwritten = std::move(still);
    if (seq_scope.size() > kMaxSeqScopes) {  // a long run: keep the newest forward scopes
      std::vector<i64> seqs;
      for (auto& [seq, scope] : seq_scope) seqs.push_back(seq);
      std::sort(seqs.begin(), seqs.end());
      for (size_t i = 0; i < seqs.size() / 2; ++i) seq_scope.erase(seqs[i]);
    }
  }

  // Local ids to global ones (Python took them from the session), everywhere they outlive the window.
  static i64 patched(i64 id, const i64* global) { return id < 0 ? global[-id - 1] : id; }

  void number(const i64* node_global, const i64* tensor_global) {
    auto fix = [&](Entry& e) { e.node = patched(e.node, node_global); e.tensor = patched(e.tensor, tensor_global); };
    for (auto& [ptr, entry] : carried) fix(entry);
    for (auto& [impl, bound] : rebound) fix(bound.entry);
    std::unordered_set<i64> numbered;
    for (i64 id : fresh) numbered.insert(patched(id, tensor_global));
    fresh = std::move(numbered);
    auto fix_sparse = [&](SparseEntry& e) { e.node = patched(e.node, node_global); e.tensor = patched(e.tensor, tensor_global); };
    for (auto& [impl, made] : sparse_made) fix_sparse(made.second);
    for (auto& pending : sparse_pending) fix_sparse(std::get<2>(pending));
  }

  void emit(const i64* node_global, const i64* tensor_global, const i64* annotation_global, const i64* string_sid,
            const i64* device_index) {
    std::map<std::pair<i64, i64>, std::vector<const Event*>> streams;
    for (auto& event : events) streams[{event.cls, event.tid}].push_back(&event);
    stream_keys.clear();
    stream_ts.clear();
    stream_records.clear();
    for (auto& [key, list] : streams) {
      std::stable_sort(list.begin(), list.end(), [](const Event* a, const Event* b) { return a->ts < b->ts; });
      const ClassLayout& layout = layouts.at(key.first);
      std::string records(list.size() * layout.record_size, '\0');
      std::vector<i64> ts;
      ts.reserve(list.size());
      char* out = records.data();
      for (const Event* event : list) {
        uint16_t cls = static_cast<uint16_t>(event->cls);
        std::memcpy(out, &cls, 2);
        std::memcpy(out + 2, &event->ts, 8);
        out += 10;
        ts.push_back(event->ts);
        for (size_t i = 0; i < layout.sizes.size(); ++i) {
          i64 value = event->values[i];
          switch (layout.kinds[i]) {
            case kString: value = string_sid[value]; break;
            case kDevice: value = device_index[value]; break;
            case kNodeId: value = patched(value, node_global); break;
            case kTensorId: value = patched(value, tensor_global); break;
            case kAnnotationId: value = patched(value, annotation_global); break;
            default: break;
          }
          std::memcpy(out, &value, layout.sizes[i]);  // little-endian: the low bytes
          out += layout.sizes[i];
        }
      }
      stream_keys.push_back(key);
      stream_ts.push_back(std::move(ts));
      stream_records.push_back(std::move(records));
    }
    number(node_global, tensor_global);
    events.clear();
  }
};

}  // namespace

extern "C" {

// Each call returns 0, or -1 after a C++ exception (the window is then lost, never the program).
#define DFC_GUARD(...) try { __VA_ARGS__; return 0; } catch (...) { return -1; }

void* dfc_convert_new() { return new (std::nothrow) Converter(); }
void dfc_convert_free(void* c) { delete static_cast<Converter*>(c); }

int dfc_convert_class(void* c, int64_t cls, int64_t nfields, const int64_t* sizes, const int64_t* kinds) {
  DFC_GUARD({
    ClassLayout layout;
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

// The next op name (ids in drain order): its text, flags, and the text its flags need.
int dfc_convert_name(void* c, const char* text, int64_t flags, const char* extra, const char* collective) {
  DFC_GUARD({
    auto* conv = static_cast<Converter*>(c);
    NameInfo info{flags, text, extra, -1};
    if (flags & kCollective) info.collective = conv->intern(collective);
    conv->names.push_back(std::move(info));
  })
}

int64_t dfc_convert_names(void* c) { return static_cast<i64>(static_cast<Converter*>(c)->names.size()); }

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
  auto& m = static_cast<Converter*>(c)->missing_written[index];
  out[0] = std::get<0>(m); out[1] = std::get<1>(m); out[2] = std::get<2>(m);
}

int dfc_convert_written(void* c, int64_t op, int64_t overload, int64_t arity, int64_t n, const int64_t* args) {
  DFC_GUARD({ static_cast<Converter*>(c)->written[std::make_tuple(op, overload, arity)].assign(args, args + n); })
}

// The window's events, with local ids. counts: nodes, node ids, tensor ids, annotation ids, edges,
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

// The i-th string used: its handle, earliest definition time, and text (valid until the next write).
const char* dfc_convert_used_string(void* c, int64_t index, int64_t* handle, int64_t* define_at) {
  auto* conv = static_cast<Converter*>(c);
  *handle = conv->used_strings[index];
  *define_at = conv->string_define_at[*handle];
  return conv->strings[*handle].c_str();
}

void dfc_convert_used_device(void* c, int64_t index, int64_t* handle, int64_t* kind, int64_t* device_index) {
  auto* conv = static_cast<Converter*>(c);
  *handle = conv->used_devices[index];
  *kind = conv->device_keys[*handle].first;
  *device_index = conv->device_keys[*handle].second;
}

int64_t dfc_convert_handles(void* c, int64_t which) {
  auto* conv = static_cast<Converter*>(c);
  return which == 0 ? static_cast<i64>(conv->strings.size()) : static_cast<i64>(conv->device_keys.size());
}

// Global ids and the sid and device index of each handle; returns the number of streams.
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

// The i-th stream: class, thread, record count; its timestamps and records (valid until the next emit).
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
