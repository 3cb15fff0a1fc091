"""The root of the provider's errors.

Every error a layer raises for a reason the user can act on derives from
:class:`ProviderError`: it carries a ``message``, the binlog ``position`` it refers to (a
``file:pos`` text, or None) and a ``hint`` saying what to do next. This module imports
nothing of the provider, so every layer may import it.
"""
from __future__ import annotations

from typing import Optional


class ProviderError(Exception):
    """Base class of the provider's errors: message, position and hint."""

    default_hint = ""

    def __init__(self, message: str, *, position: Optional[str] = None,
                 hint: Optional[str] = None) -> None:
        self.message = message
        self.position = position
        self.hint = self.default_hint if hint is None else hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"at {self.position}: {self.message}" if self.position else self.message
        return f"{text} ({self.hint})" if self.hint else text

    def __reduce__(self):
        # keep the fields when the error crosses processes
        return _rebuild, (type(self), self.message, self.position, self.hint)


def _rebuild(cls, message, position, hint):
    return cls(message, position=position, hint=hint)


__all__ = ["ProviderError"]
