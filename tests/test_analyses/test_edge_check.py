"""edge_check: the execution-trace reference graph and the alignment (hand-made ET files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tc_analyses.analyses.edge_check import read_et
from tc_analyses.analyses.op_alignment import align
from tc_analyses.errors import DfcompassError


def _t(tensor: int, storage: int, numel: int = 4, itemsize: int = 4) -> list[object]:
    return [tensor, storage, 0, numel, itemsize, "cpu"]


def _sparse(tensor: int) -> list[object]:
    return [tensor, 0, 0, 0, 0, ""]


def _node(node_id: int, name: str, inputs: list[object], outputs: list[object], parent: int = 1) -> dict[str, object]:
    return {"id": node_id, "name": name, "ctrl_deps": parent, "inputs": {"values": inputs},
            "outputs": {"values": outputs}}


def _write(tmp_path: Path, nodes: list[dict[str, object]]) -> Path:
    path = tmp_path / "et.json"
    path.write_text(json.dumps({"nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|thread]",
                                           "ctrl_deps": 0, "inputs": {"values": []}, "outputs": {"values": []}},
                                          *nodes]}))
    return path


def test_last_writer_in_place_and_inner_ops(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _node(2, "aten::randn", [], [_t(10, 100)]),
        _node(3, "aten::add_", [_t(10, 100), 1.0], [_t(10, 100)]),  # in place: writes self
        _node(4, "aten::dropout", [_t(10, 100)], [_t(11, 101)]),
        _node(5, "aten::bernoulli_", [_t(12, 102)], [_t(12, 102)], parent=4),  # the mask, inside dropout
        _node(6, "aten::mul", [_t(13, 103), _t(12, 102)], [_t(14, 104)]),  # backward reads the mask
        _node(7, "aten::relu", [_t(10, 100)], [_t(15, 105)]),
    ]))
    assert et.names == ["aten::randn", "aten::add_", "aten::dropout", "aten::mul", "aten::relu"]
    assert (0, 1) in et.last and (1, 2) in et.last and (1, 4) in et.last and (0, 4) not in et.last
    assert et.allows(0, 4)  # an earlier writer of the same storage: allowed, not the last
    assert (2, 3) in et.last  # the inner op's output, read in backward: no op wrote it since


def test_an_inner_write_since_the_last_top_level_write_is_the_last_writer(tmp_path: Path) -> None:
    # batch norm's saved statistics land where an older add's output was (freed, unseen)
    et = read_et(_write(tmp_path, [
        _node(2, "aten::add", [_t(1, 10), _t(2, 11)], [_t(3, 50)]),
        _node(3, "aten::batch_norm", [_t(4, 12)], [_t(5, 13)]),
        _node(4, "aten::native_batch_norm", [_t(4, 12)], [_t(5, 13), _t(6, 50)], parent=3),
        _node(5, "aten::native_batch_norm_backward", [_t(7, 14), _t(6, 50)], [_t(8, 15)]),
        _node(6, "aten::relu", [_t(9, 50)], [_t(10, 16)]),
        _node(7, "aten::mul_", [_t(9, 50), _t(11, 17)], [_t(9, 50)]),
        _node(8, "aten::neg", [_t(9, 50)], [_t(12, 18)]),
    ]))
    assert (1, 2) in et.last and (0, 2) not in et.last and et.allows(0, 2)
    assert (1, 3) in et.last and (4, 5) in et.last and (1, 5) not in et.last  # then a top-level write


def test_reused_address_with_another_item_size_is_no_dataflow(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _node(2, "aten::pow", [_t(1, 50)], [_t(2, 77)]),
        _node(3, "aten::add", [_t(3, 78), _t(4, 77, numel=1, itemsize=8)], [_t(5, 79)]),  # a wrapped Python float
    ]))
    assert (0, 1) not in et.last


def _typed(node: dict[str, object], inputs: list[str], outputs: list[str]) -> dict[str, object]:
    node["inputs"]["types"] = inputs  # type: ignore[index]
    node["outputs"]["types"] = outputs  # type: ignore[index]
    return node


def test_reused_address_with_another_dtype_of_the_same_item_size_is_no_dataflow(tmp_path: Path) -> None:
    # SGD's buf.mul_(0.9): the momentum, a Python float wrapped as a double, lands where randint's
    # long output was (both 8 bytes): the observer's types tell them apart.
    et = read_et(_write(tmp_path, [
        _typed(_node(2, "aten::randint", [], [_t(1, 50, numel=1, itemsize=8)]), [], ["Tensor(long int)"]),
        _typed(_node(3, "aten::mul_", [_t(2, 60), _t(3, 50, numel=1, itemsize=8)], [_t(2, 60)]),
               ["Tensor(float)", "Tensor(double)"], ["Tensor(float)"]),
        _typed(_node(4, "aten::add", [_t(4, 70), _t(5, 50, numel=1, itemsize=8)], [_t(6, 80)]),
               ["Tensor(float)", "Tensor(long int)"], ["Tensor(float)"]),
    ]))
    assert (0, 1) not in et.last and et.allows(0, 1)
    assert (0, 2) in et.last  # the same dtype: the writer's tensor


def test_lift_fresh_of_a_buffer_made_outside_any_op_writes_it(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _node(2, "aten::contiguous", [_t(1, 40)], [_t(2, 50)]),
        # numpy's image, at the address the contiguous output had: a new tensor id
        _node(3, "aten::lift_fresh", [_t(3, 50)], [_t(3, 50)]),
        _node(4, "aten::view", [_t(3, 50)], [_t(4, 50)]),
        # torch.tensor of Python data: empty, then to (the same tensor), then lift_fresh reads it
        _node(5, "aten::empty", [], [_t(5, 90)]),
        _node(6, "aten::to", [_t(5, 90)], [_t(5, 90)]),
        _node(7, "aten::lift_fresh", [_t(5, 90)], [_t(5, 90)]),
        _node(8, "aten::relu", [_t(5, 90)], [_t(6, 91)]),
        # a numpy buffer where no op wrote, under a tensor id the observer gave a freed tensor
        _node(9, "aten::lift_fresh", [_t(6, 95)], [_t(6, 95)]),
        _node(10, "aten::view", [_t(6, 95)], [_t(7, 95)]),
    ]))
    assert (0, 1) not in et.last and (0, 2) not in et.last and (1, 2) in et.last
    assert (3, 5) in et.last and (3, 6) in et.last  # empty's buffer, through lift_fresh
    assert (7, 8) in et.last


def test_sparse_tensors_by_tensor_id_and_their_buffers(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _node(2, "aten::ones", [], [_t(20, 200)]),
        _node(3, "aten::sparse_coo_tensor", [_t(21, 201, itemsize=8), _t(20, 200)], [_sparse(30)]),
        _node(4, "aten::mm", [_sparse(30), _t(22, 202)], [_t(23, 203)]),
    ]))
    assert (1, 2) in et.last
    assert et.allows(0, 2) and (0, 2) not in et.last  # the values buffer the sparse tensor keeps


def test_align_skips_ops_on_either_side() -> None:
    ours = ["a", "b", "x", "c", "d"]
    theirs = ["a", "y", "z", "b", "c", "d"]
    assert align(ours, theirs) == {0: 0, 1: 3, 3: 4, 4: 5}


def test_not_an_execution_trace_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "et.json"
    bad.write_text("{not json")
    with pytest.raises(DfcompassError, match="et.json: not an execution trace"):
        read_et(bad)


def test_an_execution_trace_of_another_schema_is_a_clear_error(tmp_path: Path) -> None:
    old = tmp_path / "et.json"
    old.write_text(json.dumps({"nodes": [{"id": 2, "name": "aten::add", "ctrl_deps": 1, "inputs": [1, 2],
                                          "outputs": []}]}))
    with pytest.raises(DfcompassError, match="et.json: not an execution trace"):
        read_et(old)


def test_undefined_tensors_are_no_buffer(tmp_path: Path) -> None:
    # convolution_backward's absent grad_input and nll_loss_backward's weight=None share one id
    undefined = [216, 0, 0, 0, 0, ""]
    et = read_et(_write(tmp_path, [
        _typed(_node(2, "aten::convolution_backward", [_t(1, 10)], [undefined, _t(2, 11)]),
               ["Tensor(float)"], ["Tensor(nullptr (uninitialized))", "Tensor(float)"]),
        _typed(_node(3, "aten::nll_loss_backward", [_t(3, 12), undefined], [_t(4, 13)]),
               ["Tensor(float)", "Tensor(nullptr (uninitialized))"], ["Tensor(float)"]),
    ]))
    assert (0, 1) not in et.last and not et.allows(0, 1)


def test_an_execution_trace_cut_short_gives_the_ops_up_to_the_cut(tmp_path: Path) -> None:
    # the observer writes as the program runs: a program that dies leaves the file unfinished
    whole = _write(tmp_path, [
        _node(2, "aten::randn", [], [_t(1, 10)]),
        _node(3, "aten::relu", [_t(1, 10)], [_t(2, 11)]),
        _node(4, "aten::neg", [_t(2, 11)], [_t(3, 12)]),
    ]).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: whole.index('"aten::neg"') + 20])
    et = read_et(cut)
    assert et.truncated and et.names == ["aten::randn", "aten::relu"] and et.last == {(0, 1)}
    assert not read_et(tmp_path / "et.json").truncated
    (tmp_path / "empty-cut.json").write_text('{"nodes": [{"id": 1, "na')
    with pytest.raises(DfcompassError, match="empty-cut.json: not an execution trace"):
        read_et(tmp_path / "empty-cut.json")


def test_a_view_with_another_dtype_still_reads_the_writer(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _typed(_node(2, "aten::randn", [], [_t(1, 10, numel=16)]), [], ["Tensor(float)"]),
        _typed(_node(3, "aten::abs", [_t(2, 10, numel=16)], [_t(3, 11, numel=16)]),  # x.view(torch.int32)
               ["Tensor(int)"], ["Tensor(int)"]),
        # an inner op's float buffer, then randint's long output at the same address, read as float
        _typed(_node(4, "aten::batch_norm", [_t(4, 12)], [_t(5, 13)]), ["Tensor(float)"], ["Tensor(float)"]),
        _typed(_node(5, "aten::native_batch_norm", [_t(4, 12)], [_t(5, 13), _t(6, 50, numel=1)], parent=4),
               ["Tensor(float)"], ["Tensor(float)", "Tensor(float)"]),
        _typed(_node(6, "aten::randint", [], [_t(7, 50, numel=1, itemsize=8)]), [], ["Tensor(long int)"]),
        _typed(_node(7, "aten::mul", [_t(8, 14), _t(9, 50, numel=1)], [_t(10, 15)]),
               ["Tensor(float)", "Tensor(float)"], ["Tensor(float)"]),
    ]))
    assert (0, 1) in et.last
    assert (2, 4) not in et.last and (3, 4) not in et.last  # the newer write decides, and it is another dtype


def test_a_gzipped_execution_trace_reads_the_same(tmp_path: Path) -> None:
    import gzip

    plain = _write(tmp_path, [_node(2, "aten::randn", [], [_t(1, 10)]), _node(3, "aten::relu", [_t(1, 10)], [_t(2, 11)])])
    packed = tmp_path / "et.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_et(packed) == read_et(plain)


def test_reading_reports_every_byte_of_the_file_for_a_progress_bar(tmp_path: Path) -> None:
    import gzip

    plain = _write(tmp_path, [_node(2, "aten::randn", [], [_t(1, 10)]), _node(3, "aten::relu", [_t(1, 10)], [_t(2, 11)])])
    packed = tmp_path / "et.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, packed):
        read: list[int] = []
        read_et(path, read.append)
        assert sum(read) == path.stat().st_size and all(n >= 0 for n in read)


def _job_with_worker(tmp_path: Path, ops: int) -> Path:
    """A recorded job: a main process of `ops` relu ops (written by our tracer) and a DataLoader worker."""
    import tracer
    from tracer import schema

    main = tmp_path / "job" / "host-300"
    with tracer.Session(main, env={"pid": 300, schema.ENV_PPID: 299}, handle_signals=False):
        for i in range(ops):
            with tracer.node(f"n{i}", op="aten::relu"):
                pass
    with tracer.Session(tmp_path / "job" / "host-301", env={"pid": 301, schema.ENV_PPID: 300,
                                                            schema.ENV_PROCESS_ROLE: schema.DATA_LOADER_WORKER},
                        handle_signals=False):
        pass
    return main


def _et_of(tmp_path: Path, pid: int, names: list[str]) -> Path:
    path = _write(tmp_path, [_node(i + 2, name, [], [_t(i, i)]) for i, name in enumerate(names)])
    data = json.loads(path.read_text())
    path.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "pid": pid, **data}))
    return path


def test_an_execution_trace_of_another_process_or_run_is_refused(tmp_path: Path) -> None:
    from tc_analyses.analyses.edge_check import check_edges

    trace = _job_with_worker(tmp_path, 30)
    with pytest.raises(DfcompassError, match="execution trace of process 4242, but .*host-300 is process 300's"):
        check_edges(trace, _et_of(tmp_path, 4242, ["aten::relu"] * 30))
    import shutil

    shutil.rmtree(trace.parent / "host-301")  # no forked process whose ops could explain the mismatch
    with pytest.raises(DfcompassError, match="only 0 of its 30 ops line up with the 30 of .*not the same run"):
        check_edges(trace, _et_of(tmp_path, 300, ["aten::tanh"] * 30))


def test_forked_workers_ops_in_the_execution_trace_are_said(tmp_path: Path) -> None:
    from tc_analyses.analyses.edge_check import check_edges
    from tc_analyses.export.reports import edge_check_text

    trace = _job_with_worker(tmp_path, 30)
    check = check_edges(trace, _et_of(tmp_path, 300, ["aten::relu"] * 30 + ["aten::stack"] * 10))
    assert check.ops_matched == 30
    assert len(check.notices) == 1
    assert "10 of the execution trace's 40 ops match none" in check.notices[0]
    assert "1 DataLoader worker in" in check.notices[0]
    assert "notice:     10 of the execution trace's 40 ops" in edge_check_text(check)
    assert check_edges(trace, _et_of(tmp_path, 300, ["aten::relu"] * 30)).notices == []


def test_a_compiled_graphs_call_is_one_op_reading_its_functions_inputs(tmp_path: Path) -> None:
    from tc_analyses.analyses.edge_check import COMPILED_GRAPH_OP

    et = read_et(_write(tmp_path, [
        _node(2, "aten::randn", [], [_t(1, 100)]),
        _node(3, "aten::ones", [], [_t(2, 200)]),
        _node(7, "aten::mm", [_t(3, 150), _t(2, 200)], [_t(4, 300)], parent=6),  # an extern kernel, inside
        _node(6, "## Call CompiledFxGraph abc ##", [], [], parent=5),
        _node(5, "CompiledFunction", [_t(1, 100), _t(3, 150)], []),
        _node(8, "aten::sum", [_t(4, 300)], [_t(5, 400)]),
        _node(9, "aten::neg", [_t(6, 500)], [_t(7, 600)]),  # a buffer the graph's kernels wrote unseen
    ]))
    assert et.names == ["aten::randn", "aten::ones", COMPILED_GRAPH_OP, "aten::sum", "aten::neg"]
    assert (0, 2) in et.last  # the graph's input, from its CompiledFunction
    # no input of its forward function: the graph's own buffer (its Triton kernels wrote it), not ones'
    assert (1, 2) not in et.last and 200 in et.wrote[2]
    assert (2, 3) in et.last  # what its inner op made
    assert et.allows(2, 4) and et.unseen_write(2, 4)  # no seen op wrote 500: allowed, not required
    assert not et.allows(0, 4) and not et.unseen_write(3, 4)


def test_compile_time_ops_are_not_in_the_reference(tmp_path: Path) -> None:
    et = read_et(_write(tmp_path, [
        _node(2, "aten::randn", [], [_t(1, 100)]),
        _node(4, "aten::mm", [_t(9, 900), _t(9, 900)], [_t(10, 901)], parent=3),  # dynamo tracing fake tensors
        _node(3, "entire_frame_compile", [], [], parent=5),
        _node(5, "dynamo", [], []),
        _node(6, "aten::relu", [_t(1, 100)], [_t(2, 200)]),
    ]))
    assert et.names == ["aten::randn", "aten::relu"] and (0, 1) in et.last


def test_many_foreign_ops_with_forked_workers_are_a_notice_not_a_refusal(tmp_path: Path) -> None:
    from tc_analyses.analyses.edge_check import check_edges

    trace = _job_with_worker(tmp_path, 30)  # the observer, inherited by the worker, wrote its ops too
    check = check_edges(trace, _et_of(tmp_path, 300, ["aten::stack"] * 40 + ["aten::relu"] * 12))
    assert check.ops_matched == 12
    assert "inherited by forked processes (1 DataLoader worker" in check.notices[0]


def test_set_writes_only_a_storage_no_op_filled(tmp_path: Path) -> None:
    """share_memory_ (hogwild): a view of the old storage made by set_ is read by copy_; the data is
    uniform_'s. torch.load: set_ binds a storage filled from the file into an empty one: set_'s."""
    et = read_et(_write(tmp_path, [
        _node(2, "aten::empty", [], [_t(1, 5)]),
        _node(3, "aten::uniform_", [_t(1, 5)], [_t(1, 5)]),
        _node(4, "aten::set_", [_t(2, 0)], [_t(2, 22, itemsize=1)]),  # bound to the new shared storage
        _node(5, "aten::set_", [_t(3, 0)], [_t(3, 5, itemsize=1)]),  # a view of the old one
        _node(6, "aten::set_", [_t(3, 0)], [_t(3, 5, itemsize=1)], parent=5),  # its inner twin
        _node(7, "aten::copy_", [_t(2, 22), _t(3, 5)], [_t(2, 22)]),
        _node(8, "aten::empty", [], [_t(4, 60)]),  # torch.load: a storage filled from the file
        _node(9, "aten::set_", [_t(5, 0)], [_t(5, 60, itemsize=1)]),
        _node(10, "aten::relu", [_t(5, 60)], [_t(6, 61)]),
    ]))
    names = et.names
    copy_, relu = names.index("aten::copy_"), names.index("aten::relu")
    assert (1, copy_) in et.last  # uniform_ -> copy_: the data read
    assert (3, copy_) not in et.last and (2, copy_) in et.last  # not the view's set_; the new storage's set_
    assert (names.index("aten::relu") - 1, relu) in et.last  # torch.load's set_ -> relu


def test_out_arguments_are_written(tmp_path: Path) -> None:
    """DDP's reducer writes gradients into its bucket with mul.out: the schema says which argument."""
    from tc_analyses.analyses.edge_check import _mutated_positions

    assert _mutated_positions("aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)") == (2,)
    assert _mutated_positions("aten::conv2d(Tensor input, Tensor weight, SymInt[2] stride=[1, 1]) -> Tensor") == ()
    mul_out = _node(3, "aten::mul", [_t(1, 10), 0.5, _t(2, 20)], [_t(2, 20)])
    mul_out["attrs"] = [{"name": "op_schema", "type": "string",
                         "value": "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)"}]
    et = read_et(_write(tmp_path, [
        _node(2, "aten::empty", [], [_t(2, 20)]),  # the bucket
        mul_out,
        _node(4, "aten::copy_", [_t(3, 30), _t(2, 20)], [_t(3, 30)]),
    ]))
    assert (1, 2) in et.last and (0, 2) not in et.last


def _schema(node: dict[str, object], schema: str) -> dict[str, object]:
    node["attrs"] = [{"name": "op_schema", "type": "string", "value": schema}]
    return node


_MM_OUT = "aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)"


def test_a_compiled_graphs_out_buffers_are_its_writes_not_reads(tmp_path: Path) -> None:
    """CUDA's caching allocator gives a graph's ``out=`` buffer (allocated unseen by the observer) the
    address of a tensor freed just before: ones_like's. The graph writes it; pow reads the graph's."""
    from tc_analyses.analyses.edge_check import COMPILED_GRAPH_OP

    et = read_et(_write(tmp_path, [
        _node(2, "aten::randn", [], [_t(1, 100)]),
        _node(3, "aten::ones_like", [_t(9, 900)], [_t(2, 200)]),  # 200 is then freed
        _node(4, "CompiledFunction", [_t(1, 100)], []),
        _node(5, "## Call CompiledFxGraph abc ##", [], [], parent=4),
        _node(6, "PythonDispatchMode", [], [], parent=5),  # a first call on CUDA: between the graph and its op
        _schema(_node(7, "aten::mm", [_t(1, 100), _t(1, 100), _t(3, 200)], [_t(3, 200)], parent=6), _MM_OUT),
        _node(8, "aten::pow", [_t(3, 200)], [_t(4, 400)]),
    ]))
    assert et.names == ["aten::randn", "aten::ones_like", COMPILED_GRAPH_OP, "aten::pow"]  # mm is inside
    assert (1, 2) not in et.last and not et.allows(1, 2)
    assert (0, 2) in et.last and (2, 3) in et.last and (1, 3) not in et.last


def _triton(node_id: int, tensors: list[object], parent: int) -> dict[str, object]:
    return _node(node_id, f"triton_poi_fused_{node_id}", [*tensors, 512, 0], [], parent=parent)


def test_a_backward_graph_reads_saved_tensors_and_makes_the_rest(tmp_path: Path) -> None:
    """A backward graph's function lists only the incoming gradient. Its extern kernels read saved
    tensors (a forward graph used them since their last write); a buffer no forward graph used
    since a backward op wrote it there is the graph's own. Its Triton kernels read or write: what
    they use may be read (allowed), and rewritten where it was freed."""
    et = read_et(_write(tmp_path, [
        _node(2, "aten::randn", [], [_t(1, 100)]),  # the input
        _node(3, "CompiledFunction", [_t(1, 100)], []),
        _node(4, "## Call CompiledFxGraph f ##", [], [], parent=3),
        _schema(_node(5, "aten::mm", [_t(1, 100), _t(1, 100), _t(2, 200)], [_t(2, 200)], parent=4), _MM_OUT),
        _triton(6, [_t(2, 200), _t(3, 300)], parent=4),  # 300: the forward's output, written by Triton
        _node(7, "aten::pow", [_t(3, 300)], [_t(4, 400)]),
        _node(8, "aten::mul", [_t(4, 400)], [_t(5, 500)]),  # the gradient
        _node(9, "aten::neg", [_t(4, 400)], [_t(6, 600)]),  # a backward op's output at 600, freed
        _node(10, "CompiledFunctionBackward", [_t(5, 500)], []),
        _node(11, "## Call CompiledFxGraph b ##", [], [], parent=10),
        _triton(12, [_t(5, 500), _t(7, 600)], parent=11),  # 600: the graph's own now
        _schema(_node(13, "aten::mm", [_t(7, 600), _t(2, 200), _t(8, 700)], [_t(8, 700)], parent=11), _MM_OUT),
        _triton(14, [_t(8, 700), _t(1, 100), _t(9, 300)], parent=11),  # reads x; a gradient where 300 was
        _node(15, "aten::detach", [_t(9, 300)], [_t(10, 300)]),
        _node(16, "aten::detach", [_t(8, 700)], [_t(11, 700)]),
    ]))
    graph, backward = 1, 5
    assert et.names[backward] == et.names[graph] == "inductor::compiled_graph"
    assert (graph, 2) in et.last  # pow reads the forward graph's output, which its Triton kernel wrote
    assert (graph, backward) in et.last  # mm reads the saved 200, which the forward graph made
    assert (3, backward) in et.last  # the gradient, its function's input
    assert (4, backward) not in et.last and not et.allows(4, backward)  # 600 is the graph's own
    assert et.allows(0, backward) and (0, backward) not in et.last  # x, used by a Triton kernel: allowed
    assert (backward, 7) in et.last  # what its extern kernel wrote
    # The observer's writer of what detach reads is the forward graph; the backward graph may have
    # written there (a gradient where the saved 300 was): an edge of ours from it excuses the pair.
    assert (graph, 6) in et.last and et.rewritten[backward] == {100, 300, 500}  # 500: its input, freed too


_CUDA = Path(__file__).parent.parent / "data" / "traces" / "cuda" / "h200-compiled"


@pytest.mark.parametrize("name, recall", [("cnn-default", 1.0), ("transformer-graph-break", 1.0),
                                          ("cnn-reduce-overhead", 1.0), ("cnn-reduce-overhead-6", 1.0)])
def test_compiled_programs_recorded_on_cuda(tmp_path: Path, name: str, recall: float) -> None:
    """The torch.compile programs recorded on an H200: the observer's view of compiled graphs (out=
    buffers, Triton kernels, saved tensors) read as above. reduce-overhead: CUDA-graph replays write
    their static outputs unseen by the profiler; the recorder finds them (tracer/torch_convert.py
    _replayed_into), over windows too (6 steps: the frees and the readers a window apart)."""
    import gzip
    import shutil

    from tc_analyses.analyses.edge_check import check_edges

    folder = _CUDA / name
    if not (folder / "et.json.gz").is_file() or not (folder / "job").is_dir():
        pytest.skip(f"{folder}: not here")
    et = tmp_path / "et.json"
    with gzip.open(folder / "et.json.gz", "rb") as packed, open(et, "wb") as out:
        shutil.copyfileobj(packed, out)
    main = min((p for p in (folder / "job").iterdir() if p.is_dir()), key=lambda p: int(p.name.split("-")[-1]))
    check = check_edges(main, et)
    assert check.ops_matched == check.ops_ours
    assert check.precision == 1.0
    assert check.recall is not None and check.recall >= recall
