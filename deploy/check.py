#!/usr/bin/env python3
"""Static checks of the deployment files; no Docker engine or cluster needed.

- deploy/Dockerfile: hadolint, plus the properties the deployment guide promises.
- deploy/compose.yaml and compose.cluster.yaml: parsed and checked (images, ports,
  volumes, health checks, environment, the cluster's addresses against its nginx
  upstream), since `docker compose config` needs the Compose plugin.
- helm/latchkey: `helm lint --strict`, rendered with several value sets, every
  manifest validated against the Kubernetes schemas (kubernetes-validate, strict),
  values.schema.json must refuse several replicas without PostgreSQL and NATS,
  and cluster mode must render as docs/deploy.md says.
- docs/openapi.json: valid OpenAPI 3.1 (openapi-spec-validator).

Exits non-zero on any finding.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FINDINGS: list[str] = []


def finding(msg: str) -> None:
    FINDINGS.append(msg)
    print(f"FAIL {msg}")


def check(cond: bool, msg: str) -> None:
    if not cond:
        finding(msg)


def dockerfile() -> None:
    path = ROOT / "deploy" / "Dockerfile"
    r = subprocess.run(["hadolint", "--no-color", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        finding(f"hadolint: {r.stdout.strip() or r.stderr.strip()}")
    text = path.read_text()
    check("AS build" in text and "AS runtime" in text, "Dockerfile: multi-stage build")
    check("--mount=type=cache" in text, "Dockerfile: dependency caching")
    check("USER 10001" in text, "Dockerfile: non-root user")
    check("ca-certificates" in text, "Dockerfile: CA certificates")
    check("HEALTHCHECK" in text, "Dockerfile: health check")
    check('ENTRYPOINT ["latchkeyd"]' in text, "Dockerfile: latchkeyd entrypoint")
    check('VOLUME ["/var/lib/latchkey"]' in text, "Dockerfile: data volume")


def compose() -> None:
    doc = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    services = doc.get("services", {})
    check(set(services) == {"postgres", "nginx", "latchkeyd"}, f"compose: services {sorted(services)}")
    for name, svc in services.items():
        check("image" in svc, f"compose: {name} has an image")
        check(svc.get("restart") == "unless-stopped", f"compose: {name} restarts")
    check(services["nginx"].get("ports") == ["443:443"], "compose: nginx publishes 443")
    lk = services["latchkeyd"]
    env = lk.get("environment", {})
    check(lk.get("network_mode") == "service:nginx", "compose: latchkeyd shares nginx's network")
    check(env.get("LATCHKEY_LISTEN") == "127.0.0.1:52800", "compose: latchkeyd listens on loopback")
    check(env.get("LATCHKEY_TRUSTED_PROXY") == "127.0.0.1/32", "compose: nginx is the trusted proxy")
    check(str(env.get("LATCHKEY_PUBLIC_URL", "")).startswith("wss://"), "compose: public URL is wss://")
    check(str(env.get("LATCHKEY_DATABASE_URL", "")).startswith("postgres://"), "compose: PostgreSQL")
    for name in ("postgres", "latchkeyd"):
        check("healthcheck" in services[name], f"compose: {name} health check")
    check(lk.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy", "compose: waits for PostgreSQL")
    mounts = services["nginx"].get("volumes", [])
    check(any(m.startswith("./nginx/latchkey.conf:") for m in mounts), "compose: nginx uses deploy/nginx/latchkey.conf")
    check((ROOT / "deploy" / "nginx" / "latchkey.conf").exists(), "compose: the nginx site file exists")
    check(
        "./nginx/nginx.conf:/etc/nginx/nginx.conf:ro" in mounts,
        "compose: nginx uses deploy/nginx/nginx.conf (sized for a fleet) as its main context",
    )
    main = (ROOT / "deploy" / "nginx" / "nginx.conf").read_text()
    check("include /etc/nginx/conf.d/latchkey.conf;" in main, "nginx.conf includes the site where compose mounts it")
    check({"postgres-data", "latchkey-data"} <= set(doc.get("volumes", {})), "compose: named volumes")
    check(
        "./nginx/latchkey-upstream.conf:/etc/nginx/latchkey-upstream.conf:ro" in mounts,
        "compose: nginx uses deploy/nginx/latchkey-upstream.conf (one replica on loopback)",
    )


def upstream_servers(path: Path) -> tuple[list[str], str]:
    """The `server` addresses of an upstream file, and the rest of its directives."""
    servers, rest = [], []
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("server "):
            address, *params = s.removeprefix("server ").rstrip(";").split()
            servers.append(address)
            # Every server keeps the shipped parameters (max_fails=0: a
            # restarting replica is never taken out, the next one is tried).
            check(params == ["max_fails=0"], f"{path.name}: server {address} has {params}, not max_fails=0")
        elif s and not s.startswith("#"):
            rest.append(s)
    return servers, "\n".join(rest)


def nats_requires_its_user() -> None:
    """deploy/nats/cluster.conf run by the real nats-server (on free ports): the
    gateway's user and the password from NATS_PASSWORD are let in, a wrong
    password is not."""
    import shutil
    import socket
    import time

    # Debian installs it in /usr/sbin, which a user's PATH may lack.
    binary = shutil.which("nats-server") or next(
        (b for b in ("/usr/sbin/nats-server", "/usr/bin/nats-server") if Path(b).exists()), None
    )
    if binary is None:
        finding("nats-server is not installed: cannot check deploy/nats/cluster.conf")
        return

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    port, http_port = free_port(), free_port()
    conf = ROOT / "deploy" / "nats" / "cluster.conf"
    server = subprocess.Popen(
        [binary, "-c", str(conf), "-a", "127.0.0.1", "-p", str(port), "-m", str(http_port)],
        env={"NATS_PASSWORD": "check-password"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        def answer(password: str) -> bytes:
            for _ in range(100):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2)
                    break
                except OSError:
                    time.sleep(0.05)  # the server is still starting
            else:
                return b"unreachable"
            with s:
                s.recv(4096)  # INFO
                connect = '{"user":"latchkey","pass":"%s","verbose":false}' % password
                s.sendall(f"CONNECT {connect}\r\nPING\r\n".encode())
                return s.recv(4096)

        check(answer("check-password").startswith(b"PONG"), "nats/cluster.conf: the gateway's user is let in")
        check(b"Authorization Violation" in answer("wrong"), "nats/cluster.conf: a wrong password is refused")
    finally:
        server.kill()
        server.wait()


def compose_cluster() -> None:
    """deploy/compose.cluster.yaml: three replicas on PostgreSQL and NATS behind
    nginx, each at the address the cluster upstream names, nginx their one
    trusted proxy, every replica on the same store, NATS and public URL."""
    import ipaddress

    doc = yaml.safe_load((ROOT / "deploy" / "compose.cluster.yaml").read_text())
    services = doc.get("services", {})
    replicas = {n: s for n, s in services.items() if n.startswith("latchkeyd-")}
    check(set(services) == {"postgres", "nats", "nginx", *replicas} and len(replicas) == 3, f"compose.cluster: services {sorted(services)}")
    for name, svc in services.items():
        check("image" in svc, f"compose.cluster: {name} has an image")
        check(svc.get("restart") == "unless-stopped", f"compose.cluster: {name} restarts")
    def address(name: str) -> str:
        return services[name].get("networks", {}).get("latchkey", {}).get("ipv4_address", "")
    subnet = ipaddress.ip_network(doc["networks"]["latchkey"]["ipam"]["config"][0]["subnet"])
    for name in services:
        check(address(name) and ipaddress.ip_address(address(name)) in subnet, f"compose.cluster: {name} has a fixed address in {subnet}")
    check(services["nginx"].get("ports") == ["443:443"], "compose.cluster: nginx publishes 443")
    check("ports" not in services["nats"] and "ports" not in services["postgres"], "compose.cluster: NATS and PostgreSQL are not published")
    servers, rest = upstream_servers(ROOT / "deploy" / "nginx" / "latchkey-upstream.cluster.conf")
    one, rest_one = upstream_servers(ROOT / "deploy" / "nginx" / "latchkey-upstream.conf")
    check(one == ["127.0.0.1:52800"], f"latchkey-upstream.conf: one replica on loopback, not {one}")
    check(rest == rest_one, "latchkey-upstream.cluster.conf differs from latchkey-upstream.conf beyond its server lines")
    check(sorted(servers) == sorted(f"{address(n)}:52800" for n in replicas), f"compose.cluster: the upstream {servers} names the replicas")
    shared = None
    node_ids = set()
    for name, svc in replicas.items():
        env = svc.get("environment", {})
        check(env.get("LATCHKEY_LISTEN") == "0.0.0.0:52800", f"compose.cluster: {name} listens on :52800")
        check(env.get("LATCHKEY_TRUSTED_PROXY") == f"{address('nginx')}/32", f"compose.cluster: {name} trusts nginx only")
        check(str(env.get("LATCHKEY_CLUSTER", "")).startswith("nats://") and "@nats:4222" in env.get("LATCHKEY_CLUSTER", ""), f"compose.cluster: {name} uses the NATS service with credentials")
        check(str(env.get("LATCHKEY_DATABASE_URL", "")).startswith("postgres://"), f"compose.cluster: {name} on PostgreSQL")
        same = tuple(env.get(k) for k in ("LATCHKEY_PUBLIC_URL", "LATCHKEY_DATABASE_URL", "LATCHKEY_CLUSTER"))
        check(shared in (None, same), f"compose.cluster: {name} shares the store, NATS and public URL")
        shared = same
        node_ids.add(env.get("LATCHKEY_NODE_ID"))
        deps = svc.get("depends_on", {})
        check(all(deps.get(d, {}).get("condition") == "service_healthy" for d in ("postgres", "nats")), f"compose.cluster: {name} waits for PostgreSQL and NATS")
        check("healthcheck" in svc, f"compose.cluster: {name} health check")
        check(svc.get("stop_grace_period") == "30s", f"compose.cluster: {name} has time to drain")
    check(len(node_ids) == 3 and None not in node_ids, f"compose.cluster: distinct node ids {node_ids}")
    check(str(shared[0]).startswith("wss://"), "compose.cluster: public URL is wss://")
    nats = services["nats"]
    check(nats.get("command") == ["-c", "/etc/nats/cluster.conf"], "compose.cluster: NATS runs nats/cluster.conf")
    check("./nats/cluster.conf:/etc/nats/cluster.conf:ro" in nats.get("volumes", []), "compose.cluster: NATS mounts nats/cluster.conf")
    check("NATS_PASSWORD" in nats.get("environment", {}), "compose.cluster: NATS reads its password from the environment")
    nats_requires_its_user()
    mounts = services["nginx"].get("volumes", [])
    for m in (
        "./nginx/nginx.conf:/etc/nginx/nginx.conf:ro",
        "./nginx/latchkey.conf:/etc/nginx/conf.d/latchkey.conf:ro",
        "./nginx/latchkey-upstream.cluster.conf:/etc/nginx/latchkey-upstream.conf:ro",
    ):
        check(m in mounts, f"compose.cluster: nginx mounts {m}")
    site = (ROOT / "deploy" / "nginx" / "latchkey.conf").read_text()
    check("include /etc/nginx/latchkey-upstream.conf;" in site, "latchkey.conf includes the upstream where compose mounts it")


CLUSTER = "cluster mode: three replicas on PostgreSQL and NATS, Ingress"

VALUE_SETS = {
    "defaults (SQLite on a volume)": {},
    "PostgreSQL, Ingress with TLS, native TLS": {
        "database": {"existingSecret": "latchkey-db"},
        "ingress": {"enabled": True, "tlsSecret": "latchkey-tls"},
        "tls": {"existingSecret": "latchkey-pod-tls"},
        "config": {
            "publicUrl": "wss://gw.example.com",
            "allowedExtensionIds": ["abcdefghijklmnopabcdefghijklmnop"],
            "tracing": {"otlpEndpoint": "http://otel-collector:4318/v1/traces", "sampleRatio": 0.25},
        },
    },
    "Gateway API, autoscaler in cluster mode (NATS URL in a Secret, private CA), no persistence, ServiceMonitor": {
        "database": {"existingSecret": "latchkey-db"},
        "cluster": {"existingSecret": "latchkey-nats", "caSecret": "nats-ca"},
        "httpRoute": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 9},
        "persistence": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
    },
    CLUSTER: {
        "replicaCount": 3,
        "database": {"existingSecret": "latchkey-db"},
        "cluster": {"natsUrl": "nats://nats.nats.svc:4222"},
        "ingress": {"enabled": True, "tlsSecret": "latchkey-tls"},
    },
}


def server_accepts(rendered: dict[str, str], extra_env: dict[str, str] | None = None) -> None:
    """The chart's latchkey.toml must pass `latchkeyd check-config` (unknown keys fail)."""
    import tempfile

    binary = ROOT / "target" / "debug" / "latchkeyd"
    if not binary.exists():
        finding(f"{binary} is missing: build latchkeyd before the deployment checks")
        return
    cm = next(v for k, v in rendered.items() if k.endswith("configmap.yaml"))
    toml = yaml.safe_load(cm)["data"]["latchkey.toml"]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "latchkey.toml"
        cfg.write_text(toml)
        env = {"PATH": "/usr/bin:/bin", "LATCHKEY_DATA_DIR": str(Path(tmp) / "data"), **(extra_env or {})}
        r = subprocess.run([str(binary), "--config", str(cfg), "check-config"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            finding(f"latchkeyd check-config rejects the chart's configuration: {r.stderr.strip()}")


def manifests(rendered: dict[str, str]) -> dict[str, dict]:
    """The rendered objects by kind (one of each kind is all the chart makes)."""
    out = {}
    for path, text in rendered.items():
        if path.endswith((".yaml", ".yml")):
            for doc in yaml.safe_load_all(text):
                if doc:
                    out[doc["kind"]] = doc
    return out


def cluster_shape(name: str, values: dict, objects: dict[str, dict]) -> None:
    """What cluster mode promises (docs/deploy.md): rolling upgrades, NATS and the
    node id in the environment, replicas spread, a preStop wait and a grace
    period that covers it and the drain, and the ingress keeping an agent's
    token on one replica."""
    dep = objects["Deployment"]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container.get("env", [])}
    check(spec["strategy"]["type"] == "RollingUpdate", f"helm ({name}): rolling upgrades")
    check(spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}, f"helm ({name}): surge one, none unavailable")
    check("LATCHKEY_CLUSTER" in env and "LATCHKEY_DATABASE_URL" in env, f"helm ({name}): NATS and PostgreSQL in the environment")
    check(env.get("LATCHKEY_NODE_ID", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name", f"helm ({name}): node id is the pod's name")
    keys = {c["topologyKey"] for c in pod.get("topologySpreadConstraints", [])}
    check({"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys, f"helm ({name}): spread over nodes and zones")
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    drain = values.get("config", {}).get("limits", {}).get("drain_timeout_ms", 10000) / 1000
    check(pod["terminationGracePeriodSeconds"] >= int(sleep[1]) + drain + 5, f"helm ({name}): grace covers preStop and drain")
    toml = objects["ConfigMap"]["data"]["latchkey.toml"]
    check("[cluster]" in toml and "subject = " in toml, f"helm ({name}): [cluster] in latchkey.toml")
    check("PersistentVolumeClaim" not in objects, f"helm ({name}): no SQLite volume")
    if values.get("autoscaling", {}).get("enabled"):
        check("replicas" not in spec, f"helm ({name}): the autoscaler owns replicas")
        check(objects.get("HorizontalPodAutoscaler", {}).get("spec", {}).get("maxReplicas") == values["autoscaling"]["maxReplicas"], f"helm ({name}): autoscaler")
    else:
        check(spec.get("replicas") == values["replicaCount"], f"helm ({name}): replicas")
    if "Ingress" in objects:
        ann = objects["Ingress"]["metadata"].get("annotations", {})
        check(ann.get("nginx.ingress.kubernetes.io/upstream-hash-by") == "$http_authorization$remote_addr", f"helm ({name}): ingress hashes on the agent token")


def helm() -> None:
    import helm_python as helm_sdk
    import kubernetes_validate

    chart_dir = ROOT / "helm" / "latchkey"
    for name, values in VALUE_SETS.items():
        report = helm_sdk.lint(str(chart_dir), values or None, strict=True)
        for m in report.get("messages", []):
            if m.get("severity", 0) >= 2:
                finding(f"helm lint ({name}): {m.get('path')}: {m.get('error')}")
        for e in report.get("errors", []) or []:
            finding(f"helm lint ({name}): {e}")
        chart = helm_sdk.Chart.load(str(chart_dir))
        rendered = chart.render(values or None, name="latchkey", namespace="latchkey", is_install=True)
        kinds = []
        for path, text in sorted(rendered.items()):
            if not path.endswith((".yaml", ".yml")) or not text.strip():
                continue
            for doc in yaml.safe_load_all(text):
                if not doc:
                    continue
                kinds.append(doc["kind"])
                if doc["apiVersion"].startswith("gateway.networking.k8s.io/"):
                    # A CRD: kubernetes-validate has no schema; check its shape.
                    spec = doc.get("spec", {})
                    check(bool(spec.get("parentRefs")) and bool(spec.get("rules")), f"HTTPRoute ({name}) shape")
                    continue
                if doc["apiVersion"].startswith("monitoring.coreos.com/"):
                    ends = doc.get("spec", {}).get("endpoints", [])
                    check(bool(ends) and ends[0].get("port") == "metrics", f"ServiceMonitor ({name}) shape")
                    continue
                try:
                    kubernetes_validate.validate(doc, "1.30.0", strict=True)
                except Exception as e:  # noqa: BLE001 - report every validation failure
                    finding(f"{path} ({name}): {e}")
        if not values:
            server_accepts(rendered)
        if values.get("cluster"):
            cluster_shape(name, values, manifests(rendered))
            if name == CLUSTER:
                # check-config reads the store: the machine's PostgreSQL (as in CI).
                pg = os.environ.get("LATCHKEY_CHECK_PG", "postgres://root@127.0.0.1:5432/test")
                server_accepts(rendered, {"LATCHKEY_CLUSTER": "nats://nats:4222", "LATCHKEY_DATABASE_URL": pg})
        else:
            check(manifests(rendered)["Deployment"]["spec"]["strategy"]["type"] == "Recreate", f"helm ({name}): one gateway at a time")
        print(f"ok   helm ({name}): {', '.join(sorted(kinds))}")
        check("Deployment" in kinds and "Service" in kinds and "ConfigMap" in kinds, f"helm ({name}): core objects")
    # The schema refuses several replicas without PostgreSQL and NATS, and NATS
    # without PostgreSQL (latchkeyd refuses cluster mode on SQLite).
    chart = helm_sdk.Chart.load(str(chart_dir))
    db = {"existingSecret": "latchkey-db"}
    nats = {"natsUrl": "nats://nats:4222"}
    for bad in (
        {"replicaCount": 2},
        {"replicaCount": 2, "database": db},
        {"replicaCount": 2, "cluster": nats},
        {"autoscaling": {"enabled": True}},
        {"autoscaling": {"enabled": True}, "database": db},
        {"cluster": nats},
        {"cluster": {"natsUrl": "nats://user:secret@nats:4222"}, "database": db},
        {"config": {"publicUrl": "ws://x"}},
    ):
        try:
            chart.validate_schema(chart.merge_values(bad))
            finding(f"values.schema.json accepted {bad}")
        except helm_sdk.HelmValuesError:
            pass
    for good in ({"replicaCount": 2, "database": db, "cluster": nats}, {"replicaCount": 3, "database": db, "cluster": {"existingSecret": "n"}}):
        try:
            chart.validate_schema(chart.merge_values(good))
        except helm_sdk.HelmValuesError as e:
            finding(f"values.schema.json refused {good}: {e}")
    # The chart refuses a grace period shorter than the preStop wait and the drain.
    try:
        chart.render(chart.merge_values({"terminationGracePeriodSeconds": 15, "config": {"limits": {"drain_timeout_ms": 30000}}}), name="latchkey", namespace="latchkey", is_install=True)
        finding("the chart rendered a grace period shorter than the drain")
    except Exception as e:  # noqa: BLE001 - the refusal is what is checked
        check("terminationGracePeriodSeconds" in str(e), f"grace refusal names the setting: {e}")


def grafana() -> None:
    """The dashboard parses and queries only metrics latchkeyd exports."""
    import json
    import re

    dash = json.loads((ROOT / "deploy" / "grafana" / "latchkey.json").read_text())
    source = (ROOT / "server" / "src" / "telemetry" / "metrics.rs").read_text()
    exported = set(re.findall(r'pub const \w+: &str = "(latchkey_\w+)"', source))
    check(bool(exported), "metrics.rs exports metric names")
    for panel in dash.get("panels", []):
        for target in panel.get("targets", []):
            for name in re.findall(r"latchkey_\w+", target.get("expr", "")):
                base = re.sub(r"_(bucket|count|sum)$", "", name)
                check(base in exported, f"grafana panel {panel.get('title')!r} queries unknown metric {name}")


def openapi() -> None:
    """docs/openapi.json, the document /openapi.json serves (a server test keeps
    them equal), is valid OpenAPI 3.1: structure, every $ref resolved, unique
    operation ids."""
    from openapi_spec_validator import validate
    from openapi_spec_validator.readers import read_from_filename

    doc, _ = read_from_filename(str(ROOT / "docs" / "openapi.json"))
    check(doc.get("openapi") == "3.1.0", "openapi.json: OpenAPI 3.1.0")
    try:
        validate(doc)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        finding(f"openapi.json: {type(e).__name__}: {str(e)[:300]}")


def main() -> int:
    dockerfile()
    openapi()
    grafana()
    compose()
    compose_cluster()
    helm()
    if FINDINGS:
        print(f"{len(FINDINGS)} finding(s)")
        return 1
    print("deployment checks: 0 findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
