"""Ready-made world models: LLM (simulate and score modes), rubric-based, and learned from anchor pairs.

Why a package of them: every predictor here fills the same ``WorldModel`` slot (docs/method.md) at a
different price and quality, from a free hand-written rubric to an LLM that prints the sandbox report;
a trainer switches between them without other changes. The LLM backends themselves (transformers,
vLLM, OpenAI-compatible HTTP) live in ``wmrl_adapters``; this package only defines their protocols.
"""

from __future__ import annotations

from wmrl_envs.kaggle.world_models.learned import (
    Embedder,
    LearnedWorldModel,
    LearnedWorldModelConfig,
    UncertainWorldModel,
    uncertainty_anchor_ranking,
)
from wmrl_envs.kaggle.world_models.llm import (
    CandidateDistribution,
    GenerationResult,
    KaggleExecutionTemplate,
    LLMScoreWorldModel,
    LLMWorldModel,
    LLMWorldModelConfig,
    OutputConstraint,
    PromptParts,
    PromptTemplate,
    ScoreDistribution,
    TextGenerator,
)
from wmrl_envs.kaggle.world_models.rubric import RubricConfig, RubricWorldModel

__all__ = [
    "CandidateDistribution",
    "Embedder",
    "GenerationResult",
    "KaggleExecutionTemplate",
    "LLMScoreWorldModel",
    "LLMWorldModel",
    "LLMWorldModelConfig",
    "LearnedWorldModel",
    "LearnedWorldModelConfig",
    "OutputConstraint",
    "PromptParts",
    "PromptTemplate",
    "RubricConfig",
    "RubricWorldModel",
    "ScoreDistribution",
    "TextGenerator",
    "UncertainWorldModel",
    "uncertainty_anchor_ranking",
]
