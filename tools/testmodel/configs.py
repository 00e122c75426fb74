"""Model hyper-parameters for the test-model maker.

The "4b" Qwen3 numbers are those of Qwen/Qwen3-4B-Instruct-2507 (its config.json); "tiny" and
"small" are scaled-down Qwen3 shapes. As in real Qwen3, heads * head_dim need not equal hidden_size
(tiny: 4 * 32 = 128 != 64). Qwen2/Qwen2.5 models have head_dim = hidden_size / num_attention_heads,
biases on the q/k/v projections and no q_norm/k_norm.
"""
from __future__ import annotations

import dataclasses

QWEN_VOCAB_SIZE = 151936  # real Qwen3/Qwen2.5 embedding rows (padded past the 151669 tokens)
BOS_TOKEN_ID = 151643     # <|endoftext|>, config.json bos_token_id
EOS_TOKEN_ID = 151645     # <|im_end|>, config.json eos_token_id (instruct models)


@dataclasses.dataclass
class ModelConfig:
    name: str
    arch: str                 # "qwen3" or "qwen2"
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim


# name -> (hidden, intermediate, layers, qwen3 heads, qwen3 head_dim, qwen2 heads, kv heads,
#          rope_theta, max_position_embeddings)
_SHAPES = {
    "tiny": (64, 128, 2, 4, 32, 4, 2, 1e6, 40960),
    "small": (512, 1536, 4, 8, 64, 8, 4, 1e6, 40960),
    "4b": (2560, 9728, 36, 32, 128, 32, 8, 5e6, 262144),
    # Qwen3-4B's shapes with 2 layers: CUDA vs CPU logits in scripts/device-check.sh.
    "4b-2l": (2560, 9728, 2, 32, 128, 32, 8, 5e6, 262144),
}


def make_config(name: str, arch: str = "qwen3", untied: bool = False,
                vocab_size: int | None = None) -> ModelConfig:
    if name not in _SHAPES:
        raise ValueError(f"unknown config {name!r} (tiny, small, 4b, 4b-2l)")
    if arch not in ("qwen3", "qwen2"):
        raise ValueError(f"unknown arch {arch!r} (qwen3, qwen2)")
    hidden, inter, layers, q3_heads, q3_hd, q2_heads, kv_heads, theta, max_pos = _SHAPES[name]
    if arch == "qwen3":
        heads, head_dim = q3_heads, q3_hd
    else:
        heads = q2_heads
        head_dim = hidden // heads
        assert heads * head_dim == hidden
    return ModelConfig(
        name=name, arch=arch, hidden_size=hidden, intermediate_size=inter,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab_size or QWEN_VOCAB_SIZE, rope_theta=theta,
        rms_norm_eps=1e-6, max_position_embeddings=max_pos, tie_word_embeddings=not untied)


def hf_config_json(cfg: ModelConfig, torch_dtype: str) -> dict:
    """config.json contents, with the fields (and order) of the real Qwen3-4B-Instruct-2507 /
    Qwen2.5-Instruct config.json files. Qwen2 configs carry no head_dim (it is hidden/heads)."""
    if cfg.arch == "qwen3":
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": BOS_TOKEN_ID,
            "eos_token_id": EOS_TOKEN_ID,
            "head_dim": cfg.head_dim,
            "hidden_act": "silu",
            "hidden_size": cfg.hidden_size,
            "initializer_range": 0.02,
            "intermediate_size": cfg.intermediate_size,
            "max_position_embeddings": cfg.max_position_embeddings,
            "max_window_layers": cfg.num_hidden_layers,
            "model_type": "qwen3",
            "num_attention_heads": cfg.num_attention_heads,
            "num_hidden_layers": cfg.num_hidden_layers,
            "num_key_value_heads": cfg.num_key_value_heads,
            "rms_norm_eps": cfg.rms_norm_eps,
            "rope_scaling": None,
            "rope_theta": cfg.rope_theta,
            "sliding_window": None,
            "tie_word_embeddings": cfg.tie_word_embeddings,
            "torch_dtype": torch_dtype,
            "transformers_version": "4.51.0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": cfg.vocab_size,
        }
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": BOS_TOKEN_ID,
        "eos_token_id": EOS_TOKEN_ID,
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "max_window_layers": cfg.num_hidden_layers,
        "model_type": "qwen2",
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "sliding_window": cfg.max_position_embeddings,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.43.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": cfg.vocab_size,
    }
