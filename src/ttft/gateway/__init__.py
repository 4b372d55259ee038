"""The OpenAI-compatible front door that applies the outside-the-weights levers.

``ttft gateway`` runs it from the command line; in Python::

    from ttft.gateway import GatewayThread, load_config
    with GatewayThread(load_config(Path("gateway.toml"))) as gw:
        ...  # gw.url serves /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics
"""

from ttft.gateway.app import Gateway
from ttft.gateway.config import GatewayConfig, ModelConfig, UpstreamConfig, from_mapping
from ttft.gateway.config import load as load_config
from ttft.gateway.serve import GatewayThread, run, serve

__all__ = [
    "Gateway",
    "GatewayConfig",
    "GatewayThread",
    "ModelConfig",
    "UpstreamConfig",
    "from_mapping",
    "load_config",
    "run",
    "serve",
]
