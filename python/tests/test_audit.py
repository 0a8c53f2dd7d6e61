"""What a Python rank does only locally (its loads and stores) reaches the audit log through
the Rust client's own shipping, so the race checker judges a Python program like a Rust one."""

import json

import onesided
from onesided import LockType

from conftest import ranks

X, NEW = 0, 42


def store_then_remote_get(pair, locked):
    """Forum example 1: B stores X (under its own lock, or not), barrier, A reads B's X."""

    def program(rank, w):
        if rank == 1:
            if locked:
                w.lock(LockType.EXCLUSIVE, 1)
            w.store(X, [NEW])
            if locked:
                w.unlock(1)
            w.session.barrier()
            w.session.barrier()
            return None
        w.session.barrier()
        w.lock(LockType.EXCLUSIVE, 1)
        value = w.get(1, X, 1)
        w.unlock(1)
        w.session.barrier()
        return value.value()[0]

    windows = pair.windows()
    seen = ranks(windows, program)
    for session in pair.sessions:
        session.close()  # everything shipped and recorded
    return windows[0].desc.id, seen[0]


def test_a_store_the_owner_never_published_is_a_finding(server, pair):
    window, seen = store_then_remote_get(pair, locked=False)
    assert seen == 0
    audit = onesided.Audit(server.url, server.token)
    stores = [e for e in audit.events(window) if e.kind == "store"]
    assert [(e.rank, json.loads(e.body)["ranges"]) for e in stores] == [(1, [[0, 8]])]
    findings = audit.check(window)
    assert [(f.rule, f.target, f.bytes) for f in findings] == [("get_store", 1, (0, 8))]
    calls = sorted([findings[0].first[2:], findings[0].second[2:]])
    assert calls == [(0, "get"), (1, "store")]
    events, first_bad = audit.verify(window)
    assert first_bad is None and events > 0
    at, public = audit.replay(window)
    assert public[1][:8] == bytes(8), "the store never reached rank 1's public copy"


def test_the_same_store_under_the_owners_lock_is_clean(server, pair):
    window, seen = store_then_remote_get(pair, locked=True)
    assert seen == NEW
    audit = onesided.Audit(server.url, server.token)
    assert audit.check(window) == []
    at, public = audit.replay(window)
    assert public[1][:8] == NEW.to_bytes(8, "little")
