"""``read_token``: a token from the file that holds it (the server's ``admin-token``, a rank's
token saved by a script), with every way such a file can be wrong as a ``ConfigError``."""

from __future__ import annotations

import os
from typing import Union

from ._errors import ConfigError, StatusCode


def _bad(path: object, what: str) -> ConfigError:
    return ConfigError("token file {}: {}".format(path, what), StatusCode.INVALID_ARGUMENT)


def read_token(path: Union[str, "os.PathLike[str]"]) -> str:
    """The token in the file at ``path``: its one line, without the line end and surrounding
    blanks. ``ConfigError`` (a ``ValueError``) naming the file when it does not exist, is a
    directory, cannot be read, is not text, is empty, or holds anything but one token
    (printable ASCII without spaces, on one line)."""
    try:
        with open(path, "rb") as file:
            # a token is short: more than this is not a token file
            data = file.read(64 * 1024 + 1)
    except FileNotFoundError:
        raise _bad(path, "does not exist") from None
    except IsADirectoryError:
        raise _bad(path, "is a directory, not a file") from None
    except PermissionError:
        raise _bad(path, "cannot be read: permission denied") from None
    except OSError as error:
        raise _bad(path, "cannot be read: {}".format(error.strerror or error)) from None
    if len(data) > 64 * 1024:
        raise _bad(path, "is larger than 64 KiB: not a token file")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise _bad(path, "is not ASCII text: a token is printable ASCII") from None
    token = text.strip()
    if not token:
        raise _bad(path, "is empty" if not text else "holds only blanks")
    if len(token.split()) > 1:
        raise _bad(path, "holds more than one token (blanks or several lines)")
    if not all(char.isprintable() for char in token):
        raise _bad(path, "holds control characters: a token is printable ASCII")
    return token
