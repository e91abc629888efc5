"""The machine's load while recording: noted by the session, said by the reports when busy."""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_analyses.analyses.machine_load import MachineLoad, busy_notice, of_env
from tc_analyses.reader import read_trace
from tracer import schema
from tracer.session import Session


def test_a_session_notes_the_cores_the_load_and_its_own_cpu_use(tmp_path: Path) -> None:
    with Session(str(tmp_path / "t")) as session:
        sum(i * i for i in range(200_000))  # some CPU time of its own
    env = read_trace(session.path).metadata.env
    for key in (schema.ENV_CORES, schema.ENV_LOAD_START, schema.ENV_LOAD_END, schema.ENV_CPU_S, schema.ENV_WALL_S):
        assert key in env, key
    load = of_env(env)
    assert load is not None and load.cores >= 1 and 0 < load.own <= load.cores + 0.5


@pytest.mark.parametrize("cores, load, cpu, wall, busy", [
    (2, 1.1, 1.0, 1.0, False),   # the program alone keeps one core busy
    (2, 2.2, 1.0, 1.0, True),    # a burner on the other core
    (16, 5.0, 4.0, 2.0, False),  # 3 cores of other work on 16
    (16, 11.0, 2.0, 2.0, True),
])
def test_busy_means_other_work_on_half_the_cores(cores: int, load: float, cpu: float, wall: float, busy: bool) -> None:
    env = {schema.ENV_CORES: cores, schema.ENV_LOAD_START: f"{load:.2f}", schema.ENV_LOAD_END: "0.10",
           schema.ENV_CPU_S: str(cpu), schema.ENV_WALL_S: str(wall)}
    found = of_env(env)
    assert found == MachineLoad(cores, load, cpu / wall)
    notice = busy_notice(env)
    assert (notice is not None) == busy
    if notice:
        assert notice.startswith("recorded on a busy machine") and f"on {cores} core(s)" in notice


def test_a_trace_without_the_note_says_nothing() -> None:
    assert of_env({"pid": 4}) is None and busy_notice({}) is None


def test_recommend_and_parallelism_say_when_the_recording_was_busy(tmp_path: Path, cli: object) -> None:
    """The metadata of a committed trace (recorded before the note existed) given a busy machine's
    note: both planning commands print it."""
    import shutil

    trace = tmp_path / "trace"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "traces" / "cuda" / "h200-eager" / "convnet-cpu"
                    / "trace", trace)
    metadata = trace / "metadata"
    text = metadata.read_text()
    note = (f'\t{schema.ENV_CORES} = 2;\n\t{schema.ENV_LOAD_START} = "2.60";\n\t{schema.ENV_LOAD_END} = "2.40";\n'
            f'\t{schema.ENV_CPU_S} = "9.0";\n\t{schema.ENV_WALL_S} = "10.0";\n')
    metadata.write_text(text.replace("env {\n", "env {\n" + note, 1))
    placed = cli("recommend-placement", trace, "--devices", "cpu,cuda:0=H200", "-o", tmp_path / "plan")  # type: ignore[operator]
    assert placed.exit_code == 0, placed.stderr
    assert "notice:     recorded on a busy machine: a load of 1.7 besides this program on 2 core(s)" in placed.stdout
    planned = cli("parallelism", trace)  # type: ignore[operator]
    assert planned.exit_code == 0 and "recorded on a busy machine" in planned.stdout
    info = cli("info", trace)  # type: ignore[operator]
    assert "machine:    2 core(s), 1-minute load up to 2.60, the program used 0.9 core(s)  ** busy" in info.stdout
