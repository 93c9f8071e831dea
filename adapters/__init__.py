"""wmrl_adapters: integrations of wmrl with outside systems (transformers, vLLM, OpenAI-compatible
servers, Docker, Ray, LIBERO, Robometer, TRL, verl). Adapters import the core; the core never imports
adapters. Every optional dependency is imported lazily and a missing one names its pip extra."""

__all__: list[str] = []
