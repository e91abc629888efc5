// The walk of a drained window into nodes: tracer.torch_observer.ObservedWalk.collect, rule for rule.
//
// Ops above the nodes give scopes (module marks, the user's record functions, backward functions,
// compiled functions), the outermost aten/c10d/gloo/nccl ops are nodes, and the ops inside a node
// give its inner reads (the first read of each storage) and its allocations. Ops still open at the
// cut keep their context for the window where they end.
#include <algorithm>

#include "window_convert.h"

namespace dfc {

void Converter::read_meta(const i64* values, const i64* sizes, i64 row, Meta* out) {
  const i64* v = values + row * kValue;
  out->ptr = v[4];
  out->impl = v[5];
  out->dtype = static_cast<int32_t>((v[6] >= 0 && v[6] < static_cast<i64>(itemsize.size())) ? v[6] : 0);
  out->device = device(v[7], v[8]);
  out->layout = static_cast<int32_t>(v[9]);
  out->ndim = static_cast<int32_t>(v[10]);
  const i64* dims = sizes + v[11];
  if (out->ndim > 6) {
    out->more.assign(dims, dims + out->ndim);
  } else {
    out->more.clear();
    std::copy(dims, dims + out->ndim, out->dims);
  }
}

// An op's inputs as the profiler lists them (ObservedWalk.collect's inputs()): per argument one
// tensor, or a list by position; a later single tensor replaces a list, a later list a tensor.
// Only the tensors are kept, in argument then position order. `read` gets every storage given.
void Converter::read_inputs(const i64* values, const i64* sizes, i64 first, i64 count, i64 arity, SmallSet* read,
                            Inputs* out) {
  out->clear();
  arg_rows.clear();
  i64 args = std::max<i64>(arity, 0);
  bool ordered = true;  // the usual case: each argument once, in order, single tensors
  for (i64 at = first; at < first + count; ++at) {
    const i64* v = values + at * kValue;
    if (read) read->insert(v[4]);
    args = std::max(args, v[2] + 1);
    if (!arg_rows.empty() && (v[3] >= 0 || v[2] <= std::get<0>(arg_rows.back()))) ordered = false;
    arg_rows.emplace_back(v[2], v[3], static_cast<int32_t>(at));
  }
  if (!ordered) {
    // Keep, per argument, what the last single tensor or the list after it left; a list by position.
    std::vector<std::tuple<i64, i64, int32_t>> kept;
    for (size_t i = 0; i < arg_rows.size(); ++i) {
      auto [arg, pos, row] = arg_rows[i];
      if (pos < 0) {
        kept.erase(std::remove_if(kept.begin(), kept.end(), [arg = arg](auto& k) { return std::get<0>(k) == arg; }),
                   kept.end());
      } else {
        kept.erase(std::remove_if(kept.begin(), kept.end(), [arg = arg, pos = pos](auto& k) {
                     return std::get<0>(k) == arg && (std::get<1>(k) < 0 || std::get<1>(k) == pos);
                   }), kept.end());
      }
      kept.emplace_back(arg, pos, row);
    }
    std::stable_sort(kept.begin(), kept.end(), [](auto& a, auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
    });
    arg_rows.swap(kept);
  }
  out->first.assign(1, 0);
  size_t r = 0;
  for (i64 arg = 0; arg < args; ++arg) {
    for (; r < arg_rows.size() && std::get<0>(arg_rows[r]) == arg; ++r) {
      out->metas.emplace_back();
      read_meta(values, sizes, std::get<2>(arg_rows[r]), &out->metas.back());
    }
    out->first.push_back(static_cast<int32_t>(out->metas.size()));
  }
}

void Converter::seq_scope_default(i64 sequence, i64 scope) {
  if (sequence >= 0 && scope >= 0) seq_scope.get(sequence, scope);
}

Node* Converter::new_node() {
  if (spare_nodes.empty()) return new Node();
  Node* node = spare_nodes.back();
  spare_nodes.pop_back();
  return node;
}

void Converter::recycle(Node* node) {
  ++node->generation;
  node->compiled = false;
  node->predefined = false;
  node->step = kNoStep;
  node->inputs.clear();
  node->allocations.clear();
  node->inner_reads.clear();
  node->read_storages.clear();
  node->sparse_built.clear();
  spare_nodes.push_back(node);
}

void Converter::collect(const i64* begins, i64 nbegins, const i64* ends, i64 nends, const i64* values,
                        const i64* sizes, const i64* allocs, i64 nallocs) {
  for (Node* node : nodes) recycle(node);
  nodes.clear();
  memory.clear();
  annotations.clear();
  annotation_ends.clear();
  const Context root;
  for (i64 r = 0; r < nbegins; ++r) {
    const i64* b = begins + r * kBegin;
    i64 tid = b[0], serial = b[1], parent = b[2], start = b[4], name_id = b[5], overload = b[6];
    i64 scope_kind = b[7], sequence = b[8], arity = b[9], first = b[10], count = b[11];
    i64 key = (tid << 40) | serial;
    const Context* found = parent >= 0 ? contexts.find((tid << 40) | parent) : nullptr;
    const Context& context = found ? *found : root;
    const NameInfo& name = names.at(name_id);
    if (context.skip || context.node) {
      Node* node = context.live_node();
      if (node && !context.skip) inner(*node, context, values, sizes, first, count, start, name, sequence);
      Context copy = context;  // the reference may move when the map grows
      contexts.set(key, copy);
      continue;
    }
    Context made = above(context, key, tid, start, name_id, overload, scope_kind, sequence, values, sizes, first,
                         count, arity);
    contexts.set(key, made);
  }
  for (i64 r = 0; r < nallocs; ++r) {
    const i64* a = allocs + r * kAlloc;
    i64 tid = a[0], at = a[1], ptr = a[2], size = a[3], total = a[4], innermost = a[7], allocation = a[8];
    i64 dev = device(a[5], a[6]);
    const Context* owner = innermost >= 0 ? contexts.find((tid << 40) | innermost) : nullptr;
    if (owner && owner->skip) continue;  // compile time, as the profiler's walk: not a step's memory
    memory.emplace_back(at, tid, dev, ptr, size, total);
    if (!owner || !owner->live_node() || allocation < 0) continue;
    Node& node = *owner->live_node();
    Allocation* entry = nullptr;
    for (auto& known : node.allocations) if (known.id == allocation) { entry = &known; break; }
    if (!entry) {
      node.allocations.push_back(Allocation{allocation, 0, ptr, 0});
      entry = &node.allocations.back();
    }
    entry->net += size;
    if (size > 0) {
      entry->at = at;  // when: a buffer freed earlier in the op may have had this address
      node.device = dev;
    }
  }
  for (i64 r = 0; r < nends; ++r) {
    const i64* e = ends + r * kEnd;
    i64 key = (e[0] << 40) | e[1];
    contexts.erase(key);
    if (Node** node = open_nodes.find(key)) {
      (*node)->end = e[2];
      nodes.push_back(*node);
      open_nodes.erase(key);
    }
    if (!open_annotations.empty()) {
      auto annotation = open_annotations.find(key);
      if (annotation != open_annotations.end()) {
        auto [begin, tid, name, id] = annotation->second;
        if (id < 0) annotations.emplace_back(begin, e[2], tid, name);
        else annotation_ends.emplace_back(e[2], tid, id);  // its begin was written when a window was cut inside it
        open_annotations.erase(annotation);
      }
    }
  }
}

void Converter::inner(Node& node, const Context& context, const i64* values, const i64* sizes, i64 first, i64 count,
                      i64 start, const NameInfo& name, i64 sequence) {
  if (context.backward < 0) seq_scope_default(sequence, context.scope);
  if (!count) return;
  if (name.flags & kSparseBuilder) {  // the values tensor comes last
    Meta values_tensor;
    read_meta(values, sizes, first + count - 1, &values_tensor);
    node.sparse_built.push_back(values_tensor.dtype);
  }
  for (i64 at = first; at < first + count; ++at) {
    i64 ptr = values[at * kValue + 4];
    if (ptr && !node.read_storages.insert(ptr)) continue;  // only a storage's first read counts
    node.inner_reads.emplace_back();
    node.inner_reads.back().at = start;
    read_meta(values, sizes, at, &node.inner_reads.back().meta);
  }
}

Context Converter::above(const Context& context, i64 key, i64 tid, i64 start, i64 name_id, i64 overload,
                         i64 scope_kind, i64 sequence, const i64* values, const i64* sizes, i64 first, i64 count,
                         i64 arity) {
  const NameInfo& name = names[name_id];
  i64 scope = context.scope, backward = context.backward;
  if (name.flags & kCompileScope) return Context{scope, backward, nullptr, 0, true, nullptr};
  if (name.flags & kCompiledCall) {
    std::string outer = backward >= 0 ? text(backward) : scope >= 0 ? text(scope) : "compiled";
    Node* node = new_node();
    node->start = node->end = start;
    node->tid = tid;
    node->compiled = true;
    node->op = node->overload = -1;
    node->label = intern(outer + " [graph " + name.extra + "]");
    node->device = device(0, -1);
    if (context.compiled_inputs) node->inputs = *context.compiled_inputs;
    open_nodes.set(key, node);
    return Context{backward >= 0 ? -1 : scope, backward, node, node->generation, false, nullptr};
  }
  std::shared_ptr<const Inputs> compiled = context.compiled_inputs;
  if (name.flags & kCompiledFunction) {
    auto inputs = std::make_shared<Inputs>();
    read_inputs(values, sizes, first, count, arity, nullptr, inputs.get());
    compiled = inputs;
  }
  if (name.flags & kModuleMark) {
    scope = scope_handle(name.extra);
  } else if (name.flags & kThreadMark) {
    return Context{scope, backward, nullptr, 0, true, nullptr};
  } else if (scope_kind == kBackwardScope) {
    const i64* forward = sequence >= 0 ? seq_scope.find(sequence) : nullptr;
    backward = intern((forward ? text(*forward) : name.text) + " (backward)");
  } else if (name.flags & kNode) {
    Node* node = new_node();
    node->start = node->end = start;
    node->tid = tid;
    node->op = name_id;
    node->overload = overload;
    node->label = backward >= 0 ? backward : scope >= 0 ? scope : name.handle;
    node->device = device(0, -1);
    read_inputs(values, sizes, first, count, arity, &node->read_storages, &node->inputs);
    open_nodes.set(key, node);
    if (backward < 0) seq_scope_default(sequence, scope);
    return Context{backward >= 0 ? -1 : scope, backward, node, node->generation, false, nullptr};
  } else if (scope_kind == kUserScope && !(name.flags & kHashScope)) {
    scope = scope_handle(name.text);  // a record_function of the user's, e.g. Optimizer.step#SGD.step
    open_annotations[key] = std::make_tuple(start, tid, name.handle, i64{-1});
  }
  if (backward < 0) seq_scope_default(sequence, scope);
  return Context{scope, backward, nullptr, 0, false, compiled};
}

// Steps: (begin, end, step) per window of the marking thread; an op takes the step whose window holds
// its start (tracer.torch_events._Collector.steps_by_time).
void Converter::number_steps(const i64* steps, i64 nsteps) {
  std::vector<std::tuple<i64, i64, i64>> windows;
  for (i64 s = 0; s < nsteps; ++s) windows.emplace_back(steps[s * 3], steps[s * 3 + 1], steps[s * 3 + 2]);
  std::sort(windows.begin(), windows.end());
  for (Node* node : nodes) {
    node->step = kNoStep;
    auto at = std::upper_bound(windows.begin(), windows.end(), node->start,
                               [](i64 t, const auto& w) { return t < std::get<0>(w); });
    if (at != windows.begin() && node->start <= std::get<1>(*(at - 1))) node->step = std::get<2>(*(at - 1));
  }
}

std::string Converter::written_key(i64 op, i64 overload, i64 arity) {
  std::string key(24, '\0');
  i64 parts[3] = {op, overload, arity};
  std::copy(reinterpret_cast<const char*>(parts), reinterpret_cast<const char*>(parts) + 24, key.begin());
  return key;
}

// The written arguments still unknown for the nodes that ended: Python looks them up before write().
i64 Converter::find_missing_written() {
  missing_written.clear();
  for (Node* node : nodes) {
    if (node->compiled) continue;
    i64 arity = static_cast<i64>(node->inputs.count());
    std::string key = written_key(node->op, node->overload, arity);
    if (written.emplace(key, std::vector<i64>{}).second) missing_written.emplace_back(node->op, node->overload, arity);
  }
  return static_cast<i64>(missing_written.size());
}

}  // namespace dfc
