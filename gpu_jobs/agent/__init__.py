"""Agentic episodes: a model acts in a persistent sandbox through tools and is rewarded for the final state.

Modules: ``tools`` (the tools, their schemas, the plain-text call format and its parser), ``spec`` (the job's
``environment`` option, torch-free), ``patching`` (a unified-diff applier that runs inside the sandbox),
``environment`` (a task row's files in a ``sandboxes.session.SandboxSession``, the tools, the final-state
verifier), ``episode`` (the turn loop: limits, truncation, running summary, trace, reward), ``training``
(multi-turn GRPO through TRL's ``rollout_func``), ``generation`` (turns through transformers or vLLM), ``warmup``
(supervised warm-up on scripted traces), ``taskpack`` (the repo-fix pack).
"""
