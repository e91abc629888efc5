// A window's nodes into records with their exact edges: tracer.torch_convert._WindowWriter.write_nodes
// and write_memory (then the annotations), rule for rule; the bookkeeping of tracer/torch_edges.py.
//
// A read links to the last write of its storage unless the storage was freed in between; a write is
// an allocation the op outlives or an argument its schema writes; lift_fresh takes buffers made
// outside any op; sparse tensors are known by their TensorImpl; a storage given by set_ links to it.
// No CUDA graph replays: the op observer records the CPU only.
#include <algorithm>
#include <cstring>

#include "window_convert.h"

namespace dfc {

const Entry* StorageWrites::last_at(i64 at, i64* when) const {
  size_t k = std::upper_bound(times.begin(), times.end(), at) - times.begin();
  if (!k) return nullptr;
  *when = times[k - 1];
  return &entries[k - 1];
}

void StorageWrites::record(i64 at, const Entry& entry) {
  size_t k = std::upper_bound(times.begin(), times.end(), at) - times.begin();  // almost always the end
  times.insert(times.begin() + k, at);
  entries.insert(entries.begin() + k, entry);
}

void MemoryIndex::build(const std::vector<std::tuple<i64, i64, i64, i64, i64, i64>>& memory) {
  rows.clear();
  ranges.clear();
  for (auto& [at, tid, dev, ptr, size, total] : memory)
    if (size) rows.emplace_back(ptr, at, size < 0);
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size();) {
    size_t j = i;
    while (j < rows.size() && std::get<0>(rows[j]) == std::get<0>(rows[i])) ++j;
    ranges.set(std::get<0>(rows[i]), {static_cast<int32_t>(i), static_cast<int32_t>(j)});
    i = j;
  }
}

std::pair<const std::tuple<i64, i64, bool>*, const std::tuple<i64, i64, bool>*> MemoryIndex::of(i64 ptr) const {
  const auto* range = ranges.find(ptr);
  if (!range) return {nullptr, nullptr};
  return {rows.data() + range->first, rows.data() + range->second};
}

// Whether the storage at `ptr` was freed or allocated again in (after, before] (to_end: after `after`).
bool MemoryIndex::freed_between(i64 ptr, i64 after, i64 before, bool to_end) const {
  auto [first, end] = of(ptr);
  auto at = std::upper_bound(first, end, after, [](i64 t, const auto& row) { return t < std::get<1>(row); });
  return at != end && (to_end || std::get<1>(*at) <= before);
}

StorageWrites& Converter::writes_of(i64 ptr) {
  bool added = false;
  int32_t& index = writes_at.get(ptr, 0, &added);
  if (added) {
    if (writes_used == writes.size()) writes.emplace_back();
    index = static_cast<int32_t>(writes_used++);
    writes[index].times.clear();
    writes[index].entries.clear();
  }
  return writes[index];
}

const StorageWrites* Converter::find_writes(i64 ptr) const {
  const int32_t* index = writes_at.find(ptr);
  return index ? &writes[*index] : nullptr;
}

i64 Converter::nbytes(const Meta& meta) const {
  i64 count = 1;
  const i64* sizes = meta.sizes();
  for (int32_t d = 0; d < meta.ndim; ++d) count *= sizes[d];
  return count * itemsize[meta.dtype];
}

// node_args' texts (shapes and dtypes of each input's first tensor), cached by the inputs' signature.
std::pair<i64, i64> Converter::args_text(const Inputs& inputs) {
  signature.clear();
  for (size_t i = 0; i < inputs.count(); ++i) {
    i64 head[2] = {-1, -1};
    if (!inputs.empty(i)) head[0] = inputs.begin(i)->ndim, head[1] = inputs.begin(i)->dtype;
    signature.append(reinterpret_cast<const char*>(head), sizeof head);
    if (!inputs.empty(i))
      signature.append(reinterpret_cast<const char*>(inputs.begin(i)->sizes()), sizeof(i64) * inputs.begin(i)->ndim);
  }
  auto found = args_cache.find(signature);
  if (found != args_cache.end()) return found->second;
  std::string shapes = "[", dtypes;
  for (size_t i = 0; i < inputs.count(); ++i) {
    if (i) shapes += ", ", dtypes += ",";
    shapes += "[";
    if (!inputs.empty(i)) {
      const Meta& first = *inputs.begin(i);
      for (int32_t d = 0; d < first.ndim; ++d) shapes += (d ? ", " : "") + std::to_string(first.sizes()[d]);
      dtypes += dtype_names[first.dtype];
    }
    shapes += "]";
  }
  shapes += "]";
  auto texts = std::make_pair(intern(shapes), intern(dtypes));
  if (args_cache.size() < 100000) args_cache.emplace(signature, texts);
  return texts;
}

void Converter::write(i64 rank, i64 world, bool memory_events) {
  events.clear();
  used_strings.clear();
  used_devices.clear();
  string_define_at.clear();
  string_define_tid.clear();
  devices_used.clear();
  node_ids = tensor_ids = annotation_ids = edges = 0;
  writes_at.clear();
  writes_used = 0;
  memory_index.build(memory);
  carried.each([&](i64 ptr, Entry& entry) {
    StorageWrites& history = writes_of(ptr);
    history.times.push_back(-1);  // written before this window
    history.entries.push_back(entry);
  });
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) {
    return a->start != b->start ? a->start < b->start : a->tid < b->tid;
  });
  i64 empty = intern("");
  for (Node* node : nodes) write_node(*node, rank, world, empty);
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
  write_open(cpu);
  end_window();
}

// What is still open at the cut: annotations begin in this window (their ids kept for their ends),
// nodes have their strings defined at their start. Written with the window where they end, both
// would go back in time in their streams (tracer.torch_source._write_annotations, predefine).
void Converter::write_open(i64 cpu) {
  for (auto& [end, tid, id] : annotation_ends) add(kAnnotationEnd, tid, end, {cpu, tid, id});
  std::vector<std::tuple<i64, i64>> begun;  // (begin, key)
  for (auto& [key, open] : open_annotations)
    if (std::get<3>(open) < 0) begun.emplace_back(std::get<0>(open), key);
  std::sort(begun.begin(), begun.end());
  annotations_begun.clear();
  for (auto& [begin, key] : begun) {
    auto& [start, tid, name, id] = open_annotations[key];
    i64 annotation = -(++annotation_ids);
    add(kAnnotationBegin, tid, start, {cpu, tid, annotation, name});
    annotations_begun.emplace_back(key, annotation);
  }
  std::vector<Node*> open;
  open_nodes.each([&](i64, Node*& node) { if (!node->predefined) open.push_back(node); });
  std::stable_sort(open.begin(), open.end(), [](const Node* a, const Node* b) {
    return a->start != b->start ? a->start < b->start : a->tid < b->tid;
  });
  for (Node* node : open) {
    i64 define_at = std::max(std::max(node->start - offset, floor_ts) - 1, floor_ts);
    auto [shapes, dtypes] = args_text(node->inputs);
    i64 op = node->compiled ? intern("inductor::compiled_graph") : names[node->op].handle;
    for (i64 handle : {op, node->label, shapes, dtypes}) use_string(handle, define_at, node->tid);
    node->predefined = true;
  }
}

void Converter::write_node(Node& node, i64 rank, i64 world, i64 empty) {
  i64 tid = node.tid, start = node.start;
  const Inputs& inputs = node.inputs;
  i64 dev = node.device;
  for (size_t i = 0; i < inputs.count(); ++i)
    if (!inputs.empty(i)) { dev = inputs.begin(i)->device; break; }
  i64 node_id = -(++node_ids);
  i64 op = node.compiled ? intern("inductor::compiled_graph") : names[node.op].handle;
  add(kNodeBegin, tid, start, {node_id, op, node.label, dev, tid, node.step});
  auto [shapes, dtypes] = args_text(inputs);
  add(kNodeArgs, tid, start, {node_id, shapes, dtypes});
  const NameInfo* name = node.compiled ? nullptr : &names[node.op];
  i64 flags = name ? name->flags : 0;
  if (flags & kCollective) {
    i64 payload = 0;
    if (inputs.count()) for (const Meta* m = inputs.begin(0); m != inputs.end(0); ++m) payload += nbytes(*m);
    add(kCollectiveEvent, tid, start, {node_id, rank, name->collective, empty, world, collectives, payload});
    ++collectives;
  }
  // A buffer made outside any op enters the graph at the op that takes it (_made_outside_ops).
  std::vector<i64> outside;
  if ((flags & kFreshInput) && inputs.count()) {
    for (const Meta* m = inputs.begin(0); m != inputs.end(0); ++m) {
      if (!m->ptr) continue;
      const StorageWrites* history = find_writes(m->ptr);
      i64 when = 0;
      const Entry* found = history ? history->last_at(start, &when) : nullptr;
      if (!found || fresh.count(found->tensor) || memory_index.freed_between(m->ptr, when, start))
        outside.push_back(m->ptr);
    }
  }
  SmallSet seen, own_sparse;
  for (i64 ptr : outside) seen.insert(ptr);
  for (const Meta& m : inputs.metas) if (!m.ptr && is_sparse(m)) own_sparse.insert(m.impl);
  // Its own inputs, read at its start; then its inner ops' inputs, read when those run.
  size_t own = inputs.metas.size();
  for (size_t r = 0; r < own + node.inner_reads.size(); ++r) {
    const Meta& m = r < own ? inputs.metas[r] : node.inner_reads[r - own].meta;
    i64 at = r < own ? start : node.inner_reads[r - own].at, ptr = m.ptr;
    if (!ptr && own_sparse.contains(m.impl) && !seen.contains(-m.impl)) {
      seen.insert(-m.impl);
      if (const SparseEntry* made = sparse_maker(m, at)) {
        add(kTensorEdge, tid, start, {made->node, node_id, made->tensor, made->bytes, made->device, dev});
        ++edges;
      }
      continue;
    }
    if (!ptr || !seen.insert(ptr)) continue;
    const StorageWrites* history = find_writes(ptr);
    i64 when = 0;
    const Entry* found = history ? history->last_at(at, &when) : nullptr;
    Entry producer;
    if (!found || memory_index.freed_between(ptr, when, at)) {
      auto bound = rebound.find(m.impl);  // no replay: the observer records the CPU only
      if (bound == rebound.end()) continue;
      Rebound taken = bound->second;
      rebound.erase(bound);
      if (taken.at > at || !bound_by_set(ptr, at, taken.at)) continue;
      writes_of(ptr).record(taken.at, taken.entry);  // the storage it was given is now known
      producer = taken.entry;
    } else {
      producer = *found;
    }
    add(kTensorEdge, tid, start, {producer.node, node_id, producer.tensor, nbytes(m), producer.device, dev});
    ++edges;
  }
  for (i64 ptr : outside) {
    Entry entry{node_id, dev, -(++tensor_ids)};
    fresh.insert(entry.tensor);
    writes_of(ptr).record(start, entry);
  }
  for (const Allocation& allocation : node.allocations)  // allocated here and still alive: an output
    if (allocation.net > 0 && allocation.ptr) writes_of(allocation.ptr).record(allocation.at, Entry{node_id, dev, -(++tensor_ids)});
  bool inner_sparse = false;
  for (const Read& r : node.inner_reads) if (!r.meta.ptr && is_sparse(r.meta)) { inner_sparse = true; break; }
  if (!node.sparse_built.empty() || inner_sparse) {
    i64 kept = 0;  // indices + values
    for (const Allocation& allocation : node.allocations) if (allocation.net > 0) kept += allocation.net;
    sparse_add(node, own_sparse, SparseEntry{node_id, dev, -(++tensor_ids), kept});
  }
  if (name) {
    auto found = written.find(written_key(node.op, node.overload, static_cast<i64>(inputs.count())));
    if (found != written.end()) {
      for (i64 index : found->second) {
        if (index >= static_cast<i64>(inputs.count())) continue;
        for (const Meta* m = inputs.begin(index); m != inputs.end(index); ++m) {
          if (m->ptr) {  // written in place: this op holds the new value
            writes_of(m->ptr).record(start, Entry{node_id, dev, -(++tensor_ids)});
          } else if (flags & kSetStorage) {  // given a storage (torch.load rebuilds parameters so)
            Entry entry{node_id, dev, -(++tensor_ids)};
            auto old = rebound.find(m->impl);
            i64 order = old != rebound.end() ? old->second.order : rebound_order++;
            rebound[m->impl] = Rebound{start, entry, order};
          }
        }
      }
    }
  }
  add(kNodeEnd, tid, node.end, {node_id, dev, tid});
}

// Whether a read at `at` of storage `ptr`, which no op wrote, may be of the storage that a set_ at
// `set_at` bound: allocated before the set_ and neither freed nor allocated again since.
bool Converter::bound_by_set(i64 ptr, i64 at, i64 set_at) const {
  auto [first, end] = memory_index.of(ptr);
  auto upto = std::upper_bound(first, end, at, [](i64 t, const auto& row) { return t < std::get<1>(row); });
  if (upto == first) {  // no memory event here before the read: alive since an earlier window
    auto allocated = unwritten.find(ptr);
    return allocated != unwritten.end() && allocated->second <= set_at;
  }
  const auto& last = *(upto - 1);
  return !std::get<2>(last) && std::get<1>(last) <= set_at;
}

const SparseEntry* Converter::sparse_maker(const Meta& meta, i64 at) {
  auto known = sparse_made.find(meta.impl);
  if (known != sparse_made.end()) return &known->second.second;
  for (size_t i = 0; i < sparse_pending.size(); ++i) {  // built first, read first
    auto [time, dtype, entry] = sparse_pending[i];
    if (time < at && dtype == meta.dtype) {
      sparse_pending.erase(sparse_pending.begin() + static_cast<long>(i));
      auto& made = sparse_made[meta.impl] = {time, entry};
      return &made.second;
    }
  }
  return nullptr;
}

void Converter::sparse_add(const Node& node, const SmallSet& own, const SparseEntry& entry) {
  std::unordered_set<i64> inner;
  for (const Read& r : node.inner_reads)
    if (!r.meta.ptr && is_sparse(r.meta) && !own.contains(r.meta.impl)) inner.insert(r.meta.impl);
  for (i64 impl : inner) sparse_made[impl] = {node.start, entry};
  if (!node.sparse_built.empty() && inner.empty()) {
    for (int32_t dtype : node.sparse_built) sparse_pending.emplace_back(node.start, dtype, entry);
    if (sparse_pending.size() > kMaxPendingSparse)
      sparse_pending.erase(sparse_pending.begin(), sparse_pending.end() - static_cast<long>(kMaxPendingSparse));
  }
}

// What outlives the window: each storage's last writer unless freed since, the buffers made outside
// ops still alive, the storages alive and unwritten (a later set_ may have bound them).
void Converter::end_window() {
  if (rebound.size() > kMaxRebound) {  // never read: keep the newest
    std::vector<std::pair<i64, i64>> order;
    for (auto& [impl, entry] : rebound) order.emplace_back(entry.order, impl);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() / 2; ++i) rebound.erase(order[i].second);
  }
  carried.clear();
  writes_at.each([&](i64 ptr, int32_t& index) {
    const StorageWrites& history = writes[index];
    if (!memory_index.freed_between(ptr, history.times.back(), 0, true)) carried.set(ptr, history.entries.back());
  });
  std::unordered_set<i64> kept;
  carried.each([&](i64, Entry& entry) { kept.insert(entry.tensor); });
  for (auto it = fresh.begin(); it != fresh.end();) it = kept.count(*it) ? std::next(it) : fresh.erase(it);
  std::unordered_map<i64, i64> still;
  for (auto& [ptr, at] : unwritten)
    if (!memory_index.ranges.contains(ptr) && !carried.contains(ptr)) still[ptr] = at;
  for (size_t i = 0; i < memory_index.rows.size(); ++i) {  // the last event of each address
    const auto& row = memory_index.rows[i];
    bool last = i + 1 == memory_index.rows.size() || std::get<0>(memory_index.rows[i + 1]) != std::get<0>(row);
    if (last && !std::get<2>(row) && !carried.contains(std::get<0>(row))) still[std::get<0>(row)] = std::get<1>(row);
  }
  if (still.size() > kMaxRebound) {  // keep the newest
    std::vector<std::pair<i64, i64>> order;
    for (auto& [ptr, at] : still) order.emplace_back(at, ptr);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() / 2; ++i) still.erase(order[i].second);
  }
  unwritten = std::move(still);
  if (seq_scope.size() > kMaxSeqScopes) {  // a long run: keep the newest forward scopes
    std::vector<i64> seqs;
    seq_scope.each([&](i64 seq, i64&) { seqs.push_back(seq); });
    std::sort(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size() / 2; ++i) seq_scope.erase(seqs[i]);
  }
}

}  // namespace dfc
