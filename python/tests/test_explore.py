"""``onesided.explore``: the schedule explorer on a scenario's text, no server — the same
report as ``onesided explore --json`` (cli/tests/cli/explore.rs holds the CLI to it)."""

import json
import os
import subprocess

import pytest

import onesided

REPOSITORY = os.path.join(os.path.dirname(__file__), "..", "..")

# forum example 2, broken: B loads X after the barrier without locking its own window
EXAMPLE = os.path.join(REPOSITORY, "examples", "forum2_load_without_lock.rma")
with open(EXAMPLE) as example:
    LOAD_WITHOUT_LOCK = example.read()


def test_both_values_mpi_allows_show_up_and_the_race_is_named_by_its_lines() -> None:
    report = onesided.explore(LOAD_WITHOUT_LOCK, schedules=300, seed=5)
    assert report["schedules"] == 300
    assert report["ok"] is True
    seen = report["distribution"]["B b"]
    assert set(seen) == {"0", "42"}
    assert sum(seen.values()) == 300
    (race,) = report["races"]
    assert race["rule"] == "put_load"
    assert [a["line"] for a in race["accesses"]] == [10, 13]  # the put, the load
    assert race["count"] == 300
    # the same arguments, the same report; --check makes the race fail it
    assert onesided.explore(LOAD_WITHOUT_LOCK, schedules=300, seed=5) == report
    assert onesided.explore(LOAD_WITHOUT_LOCK, schedules=300, seed=5, check=True)["ok"] is False


def test_exhaustive_says_it_saw_every_schedule() -> None:
    report = onesided.explore(LOAD_WITHOUT_LOCK, strategy="exhaustive", schedules=100_000)
    assert report["complete"] is True
    assert set(report["distribution"]["B b"]) == {"0", "42"}


def test_the_report_is_the_one_the_cli_prints() -> None:
    # python/test.sh builds the CLI beside the server
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPOSITORY, "target"))
    cli = os.path.join(target, "debug", "onesided")
    assert os.path.exists(cli), f"{cli}: build it with cargo build -p onesided-cli"
    printed = subprocess.run(
        [cli, "--json", "explore", EXAMPLE, "--schedules", "200", "--strategy", "pct:2"],
        check=True, capture_output=True, text=True,
    ).stdout
    report = onesided.explore(LOAD_WITHOUT_LOCK, schedules=200, strategy="pct:2", name=EXAMPLE)
    assert json.loads(printed) == report


def test_bad_input_is_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="<scenario>:1:1: no window declared"):
        onesided.explore("A: fence\n")
    with pytest.raises(onesided.ArgumentError, match="strategy"):
        onesided.explore(LOAD_WITHOUT_LOCK, strategy="sometimes")
    with pytest.raises(onesided.ArgumentError, match="schedules"):
        onesided.explore(LOAD_WITHOUT_LOCK, schedules=0)


def test_a_crashed_rank_fails_the_fence_that_needs_it_in_every_schedule() -> None:
    crash = (
        "window W ranks=2 size=1 type=i64\nA: W.fence\nB: W.fence\nA: crash\n"
        "B: W.fence !PROC_FAILED\n"
    )
    report = onesided.explore(crash, schedules=50)
    assert report["ok"], report
    [failed] = report["failed_calls"]
    assert (failed["class"], failed["count"], failed["line"]) == ("PROC_FAILED", 50, 5)
