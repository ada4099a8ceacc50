"""Encryption at rest of secret arguments (``@app.task(secret=(...))``).

With ``DULY_SECRET_KEY`` (or ``App(secret_key=)``) set, each secret argument's value is
encrypted with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``: ``duly[secrets]``)
before the payload is stored, as ``{"$sealed": "<token>"}`` in its place, and decrypted only by
the worker, just before the call. A Redis dump or a database backup then holds the token,
never the value. The key is any string (a long random one: ``python -c "import secrets;
print(secrets.token_urlsafe(32))"``); several comma-separated keys rotate: the first seals,
every one opens.

What it does not protect: the other arguments; the result; the running worker's memory; a
secret value a task puts in its exception message is scrubbed before it is stored
(``duly._secrets``), but anything the task itself logs or stores elsewhere is its own business;
and anyone holding the key (every worker needs it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from duly._errors import ConfigurationError

__all__ = [
    "HASHED",
    "LITERAL",
    "SEALED",
    "Sealer",
    "escape_argument",
    "plain_digest",
    "unescape_argument",
]

#: The key of the object that replaces a sealed value in a stored payload.
SEALED: Final = "$sealed"
#: The key of the object that wraps an argument that would otherwise read as an envelope: a
#: user's own ``{"$sealed": ...}`` (or ``{"$literal": ...}``) dict is stored as
#: ``{"$literal": {"$sealed": ...}}`` and given back as it was.
LITERAL: Final = "$literal"
_ENVELOPE_KEYS: Final = frozenset({SEALED, LITERAL})


def _looks_like_envelope(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and next(iter(value)) in _ENVELOPE_KEYS


def escape_argument(value: Any) -> Any:
    """An argument as stored: user data that reads as an envelope is wrapped in ``$literal``."""
    return {LITERAL: value} if _looks_like_envelope(value) else value


def unescape_argument(value: Any) -> Any:
    """A stored argument as the task gets it (``escape_argument`` undone)."""
    if type(value) is dict and len(value) == 1 and LITERAL in value:
        return value[LITERAL]
    return value


_JSON: Final = msgspec.json.Encoder()
_DECODE: Final = msgspec.json.Decoder()


#: What a key rendered from a secret argument starts with once hashed (``Sealer.digest``).
HASHED: Final = "#"


def plain_digest(text: str) -> str:
    """A key rendered from a secret argument, without a secret key: its SHA-256 (the same in
    every process, so uniqueness and mutexes hold; guessable for a value with few options)."""
    return HASHED + hashlib.sha256(text.encode()).hexdigest()


def _fernet_key(secret: str) -> bytes:
    return base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest())


class Sealer:
    """Seals and opens secret arguments inside payloads with one key (or several, rotating)."""

    def __init__(self, secret_key: str) -> None:
        try:
            from cryptography.fernet import Fernet, MultiFernet
        except ImportError:  # pragma: no cover - the extra is missing
            raise ConfigurationError(
                "a secret key (DULY_SECRET_KEY / App(secret_key=)) needs the cryptography "
                "package: pip install 'duly[secrets]'"
            ) from None
        keys = [k.strip() for k in secret_key.split(",") if k.strip()]
        if not keys:
            raise ConfigurationError("the secret key is empty")
        self._fernet = MultiFernet([Fernet(_fernet_key(k)) for k in keys])
        # Keys are hashed with the first (sealing) key only: after a rotation, a unique key
        # or mutex of a job stored before it no longer matches the same call's new one.
        self._hash_key = keys[0].encode()

    def __repr__(self) -> str:
        return "<duly.Sealer>"

    @classmethod
    def from_key(cls, secret_key: str | None) -> Sealer | None:
        """A Sealer for ``secret_key``, or None when there is none."""
        return None if not secret_key else cls(secret_key)

    def digest(self, text: str) -> str:
        """A key rendered from a secret argument, as stored: ``#`` and its HMAC-SHA256 under
        the first key (the same in every process holding it, so uniqueness and mutexes hold)."""
        return HASHED + hmac.new(self._hash_key, text.encode(), hashlib.sha256).hexdigest()

    def seal(self, payload: bytes, positions: Sequence[int], names: Sequence[str]) -> bytes:
        """``payload`` with the arguments at ``positions`` and the keywords ``names`` sealed."""
        call = _DECODE.decode(payload)
        args: list[Any] = call.get("args", [])
        kwargs: dict[str, Any] = call.get("kwargs", {})
        changed = False
        for index in positions:
            if index < len(args):
                args[index] = self._sealed(args[index])
                changed = True
        for name in names:
            if name in kwargs:
                kwargs[name] = self._sealed(kwargs[name])
                changed = True
        return _JSON.encode(call) if changed else payload

    def _sealed(self, value: Any) -> dict[str, str]:
        return {SEALED: self._fernet.encrypt(_JSON.encode(value)).decode()}

    def open(self, payload: bytes) -> bytes:
        """``payload`` with every sealed value opened; ValueError for a token no key opens."""
        if SEALED.encode() not in payload:
            return payload
        call = _DECODE.decode(payload)
        call["args"] = [self._opened(v) for v in call.get("args", [])]
        call["kwargs"] = {k: self._opened(v) for k, v in call.get("kwargs", {}).items()}
        return _JSON.encode(call)

    def open_value(self, value: Any) -> Any:
        """``value`` opened if it is a sealed argument this key opens, else as it is."""
        try:
            return self._opened(value)
        except ValueError:
            return value

    def _opened(self, value: Any) -> Any:
        if not (isinstance(value, dict) and len(value) == 1 and SEALED in value):
            return value
        from cryptography.fernet import InvalidToken

        try:
            return _DECODE.decode(self._fernet.decrypt(str(value[SEALED]).encode()))
        except (InvalidToken, ValueError):
            raise ValueError(
                "a sealed secret argument cannot be opened with this DULY_SECRET_KEY"
            ) from None


def open_without_key(payload: bytes) -> bytes:
    """For a worker without a key: ``payload``, or ValueError if it holds sealed values (an
    argument that is an envelope itself; a user's dict that only looks like one is escaped)."""
    if b'"' + SEALED.encode() + b'"' in payload and _has_envelope(payload):
        raise ValueError(
            "this job has sealed secret arguments: the worker needs DULY_SECRET_KEY to open them"
        )
    return payload


def _has_envelope(payload: bytes) -> bool:
    try:
        call = _DECODE.decode(payload)
    except msgspec.DecodeError:
        return False  # corrupt: decoding the call says so
    if not isinstance(call, dict):
        return False
    args, kwargs = call.get("args"), call.get("kwargs")
    values = list(args) if isinstance(args, list) else []
    values += kwargs.values() if isinstance(kwargs, dict) else ()
    return any(type(v) is dict and len(v) == 1 and SEALED in v for v in values)
