// dfcompass's window converter for the op observer (see window_convert.cpp): its data and state.
//
// Each window holds thousands of ops; what is made per op is kept flat and reused from window to
// window (nodes come from a pool, maps are open-addressed), so a window costs no allocation per op
// once the first ones have sized the buffers.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace dfc {

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

// Field kinds of a record (from tracer/schema.py, given by Python): what emit() patches in.
enum FieldKind : i64 { kPlain = 0, kString = 1, kDevice = 2, kNodeId = 3, kTensorId = 4, kAnnotationId = 5 };
enum Class : i64 { kNodeBegin = 6, kNodeEnd = 7, kTensorEdge = 8, kMemAlloc = 17, kMemFree = 18, kNodeArgs = 19,
                   kAnnotationBegin = 25, kAnnotationEnd = 26, kCollectiveEvent = 28 };

// i64 keys (never INT64_MIN) to values, open-addressed with linear probing; erase shifts back.
template <typename V>
class FlatMap {
 public:
  static constexpr i64 kEmpty = INT64_MIN;
  V* find(i64 key) {
    if (!count_) return nullptr;
    for (size_t at = slot(key);; at = (at + 1) & mask_) {
      if (keys_[at] == key) return &values_[at];
      if (keys_[at] == kEmpty) return nullptr;
    }
  }
  const V* find(i64 key) const { return const_cast<FlatMap*>(this)->find(key); }
  bool contains(i64 key) const { return find(key) != nullptr; }
  // The value of `key`, made with `made` when absent; `added` says which.
  V& get(i64 key, const V& made, bool* added = nullptr) {
    if ((count_ + 1) * 4 > keys_.size() * 3) grow();
    size_t at = slot(key);
    for (; keys_[at] != kEmpty; at = (at + 1) & mask_) {
      if (keys_[at] == key) {
        if (added) *added = false;
        return values_[at];
      }
    }
    keys_[at] = key;
    values_[at] = made;
    ++count_;
    if (added) *added = true;
    return values_[at];
  }
  V& operator[](i64 key) { return get(key, V{}); }
  void set(i64 key, const V& value) { get(key, value) = value; }
  bool erase(i64 key) {
    if (!count_) return false;
    size_t at = slot(key);
    while (keys_[at] != key) {
      if (keys_[at] == kEmpty) return false;
      at = (at + 1) & mask_;
    }
    // Backward-shift: later entries of the probe run move into the hole.
    for (size_t next = (at + 1) & mask_; keys_[next] != kEmpty; next = (next + 1) & mask_) {
      size_t home = slot(keys_[next]);
      if (((next - home) & mask_) >= ((next - at) & mask_)) {
        keys_[at] = keys_[next];
        values_[at] = std::move(values_[next]);
        at = next;
      }
    }
    keys_[at] = kEmpty;
    values_[at] = V{};
    --count_;
    return true;
  }
  void clear() {
    if (count_) {
      std::fill(keys_.begin(), keys_.end(), kEmpty);
      for (auto& value : values_) value = V{};
    }
    count_ = 0;
  }
  size_t size() const { return count_; }
  template <typename F>
  void each(F&& f) {
    for (size_t at = 0; at < keys_.size(); ++at)
      if (keys_[at] != kEmpty) f(keys_[at], values_[at]);
  }

 private:
  size_t slot(i64 key) const { return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL >> 20) & mask_; }
  void grow() {
    std::vector<i64> keys = std::move(keys_);
    std::vector<V> values = std::move(values_);
    size_t capacity = keys.empty() ? 64 : keys.size() * 2;
    keys_.assign(capacity, kEmpty);
    values_.assign(capacity, V{});
    mask_ = capacity - 1;
    count_ = 0;
    for (size_t at = 0; at < keys.size(); ++at)
      if (keys[at] != kEmpty) get(keys[at], values[at]);
  }
  std::vector<i64> keys_;
  std::vector<V> values_;
  size_t mask_ = 0, count_ = 0;
};

// A set of i64 that is a short vector while small (most ops read a few storages).
class SmallSet {
 public:
  bool insert(i64 value) {  // true when new
    if (big_.empty()) {
      for (i64 known : small_) if (known == value) return false;
      small_.push_back(value);
      if (small_.size() > 24) big_.insert(small_.begin(), small_.end());
      return true;
    }
    if (!big_.insert(value).second) return false;
    small_.push_back(value);
    return true;
  }
  bool contains(i64 value) const {
    if (big_.empty()) {
      for (i64 known : small_) if (known == value) return true;
      return false;
    }
    return big_.count(value) > 0;
  }
  void clear() { small_.clear(); big_.clear(); }

 private:
  std::vector<i64> small_;
  std::unordered_set<i64> big_;
};

struct Meta {  // a tensor an op read, as the observer recorded it
  i64 ptr = 0, impl = 0, device = 0;  // device: a device handle
  int32_t dtype = 0, layout = 0, ndim = 0;
  i64 dims[6] = {0};
  std::vector<i64> more;  // the sizes when ndim > 6
  const i64* sizes() const { return ndim > 6 ? more.data() : dims; }
};

// The tensors of an op's inputs, flat: input i's are metas[first[i] .. first[i + 1]).
struct Inputs {
  std::vector<Meta> metas;
  std::vector<int32_t> first{0};
  size_t count() const { return first.size() - 1; }
  const Meta* begin(size_t i) const { return metas.data() + first[i]; }
  const Meta* end(size_t i) const { return metas.data() + first[i + 1]; }
  bool empty(size_t i) const { return first[i] == first[i + 1]; }
  void clear() { metas.clear(); first.assign(1, 0); }
};

inline bool is_sparse(const Meta& meta) {  // sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc
  return !meta.ptr && (meta.layout == 1 || meta.layout == 2 || meta.layout == 4 || meta.layout == 5 ||
                       meta.layout == 6);
}

// An id is global (>= 0) once Python numbered it, local to the window being written (< 0) before.
struct Entry { i64 node = 0, device = 0, tensor = 0; };
struct SparseEntry { i64 node = 0, device = 0, tensor = 0, bytes = 0; };
struct Allocation { i64 id = 0, net = 0, ptr = 0, at = 0; };
struct Read { i64 at = 0; Meta meta; };

struct Node {
  i64 start = 0, end = 0, tid = 0, op = -1, overload = -1, label = 0, step = kNoStep, device = 0;
  uint64_t generation = 0;  // bumped when the node is reused: a context of its old life no longer finds it
  bool compiled = false;
  bool predefined = false;  // its strings were defined in the window where it began (still open then)
  Inputs inputs;
  std::vector<Allocation> allocations;  // by allocation id, in first-seen order
  std::vector<Read> inner_reads;
  SmallSet read_storages;
  std::vector<int32_t> sparse_built;  // value dtypes
};

struct Context {
  i64 scope = -1, backward = -1;  // string handles, -1: ""
  Node* node = nullptr;
  uint64_t generation = 0;  // the node's, when this context was made
  bool skip = false;
  std::shared_ptr<const Inputs> compiled_inputs;  // a CompiledFunction's inputs (rare)
  // The node this op is inside, unless it ended windows ago (an op whose end was never seen).
  Node* live_node() const { return node && node->generation == generation ? node : nullptr; }
};

struct NameInfo {
  i64 flags = 0;
  std::string text;
  std::string extra;    // module mark: the scope; compiled call: the graph's key
  i64 collective = -1;  // string handle of the collective kind
  i64 handle = -1;      // string handle of the text
};

struct Event {  // one record before packing: ids, strings and devices still to patch
  i64 cls, tid, ts;
  i64 values[8];
};

struct ClassLayout { std::vector<i64> sizes, kinds; size_t record_size = 10; };

// A storage's writes in time order (most have one or two).
struct StorageWrites {
  std::vector<i64> times;
  std::vector<Entry> entries;
  const Entry* last_at(i64 at, i64* when) const;
  void record(i64 at, const Entry& entry);
};

// A window's memory events by storage address: frees (any event ends what was written before)
// and, per address, (time, freed) in order.
struct MemoryIndex {
  std::vector<std::tuple<i64, i64, bool>> rows;  // (ptr, time, freed), sorted
  FlatMap<std::pair<int32_t, int32_t>> ranges;    // ptr -> [first, end) in rows
  void build(const std::vector<std::tuple<i64, i64, i64, i64, i64, i64>>& memory);
  std::pair<const std::tuple<i64, i64, bool>*, const std::tuple<i64, i64, bool>*> of(i64 ptr) const;
  bool freed_between(i64 ptr, i64 after, i64 before, bool to_end = false) const;
};

class Converter {
 public:
  Converter();
  ~Converter();
  // ---- set-up, by Python
  std::vector<NameInfo> names;
  std::vector<i64> itemsize;             // by dtype code
  std::vector<std::string> dtype_names;  // by dtype code, as node_args shows them
  std::unordered_map<i64, ClassLayout> layouts;
  std::unordered_map<std::string, std::vector<i64>> written;  // (op, overload, arity) -> written args

  // ---- strings and devices: handles
  std::vector<std::string> strings;
  std::unordered_map<std::string, i64> string_ids;
  std::vector<std::pair<i64, i64>> device_keys;  // handle -> (kind, index)
  FlatMap<i64> device_ids;
  i64 intern(const std::string& text);
  i64 scope_handle(const std::string& text) { return text.empty() ? -1 : intern(text); }
  i64 device(i64 kind, i64 index);
  const std::string& text(i64 handle) const;

  // ---- what outlives a window
  FlatMap<Context> contexts;
  FlatMap<Node*> open_nodes;
  // key -> (begin, tid, name, id): the id once its begin is written (a cut inside it), else -1
  std::unordered_map<i64, std::tuple<i64, i64, i64, i64>> open_annotations;
  FlatMap<i64> seq_scope;
  FlatMap<Entry> carried;
  std::unordered_set<i64> fresh;
  std::unordered_map<i64, std::pair<i64, SparseEntry>> sparse_made;  // impl -> (time, entry)
  std::vector<std::tuple<i64, i64, SparseEntry>> sparse_pending;      // (time, dtype, entry)
  struct Rebound { i64 at; Entry entry; i64 order; };
  std::unordered_map<i64, Rebound> rebound;  // TensorImpl address -> the set_ that gave it a storage
  i64 rebound_order = 0;
  std::unordered_map<i64, i64> unwritten;
  i64 collectives = 0;

  // ---- this window
  std::vector<Node*> nodes, spare_nodes;
  std::vector<std::tuple<i64, i64, i64, i64, i64, i64>> memory;  // at, tid, device, ptr, size, total
  std::vector<std::tuple<i64, i64, i64, i64>> annotations;       // begin, end, tid, name
  std::vector<std::tuple<i64, i64, i64>> annotation_ends;        // end, tid, id: begun in an earlier window
  std::vector<std::pair<i64, i64>> annotations_begun;           // key, local id: begun here, still open
  std::vector<std::tuple<i64, i64, i64>> missing_written;        // (op, overload, arity) to ask Python for
  std::vector<Event> events;
  i64 node_ids = 0, tensor_ids = 0, annotation_ids = 0, edges = 0;
  std::vector<i64> used_strings, used_devices;  // in first-use order
  FlatMap<i64> string_define_at;                 // handle -> earliest definition time
  FlatMap<i64> string_define_tid;                // handle -> the thread of that use (its string stream)
  FlatMap<int32_t> devices_used;
  i64 floor_ts = 0, offset = 0;
  std::vector<std::pair<i64, i64>> stream_keys;  // emit(): per stream (class, tid), its times and records
  std::vector<std::vector<i64>> stream_ts;
  std::vector<std::string> stream_records;

  // window_walk.cpp: ObservedWalk.collect
  void collect(const i64* begins, i64 nbegins, const i64* ends, i64 nends, const i64* values, const i64* sizes,
               const i64* allocs, i64 nallocs);
  void number_steps(const i64* steps, i64 nsteps);
  i64 find_missing_written();
  static std::string written_key(i64 op, i64 overload, i64 arity);

  // window_edges.cpp: _WindowWriter.write_nodes and write_memory, then the annotations
  void write(i64 rank, i64 world, bool memory_events);

  // window_convert.cpp: the records, patched and packed
  void add(i64 cls, i64 tid, i64 epoch_ns, std::initializer_list<i64> values);
  void emit(const i64* node_global, const i64* tensor_global, const i64* annotation_global, const i64* string_sid,
            const i64* device_index);

 private:
  Node* new_node();
  void recycle(Node* node);
  void read_meta(const i64* values, const i64* sizes, i64 row, Meta* out);
  void read_inputs(const i64* values, const i64* sizes, i64 first, i64 count, i64 arity, SmallSet* read,
                   Inputs* out);
  void inner(Node& node, const Context& context, const i64* values, const i64* sizes, i64 first, i64 count,
             i64 start, const NameInfo& name, i64 sequence);
  Context above(const Context& context, i64 key, i64 tid, i64 start, i64 name_id, i64 overload, i64 scope_kind,
                i64 sequence, const i64* values, const i64* sizes, i64 first, i64 count, i64 arity);
  void seq_scope_default(i64 sequence, i64 scope);
  void use_string(i64 handle, i64 define_at, i64 tid);
  i64 nbytes(const Meta& meta) const;
  std::pair<i64, i64> args_text(const Inputs& inputs);
  void write_node(Node& node, i64 rank, i64 world, i64 empty);
  bool bound_by_set(i64 ptr, i64 at, i64 set_at) const;
  const SparseEntry* sparse_maker(const Meta& meta, i64 at);
  void sparse_add(const Node& node, const SmallSet& own, const SparseEntry& entry);
  void end_window();
  void write_open(i64 cpu);
  void number(const i64* node_global, const i64* tensor_global, const i64* annotation_global);

  // write()'s per-window state
  FlatMap<int32_t> writes_at;          // storage ptr -> index in writes
  std::vector<StorageWrites> writes;   // reused from window to window
  size_t writes_used = 0;
  MemoryIndex memory_index;
  StorageWrites& writes_of(i64 ptr);
  const StorageWrites* find_writes(i64 ptr) const;
  std::unordered_map<std::string, std::pair<i64, i64>> args_cache;  // input signature -> (shapes, dtypes)
  std::string signature;  // scratch
  std::vector<std::tuple<i64, i64, int32_t>> arg_rows;  // scratch: (arg, pos, value row)
};

}  // namespace dfc
