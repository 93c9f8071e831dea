"""Tests of the run configs (kaggle.config, embodied.config, run.checks) and the CLI override parser.

Bad input names the valid choices.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from wmrl_adapters.train.cli import parse_overrides
from wmrl_adapters.train.kaggle.config import TrainConfig, paper_config
from wmrl_adapters.train.run.checks import load_config
from wmrl_adapters.train.run.settings import ALGOS

from wmrl_algos.errors import ConfigError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algo": "ppo"}, "choose from grpo"),
        ({"world_model": "oracle"}, "choose from rubric"),
        ({"policy": "gpt"}, "choose from design"),
        ({"group_size": 1}, ">= 2"),
        ({"steps": 0}, "positive"),
        ({"anchor_fraction": 0.0}, "(0, 1]"),
        ({"clip": 1.5}, "clip"),
    ],
)
def test_invalid_values_name_the_fix(changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("]", r"\]")):
        TrainConfig(**changes)


def test_every_algorithm_and_llm_world_models_are_accepted():
    for algo in ALGOS:
        assert TrainConfig(algo=algo).algo == algo
    assert TrainConfig(world_model="llm:http://localhost:8000/v1").world_model.startswith("llm:")


def test_unknown_config_keys_list_the_valid_ones(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"algo": "od", "lr": 0.1}))
    with pytest.raises(ConfigError, match="unknown config key.*'lr'.*learning_rate"):
        load_config(path, None, TrainConfig)


def test_a_config_file_and_overrides_combine_with_overrides_winning(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"algo": "od", "steps": 3}))
    config = load_config(path, {"steps": 5}, TrainConfig)
    assert (config.algo, config.steps, config.groups) == ("od", 5, TrainConfig().groups)


def test_overrides_are_parsed_by_field_type():
    parsed = parse_overrides(
        ["--group-size", "8", "--algo=ivd", "--cache", "false", "--anchor-fraction", "0.25"]
    )
    assert parsed == {"group_size": 8, "algo": "ivd", "cache": False, "anchor_fraction": 0.25}
    with pytest.raises(ConfigError, match="not a valid int"):
        parse_overrides(["--steps", "many"])
    with pytest.raises(ConfigError, match="unknown config key"):
        parse_overrides(["--stepz", "3"])


def test_the_paper_scale_is_8_groups_of_8_and_4_turns():
    config = paper_config()
    assert (config.groups, config.group_size, config.max_turns, config.steps) == (8, 8, 4, 30)


def test_both_tracks_take_each_correction_default_from_correction_config_or_the_named_cpu_override():
    from wmrl_adapters.train.embodied.config import EmbodiedConfig
    from wmrl_adapters.train.run.settings import CPU_SCALE_OVERRIDES

    from wmrl_algos.loop import CorrectionConfig

    library = {spec.name: spec.default for spec in dataclasses.fields(CorrectionConfig)}
    for config in (TrainConfig(), EmbodiedConfig()):
        for name in ("anchor_fraction", "min_pairs", "refit_every", "warmup_groups", "weighting"):
            assert getattr(config, name) == CPU_SCALE_OVERRIDES.get(name, library[name]), name


def test_the_shared_settings_are_declared_once_and_help_the_same_in_both_tracks():
    from wmrl_adapters.train.embodied.config import EmbodiedConfig
    from wmrl_adapters.train.run.settings import RunSettings

    shared = {spec.name: spec for spec in dataclasses.fields(RunSettings)}
    embodied = {spec.name: spec for spec in dataclasses.fields(EmbodiedConfig)}
    assert {spec.name: spec for spec in dataclasses.fields(TrainConfig) if spec.name in shared} == shared
    differing = {name for name in shared if embodied[name].default != shared[name].default}
    assert differing == {"steps", "learning_rate", "update_epochs", "eval_samples"}
    assert all(embodied[name].metadata == shared[name].metadata for name in shared if name != "algo")
