"""Robometer inside the embodied stack: the plugin the simulator worker loads for ``RobometerScorer``.

This file runs under the embodied stack's interpreter (Python 3.12, LeRobot >= 0.6), loaded by path by
``wmrl_envs/embodied/_worker.py``; it imports LeRobot and transformers, never wmrl. The wmrl side is
:mod:`wmrl_adapters.robometer`.

Per-frame progress follows LeRobot's own recipe (``lerobot.rewards.robometer.compute_rabc_weights``): the
progress of frame ``t`` is ``RobometerRewardModel.compute_reward`` on ``window`` frames sub-sampled
evenly from frames ``0..t`` (first and last included). That is one model call per scored frame, so
``stride`` scores every ``stride``-th frame (and the last) and interpolates between them.

``tiny_random=True`` builds a randomly initialised Robometer of ~20 M parameters with a Qwen3-VL
processor assembled offline (a byte-level tokenizer with Qwen's special tokens and chat template): its
progress is meaningless, but every step of the real code path runs (processor, encoder step, Qwen3-VL
backbone, progress head). The 4B weights (``lerobot/Robometer-4B``) need the hub or its cache.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

_QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
)


def _tiny_processor(directory: Path) -> tuple[int, dict[str, int]]:
    """Save a Qwen3-VL processor with a byte-level tokenizer into ``directory``.

    Returns its vocabulary size and the ids of the vision tokens, which the model config must share.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2VLImageProcessor,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocabulary = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    backend = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(_QWEN_SPECIAL_TOKENS),
    )
    tokenizer.chat_template = _CHAT_TEMPLATE
    pixels = {"shortest_edge": 32 * 32, "longest_edge": 512 * 512}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(
            patch_size=16, merge_size=2, temporal_patch_size=2, size=pixels
        ),
        tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(
            patch_size=16, merge_size=2, temporal_patch_size=2, size=pixels
        ),
        chat_template=_CHAT_TEMPLATE,
    )
    processor.save_pretrained(directory)
    ids = tokenizer.convert_tokens_to_ids
    token_ids = {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }
    return len(tokenizer), token_ids


def _tiny_vlm_config(vocab_size: int, token_ids: dict[str, int]) -> dict[str, Any]:
    from transformers import Qwen3VLConfig

    return Qwen3VLConfig(
        text_config={
            "vocab_size": vocab_size,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "rope_scaling": {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True},
            "max_position_embeddings": 4096,
        },
        vision_config={
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 4,
            "out_hidden_size": 64,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 256,
            "deepstack_visual_indexes": [0],
        },
        **token_ids,
    ).to_dict()


class RobometerProgress:
    """A loaded Robometer and its encoder step; scores one trajectory's frames per call."""

    def __init__(self, options: dict[str, Any]) -> None:
        import torch
        from lerobot.rewards.robometer.configuration_robometer import (
            ROBOMETER_SPECIAL_TOKENS,
            RobometerConfig,
        )
        from lerobot.rewards.robometer.modeling_robometer import RobometerRewardModel
        from lerobot.rewards.robometer.processor_robometer import RobometerEncoderProcessorStep

        self.window = int(options.get("window", 4))
        self.batch_size = int(options.get("batch_size", 8))
        device = options.get("device", "cpu")
        self.tiny_random = bool(options.get("tiny_random", False))
        if self.tiny_random:
            self._scratch = tempfile.TemporaryDirectory(prefix="wmrl-tiny-robometer-")
            processor_dir = Path(self._scratch.name)
            vocab_size, token_ids = _tiny_processor(processor_dir)
            config = RobometerConfig(
                pretrained_path="tiny-random",
                base_model_id=str(processor_dir),
                vlm_config=_tiny_vlm_config(vocab_size + len(ROBOMETER_SPECIAL_TOKENS), token_ids),
                torch_dtype="float32",
                device=device,
                max_frames=self.window,
            )
            torch.manual_seed(int(options.get("seed", 0)))
            self.model = RobometerRewardModel(config)
        else:
            path = options["pretrained_path"]
            config = RobometerConfig(pretrained_path=path, device=device, max_frames=self.window)
            self.model = RobometerRewardModel.from_pretrained(path, config=config)
        self.model.to(device).eval()
        self.config = config
        self.encoder = RobometerEncoderProcessorStep(
            base_model_id=config.base_model_id,
            image_key=config.image_key,
            task_key=config.task_key,
            max_frames=self.window,
            use_multi_image=config.use_multi_image,
            use_per_frame_progress_token=config.use_per_frame_progress_token,
        )
        self.device = device

    def describe(self) -> dict[str, Any]:
        return {
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
            "window": self.window,
            "tiny_random": self.tiny_random,
            "base_model_id": self.config.base_model_id,
        }

    def progress(self, frames: np.ndarray, instruction: str, stride: int = 1) -> list[float]:
        """Per-frame progress of one trajectory's ``(T, H, W, 3)`` uint8 frames."""
        import torch
        from lerobot.lerobot_types import TransitionKey

        frames = np.asarray(frames)
        length = frames.shape[0]
        scored = sorted(set(range(0, length, max(1, int(stride)))) | {length - 1})
        video = torch.from_numpy(frames).permute(0, 3, 1, 2)  # (T, C, H, W)
        values: list[float] = []
        for start in range(0, len(scored), self.batch_size):
            chunk = scored[start : start + self.batch_size]
            windows = torch.stack(
                [video[np.linspace(0, t, self.window).round().astype(np.int64)] for t in chunk]
            )
            transition = {
                TransitionKey.OBSERVATION: {self.config.image_key: windows},
                TransitionKey.COMPLEMENTARY_DATA: {self.config.task_key: instruction},
            }
            observation = self.encoder(transition)[TransitionKey.OBSERVATION]
            batch = {
                k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in observation.items()
            }
            with torch.no_grad():
                values.extend(float(v) for v in self.model.compute_reward(batch).cpu())
        return [float(v) for v in np.interp(np.arange(length), scored, values)]


def load(options: dict[str, Any]) -> RobometerProgress:
    """The worker's plugin entry point."""
    return RobometerProgress(options)
