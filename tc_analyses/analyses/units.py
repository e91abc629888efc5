"""Durations, sizes and times as people read them in reports and findings."""

from __future__ import annotations

from datetime import datetime, timezone


def fmt_ns(ns: float) -> str:
    """850 ns, 12.3 µs, 4.56 ms, 1.23 s."""
    if abs(ns) < 1e3:
        return f"{ns:.0f} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def fmt_ms(ns: float) -> str:
    """Milliseconds with three decimals, for tables that line up: 12.345 ms."""
    return f"{ns / 1e6:.3f} ms"


def fmt_bytes(nbytes: float) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 3.0 MiB."""
    value, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def fmt_utc(ns: int | None) -> str:
    """A time in Trace Compass's time base (ns since the epoch) as UTC to the nanosecond:
    2026-11-29T18:12:33.123456789Z; "-" for None."""
    if ns is None:
        return "-"
    seconds, rest = divmod(ns, 1_000_000_000)
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest:09d}Z"
    except (OverflowError, OSError, ValueError):  # a damaged clock offset: past the calendar's years
        return f"{ns} ns since the epoch"
