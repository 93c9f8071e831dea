"""The design-space code agent: a small torch policy that writes real solutions by choosing a design.

Why this policy: it is the CPU stand-in for an LLM code agent (:mod:`wmrl_adapters.llm_agent`), with
the same interface (:class:`~wmrl_adapters.train.policy.TrainablePolicy`) and the same environment: its
actions are complete Python scripts (:func:`wmrl_envs.kaggle.design.render_design`) that the sandbox
runs for real. What it learns is which design suits which task, from the task's public features.

Network: the input is the task's features (:func:`~wmrl_envs.kaggle.design.task_features`), the turn,
the previous design (one-hot per decision) and the feedback of the previous execution (status and
public leaderboard position, parsed from the log the agent was shown). A two-layer tanh trunk feeds
one categorical head per decision of :data:`~wmrl_envs.kaggle.design.DECISIONS`. Heads start at zero
(a uniform design distribution: maximal exploration, and no design is favoured before any reward).

Multi-turn: turn t+1 sees turn t's design and its feedback through the rollout's ``contexts``
(:class:`wmrl_envs.rollouts.TurnContext`) and may keep or revise it. ``logprobs`` is stateless: the
design comes back from the ``# wmrl-design`` header of each action, the feedback from the observation
text, so old and new log-probs always refer to the same decisions. A decision that cannot matter for
the task (:func:`~wmrl_envs.kaggle.design.relevant_decisions`) is masked out of the log-probs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wmrl_algos.errors import CheckpointError, ConfigError
from wmrl_envs.kaggle.competition import Competition
from wmrl_envs.kaggle.design import (
    DECISIONS,
    FEEDBACK_FEATURES,
    TASK_FEATURES,
    Design,
    feedback_features,
    parse_design,
    relevant_decisions,
    render_design,
    task_features,
)
from wmrl_envs.kaggle.feedback import parse_feedback
from wmrl_envs.rollouts import Trajectory

__all__ = ["DesignPolicy", "design_action"]

_DESIGN_WIDTH = sum(len(choices) for choices in DECISIONS.values())
_N_DECISIONS = len(DECISIONS)


def design_action(design: Design, competition: Competition) -> str:
    """The agent message for ``design``: its rendered script in a ```python fence."""
    return f"```python\n{render_design(design, competition)}```\n"


def _design_onehot(design: Design | None) -> np.ndarray:
    row = np.zeros(_DESIGN_WIDTH, dtype=np.float32)
    if design is None:
        return row
    offset = 0
    for name, choices in DECISIONS.items():
        row[offset + choices.index(getattr(design, name))] = 1.0
        offset += len(choices)
    return row


class DesignPolicy(nn.Module):
    """Task features + history -> a sampled solution design, rendered as a runnable script.

    Args:
        competitions: looks up a competition by id (public files and public leaderboard only); the
            trainer passes its own lookup (the suite's competitions and those it evaluates on). Needed by
            ``act`` and ``logprobs``. A competition the policy never trained on is acted on like any
            other: the design is chosen from its task features (public data and metric), not its id.
        hidden: trunk width.
        max_turns: turns the input encodes (the turn index is scaled by it).
        seed: seeds the parameter init and the sampling generator (saved in :meth:`state_dict`).

    Example:
        >>> policy = DesignPolicy(seed=0)
        >>> sum(p.numel() for p in policy.parameters()) > 0
        True
    """

    def __init__(
        self,
        competitions: Callable[[str], Competition] | None = None,
        *,
        hidden: int = 64,
        max_turns: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if hidden < 1 or max_turns < 1:
            raise ConfigError(f"hidden={hidden}, max_turns={max_turns}; both must be >= 1")
        self.competitions = competitions
        self.max_turns = max_turns
        torch.manual_seed(seed)
        width = TASK_FEATURES + 1 + _DESIGN_WIDTH + FEEDBACK_FEATURES
        self.trunk = nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.heads = nn.ModuleList(nn.Linear(hidden, len(choices)) for choices in DECISIONS.values())
        for head in self.heads:
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        self.generator = torch.Generator().manual_seed(seed)
        self._first_turn_cache: dict[str, np.ndarray] = {}

    def _competition(self, task_id: str) -> Competition:
        if self.competitions is None:
            raise ConfigError("DesignPolicy has no competition lookup; pass competitions=suite.get")
        try:
            return self.competitions(task_id)
        except ConfigError as error:
            raise ConfigError(
                f"DesignPolicy's lookup does not know competition {task_id!r} ({error}); any competition "
                "works, seen in training or not: make the lookup return it (wmrl's Trainer does for "
                "Trainer.set_eval_competitions([competition]))"
            ) from error

    def _inputs(
        self, competition: Competition, turn: int, previous: str | None, feedback: str | None
    ) -> np.ndarray:
        design = parse_design(previous) if previous is not None else None
        outcome = parse_feedback(feedback) if feedback is not None else None
        return np.concatenate(
            [
                task_features(competition),
                np.asarray([turn / self.max_turns], dtype=np.float32),
                _design_onehot(design),
                feedback_features(outcome, competition),
            ]
        )

    def _logits(self, inputs: np.ndarray) -> list[torch.Tensor]:
        hidden = self.trunk(torch.as_tensor(inputs, dtype=torch.float32))
        return [head(hidden) for head in self.heads]

    def act(
        self,
        observations: Sequence[Any],
        infos: Sequence[Mapping[str, Any]],
        contexts: Sequence[Any] | None = None,
    ) -> list[str]:
        """Sample one design per live trajectory and return its rendered script as the action.

        With ``contexts`` (``wmrl_envs.rollouts.TurnContext``) a later turn conditions on the previous
        action and the log it produced; without them every call is treated as a first turn.
        """
        rows, competitions = [], []
        for index, (observation, info) in enumerate(zip(observations, infos, strict=True)):
            context = contexts[index] if contexts is not None else None
            task_id = str(context.task_id if context is not None else info["competition_id"])
            competition = self._competition(task_id)
            turn = len(context.actions) if context is not None else 0
            previous = context.actions[-1] if turn else None
            rows.append(self._inputs(competition, turn, previous, observation if turn else None))
            competitions.append(competition)
        with torch.no_grad():
            logits = self._logits(np.stack(rows))
            choices = [
                torch.multinomial(torch.softmax(head_logits, dim=-1), 1, generator=self.generator).squeeze(1)
                for head_logits in logits
            ]
        picked = torch.stack(choices, dim=1).tolist()
        return [
            design_action(Design.from_indices(indices), competition)
            for indices, competition in zip(picked, competitions, strict=True)
        ]

    def _decisions(
        self, trajectory: Trajectory
    ) -> tuple[list[np.ndarray], list[list[int]], list[list[bool]]]:
        competition = self._competition(trajectory.task_id)
        inputs, indices, relevant = [], [], []
        for turn, action in enumerate(trajectory.actions):
            design = parse_design(str(action))
            if design is None:
                raise ConfigError(
                    f"action {turn} of a {trajectory.task_id!r} trajectory has no '# wmrl-design' header; "
                    "DesignPolicy can only score actions it wrote"
                )
            previous = str(trajectory.actions[turn - 1]) if turn else None
            feedback = str(trajectory.observations[turn]) if turn else None
            inputs.append(self._inputs(competition, turn, previous, feedback))
            indices.append(list(design.indices()))
            relevant.append(list(relevant_decisions(design, competition)))
        return inputs, indices, relevant

    def logprobs(self, trajectories: Sequence[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, max_turns * len(DECISIONS))`` per-decision log-probs (with gradient) and their mask."""
        if not trajectories:
            raise ConfigError("logprobs() got no trajectories")
        width = max(len(t.actions) for t in trajectories) * _N_DECISIONS
        rows, picks, masks = [], [], []
        for trajectory in trajectories:
            inputs, indices, relevant = self._decisions(trajectory)
            rows += inputs
            picks += indices
            masks += relevant
        logits = self._logits(np.stack(rows))
        chosen = torch.as_tensor(picks, dtype=torch.long)
        per_decision = torch.stack(
            [
                torch.log_softmax(head_logits, dim=-1).gather(1, chosen[:, d : d + 1]).squeeze(1)
                for d, head_logits in enumerate(logits)
            ],
            dim=1,
        )
        rows_out, mask_out = [], []
        cursor = 0
        for trajectory in trajectories:
            turns = len(trajectory.actions)
            values = per_decision[cursor : cursor + turns].reshape(-1)
            keep = torch.as_tensor(masks[cursor : cursor + turns], dtype=torch.float32).reshape(-1)
            cursor += turns
            pad = width - values.numel()
            rows_out.append(torch.cat([values, values.new_zeros(pad)]))
            mask_out.append(torch.cat([keep, keep.new_zeros(pad)]))
        out, mask = torch.stack(rows_out), torch.stack(mask_out)
        return out, mask

    def _first_turn_inputs(self, task_id: str) -> np.ndarray:
        """The turn-0 input row of ``task_id`` (public task features only), computed once per task."""
        if task_id not in self._first_turn_cache:
            self._first_turn_cache[task_id] = self._inputs(self._competition(task_id), 0, None, None)
        return self._first_turn_cache[task_id]

    def design_logprobs(self, task_ids: Sequence[str], designs: Sequence[Design]) -> torch.Tensor:
        """First-turn log-probs of the policy restricted to an explicit list of designs, per task.

        The restriction is the policy conditioned on its design being one of ``designs``: each design's
        joint log-prob (the sum over every decision of :data:`DECISIONS`) renormalised over the list, so
        each row is a categorical distribution over exactly these designs. A benchmark over a tabulated
        design space samples from it and evaluates it exactly (``sum_d pi(d | task) * value(d, task)``).

        Args:
            task_ids: the competitions, one row each (looked up as in :meth:`act`).
            designs: the designs, distinct, in the order of the columns.

        Returns:
            ``(len(task_ids), len(designs))`` log-probs with gradient; ``exp`` of a row sums to 1.

        Raises:
            ConfigError: no tasks, no designs, or a design listed twice (it would count twice).

        Example:
            >>> from wmrl_envs.kaggle.design import Design
            >>> policy = DesignPolicy(seed=0)
            >>> policy.design_logprobs([], [Design()])
            Traceback (most recent call last):
            ...
            wmrl_algos.errors.ConfigError: design_logprobs() got no task ids; pass at least one competition id
        """
        if not task_ids:
            raise ConfigError("design_logprobs() got no task ids; pass at least one competition id")
        if not designs:
            raise ConfigError("design_logprobs() got no designs; pass the list to restrict the policy to")
        if len(set(designs)) != len(designs):
            repeated = sorted({design.short() for design in designs if list(designs).count(design) > 1})
            raise ConfigError(
                f"designs {repeated} are listed more than once; pass each design once, or its probability "
                "would be counted twice"
            )
        rows = np.stack([self._first_turn_inputs(str(task)) for task in task_ids])
        logits = self._logits(rows)
        chosen = torch.as_tensor([design.indices() for design in designs], dtype=torch.long)
        joint = sum(
            torch.log_softmax(head_logits, dim=-1)[:, chosen[:, d]] for d, head_logits in enumerate(logits)
        )
        return torch.log_softmax(joint, dim=-1)

    def entropy(self, trajectories: Sequence[Trajectory]) -> float:
        """Mean entropy (nats) of the relevant decisions at the states the trajectories visited."""
        rows, masks = [], []
        for trajectory in trajectories:
            inputs, _, relevant = self._decisions(trajectory)
            rows += inputs
            masks += relevant
        with torch.no_grad():
            logits = self._logits(np.stack(rows))
            entropies = torch.stack(
                [-(torch.softmax(h, -1) * torch.log_softmax(h, -1)).sum(-1) for h in logits], dim=1
            )
        keep = torch.as_tensor(masks, dtype=torch.float32)
        return float((entropies * keep).sum() / keep.sum().clamp(min=1.0))

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """Weights plus the sampling generator's state (so a resumed run samples the same designs)."""
        state = dict(super().state_dict(*args, **kwargs))
        state["_generator"] = self.generator.get_state()
        return state

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:  # type: ignore[override]
        """Restore :meth:`state_dict`.

        Raises:
            CheckpointError: the state lacks the generator or does not fit this network.
        """
        state = dict(state)
        if "_generator" not in state:
            raise CheckpointError("DesignPolicy state has no '_generator'; pass DesignPolicy.state_dict()")
        generator = state.pop("_generator")
        try:
            result = super().load_state_dict(state, strict=strict, assign=assign)
        except RuntimeError as error:
            raise CheckpointError(f"DesignPolicy state does not fit this network: {error}") from error
        self.generator.set_state(generator)
        return result
