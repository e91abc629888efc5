"""Event-name patterns of XML analyses, matched in linear time.

Trace Compass compiles a handler's ``eventName`` (``*`` read as ``.*``) as a Java regex. A user's
pattern such as ``(.|.|.|.|.)+Z`` makes a backtracking engine (Java's, Python's ``re``) take
exponential time on a 20-letter name: ``states`` ran past 120 s on one. Patterns go through RE2
(google-re2), whose time is linear in the name. RE2 has no backreferences, lookaround, atomic
groups or possessive quantifiers; a pattern that needs them is refused in one line, not matched
in unbounded time (no event name needs them).
"""

from __future__ import annotations

from typing import Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is ours to report, in one line, not absl's on stderr


class NameMatcher(Protocol):
    def fullmatch(self, string: str) -> object | None: ...


def compile_event_name(text: str) -> NameMatcher:
    """The matcher of an ``eventName`` (``*`` is ``.*``); ValueError saying why it cannot be one."""
    try:
        matcher: NameMatcher = re2.compile(text.replace("*", ".*"), options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"{detail} (dfcompass matches event names with RE2, in linear time: no backreferences "
                         "or lookaround)") from None
    return matcher
