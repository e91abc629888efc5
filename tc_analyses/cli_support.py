"""What every ``dfcompass`` command shares: one-line errors and exit codes, progress bars, and
the option types that check a value when it is parsed (a bad one is a usage error, exit 2)."""

from __future__ import annotations

import errno
import functools
import gc
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import click

from tc_analyses.errors import DfcompassError

F = TypeVar("F", bound=Callable[..., Any])


class State:
    debug = False
    progress = True
    exits_after_command = False  # the dfcompass process's own command line, not a caller's in-process run


def _fail(message: str, code: int) -> None:
    click.echo(f"dfcompass: error: {message}", err=True)
    sys.exit(code)


OUTPUT_OPTIONS = ("output", "csv_out", "parquet_out", "plots")  # the parameters naming what a command writes
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}  # a disk that takes no more


def handle_errors(func: F) -> F:
    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DfcompassError as exc:
            _fail(" ".join(str(exc).split()), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except BrokenPipeError:
            sys.exit(0)
        except OSError as exc:  # a file dfcompass cannot write or read that no reader caught
            output = next((kwargs[k] for k in OUTPUT_OPTIONS if kwargs.get(k) is not None), None)
            if exc.filename is None and exc.errno in _FULL and output is not None:
                # a write() names no file: the command's own output is where it failed
                _fail(f"{os.fsdecode(output)}: cannot write the output ({exc.strerror})", 1)
            where = f"{exc.filename}: " if exc.filename is not None else ""
            _fail(f"{where}{exc.strerror or type(exc).__name__}", 1)
        except Exception as exc:  # never a traceback by default: one line, exit 1
            if State.debug:
                traceback.print_exc()
            _fail(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (run with --debug for details)", 1)
        return None

    return run  # type: ignore[return-value]


def without_cycle_collector(func: F) -> F:
    """Run an analysis command with Python's cyclic garbage collector off.

    Analyses hold millions of long-lived objects (graph nodes, plans, rows) and make few reference
    cycles; the collector re-scanning the growing heap took a quarter of ``analyze`` on a 1M-event
    trace (54 s against 40 s without it, at the same peak RSS). Reference counting still frees
    everything else. Not for commands that run the user's program (record, verify, demo)."""
    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if State.exits_after_command:
                # The process ends next, and Python's last act is a full collection, collector on or
                # off: it scanned every object the command made (3.4 of 19 s of analyze on a 1M-event
                # trace). Frozen objects are left out of it; reference counting still frees them.
                gc.freeze()
            elif enabled:
                gc.enable()

    return run  # type: ignore[return-value]


class OneLineErrors(click.Group):
    """A command group whose usage errors (a missing argument, a bad choice or range, an unknown
    option) are one line on stderr, with the usage in it, and exit code 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Only a standalone run on sys.argv is the process's own command line (it exits next).
        State.exits_after_command = (kwargs.get("standalone_mode", True) and not args
                                     and kwargs.get("args") is None)
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as exc:  # the bare command: its help, as click gives it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            usage = " ".join(exc.ctx.get_usage().split()) if exc.ctx is not None else ""
            _fail(" ".join(exc.format_message().split()) + (f" ({usage})" if usage else ""), exc.exit_code)
        except click.ClickException as exc:
            _fail(" ".join(exc.format_message().split()), exc.exit_code)
        except click.Abort:
            _fail("aborted", 1)
        sys.exit(code if isinstance(code, int) else 0)


class MissingInput(click.ClickException):
    exit_code = 1  # a data problem, as a trace that cannot be read is


class InputPath(click.Path):
    """A file or folder a command reads: a missing one fails while the arguments are parsed, before
    the command imports anything heavy, so a mistyped path answers as fast as ``--help``."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if not os.path.lexists(path):
            raise MissingInput(f"{os.fsdecode(path)}: does not exist")
        return path


@contextmanager
def progress(label: str, total: int | None, unit: str = "items") -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr when interactive; a no-op otherwise. `unit`: bytes or items."""
    if not State.progress or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    count = (DownloadColumn() if unit == "bytes" else MofNCompleteColumn()) if total else TextColumn("{task.completed}")
    columns = [TextColumn(label), BarColumn(), count, TimeRemainingColumn()]
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def trace_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else 0


def _check(convert: Callable[[str], Any], value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
    try:
        convert(str(value))
    except DfcompassError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return str(value)


class PeaksDevice(click.ParamType):
    """A device whose peaks the device table knows: cpu, CPU-<cores> or a GPU model (H100...)."""

    name = "device"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from tc_analyses.perf.devices import spec

        return _check(spec, value, param, ctx)


class DeviceList(click.ParamType):
    """Devices to place on: cpu,cuda:0[=H100],hostB:cuda:0 ..."""

    name = "devices"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from tc_analyses.perf.devices import parse_devices

        return _check(parse_devices, value, param, ctx)


PEAKS_DEVICE, DEVICE_LIST = PeaksDevice(), DeviceList()
