"""Every objective subclasses the typed `Objective` base, so the type checker holds its `__call__`
to the contract; one that does not define `__call__` cannot be built. An objective that calls
model methods beyond `Model`'s names their protocol (`model_contract`), which the models it goes
with meet and a model without them is refused for."""

import dataclasses
from typing import ClassVar

import pytest

from seqjax.config import MODELS, Config, ObjectiveConfig
from seqjax.contracts import LatentModel, Model, Objective, ReplacedTokenModel, missing_methods
from seqjax.models import MODEL_OBJECTIVES
from seqjax.objectives import OBJECTIVES
from seqjax.objectives.teacher_forcing import TeacherForcing
from seqjax.training.core.experiment import validate_model_objective


@pytest.mark.parametrize("kind", sorted(OBJECTIVES))
def test_every_registered_objective_subclasses_the_objective_base(kind):
    assert issubclass(OBJECTIVES[kind].build, Objective)


def test_an_objective_without_a_call_cannot_be_built():
    @dataclasses.dataclass(frozen=True)
    class Silent(Objective):
        rate: float = 0.1

    with pytest.raises(TypeError, match="abstract"):
        Silent()


@pytest.mark.parametrize("model_kind", sorted(MODEL_OBJECTIVES))
def test_the_objective_a_model_goes_with_finds_the_methods_it_calls(model_kind):
    objective = OBJECTIVES[MODEL_OBJECTIVES[model_kind]].build
    assert missing_methods(MODELS[model_kind].build, objective.model_contract or Model) == []


def test_the_contracts_name_the_methods_a_model_lacks():
    assert missing_methods(MODELS["transformer"].build, LatentModel) == ["decode", "encode"]
    assert missing_methods(MODELS["transformer_encoder"].build, ReplacedTokenModel) == ["discriminate", "generator"]
    assert missing_methods(MODELS["rnn_vae"].build, LatentModel) == []


@dataclasses.dataclass(frozen=True)
class NeedsLatent(TeacherForcing):
    model_contract: ClassVar[type | None] = LatentModel


def test_an_objective_is_refused_with_a_model_without_the_methods_it_calls():
    OBJECTIVES.register("needs_latent", NeedsLatent)
    try:
        cfg = Config(objective=ObjectiveConfig(kind="needs_latent"))
        with pytest.raises(ValueError, match="objective.kind='needs_latent' calls the model's decode, encode"):
            validate_model_objective(cfg)
    finally:
        OBJECTIVES.remove("needs_latent")
