// Below each outermost op of a torch.profiler event tree: what tracer/torch_events.py's
// _Collector._inside reads there, read in C++. In Python each attribute of the profiler's
// objects is a pybind call (an op's inputs alone build a list of new objects); here the tree is
// read in place and only what the conversion keeps becomes a Python object.
//
// inside(event, sparse_builders, graph_launches) -> (allocations, reads, sequences, sparse_built, replays)
//   allocations: (start ns, tid, device, ptr, bytes, total allocated, allocation id or None, tensor id or None)
//   reads: (start ns of the inner op, storage ptr, TensorImpl address, dtype, sizes, device, layout),
//          the first read of each storage only (a later one adds no edge); every read of a tensor
//          with no storage (sparse) is kept
//   sequences: autograd sequence numbers (>= 0) of the inner ops
//   sparse_built: the dtype of the last tensor read by each inner op that builds a sparse tensor
//   replays: whether a runtime call that replays a CUDA graph is below the op
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/profiler/collection.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <unordered_set>
#include <vector>

namespace py = pybind11;
namespace pi = torch::profiler::impl;
using ResultPtr = std::shared_ptr<pi::Result>;
using Names = std::unordered_set<std::string>;

namespace {

py::object dtype_of(c10::ScalarType type) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(type)));
}

py::object layout_of(c10::Layout layout) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPLayout(layout)));
}

template <typename Id>
py::object optional_id(const std::optional<Id>& id) {
  return id ? py::object(py::int_(id->value_of())) : py::object(py::none());
}

py::tuple inside(const ResultPtr& event, const Names& sparse_builders, const Names& graph_launches) {
  py::list allocations, reads, sequences, sparse_built;
  bool replays = false;
  std::unordered_set<const void*> seen;
  std::vector<const pi::TensorMetadata*> metas;
  std::vector<ResultPtr> stack(event->children_.rbegin(), event->children_.rend());
  while (!stack.empty()) {
    ResultPtr child = std::move(stack.back());
    stack.pop_back();
    const auto tag = child->tag();
    if (tag == pi::EventType::Allocation) {
      const auto& a = std::get<pi::ExtraFields<pi::EventType::Allocation>>(child->extra_fields_);
      allocations.append(py::make_tuple(child->start_time_ns_, child->start_tid_, a.device().str(),
                                        reinterpret_cast<intptr_t>(a.ptr_), a.alloc_size_, a.total_allocated_,
                                        optional_id(a.allocation_id_), optional_id(a.id_)));
      continue;  // as the Python walk: nothing below an allocation is read
    }
    if (tag == pi::EventType::TorchOp) {
      const auto& op = std::get<pi::ExtraFields<pi::EventType::TorchOp>>(child->extra_fields_);
      if (op.sequence_number_ >= 0) {
        sequences.append(op.sequence_number_);
      }
      metas.clear();
      for (const auto& input : op.inputs_) {
        if (const auto* tensor = std::get_if<pi::TensorMetadata>(&input)) {
          metas.push_back(tensor);
        } else if (const auto* list = std::get_if<std::vector<pi::TensorMetadata>>(&input)) {
          for (const auto& item : *list) {
            metas.push_back(&item);
          }
        }
      }
      for (const auto* meta : metas) {
        const void* ptr = meta->data_.value_of();
        if (ptr != nullptr && !seen.insert(ptr).second) {
          continue;
        }
        py::tuple sizes(meta->sizes_.size());
        for (size_t k = 0; k < meta->sizes_.size(); ++k) {
          sizes[k] = py::int_(meta->sizes_[k]);
        }
        reads.append(py::make_tuple(child->start_time_ns_, reinterpret_cast<intptr_t>(ptr),
                                    reinterpret_cast<intptr_t>(meta->impl().value_of()), dtype_of(meta->dtype_),
                                    sizes, meta->device_.str(), layout_of(meta->layout_)));
      }
      if (!metas.empty() && sparse_builders.count(op.name_) != 0) {
        sparse_built.append(dtype_of(metas.back()->dtype_));
      }
    } else if (graph_launches.count(child->name()) != 0) {
      replays = true;
    }
    stack.insert(stack.end(), child->children_.rbegin(), child->children_.rend());
  }
  return py::make_tuple(allocations, reads, sequences, sparse_built, replays);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "dfcompass: the inside of a torch.profiler op read in C++ (tracer/native/__init__.py)";
  m.def("inside", &inside, "allocations, tensor reads, sequence numbers, sparse builds and CUDA graph replays below an op");
}
