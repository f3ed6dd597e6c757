"""`Registry`: the kinds one config key may name, each registered by one call in its own module.

A kind's module declares, in one `register` call, its name, the code that builds it, the frozen
dataclass of the options only it reads (deriving from `Options`, which checks each when made; its
group in the config, named for it:
`model.rnn_vae.latent_size`) and the families of shared options it reads (`neural`: the flat
`model.d_model`, `model.layers`, ...). Everything else is derived from the registry: the key's
choices and their check at `--set`, the config's groups, `seqjax config` and `--help`, which flat
options apply to which kinds. Levanter's `LmConfig.register_subclass` is the model.

The registries themselves (`seqjax.config.kinds`) sit below the code they list, so a kind's
module imports its registry and registers itself; the package `seqjax` imports the packages of
the built-in kinds, so that every registry is full whatever module a user imports first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from seqjax.config.fields import Options


@dataclasses.dataclass(frozen=True)
class Kind:
    """One registered kind.

    Attributes:
      name: what the config key names it (a Python identifier).
      build: the code that makes it (a class or a function; each registry says which signature).
      options: the frozen dataclass (of `Options`) of the options only this kind reads, or None.
      families: the families of shared options it reads (declared by its registry).
    """

    name: str
    build: Any
    options: type | None = None
    families: tuple[str, ...] = ()


class Family:
    """The kinds of a registry that read one family of options: a live view, so that a kind
    registered later is in it when it reads the family."""

    def __init__(self, registry: Registry, family: str) -> None:
        self._registry = registry
        self._family = family

    def _names(self) -> tuple[str, ...]:
        return tuple(kind.name for kind in self._registry.kinds() if self._family in kind.families)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"{self._family}: {', '.join(self)}"


class Registry:
    """The kinds `key` may name (`model.kind`, `optim.kind`, `model.attention_kernel`, ...), in
    registration order. Iterating gives the names; `registry[name]` the `Kind`.

    Args:
      key: the config key whose values these are.
      families: family name -> the options it stands for (a kind may read only these).
    """

    def __init__(self, key: str, families: Mapping[str, str] | None = None) -> None:
        self.key = key
        self.families = dict(families or {})
        self._kinds: dict[str, Kind] = {}

    def register(self, name: str, build: Any, *, options: type | None = None, families: tuple[str, ...] = ()) -> Kind:
        """Adds kind `name`, made by `build`, with its own `options` (a frozen dataclass of
        `Options`, checked when made, whose defaults construct; or None) reading `families`.
        Returns the `Kind`.

        Raises:
          ValueError: a name that is not an identifier or is taken, options that are not a frozen
            dataclass of `Options` or are another kind's, a family the registry does not declare.
        """
        if not name.isidentifier():
            raise ValueError(f"{self.key} must be a Python identifier, got {name!r}")
        if name in self._kinds:
            raise ValueError(f"{self.key} {name!r} is already registered")
        if options is not None:
            params = getattr(options, "__dataclass_params__", None)
            if params is None or not params.frozen or not (isinstance(options, type) and issubclass(options, Options)):
                raise ValueError(
                    f"{self.key} {name!r}: options must be a frozen dataclass deriving from seqjax.config.Options, "
                    f"got {options!r}"
                )
            if options in self.options.values():
                raise ValueError(f"{self.key} {name!r}: {options.__name__} are another kind's options")
        unknown = sorted(set(families) - set(self.families))
        if unknown:
            raise ValueError(
                f"{self.key} {name!r}: unknown families {unknown}; "
                f"{self.key}'s are {', '.join(self.families) or 'none'}"
            )
        kind = Kind(name, build, options, tuple(families))
        self._kinds[name] = kind
        return kind

    def remove(self, name: str) -> None:
        """Takes kind `name` out (a kind registered for a while, e.g. by a test)."""
        del self._kinds[self[name].name]

    def __getitem__(self, name: str) -> Kind:
        if name not in self._kinds:
            raise ValueError(f"{self.key} must be one of {', '.join(self._kinds)}, got {name!r}")
        return self._kinds[name]

    def kinds(self) -> tuple[Kind, ...]:
        return tuple(self._kinds.values())

    def family(self, family: str) -> Family:
        """The kinds that read `family`, a live view."""
        if family not in self.families:
            raise ValueError(f"{self.key} has no family {family!r}; its families are {', '.join(self.families)}")
        return Family(self, family)

    @property
    def options(self) -> dict[str, type]:
        """kind -> the class of its own options, for the kinds that have some, in order."""
        return {kind.name: kind.options for kind in self._kinds.values() if kind.options is not None}

    def owner(self, options: type) -> str | None:
        """The kind whose options `options` are, or subclass (an objective is its options with a
        `__call__`): the nearest in its method resolution order. None: no kind's."""
        owners = {cls: name for name, cls in self.options.items()}
        return next((owners[cls] for cls in options.__mro__ if cls in owners), None)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._kinds))

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def __len__(self) -> int:
        return len(self._kinds)

    def __repr__(self) -> str:
        return " | ".join(self)
