// dfcompass's op observer: every PyTorch op (RecordFunction) and every allocation, recorded into
// per-thread columns without torch.profiler, drained at each window cut (tracer/torch_observer.py).
//
// Why: torch.profiler's collection with record_shapes and profile_memory costs 6x the LSTM loop of
// time_sequence_prediction; a RecordFunction callback that keeps what our conversion reads (names,
// times, thread, scope, autograd sequence number, tensor inputs, allocations) costs 1.3x (issue 35).
//
// A C ABI, loaded with ctypes: the file needs only ATen's record_function.h, so it builds in seconds.
// Compiled with NDEBUG like libtorch: RecordFunction's layout differs without it.
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kBeginCols = 12;  // tid, serial, parent serial, depth, t0, name id, overload id, scope, seq nr,
                                // input count, first value row, value rows (its input tensors)
constexpr int kEndCols = 3;     // tid, serial, t1
constexpr int kValueCols = 12;  // tid, op serial, arg, list pos, storage ptr, impl ptr, dtype, device type,
                                // device index, layout, ndim, first size
constexpr int kAllocCols = 9;   // tid, time, ptr, bytes (< 0: free), total, device type, device index,
                                // serial of the innermost op open on the thread (-1: none), allocation id

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the trace's clock (tracer/clock.py)
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One thread's columns. The owner appends under `lock`; a drain swaps them out under it.
struct ThreadColumns {
  std::mutex lock;
  int64_t tid = 0;
  std::vector<int64_t> begins, ends, values, sizes, allocs;
  // Open ops of this thread, outermost first: (serial). Touched by the owner only.
  std::vector<int64_t> open;
  int64_t next_serial = 0;
};

std::mutex registry_lock;                                // guards threads and names
std::vector<std::shared_ptr<ThreadColumns>> threads;     // every thread that ran an op or allocated
std::unordered_map<std::string, int64_t> name_ids;
std::string new_names;                                   // names given an id since the last drain, '\0'-ended
thread_local std::shared_ptr<ThreadColumns> mine;

ThreadColumns& columns() {
  if (!mine) {
    mine = std::make_shared<ThreadColumns>();
    mine->tid = static_cast<int64_t>(syscall(SYS_gettid));
    std::lock_guard<std::mutex> guard(registry_lock);
    threads.push_back(mine);
  }
  return *mine;
}

int64_t name_id(const char* name) {
  // Op names are few and repeat: one lookup per op, under a lock the threads rarely contend for.
  std::lock_guard<std::mutex> guard(registry_lock);
  auto found = name_ids.find(name);
  if (found != name_ids.end()) return found->second;
  int64_t id = static_cast<int64_t>(name_ids.size());
  name_ids.emplace(name, id);
  new_names.append(name);
  new_names.push_back('\0');
  return id;
}

struct OpContext : public at::ObserverContext {
  int64_t serial = 0;
};

void add_tensor(ThreadColumns& cols, int64_t serial, int64_t arg, int64_t pos, const at::Tensor& t) {
  if (!t.defined()) return;
  int64_t storage = 0;
  c10::IntArrayRef sizes;
  try {  // some tensors (nested, functorch's wrappers, symbolic sizes) refuse storage() or sizes()
    storage = t.has_storage() ? reinterpret_cast<int64_t>(t.storage().data()) : 0;
    sizes = t.sizes();
  } catch (...) {
    storage = 0;
    sizes = {};
  }
  const auto device = t.device();
  int64_t row[kValueCols] = {cols.tid, serial, arg, pos, storage,
                             reinterpret_cast<int64_t>(t.unsafeGetTensorImpl()),
                             static_cast<int64_t>(t.scalar_type()), static_cast<int64_t>(device.type()),
                             static_cast<int64_t>(device.index()), static_cast<int64_t>(t.layout()),
                             static_cast<int64_t>(sizes.size()), static_cast<int64_t>(cols.sizes.size())};
  cols.values.insert(cols.values.end(), row, row + kValueCols);
  cols.sizes.insert(cols.sizes.end(), sizes.begin(), sizes.end());
}

std::atomic<bool> observing{false};  // off: the callbacks and a reporter left behind record nothing

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!observing.load(std::memory_order_relaxed)) return nullptr;  // a fork child, or stopping
  ThreadColumns& cols = columns();
  auto context = std::make_unique<OpContext>();
  const int64_t serial = context->serial = cols.next_serial++;
  const int64_t parent = cols.open.empty() ? -1 : cols.open.back();
  const auto depth = static_cast<int64_t>(cols.open.size());
  // A begin row as the op starts: ops inside it that end before a window cut still know their scope.
  const int64_t name = name_id(fn.name());
  const char* overload = fn.overload_name();
  const int64_t overload_id = (overload != nullptr && overload[0] != '\0') ? name_id(overload) : -1;
  const bool inputs = fn.needsInputs();
  const auto arity = inputs ? static_cast<int64_t>(fn.inputs().size()) : -1;
  std::lock_guard<std::mutex> guard(cols.lock);
  const auto first_value = static_cast<int64_t>(cols.values.size() / kValueCols);
  if (inputs) {
    int64_t arg = 0;
    for (const c10::IValue& value : fn.inputs()) {
      if (value.isTensor()) {
        add_tensor(cols, serial, arg, -1, value.toTensor());
      } else if (value.isTensorList()) {
        int64_t pos = 0;
        for (const at::Tensor& t : value.toTensorVector()) add_tensor(cols, serial, arg, pos++, t);
      } else if (value.isList()) {  // a list of optional tensors (index, index_put_)
        int64_t pos = 0;
        for (const c10::IValue& item : value.toListRef()) {
          if (item.isTensor()) add_tensor(cols, serial, arg, pos, item.toTensor());
          ++pos;
        }
      }
      ++arg;
    }
  }
  int64_t row[kBeginCols] = {cols.tid, serial, parent, depth, now_ns(), name, overload_id,
                             static_cast<int64_t>(fn.scope()), fn.seqNr(), arity, first_value,
                             static_cast<int64_t>(cols.values.size() / kValueCols) - first_value};
  cols.begins.insert(cols.begins.end(), row, row + kBeginCols);
  cols.open.push_back(serial);  // last: an op whose start failed is not left open
  return context;
}

void on_end(const at::RecordFunction& /*fn*/, at::ObserverContext* base) {
  const int64_t t1 = now_ns();
  auto* context = static_cast<OpContext*>(base);
  if (context == nullptr) return;
  ThreadColumns& cols = columns();
  // Ops end in the order they began on a thread; one that did not (an async scope) is dropped from
  // the open list wherever it is.
  for (auto it = cols.open.rbegin(); it != cols.open.rend(); ++it) {
    if (*it == context->serial) {
      cols.open.erase(std::next(it).base());
      break;
    }
  }
  int64_t row[kEndCols] = {cols.tid, context->serial, t1};
  std::lock_guard<std::mutex> guard(cols.lock);
  cols.ends.insert(cols.ends.end(), row, row + kEndCols);
}

// Allocations: torch's allocators report to the profiler state in the thread's debug info (the
// autograd engine's threads inherit it). Ours is a ProfilerStateBase, as torch's NVTX observer's is,
// because torch casts whatever is in that slot to one (record_function_fast, which the module scopes
// use, records only when the slot is set). Its config is Disabled, so torch and the program see no
// profiler enabled (torch.autograd._profiler_enabled() stays False).
std::mutex live_lock;
std::unordered_map<int64_t, int64_t> live;  // ptr -> allocation id, until freed
int64_t next_allocation = 0;

namespace prof = torch::profiler::impl;

struct MemoryReporter : public prof::ProfilerStateBase {
  MemoryReporter() : prof::ProfilerStateBase(prof::ProfilerConfig(prof::ProfilerState::Disabled)) {}
  prof::ActiveProfilerType profilerType() override { return prof::ActiveProfilerType::NONE; }
  void reportMemoryUsage(void* ptr, int64_t bytes, size_t total_allocated, size_t /*total_reserved*/,
                         c10::Device device) override {
    if (!observing.load(std::memory_order_relaxed)) return;
    const int64_t at = now_ns();
    const auto key = reinterpret_cast<int64_t>(ptr);
    int64_t allocation = -1;
    {
      std::lock_guard<std::mutex> guard(live_lock);
      if (bytes > 0) {
        allocation = next_allocation++;
        live[key] = allocation;
      } else if (auto found = live.find(key); found != live.end()) {
        allocation = found->second;
        live.erase(found);
      }
    }
    ThreadColumns& cols = columns();
    const int64_t innermost = cols.open.empty() ? -1 : cols.open.back();
    int64_t row[kAllocCols] = {cols.tid, at, key, bytes, static_cast<int64_t>(total_allocated),
                               static_cast<int64_t>(device.type()), static_cast<int64_t>(device.index()),
                               innermost, allocation};
    std::lock_guard<std::mutex> guard(cols.lock);
    cols.allocs.insert(cols.allocs.end(), row, row + kAllocCols);
  }
  bool memoryProfilingEnabled() const override { return observing.load(std::memory_order_relaxed); }
};

at::CallbackHandle callback = 0;
std::shared_ptr<MemoryReporter> reporter;  // in the starting thread's debug info while observing

// What the last drain took, concatenated over threads, until the next drain.
std::vector<int64_t> taken_begins, taken_ends, taken_values, taken_sizes, taken_allocs;
std::string taken_names;

// A fork child (a DataLoader worker, a converter child) inherits the callback's registration and the
// parent's columns: it records nothing until it starts its own observer. Locks another thread held
// at the fork stay locked in the child, so they are made anew.
bool forked = false;

void after_fork_in_child() {
  observing = false;
  forked = true;
  new (&registry_lock) std::mutex();
  new (&live_lock) std::mutex();
  threads.clear();
  if (mine) {
    new (&mine->lock) std::mutex();
    mine->begins.clear(), mine->ends.clear(), mine->values.clear(), mine->sizes.clear(), mine->allocs.clear();
    mine->open.clear();
    mine->tid = static_cast<int64_t>(syscall(SYS_gettid));
    threads.push_back(mine);
  }
  name_ids.clear();
  new_names.clear();
  live.clear();
}

[[maybe_unused]] const int registered = pthread_atfork(nullptr, nullptr, after_fork_in_child);

void take(std::vector<int64_t>& from, std::vector<int64_t>& into) {
  into.insert(into.end(), from.begin(), from.end());
  from.clear();
}

}  // namespace

extern "C" {

// Start observing every op of every thread (and, with `memory`, the allocations of this thread and
// of the threads that inherit its state). 0 on success, -1 if already observing, -2 when a profiler
// is on in this thread.
int dfc_observer_start(int memory) {
  if (forked) {  // the parent's registration and reporter are not this process's observer
    if (callback != 0) at::removeCallback(callback);
    callback = 0;
    if (reporter && prof::ProfilerStateBase::get(/*global=*/false) == reporter.get()) {
      prof::ProfilerStateBase::pop(/*global=*/false);
    }
    reporter.reset();
    forked = false;
  }
  if (callback != 0) return -1;
  if (torch::profiler::impl::ProfilerStateBase::get() != nullptr) return -2;  // a profiler is on
  {
    std::lock_guard<std::mutex> guard(live_lock);
    live.clear();  // an allocation of an earlier recording is not one of this one's
  }
  auto cb = at::RecordFunctionCallback(on_start, on_end)
                .needsInputs(true)
                .needsIds(true)
                .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE});
  callback = at::addGlobalCallback(cb);
  observing = true;
  if (memory) {
    reporter = std::make_shared<MemoryReporter>();
    prof::ProfilerStateBase::push(std::shared_ptr<prof::ProfilerStateBase>(reporter));
  }
  return 0;
}

// Stop observing. Call on the thread that started (its debug info holds the memory reporter).
// 1 when the reporter could not be taken off (a profiler of the program's is still on top).
int dfc_observer_stop() {
  if (callback != 0) at::removeCallback(callback);
  callback = 0;
  observing = false;
  int status = 0;
  if (reporter) {
    // Only ours comes off: another thread, or a profiler pushed above it, leaves it in place (inert).
    if (prof::ProfilerStateBase::get(/*global=*/false) == reporter.get()) {
      prof::ProfilerStateBase::pop(/*global=*/false);
    } else {
      status = 1;
    }
    reporter.reset();
  }
  return status;
}

// Take every thread's columns recorded so far; their sizes in rows (begins, ends, values, sizes,
// allocations, bytes of new names). The arrays stay readable through dfc_observer_taken until the next drain.
void dfc_observer_drain(int64_t* counts) {
  taken_begins.clear();
  taken_ends.clear();
  taken_values.clear();
  taken_sizes.clear();
  taken_allocs.clear();
  std::vector<std::shared_ptr<ThreadColumns>> all;
  {
    std::lock_guard<std::mutex> guard(registry_lock);
    all = threads;
  }
  for (auto& cols : all) {
    std::lock_guard<std::mutex> guard(cols->lock);
    // Values and sizes are indexed from the start of the drained block: shift this thread's offsets.
    const auto shift = static_cast<int64_t>(taken_sizes.size());
    for (size_t row = 0; row < cols->values.size(); row += kValueCols) cols->values[row + kValueCols - 1] += shift;
    const auto value_shift = static_cast<int64_t>(taken_values.size() / kValueCols);
    for (size_t row = 0; row < cols->begins.size(); row += kBeginCols) cols->begins[row + kBeginCols - 2] += value_shift;
    take(cols->begins, taken_begins);
    take(cols->ends, taken_ends);
    take(cols->values, taken_values);
    take(cols->sizes, taken_sizes);
    take(cols->allocs, taken_allocs);
  }
  {
    // The names after the rows: a name in a row taken was given its id before the row was written.
    std::lock_guard<std::mutex> guard(registry_lock);
    taken_names.swap(new_names);
    new_names.clear();
  }
  counts[0] = static_cast<int64_t>(taken_begins.size() / kBeginCols);
  counts[1] = static_cast<int64_t>(taken_ends.size() / kEndCols);
  counts[2] = static_cast<int64_t>(taken_values.size() / kValueCols);
  counts[3] = static_cast<int64_t>(taken_sizes.size());
  counts[4] = static_cast<int64_t>(taken_allocs.size() / kAllocCols);
  counts[5] = static_cast<int64_t>(taken_names.size());
}

// The arrays of the last drain, in dfc_observer_drain's order: int64 rows of
// dfc_observer_columns(which) columns, and the new names (bytes, each '\0'-ended).
const void* dfc_observer_taken(int which) {
  switch (which) {
    case 0: return taken_begins.data();
    case 1: return taken_ends.data();
    case 2: return taken_values.data();
    case 3: return taken_sizes.data();
    case 4: return taken_allocs.data();
    default: return taken_names.data();
  }
}

int dfc_observer_columns(int which) {
  const int columns[] = {kBeginCols, kEndCols, kValueCols, 1, kAllocCols, 1};
  return which >= 0 && which < 6 ? columns[which] : 0;
}

}  // extern "C"
