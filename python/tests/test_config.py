"""Mistakes in what a program gives the package — a token file, a token, a timeout, a name —
are ``ValueError``s that say which input and what is wrong, raised before anything is sent;
the same inputs done right work against the real server."""

from __future__ import annotations

import math
import os
import pathlib
from typing import Any, Callable, Dict

import pytest

import onesided
from onesided import ArgumentError, ConfigError, ErrorClass, LockType, Op, WindowSpec

from conftest import Fixture, Server, unique


def value_error(call: Callable[[], Any], *words: str) -> ValueError:
    """The ValueError ``call`` raises; its message holds each of ``words``."""
    with pytest.raises(ValueError) as caught:
        call()
    for word in words:
        assert word in str(caught.value), caught.value
    return caught.value


# ---- token files ----


def test_a_token_file_read_as_written(server: Server, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "admin-token"
    path.write_text("  " + server.token + "\n\n")
    token = onesided.read_token(path)
    assert token == server.token
    assert onesided.read_token(str(path)) == server.token, "a str path does too"
    onesided.Admin(server.url, token).list_worlds()


@pytest.mark.parametrize(
    "content, what",
    [
        (b"", "is empty"),
        (b" \n\t\n", "holds only blanks"),
        (b"first-token\nsecond-token\n", "more than one token"),
        (b"abc def\n", "more than one token"),
        (b"t\xc3\xb6ken\n", "not ASCII text"),
        (b"tok\x07en\n", "control characters"),
        (b"t" * (64 * 1024 + 1), "larger than 64 KiB"),
    ],
)
def test_a_token_file_that_holds_no_single_token(
    tmp_path: pathlib.Path, content: bytes, what: str
) -> None:
    path = tmp_path / "token"
    path.write_bytes(content)
    error = value_error(lambda: onesided.read_token(path), str(path), what)
    assert isinstance(error, ConfigError)


def test_a_token_file_that_is_missing_or_a_directory(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "no-such-token"
    value_error(lambda: onesided.read_token(missing), str(missing), "does not exist")
    value_error(lambda: onesided.read_token(tmp_path), str(tmp_path), "is a directory")


def test_a_token_file_that_cannot_be_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "token"
    path.write_text("secret\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("this user reads files whatever their mode (root)")
        value_error(lambda: onesided.read_token(path), str(path), "permission denied")
    finally:
        path.chmod(0o600)


# ---- tokens, addresses, timeouts ----


def test_a_token_that_cannot_be_sent_is_a_config_error(server: Server) -> None:
    for token in [server.token + "\n", "", "two words"]:
        for connect in [
            lambda: onesided.Admin(server.url, token),
            lambda: onesided.Audit(server.url, token),
            lambda: onesided.Session.attach(server.url, token),
        ]:
            error = value_error(connect, "token")
            assert isinstance(error, ConfigError)
    value_error(lambda: onesided.Admin(server.url, server.token + "\n"), "'\\n'", "read_token")


@pytest.mark.parametrize("option", ["connect_timeout", "timeout"])
@pytest.mark.parametrize("seconds", [-1.0, 0.0, math.nan, math.inf])
def test_a_timeout_that_is_no_duration_is_a_config_error(
    server: Server, option: str, seconds: float
) -> None:
    options: Dict[str, Any] = {option: seconds}
    for connect in [
        lambda: onesided.Admin(server.url, server.token, **options),
        lambda: onesided.Audit(server.url, server.token, **options),
        lambda: onesided.Session.attach(server.url, server.token, **options),
    ]:
        error = value_error(connect, option, "seconds > 0")
        assert isinstance(error, ConfigError)


def test_timeouts_given_right_are_used(server: Server, admin: onesided.Admin) -> None:
    world = admin.create_world(unique("cfg"), 1)
    session = onesided.Session.attach(
        server.url, world.tokens[0], connect_timeout=5, timeout=0.5, reattach_within=0
    )
    assert session.rank == 0
    session.close()
    onesided.Admin(server.url, server.token, connect_timeout=5, timeout=30).list_worlds()


def test_a_negative_reattach_within_is_a_config_error(server: Server) -> None:
    error = value_error(
        lambda: onesided.Session.attach(server.url, server.token, reattach_within=-1),
        "reattach_within",
        ">= 0",
    )
    assert isinstance(error, ConfigError)


def test_an_address_without_a_scheme_names_it(server: Server) -> None:
    address = server.url.split("://", 1)[1]
    error = value_error(lambda: onesided.Admin(address, server.token), "http://")
    assert isinstance(error, ConfigError)


# ---- names ----


def argument(call: Callable[[], Any], error_class: ErrorClass, *words: str) -> None:
    error = value_error(call, *words)
    assert isinstance(error, ArgumentError) and isinstance(error, onesided.MpiError)
    assert error.error_class == error_class


def test_unknown_names_are_argument_errors(server: Server, admin: onesided.Admin) -> None:
    argument(lambda: WindowSpec.bytes("w", 2, 16).model("unifed"), ErrorClass.ARG, "unifed")
    argument(lambda: WindowSpec.bytes("w", 2, 16).flavor("dynamik"), ErrorClass.ARG, "dynamik")
    argument(lambda: WindowSpec("w", [8], [1], model="sep"), ErrorClass.ARG, "memory model")
    argument(lambda: WindowSpec.of("w", 2, 4, "i65"), ErrorClass.TYPE, "i65")
    fixture = Fixture(server, admin, 2)
    session = fixture.sessions[0]
    argument(
        lambda: session.create_window(unique("w"), 8, model="unified-ish"),
        ErrorClass.ARG,
        "unified-ish",
    )
    w0, _ = fixture.windows()
    argument(lambda: w0.lock("medium", 1), ErrorClass.LOCKTYPE, "medium")
    w0.lock(LockType.EXCLUSIVE, 1)
    argument(lambda: w0.accumulate(1, 0, [1], "median"), ErrorClass.OP, "median")
    argument(lambda: w0.put(1, 0, [1], dtype="complex128"), ErrorClass.TYPE, "complex128")
    argument(lambda: w0.fetch_and_op(1, 0, [1, 2], Op.SUM), ErrorClass.COUNT, "one element")
    argument(lambda: w0.get_accumulate(1, 0, None, Op.SUM), ErrorClass.ARG, "needs values")
    w0.put(1, 0, [3])
    w0.unlock(1)
    w0.lock(LockType.SHARED, 1)
    got = w0.get(1, 0, 2)
    w0.unlock(1)
    assert list(got.value()) == [3, 0], "only the put given right was sent"
