"""Named backend registries: built-in backends, extensions and test fakes all register the same way.

Config names a backend as a plain string (`llm.backend`, `embedding.backend`,
`search.backend`); the registry that owns those names validates it when the backend is
looked up, so a backend registered by a test or an extension is as valid as a built-in.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from deepresearch.errors import ConfigError, DeepResearchError

F = TypeVar("F", bound=Callable[..., object])


class Registry(Generic[F]):
    """Factories by name for one kind of backend (`key` is the config key that selects one)."""

    def __init__(self, kind: str, key: str, error: type[DeepResearchError] = ConfigError, hint: str = ""):
        self.kind = kind
        self.key = key
        self.error = error
        self.hint = hint
        self._factories: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator: register `factory` under `name` (a later registration replaces an earlier one)."""

        def decorator(factory: F) -> F:
            self._factories[name] = factory
            return factory

        return decorator

    def unregister(self, name: str) -> None:
        """Remove `name` (no error if it is not registered)."""
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def get(self, name: str) -> F:
        """The factory registered as `name`; an unknown name raises the registry's error naming the choices."""
        try:
            return self._factories[name]
        except KeyError:
            raise self.error(
                f"unknown {self.kind} {name!r} — choose one of {', '.join(self.names())}"
                f" ({self.key} in your config{self.hint})"
            ) from None
