"""Talk to a Ray head's GCS directly, with a deadline on every call: the start-up handshake and the
node list the evaluator watches during a run.

``ray.init`` retries an absent or silent head for minutes, swaps 127.0.0.1 for the machine's
address, and its error for a non-Ray service names token authentication. A TCP connect proves
nothing (any listener passes). So ``handshake`` asks the GCS, over Ray's own gRPC channel (with
Ray's token when token authentication is on), for the cluster's id, its Ray version and its nodes,
and turns each way of failing into one sentence naming the address and what to check. It is
cheap (milliseconds against a live head) and runs before anything is loaded or written.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

HANDSHAKE_TIMEOUT_S = 5.0
_ALIVE = 0  # GcsNodeInfo.GcsNodeState.ALIVE


class RayUnreachable(ConnectionError):
    """No usable Ray cluster at the configured address; raised within seconds, before any work."""


@dataclass(frozen=True)
class NodeState:
    node_id: str  # hex
    address: str  # the node's IP
    cpus: float
    alive: bool
    death: str = ""  # why the GCS marked it dead


@dataclass(frozen=True)
class ClusterInfo:
    address: str  # HOST:PORT of the GCS
    cluster_id: str
    ray_version: str
    nodes: tuple[NodeState, ...] = field(default=())

    @property
    def cpus(self) -> float:
        return sum(n.cpus for n in self.nodes if n.alive)


def split_address(address: str) -> tuple[str, int]:
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnreachable(f"task.ray_address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379), 'auto' or ''")
    return host.strip("[]"), int(port)


def resolve(address: str) -> str | None:
    """HOST:PORT to connect to; None for '' and 'local' (a private cluster started here)."""
    if address in ("", "local"):
        return None
    if address == "auto":  # the cluster `ray start --head` recorded on this machine (or $RAY_ADDRESS)
        from ray._private.services import get_ray_address_from_environment

        try:
            found = get_ray_address_from_environment("auto", None)
        except Exception as exc:  # Ray's own lookup: several clusters, a bad file...
            raise RayUnreachable(f"task.ray_address auto: {exc}") from None
        if not found:
            raise RayUnreachable("task.ray_address auto: no Ray cluster was started on this machine "
                                 "(`.venv/bin/ray start --head`); give HOST:PORT of the head instead")
        address = found
    host, port = split_address(address)
    return f"{host}:{port}"


class Gcs:
    """A gRPC channel to one GCS; every call has a deadline and raises grpc.RpcError on failure."""

    def __init__(self, address: str):
        from ray._private.gcs_utils import create_gcs_channel
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        self.address = address
        self._pb = gcs_service_pb2
        self._channel = create_gcs_channel(address)  # Ray's interceptors add the token if auth is on
        self._nodes = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(self._channel)
        self._kv = gcs_service_pb2_grpc.InternalKVGcsServiceStub(self._channel)

    def cluster_id(self, timeout_s: float) -> str:
        return self._nodes.GetClusterId(self._pb.GetClusterIdRequest(), timeout=timeout_s).cluster_id.hex()

    def ray_version(self, timeout_s: float) -> str:
        import json

        reply = self._kv.InternalKVGet(self._pb.InternalKVGetRequest(key=b"CLUSTER_METADATA", namespace=b"cluster"),
                                       timeout=timeout_s)
        try:
            return str(json.loads(reply.value or b"{}").get("ray_version", ""))
        except ValueError:
            return ""

    def nodes(self, timeout_s: float) -> tuple[NodeState, ...]:
        reply = self._nodes.GetAllNodeInfo(self._pb.GetAllNodeInfoRequest(), timeout=timeout_s)
        return tuple(NodeState(n.node_id.hex(), n.node_manager_address, float(n.resources_total.get("CPU", 0.0)),
                               n.state == _ALIVE, n.death_info.reason_message if n.state != _ALIVE else "")
                     for n in reply.node_info_list)

    def close(self) -> None:
        self._channel.close()


def handshake(address: str, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> ClusterInfo | None:
    """The cluster at ``address`` (task.ray_address), or RayUnreachable with one sentence that names
    it and what to check; None for a private cluster ('' or 'local'). Takes at most 2.5 x
    ``timeout_s`` (connect, then the GCS's answers), whatever is or is not there."""
    target = resolve(address)
    if target is None:
        return None
    result: list = []
    budget = 2.5 * timeout_s
    worker = threading.Thread(target=lambda: result.append(_handshake(address, target, timeout_s, budget)),
                              daemon=True, name="helix-ray-handshake")
    worker.start()
    worker.join(budget)
    if not result:  # a name lookup or a GCS that takes too long for every step
        raise RayUnreachable(f"task.ray_address {address}: no complete answer within {budget:g} s. Check the head's "
                             "name or IP address and that it is not overloaded, or set task.eval_backend=local")
    if isinstance(result[0], RayUnreachable):
        raise result[0]
    return result[0]


def _handshake(address: str, target: str, timeout_s: float, budget_s: float) -> ClusterInfo | RayUnreachable:
    deadline = time.monotonic() + budget_s - 0.5
    host, port = split_address(target)
    start = f"Start the head with `.venv/bin/ray start --head --port {port}` (docs/scale.md: Evaluation on a Ray " \
            "cluster), or set task.eval_backend=local"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return RayUnreachable(f"task.ray_address {address}: the host {host!r} is unknown here ({exc.strerror or exc}). "
                              "Check the head's name or IP address (`ray start --head` prints it)")
    try:
        with socket.create_connection(infos[0][4][:2], timeout=timeout_s):
            pass
    except ConnectionRefusedError:
        return RayUnreachable(f"task.ray_address {address}: nothing listens on port {port} of {host} (connection "
                              f"refused). Check that the Ray head runs there and the port. {start}")
    except OSError as exc:
        return RayUnreachable(f"task.ray_address {address}: no connection to {host}:{port} within {timeout_s:g} s "
                              f"({exc.strerror or type(exc).__name__}). Check the address, that the machine is up, "
                              f"and firewalls. {start}")
    import grpc

    gcs = Gcs(target)
    try:
        left = lambda: max(0.1, min(timeout_s, deadline - time.monotonic()))  # noqa: E731
        cluster_id = gcs.cluster_id(left())
        version = gcs.ray_version(left())
        nodes = gcs.nodes(left())
    except grpc.RpcError as exc:
        code, detail = exc.code(), (exc.details() or "").strip()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return RayUnreachable(f"task.ray_address {address}: {host}:{port} accepts connections but does not answer "
                                  f"as a Ray head within {timeout_s:g} s. Check the port: it must be the head's GCS "
                                  "port (`ray start --head --port PORT`, default 6379)")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return RayUnreachable(f"task.ray_address {address}: the Ray head refused this trainer's credentials "
                                  f"({detail[:150]}). The cluster uses token authentication: set RAY_AUTH_MODE=token "
                                  "and the same RAY_AUTH_TOKEN here as on its nodes")
        return RayUnreachable(f"task.ray_address {address}: the service at {host}:{port} is not a Ray head (it does not "
                              f"speak Ray's GCS protocol: {code.name.lower()}, {detail[:150]}). Check the port: it must "
                              "be the head's GCS port (`ray start --head --port PORT`, default 6379)")
    finally:
        gcs.close()
    import ray

    if version and version != ray.__version__:
        return RayUnreachable(f"task.ray_address {address}: the cluster runs Ray {version}, this trainer Ray "
                              f"{ray.__version__}. Install the same Ray version on every machine and the trainer")
    return ClusterInfo(target, cluster_id, version, nodes)
