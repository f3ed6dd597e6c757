"""Every objective subclasses the typed `Objective` base, so the type checker holds its `__call__`
to the contract; one that does not define `__call__` cannot be built."""

import dataclasses

import pytest

from seqjax.contracts import Objective
from seqjax.objectives import OBJECTIVES


@pytest.mark.parametrize("kind", sorted(OBJECTIVES))
def test_every_registered_objective_subclasses_the_objective_base(kind):
    assert issubclass(OBJECTIVES[kind], Objective)


def test_an_objective_without_a_call_cannot_be_built():
    @dataclasses.dataclass(frozen=True)
    class Silent(Objective):
        rate: float = 0.1

    with pytest.raises(TypeError, match="abstract"):
        Silent()
