"""Hostile user pipelines, loaded with ``--pipeline tests.support.hostile_pipelines:NAME``.

Each misbehaves in one way a real pipeline can: the run must give its items a row each (an
error, or a repaired output) and go on."""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from typing import Any

EMPTY: dict[str, Any] = {"entities": [], "relationships": []}


class Unprintable(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class HostileAttributes(Exception):
    """An exception whose attributes raise when read (``raw``, ``attempts``, ``usage``)."""

    @property
    def raw(self) -> str:
        raise RuntimeError("no raw")

    @property
    def attempts(self) -> int:
        raise RuntimeError("no attempts")


class OwnBaseException(BaseException):
    pass


def system_exit(**_: Any) -> Any:
    raise SystemExit(3)


def keyboard_interrupt(**_: Any) -> Any:
    raise KeyboardInterrupt


async def async_keyboard_interrupt(**_: Any) -> Any:
    raise KeyboardInterrupt


async def async_system_exit(**_: Any) -> Any:
    raise SystemExit("bye")


def generator_exit(**_: Any) -> Any:
    raise GeneratorExit


def own_base_exception(**_: Any) -> Any:
    raise OwnBaseException("mine")


def stop_iteration(**_: Any) -> Any:
    raise StopIteration


def unprintable(**_: Any) -> Any:
    raise Unprintable


def hostile_attributes(**_: Any) -> Any:
    raise HostileAttributes("attributes raise")


def own_timeout(**_: Any) -> Any:
    raise TimeoutError("my own timeout")


def surrogate_output(**_: Any) -> Any:
    return {"entities": [{"name": "Ada \ud83d", "type": "person\udc00"}], "relationships": []}


def surrogate_string(**_: Any) -> Any:
    return '{"entities": [{"name": "Ada \\ud800", "type": "person"}], "relationships": []}'


def surrogate_error(**_: Any) -> Any:
    raise ValueError("bad \ud800 byte")


def hang(**_: Any) -> Any:
    time.sleep(30)
    return EMPTY


async def async_hang(**_: Any) -> Any:
    await asyncio.sleep(30)
    return EMPTY


def huge_message(**_: Any) -> Any:
    raise ValueError("x" * 5_000_000)


def echo_text(*, text: str, **_: Any) -> Any:
    """The item's last words as an entity: whatever the text holds reaches the output."""
    return {"entities": [{"name": text[-12:], "type": "echo"}], "relationships": []}


# A configured secret by its name's ending (``_API_KEY``): what a pipeline calling a partner
# service would have in its environment.
KEY_ENV = "PARTNER_API_KEY"


def _key_answer() -> dict[str, Any]:
    """A valid answer quoting the key, once whole and once broken by a newline."""
    key = os.environ[KEY_ENV]
    half = len(key) // 2
    return {
        "entities": [
            {"name": f"called with {key}", "type": "config"},
            {"name": f"{key[:half]}\n{key[half:]}", "type": "config"},
        ],
        "relationships": [],
    }


def key_in_answer(**_: Any) -> Any:
    """Warns with the key (``warnings.warn``) and returns it in a valid answer."""
    warnings.warn(f"partner called with {os.environ[KEY_ENV]}", stacklevel=1)
    return _key_answer()


def key_in_answer_text(**_: Any) -> Any:
    """The same answer as JSON text: it is also the item's ``raw_output``."""
    return json.dumps(_key_answer())


def key_split_in_error(**_: Any) -> Any:
    """An error quoting the key wrapped over two lines (an error body at 80 columns)."""
    key = os.environ[KEY_ENV]
    half = len(key) // 2
    raise PermissionError(f"partner refused the key {key[:half]}\n{key[half:]} for this call")


def text_in_answer(**_: Any) -> Any:
    """``ANSWER_TEXT`` in a valid answer: a value that is no secret where the run is made,
    and may be one on the machine that reads the run (``runs pull``)."""
    return {"entities": [{"name": os.environ["ANSWER_TEXT"], "type": "note"}], "relationships": []}
