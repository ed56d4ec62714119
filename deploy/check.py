#!/usr/bin/env python3
"""Static checks of the deployment files; no Docker engine or cluster needed.

- deploy/Dockerfile: hadolint, plus the properties the deployment guide promises.
- deploy/compose.yaml: parsed and checked (images, ports, volumes, health checks,
  environment), since `docker compose config` needs the Compose plugin.
- helm/latchkey: `helm lint --strict`, rendered with several value sets, every
  manifest validated against the Kubernetes schemas (kubernetes-validate, strict),
  and values.schema.json must refuse more than one replica.
- docs/openapi.json: valid OpenAPI 3.1 (openapi-spec-validator).

Exits non-zero on any finding.
"""

from __future__ import annotations

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
    "Gateway API, autoscaler, no persistence, ServiceMonitor": {
        "httpRoute": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "autoscaling": {"enabled": True},
        "persistence": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
    },
}


def server_accepts(rendered: dict[str, str]) -> None:
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
        env = {"PATH": "/usr/bin:/bin", "LATCHKEY_DATA_DIR": str(Path(tmp) / "data")}
        r = subprocess.run([str(binary), "--config", str(cfg), "check-config"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            finding(f"latchkeyd check-config rejects the chart's configuration: {r.stderr.strip()}")


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
        print(f"ok   helm ({name}): {', '.join(sorted(kinds))}")
        check("Deployment" in kinds and "Service" in kinds and "ConfigMap" in kinds, f"helm ({name}): core objects")
    # The schema refuses what the chart cannot run yet.
    chart = helm_sdk.Chart.load(str(chart_dir))
    for bad in ({"replicaCount": 2}, {"autoscaling": {"maxReplicas": 3}}, {"config": {"publicUrl": "ws://x"}}):
        try:
            chart.validate_schema(chart.merge_values(bad))
            finding(f"values.schema.json accepted {bad}")
        except helm_sdk.HelmValuesError:
            pass


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
    helm()
    if FINDINGS:
        print(f"{len(FINDINGS)} finding(s)")
        return 1
    print("deployment checks: 0 findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
