"""`[deployments.NAME]` in the config: the nodes of one model served over several hosts.

    [deployments.qwen-397b]
    kind = "multinode"                    # or "pd" (prefill/decode behind a router)
    nodes = [
      { profile = "gpu-a", node_rank = 0 },
      { profile = "gpu-b", node_rank = 1 },
    ]
    may_differ = ["--model-path"]         # optional: flags allowed to differ besides --host

    [deployments.qwen-pd]
    kind = "pd"
    nodes = [
      { profile = "gpu-a", role = "prefill" },
      { profile = "gpu-b", role = "decode" },
      { profile = "edge", role = "router" },
    ]

Each node names a host profile: how to reach it (host, port, user, identity, known_hosts, the
jump host of ~/.ssh/config) and its service (unit or container, model_dir) are the profile's, so a
node is reached exactly as that host is. `unit` or `container` on the node override the profile's
(two nodes of one host, each with its own unit). Bad tables are a ConfigError naming the key.
"""

from __future__ import annotations

# The [deployments] table is read with the rest of the config file (console/config.py, a leaf that
# imports nothing above it): the deployment code names its types from here.
from console.config import DEPLOYMENT_KINDS as KINDS
from console.config import DEPLOYMENT_NODE_KEYS as NODE_KEYS
from console.config import DEPLOYMENT_ROLES as ROLES
from console.config import Deployment, DeploymentNode, deployment_from_table, deployments_from_table

__all__ = ["KINDS", "ROLES", "NODE_KEYS", "Deployment", "DeploymentNode", "deployment_from_table",
           "deployments_from_table"]
