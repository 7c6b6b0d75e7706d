"""What a model's shape says about a job: its context window, and the memory a training step needs.

``ModelShape`` is read from a model folder without loading the model (config.json for the architecture and
the window, the safetensors header for the exact parameter count), or taken from the built-in models'
recipes when they are not built yet. Torch-free: the launch check in the web process uses it.

Memory of a training step (``training_memory``), in bytes, on one device, the formula the launch refuses with
(every term is printed with the refusal):

- weights: P x w, with P the parameters and w the bytes of one (4 on the CPU, float32; 2 on a GPU, bf16);
- gradients: T x w, with T the trainable parameters (P for full fine-tuning; LoRA's adapters,
  2 x r x hidden per adapted matrix, 7 matrices a layer, when lora_rank > 0);
- optimizer: T x 8 (AdamW's two float32 moments);
- reference model: P x w when beta > 0 (the KL term keeps a frozen copy);
- activations: B x S x L x hidden x a x w / 2, with B the completions of a step, S the prompt plus
  completion tokens, L the layers and a = 34 (Korthikanti et al. 2022, bytes per token per layer at 16 bits
  with memory-efficient attention); with gradient checkpointing (on a GPU, or activation_checkpointing on)
  only each layer's input is kept,
  B x S x L x hidden x w, plus one layer's a-sized activations;
- logits: B x C x V x 4 x 4, with C the completion tokens and V the vocabulary: float32 logits of the
  completion tokens (TRL keeps only those), the copy divided by the temperature, and the gradients of both.
  Measured with SmolLM2-135M on the CPU (an agent step of 8 episodes of ~1,100 tokens, LoRA, activation
  checkpointing on: 8.65 GB peak, 8.2 GiB by this formula; with one logits copy it said 3.2);
- KV cache of the rollouts: B x S x L x 2 x kv_heads x head_dim x w (keys and values of every layer for every
  token of every sequence generated at once).

Reading that cache costs time too: ``kv_read_weight`` is what the cost estimate (anneal.training.costs) adds
per generated token per context token.

The estimate is for one device; data-parallel devices each hold a full copy and share the batch.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

GIB = 1024**3
ACTIVATION_BYTES_PER_HIDDEN = 34  # per token per layer, at 16 bits (Korthikanti et al. 2022, table 2)
LOGIT_COPIES = 4  # the logits, their temperature-scaled copy, and the gradients of both (module docstring)
LORA_MATRICES_PER_LAYER = 7  # q, k, v, o, gate, up, down ("all-linear")
_WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx")


@dataclass(frozen=True)
class ModelShape:
    parameters: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    window: int | None

    @property
    def head_dim(self) -> int:
        return self.hidden // max(1, self.heads)

    @classmethod
    def from_config(cls, config: dict, *, parameters: int | None = None) -> ModelShape:
        """From a transformers config.json; ``parameters`` counted elsewhere (else estimated from the shape)."""
        nested = config.get("text_config")
        text: dict = nested if isinstance(nested, dict) else config
        hidden = int(text.get("hidden_size") or text.get("n_embd") or text.get("d_model") or 0)
        layers = int(text.get("num_hidden_layers") or text.get("n_layer") or text.get("num_layers") or 0)
        heads = int(text.get("num_attention_heads") or text.get("n_head") or 1)
        kv_heads = int(text.get("num_key_value_heads") or heads)
        vocab = int(text.get("vocab_size") or 0)
        window = next((int(text[key]) for key in _WINDOW_KEYS if isinstance(text.get(key), int)), None)
        if parameters is None:
            intermediate = int(text.get("intermediate_size") or 4 * hidden)
            head_dim = hidden // max(1, heads)
            attention = hidden * hidden * 2 + 2 * hidden * kv_heads * head_dim
            per_layer = attention + 3 * hidden * intermediate
            embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings", True) else 2)
            parameters = layers * per_layer + embeddings
        return cls(
            parameters=int(parameters),
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            vocab=vocab,
            window=window,
        )

    @classmethod
    def from_folder(cls, folder: Path) -> ModelShape:
        """From a Hugging Face model folder: config.json, and the parameters in its safetensors headers."""
        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        return cls.from_config(config, parameters=safetensors_parameters(folder))

    def to_dict(self) -> dict:
        return asdict(self)


def safetensors_parameters(folder: Path) -> int | None:
    """Parameters stored in a folder's ``*.safetensors`` files, from their JSON headers (nothing loaded);
    None when there is no such file."""
    total, found = 0, False
    for path in sorted(Path(folder).glob("*.safetensors")):
        with open(path, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in entry.get("shape", []):
                count *= int(dim)
            total += count
            found = True
    return total if found else None


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a training step needs on one device, term by term (see the module docstring)."""

    weights: int
    gradients: int
    optimizer: int
    reference: int
    activations: int
    logits: int
    kv_cache: int
    sequence_tokens: int
    sequences: int

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.gradients
            + self.optimizer
            + self.reference
            + self.activations
            + self.logits
            + self.kv_cache
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "total": self.total}

    def describe(self) -> str:
        """Each term in GiB, for messages."""
        parts = [
            f"{name} {getattr(self, name) / GIB:.2f}"
            for name in (
                "weights",
                "gradients",
                "optimizer",
                "reference",
                "activations",
                "logits",
                "kv_cache",
            )
            if getattr(self, name)
        ]
        return (
            f"{self.total / GIB:.2f} GiB ({', '.join(parts)} GiB; {self.sequences} sequences of "
            f"{self.sequence_tokens} tokens)"
        )


def training_memory(
    shape: ModelShape,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    sequences: int,
    gpu: bool,
    lora_rank: int = 0,
    reference: bool = False,
    checkpointing: bool | None = None,
) -> MemoryEstimate:
    """The memory of one training step of ``sequences`` completions, each ``prompt_tokens`` +
    ``completion_tokens`` long, as the module docstring's formula says. ``gpu``: bf16 weights and gradient
    checkpointing (what gpu_jobs.device turns on for CUDA), else float32 without checkpointing; ``checkpointing``
    (the job's activation_checkpointing when it is not auto) overrides the latter."""
    width = 2 if gpu else 4
    sequence = prompt_tokens + completion_tokens
    if lora_rank > 0:
        trainable = shape.layers * LORA_MATRICES_PER_LAYER * 2 * lora_rank * shape.hidden
    else:
        trainable = shape.parameters
    tokens = sequences * sequence
    full_layer = tokens * shape.hidden * ACTIVATION_BYTES_PER_HIDDEN * width // 2
    inputs_only = gpu if checkpointing is None else checkpointing  # activation checkpointing
    if inputs_only:
        activations = tokens * shape.layers * shape.hidden * width + full_layer
    else:
        activations = full_layer * shape.layers
    return MemoryEstimate(
        weights=shape.parameters * width,
        gradients=trainable * width,
        optimizer=trainable * 8,
        reference=shape.parameters * width if reference else 0,
        activations=activations,
        logits=sequences * completion_tokens * shape.vocab * 4 * LOGIT_COPIES,
        kv_cache=tokens * shape.layers * 2 * shape.kv_heads * shape.head_dim * width,
        sequence_tokens=sequence,
        sequences=sequences,
    )


# The built-in models' shapes before they are built or imported (their recipes; a built folder is read).
_SMOLLM2_135M = {
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}


def _tiny_config() -> dict:
    from gpu_jobs.tiny_model import RECIPE

    return {
        "hidden_size": RECIPE.hidden_size,
        "num_hidden_layers": RECIPE.num_hidden_layers,
        "num_attention_heads": RECIPE.num_attention_heads,
        "intermediate_size": RECIPE.intermediate_size,
        "vocab_size": 259,  # 256 bytes and three special tokens
        "max_position_embeddings": RECIPE.max_position_embeddings,
        "tie_word_embeddings": True,
    }


def _tiny_long_config() -> dict:
    from gpu_jobs.tiny_long_model import RECIPE

    return {
        **_tiny_config(),
        "hidden_size": RECIPE.hidden_size,
        "num_hidden_layers": RECIPE.num_hidden_layers,
        "num_attention_heads": RECIPE.num_attention_heads,
        "intermediate_size": RECIPE.intermediate_size,
        "max_position_embeddings": RECIPE.max_position_embeddings,
    }


def model_folder(name: str, *, store: Path) -> Path | None:
    """Where the store keeps (or will keep) model ``name``; None for a hub id."""
    from gpu_jobs.model_store import TINY, TINY_LONG
    from gpu_jobs.smollm import SMOLLM2_NAME, smollm2_dir
    from gpu_jobs.tiny_long_model import tiny_long_model_dir
    from gpu_jobs.tiny_model import tiny_model_dir

    store = Path(store)
    if name == TINY:
        return tiny_model_dir(store)
    if name == TINY_LONG:
        return tiny_long_model_dir(store)
    if name == SMOLLM2_NAME:
        return smollm2_dir(store)
    if name.startswith("/"):
        return Path(name)
    if "/" not in name:
        return store / name
    return None


def kv_read_weight(shape: ModelShape) -> float:
    """Work of reading one cached context token, per generated token, in units of one generated token's
    pass over the weights: attention's QK and AV products are 4 x L x hidden multiply-adds per context token,
    the weights 2 x P per token, so 2 x L x hidden / P. Small for a short prompt, dominant for a long one
    (the tiny long-context model at 4,096 tokens: about 4.7 weight passes a generated token)."""
    return 2.0 * shape.layers * shape.hidden / max(1, shape.parameters)


def model_shape(name: str, *, store: Path) -> ModelShape | None:
    """The shape of the store's model ``name`` without building or loading it; None for a hub id (not on
    this machine). Preconditions: ``check_model`` accepted the name."""
    from gpu_jobs.model_store import TINY, TINY_LONG
    from gpu_jobs.smollm import SMOLLM2_NAME

    folder = model_folder(name, store=Path(store))
    if folder is not None and (folder / "config.json").is_file():
        return ModelShape.from_folder(folder)
    if name == SMOLLM2_NAME:
        return ModelShape.from_config(_SMOLLM2_135M, parameters=134_515_008)
    if name == TINY:
        return ModelShape.from_config(_tiny_config())
    if name == TINY_LONG:
        return ModelShape.from_config(_tiny_long_config())
    return None
