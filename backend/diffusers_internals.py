"""The private diffusers names paradit relies on, checked when a feature first needs them.

Sequence parallelism drives diffusers' context-parallel machinery below its public API, and
`patches` replaces three of its helpers. Private names change between minor releases without
notice, so every one of them is listed once, in `INTERNALS`, with the parameters paradit
passes or must accept, and looked up (never at import) through `require`. A name that is gone
or changed fails with one error that names the diffusers version found and the range paradit
supports, instead of an AttributeError deep inside a rank.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

DIFFUSERS_RANGE = ">=0.42.1,<0.43"
"""The diffusers versions whose internals match `INTERNALS` (pyproject.toml pins the same)."""


@dataclass(frozen=True)
class Internal:
    """One private diffusers name: a function, a class, a method or a class attribute."""

    module: str
    """The module that holds it, e.g. "diffusers.models.attention_dispatch"."""
    name: str
    """Its name in that module; "Class.attribute" for methods and class attributes."""
    params: tuple[str, ...] | None
    """The parameters paradit relies on; None for an attribute that is only read or set."""
    replaced: bool = False
    """paradit swaps it for its own function, so diffusers' parameters must be exactly these."""

    @property
    def key(self) -> str:
        """The short name used in messages and lookups: "attention_dispatch._maybe_pad_qkv_head"."""
        return f"{self.module.rsplit('.', 1)[-1]}.{self.name}"

    def lookup(self) -> Any:
        """The object, imported now; ImportError or AttributeError if it is not there."""
        found: Any = importlib.import_module(self.module)
        for part in self.name.split("."):
            found = getattr(found, part)
        return found

    def problem(self) -> str | None:
        """What differs in the installed diffusers, or None."""
        try:
            found = self.lookup()
        except (ImportError, AttributeError):
            return f"{self.key} is missing"
        if self.params is None:
            return None
        try:
            names = tuple(inspect.signature(found).parameters)
        except (TypeError, ValueError):
            return f"{self.key} is no longer a function or class"
        if names[:1] == ("self",):
            names = names[1:]
        fits = names == self.params if self.replaced else set(self.params) <= set(names)
        if fits:
            return None
        return f"{self.key} takes ({', '.join(names)}), expected ({', '.join(self.params)})"


_DISPATCH = "diffusers.models.attention_dispatch"
_HOOKS = "diffusers.hooks.context_parallel"
_PARALLEL = "diffusers.models._modeling_parallel"
_MODELING = "diffusers.models.modeling_utils"
_EMBEDDINGS = "diffusers.models.embeddings"
_FBC = "diffusers.hooks.first_block_cache"
_WAN_VAE = "diffusers.models.autoencoders.autoencoder_kl_wan"
_QWEN_VAE = "diffusers.models.autoencoders.autoencoder_kl_qwenimage"
_HUNYUAN15 = "diffusers.models.transformers.transformer_hunyuan_video15"
_QWEN21 = "diffusers.models.transformers.transformer_qwenimage21"
_FLUX2 = "diffusers.models.transformers.transformer_flux2"

INTERNALS: dict[str, Internal] = {
    internal.key: internal
    for internal in (
        # Ulysses with any head count (patches.install_any_head_count): three replaced, and
        # diffusers' own output unpadding, which drops the padding heads we keep.
        Internal(_DISPATCH, "_maybe_pad_qkv_head", ("x", "H", "group"), replaced=True),
        Internal(_DISPATCH, "_maybe_unpad_qkv_head", ("x", "H_PAD", "group"), replaced=True),
        Internal(_DISPATCH, "_maybe_pad_o_head", ("x", "H", "group"), replaced=True),
        Internal(_DISPATCH, "_maybe_unpad_o_head", ("x", "H_PAD", "group")),
        # Uneven sequence shards on gloo (patches.install_uneven_gather).
        Internal(_HOOKS, "_all_gather_anything", ("tensor", "dim", "group"), replaced=True),
        Internal(_DISPATCH, "gather_size_by_comm", ("size", "group")),
        # Sequence parallelism on our own mesh (sequence.apply_sequence_parallel).
        Internal(_HOOKS, "apply_context_parallel", ("module", "parallel_config", "plan")),
        Internal(
            _PARALLEL,
            "ContextParallelConfig",
            ("ring_degree", "ulysses_degree", "mesh", "ulysses_anything", "ring_anything"),
        ),
        Internal(_PARALLEL, "ParallelConfig", ("context_parallel_config",)),
        Internal(_PARALLEL, "ParallelConfig.setup", ("rank", "world_size", "device", "mesh")),
        Internal(_MODELING, "ModelMixin._cp_plan", None),
        Internal(_MODELING, "ModelMixin._parallel_config", None),
        # Our context-parallel plan for CogVideoX (families/cogvideox/parallel.py): the plan's
        # entries, and what its attention processor calls.
        Internal(_PARALLEL, "ContextParallelInput", ("split_dim", "expected_dims", "split_output")),
        Internal(_PARALLEL, "ContextParallelOutput", ("gather_dim", "expected_dims")),
        Internal(
            _DISPATCH,
            "dispatch_attention_fn",
            ("query", "key", "value", "backend", "parallel_config"),
        ),
        Internal(_EMBEDDINGS, "apply_rotary_emb", ("x", "freqs_cis", "sequence_dim")),
        # Our plan for LTX-2 (families/ltx2/parallel.py): video keys gathered as the plan's
        # split is undone.
        Internal(_HOOKS, "PartitionAnythingSharder", None),
        Internal(_HOOKS, "PartitionAnythingSharder.unshard_anything", ("tensor", "dim", "mesh")),
        Internal(_PARALLEL, "ContextParallelConfig._flattened_mesh", None),
        # Our plan for HunyuanVideo 1.5 (families/hunyuan_video15/parallel.py) calls
        # diffusers' processor for jobs that run whole, by position: exactly these parameters.
        Internal(_HUNYUAN15, "HunyuanVideo15AttnProcessor2_0", None),
        Internal(
            _HUNYUAN15,
            "HunyuanVideo15AttnProcessor2_0.__call__",
            ("attn", "hidden_states", "encoder_hidden_states", "attention_mask")
            + ("image_rotary_emb",),
            replaced=True,
        ),
        # Our plan for Qwen-Image 2.1 (families/qwen_image21/parallel.py): Ulysses' exchanges
        # around its block-causal runs, and diffusers' processor (called by position) for jobs
        # that run whole.
        Internal(_DISPATCH, "ulysses_anything_metadata", ("query",)),
        Internal(_DISPATCH, "all_to_all_single_any_qkv_async", ("x", "group")),
        Internal(_DISPATCH, "all_to_all_single_any_o_async", ("x", "group")),
        Internal(_QWEN21, "apply_rotary_emb_qwen", ("x", "freqs_cis", "use_real")),
        Internal(
            _QWEN21,
            "QwenImage21AttnProcessor.__call__",
            ("attn", "hidden_states", "attention_mask", "rotary_emb", "layer_cache")
            + ("kv_cache_mode", "cache_write_slice", "segments", "key_valid"),
            replaced=True,
        ),
        # Our plan for FLUX.2 [klein] KV (families/flux2_klein/parallel.py): the same exchanges
        # around the KV pipeline's cached references, its reference attention and projections,
        # and its two processors (called by position) for jobs that run whole.
        Internal(
            _FLUX2,
            "_flux2_kv_causal_attention",
            ("query", "key", "value", "num_txt_tokens", "num_ref_tokens", "kv_cache", "backend"),
        ),
        Internal(
            _FLUX2, "_get_qkv_projections", ("attn", "hidden_states", "encoder_hidden_states")
        ),
        Internal(
            _FLUX2,
            "Flux2KVAttnProcessor.__call__",
            ("attn", "hidden_states", "encoder_hidden_states", "attention_mask")
            + ("image_rotary_emb", "kv_cache", "kv_cache_mode", "num_ref_tokens"),
            replaced=True,
        ),
        Internal(
            _FLUX2,
            "Flux2KVParallelSelfAttnProcessor.__call__",
            ("attn", "hidden_states", "attention_mask", "image_rotary_emb", "kv_cache")
            + ("kv_cache_mode", "num_txt_tokens", "num_ref_tokens"),
            replaced=True,
        ),
        # The step cache (step_cache.install_step_cache): diffusers' First-Block-Cache hooks,
        # subclassed, with the decision replaced.
        Internal(_FBC, "FBCHeadBlockHook", ("state_manager", "threshold")),
        Internal(
            _FBC, "FBCHeadBlockHook._should_compute_remaining_blocks", ("hidden_states_residual",)
        ),
        Internal(_FBC, "FBCBlockHook", ("state_manager", "is_tail")),
        Internal(_FBC, "FBCSharedBlockState", ()),
        Internal(
            "diffusers.hooks.hooks", "StateManager", ("state_cls", "init_args", "init_kwargs")
        ),
        Internal("diffusers.hooks._common", "_ALL_TRANSFORMER_BLOCK_IDENTIFIERS", None),
        # ... whose state is kept per named call (`cache_context`): named by paradit where a
        # pipeline names none (its calls' branches: step_cache.install_step_cache)
        Internal("diffusers.hooks.hooks", "CacheContext", ("name",)),
        Internal("diffusers.hooks.hooks", "StateManager.set_context", ("context",)),
        Internal("diffusers.hooks.hooks", "StateManager.context", None),
        # ... and the registry of block layouts they read, for the blocks diffusers' own
        # registrations leave out (FamilySpec.block_layouts).
        Internal("diffusers.hooks._helpers", "TransformerBlockRegistry", None),
        Internal(
            "diffusers.hooks._helpers",
            "TransformerBlockMetadata",
            ("return_hidden_states_index", "return_encoder_hidden_states_index")
            + ("encoder_hidden_states_argument_name",),
        ),
        # ... whose lookup of a block's input by name paradit's metadata routes through the
        # argument name it declares (First-Block-Cache asks for "encoder_hidden_states")
        Internal(
            "diffusers.hooks._helpers",
            "TransformerBlockMetadata._get_parameter_from_args_kwargs",
            ("identifier", "args", "kwargs"),
            replaced=True,
        ),
        # The attention kernel switch (attention.py): the registry's active backend, our own
        # backends registered in it, and run between Ulysses' all-to-alls.
        Internal(_DISPATCH, "AttentionBackendName", None),
        Internal(_DISPATCH, "_AttentionBackendRegistry", None),
        Internal(
            _DISPATCH,
            "_AttentionBackendRegistry.register",
            ("backend", "constraints", "supports_context_parallel"),
        ),
        Internal(_DISPATCH, "_AttentionBackendRegistry.set_active_backend", ("backend",)),
        Internal(
            _DISPATCH,
            "_templated_context_parallel_attention",
            ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
            + ("enable_gqa", "return_lse", "forward_op", "backward_op", "_parallel_config"),
        ),
        # Wan's VAE decoded tile by tile (models/wan_vae.py): its causal decoder called with
        # the feature cache that `clear_cache` resets (`_feat_map`, `_conv_idx`), as its own
        # tiled decode does, and the unpatchify that follows.
        Internal(_WAN_VAE, "AutoencoderKLWan.clear_cache", ()),
        Internal(_WAN_VAE, "WanDecoder3d.forward", ("x", "feat_cache", "feat_idx", "first_chunk")),
        Internal(_WAN_VAE, "unpatchify", ("x", "patch_size")),
        # Qwen-Image's VAE decoded tile by tile (models/qwen_vae.py), as Wan's without patches.
        Internal(_QWEN_VAE, "AutoencoderKLQwenImage.clear_cache", ()),
        Internal(_QWEN_VAE, "QwenImageDecoder3d.forward", ("x", "feat_cache", "feat_idx")),
    )
}


def diffusers_version() -> str:
    import diffusers

    return diffusers.__version__


def require(feature: str, *keys: str) -> list[Any]:
    """The objects `keys` name, after checking each against the installed diffusers.

    Raises RuntimeError naming `feature`, the version found and `DIFFUSERS_RANGE` when any is
    missing or has other parameters.
    """
    internals = [INTERNALS[key] for key in keys]
    problems = [p for p in (internal.problem() for internal in internals) if p]
    if problems:
        raise RuntimeError(
            f"paradit's {feature} needs diffusers {DIFFUSERS_RANGE} "
            f"(found {diffusers_version()}): {'; '.join(problems)}"
        )
    return [internal.lookup() for internal in internals]
