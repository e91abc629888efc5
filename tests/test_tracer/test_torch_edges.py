"""PyTorch recording: rebuilt edges equal the true dataflow of hand-written models.

Each model's dataflow is known by construction; the tests compare the recorded dfc:tensor_edge
events (between outermost aten ops) with it, exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader import read_trace  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402

nn = torch.nn


def record(tmp_path: Path, body, **options) -> tuple[list[tuple[str, str]], set[tuple[int, int]], object]:
    """Run `body` under a TorchRecorder; return nodes [(op, scope)] in time order and edges (i, j)."""
    torch.manual_seed(0)
    out = tmp_path / "trace"
    with TorchRecorder(str(out), cuda=False, **options):
        body()
    trace = read_trace(out)
    nodes = trace.table("node_begin")
    index = {nid: i for i, nid in enumerate(nodes["node_id"].tolist())}
    labels = list(zip(nodes.text("op").tolist(), nodes.text("name").tolist()))
    edges_table = trace.table("tensor_edge")
    edges = {(index[p], index[c]) for p, c in zip(edges_table["producer"].tolist(), edges_table["consumer"].tolist())}
    return labels, edges, trace


def ops_of(labels: list[tuple[str, str]]) -> list[str]:
    return [op for op, _ in labels]


def find(labels: list[tuple[str, str]], op: str, nth: int = 0) -> int:
    return [i for i, (o, _) in enumerate(labels) if o == op][nth]


def assert_acyclic_forward(edges: set[tuple[int, int]]) -> None:
    # Nodes are numbered in time order: every edge must point forward, hence no cycle.
    assert all(p < c for p, c in edges), sorted(e for e in edges if e[0] >= e[1])


def test_chain_of_functional_ops(tmp_path: Path) -> None:
    w = torch.randn(8, 8)
    x = torch.randn(4, 8)

    def body() -> None:
        y = torch.mm(x, w)
        z = torch.sigmoid(y)
        torch.sum(z)

    labels, edges, _ = record(tmp_path, body)
    assert ops_of(labels) == ["aten::mm", "aten::sigmoid", "aten::sum"]
    assert edges == {(0, 1), (1, 2)}  # x and w come from outside the recording: no producer


def test_residual_block(tmp_path: Path) -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):  # type: ignore[no-untyped-def]
            h = torch.relu(self.conv1(x))
            return torch.relu(self.conv2(h) + x)

    block = Block()
    x = torch.randn(2, 4, 8, 8)
    stem = nn.Conv2d(4, 4, 1)

    def body() -> None:
        with torch.no_grad():
            block(stem(x))

    labels, edges, _ = record(tmp_path, body)
    assert ops_of(labels) == ["aten::conv2d", "aten::conv2d", "aten::relu", "aten::conv2d", "aten::add", "aten::relu"]
    stem_, c1, r1, c2, add, r2 = range(6)
    # the skip connection: the stem's output feeds both conv1 and the add
    assert edges == {(stem_, c1), (c1, r1), (r1, c2), (c2, add), (stem_, add), (add, r2)}
    assert [name for _, name in labels] == ["Conv2d", "Block.conv1", "Block", "Block.conv2", "Block", "Block"]


def test_branchy_block(tmp_path: Path) -> None:
    a_lin, b_lin = nn.Linear(8, 8), nn.Linear(8, 8)
    x = torch.randn(4, 8)

    def body() -> None:
        with torch.no_grad():
            a = a_lin(x)
            b = b_lin(x)
            c = a * b
            d = a + c
            torch.cat([d, b], dim=1)

    labels, edges, _ = record(tmp_path, body)
    assert ops_of(labels) == ["aten::linear", "aten::linear", "aten::mul", "aten::add", "aten::cat"]
    a, b, mul, add, cat = range(5)
    assert edges == {(a, mul), (b, mul), (a, add), (mul, add), (add, cat), (b, cat)}  # cat reads a TensorList


def test_in_place_relu_becomes_the_writer(tmp_path: Path) -> None:
    lin = nn.Linear(8, 8)
    x = torch.randn(4, 8)

    def body() -> None:
        with torch.no_grad():
            y = lin(x)
            y.relu_()
            z = y * 2
            y.add_(1)
            y.sum() + z.sum()

    labels, edges, _ = record(tmp_path, body)
    assert ops_of(labels) == ["aten::linear", "aten::relu_", "aten::mul", "aten::add_", "aten::sum", "aten::sum",
                              "aten::add"]
    lin_, relu_, mul, add_, sum_y, sum_z, final = range(7)
    # mul reads the relu'd value, not the linear output: no false edge linear -> mul
    assert edges == {(lin_, relu_), (relu_, mul), (relu_, add_), (add_, sum_y), (mul, sum_z), (sum_y, final),
                     (sum_z, final)}
    assert (lin_, mul) not in edges
    assert_acyclic_forward(edges)


def test_views_and_reshapes_add_no_edges_of_their_own(tmp_path: Path) -> None:
    lin = nn.Linear(8, 8)
    x = torch.randn(4, 8)

    def body() -> None:
        with torch.no_grad():
            y = lin(x)
            v = y.view(-1)
            r = v.reshape(2, 16)
            t = r.t()
            t.sum()

    labels, edges, _ = record(tmp_path, body)
    assert ops_of(labels) == ["aten::linear", "aten::view", "aten::reshape", "aten::t", "aten::sum"]
    lin_, view, reshape, transpose, sum_ = range(5)
    # every view reads the linear's storage; the sum reads it too, through the views
    assert edges == {(lin_, view), (lin_, reshape), (lin_, transpose), (lin_, sum_)}


def test_training_step_links_backward_and_optimizer(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])

    def body() -> None:
        for _ in range(2):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
            opt.step()

    labels, edges, trace = record(tmp_path, body)
    assert_acyclic_forward(edges)
    names = [name for _, name in labels]
    backward = [i for i, name in enumerate(names) if name.endswith("(backward)")]
    optimizer = [i for i, name in enumerate(names) if name.startswith("Optimizer.step")]
    assert backward and optimizer
    # backward ops read forward tensors: at least one edge from a forward op into backward
    forward = [i for i, name in enumerate(names) if not name.endswith("(backward)") and i < backward[0]]
    assert any(p in forward and c in backward for p, c in edges)
    # backward scopes name the forward modules
    assert {"Sequential.0 (backward)", "Sequential.2 (backward)"} <= set(names)
    # the optimizer's in-place updates read gradients made in backward ...
    assert any(p in backward and c in optimizer for p, c in edges)
    # ... and the second step's forward reads the weights the first step's optimizer wrote
    second_forward = [i for i, (op, name) in enumerate(labels) if op == "aten::linear" and i > optimizer[0]]
    assert any(p in optimizer and c in second_forward for p, c in edges)
    # memory: allocations with bytes in use, frees never below zero
    allocs = trace.table("mem_alloc")
    assert len(allocs) > 0 and (allocs["bytes_in_use"] >= allocs["bytes"]).all()


def test_node_args_hold_shapes_and_dtypes(tmp_path: Path) -> None:
    x = torch.randn(3, 5)
    idx = torch.tensor([0, 2])

    def body() -> None:
        torch.index_select(x, 0, idx)

    _, _, trace = record(tmp_path, body)
    args = trace.table("node_args")
    assert args.text("shapes").tolist() == ["[[3, 5], [], [2]]"]
    assert args.text("dtypes").tolist() == ["float32,,int64"]


def test_schedule_records_only_active_steps(tmp_path: Path) -> None:
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    out = tmp_path / "trace"
    with TorchRecorder(str(out), wait=1, warmup=1, active=2, cuda=False) as rec:
        for _ in range(5):
            with torch.no_grad():
                lin(x)
            rec.step()
    trace = read_trace(out)
    steps = trace.table("node_begin")["step"].tolist()
    assert sorted(set(steps)) == [2, 3]  # steps 0 (wait) and 1 (warmup) are not recorded
    assert len(trace.table("step_begin")) == 2


def test_thread_settings_go_into_the_metadata(tmp_path: Path) -> None:
    _, _, trace = record(tmp_path, lambda: torch.relu(torch.ones(2)))
    env = trace.metadata.env  # type: ignore[attr-defined]
    assert int(env["torch_num_threads"]) == torch.get_num_threads()
    assert int(env["torch_interop_threads"]) == torch.get_num_interop_threads()

