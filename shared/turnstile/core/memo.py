"""`cached_property` without the lock Python 3.11's takes.

`functools.cached_property` in Python 3.11 computes under one lock per property shared by every
instance of the class (removed in 3.12, CPython gh-87634). Threads that read the state of
different tables at once (`turnstile status`, the console) then wait on each other's storage
reads, and two properties whose computations read each other deadlock them. This one keeps no
lock: an instance is used by one thread, and a value computed twice by two threads is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_property(Generic[T]):  # noqa: N801 (named as the functools one it stands for)
    """Computes the value on first access and stores it in the instance's `__dict__`, which later
    accesses read directly (a non-data descriptor)."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.attrname: str | None = None
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        if self.attrname is None:
            raise TypeError("cached_property used without __set_name__")
        value = self.func(instance)
        instance.__dict__[self.attrname] = value
        return value
