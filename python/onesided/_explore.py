"""``explore``: every schedule MPI allows of a ``.rma`` scenario, on onesided's in-memory
simulator (no server), as ``onesided explore FILE --json`` runs it."""

import json
from typing import Any, Dict

from . import _onesided


def explore(
    text: str,
    *,
    schedules: int = 1000,
    seed: int = 0,
    strategy: str = "random",
    check: bool = False,
    name: str = "<scenario>",
) -> Dict[str, Any]:
    """Runs the scenario ``text`` under ``schedules`` schedules drawn from ``seed`` by
    ``strategy`` (``"random"``, ``"pct"``, ``"pct:DEPTH"`` or ``"exhaustive"``) and returns the
    report ``onesided explore --json`` prints: ``distribution`` (each subject the
    expectations read: value → in how many schedules), ``expectations`` (each with ``failed``
    and the ``first`` schedule that failed it), ``failed_calls``, ``problems``,
    ``deadlocks``, ``races`` (the race checker over each schedule's log: the two lines that
    race, in how many schedules, the first), ``complete`` (under ``exhaustive``) and ``ok``
    (with ``check``, a race makes it false). The same arguments give the same report.

    Raises ``ValueError`` for text that does not parse (naming the line), ``ArgumentError``
    for a strategy or count that cannot be used, and ``MpiError`` for a window or call the
    server would refuse too.
    """
    document = _onesided.explore(
        text, schedules=schedules, seed=seed, strategy=strategy, check=check, name=name
    )
    report: Dict[str, Any] = json.loads(document)
    return report
