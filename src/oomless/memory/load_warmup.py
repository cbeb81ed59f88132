"""transformers' caching-allocator warm-up when a model is quantized as it loads (QLoRA).

Before it copies a checkpoint to the GPU, `from_pretrained` allocates one block the size it
expects the weights to take, frees it and leaves it to torch's caching allocator, which keeps it
reserved (`caching_allocator_warmup`). For a bitsandbytes 4-bit load the releases below size that
block from the model's 16-bit parameters (a quantizer's warm-up factor of 4 on fp16 elements: half
the 16-bit bytes), while the weights it then holds are NF4: the load's peak is the block, not the
weights, and `torch.cuda.max_memory_reserved()` stays there until more is allocated.
"""

from __future__ import annotations

from ..catalog.models import ModelArch
from ..spec.releases import in_releases
from ..spec.run import Finetune, FinetuneMethod
from . import params as P
from .states import prequantized_weight_bytes

QUANTIZED_HALF_WARMUP = ">=4.51.0,<5.0.0.dev0"
"""transformers releases whose warm-up under a quantizer allocates `byte_count // 4` fp16 elements,
byte_count being every parameter's bytes in the load dtype as the meta model holds them (a
bitsandbytes Linear4bit still has its 16-bit shape there). Sources: transformers 4.51.3
modeling_utils.py (`caching_allocator_warmup(model_to_load, expanded_device_map, factor=2 if
hf_quantizer is None else 4)`, `torch.empty(byte_count // factor, dtype=torch.float16)`); 4.52.4 to
4.57.3 (`factor = ... hf_quantizer.get_cuda_warm_up_factor()` / `get_accelerator_warm_up_factor()`,
4 in quantizers/base.py, not overridden by quantizer_bnb_4bit.py). 4.50.3 skipped the warm-up
under a quantizer (`if device_map is not None and hf_quantizer is None`); 5.0.0 counts each
parameter at its quantized size (`get_total_byte_count`, `param_element_size`), so the block is
what loads. bitsandbytes always sets a device map (one device), so the warm-up runs."""

TIED_KEYS_SKIPPED = ">=4.54.0"
"""Releases whose warm-up skips the keys a model class declares tied (`_get_tied_weight_keys`):
`lm_head.weight` of the *ForCausalLM classes whether or not the checkpoint ties it. 4.53.3 counts
every key of `model.state_dict()` (a tied head twice); 4.54.1 skips them."""


def quantized_load_warmup_bytes(arch: ModelArch, finetune: Finetune, transformers_version: str | None) -> int:
    """The block transformers reserves before loading a QLoRA base it quantizes: one byte per
    parameter counted (half of 2 bytes in fp16/bf16). Counted: every parameter, less an untied
    LM head from 4.54 (its declared tied key is skipped), plus a tied one again before 4.54. 0 for
    other fine-tuning, a pre-quantized checkpoint (its stored size is what loads) and releases
    outside `QUANTIZED_HALF_WARMUP`, an unknown release included.
    Measured (benchmarks/results/gpu-qlora-notebook, H100, transformers 4.57.3, Qwen2-7B-Instruct
    loaded as TRL's QLoRA notebook does): `max_memory_allocated()` after `from_pretrained`
    7,071,596,544 B, this 7,070,619,136 B; reserved 6.650 GiB against 5.176 GiB of weights."""
    if finetune.method != FinetuneMethod.qlora or prequantized_weight_bytes(arch) is not None:
        return 0
    if not in_releases(transformers_version, QUANTIZED_HALF_WARMUP):
        return 0
    counted = P.num_parameters(arch)
    untied_head = P.num_lm_head_parameters(arch) >= P.num_embedding_parameters(arch)
    if in_releases(transformers_version, TIED_KEYS_SKIPPED):
        counted -= P.num_embedding_parameters(arch) if untied_head else 0
    elif not untied_head:
        counted += P.num_embedding_parameters(arch)
    return counted
