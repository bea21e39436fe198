"""deploy/k8s: the manifests validate against the Kubernetes schemas of a pinned version
(kubernetes-validate ships them), KEDA's resources against deploy/schemas/keda-v1alpha1.json,
and they are wired as the roles need: probes on the right ports, `fetcher check` before each
role, resources, disruption budgets, autoscaling of the API on CPU and of the worker on the
work queue. `kubectl apply -f deploy/k8s/` (not recursive) applies only what every cluster
takes: the Secret is an example in its own folder, KEDA's resources are optional in theirs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from entrypoints.cli.main import build_parser
from entrypoints.cli.settings_help import SETTINGS
from entrypoints.composition.infrastructure import load_key_ring
from entrypoints.settings import Settings, SettingsError
from tests.deploy.conftest import BIN, DEPLOY, yaml_documents

KUBERNETES_VERSION = "1.33.0"
K8S = DEPLOY / "k8s"
CORE_FILES = ("configmap.yaml", "api.yaml", "worker.yaml", "relay.yaml")
SECRET_EXAMPLE = K8S / "examples" / "secret.example.yaml"
KEDA = K8S / "keda" / "keda.yaml"
PORTS = {"api": ("http", 4006), "worker": ("health", 4007), "relay": ("health", 4007)}


def resources() -> dict[tuple[str, str], dict]:
    found = {}
    for path in [*sorted(K8S.glob("*.yaml")), SECRET_EXAMPLE, KEDA]:
        for doc in yaml_documents(path):
            found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def test_every_manifest_file_is_checked():
    assert {p.relative_to(K8S).as_posix() for p in K8S.rglob("*.y*ml")} == {
        *CORE_FILES,
        "examples/secret.example.yaml",
        "keda/keda.yaml",
    }


def test_applying_the_folder_applies_no_secret_and_nothing_a_cluster_may_not_know():
    """`kubectl apply -f deploy/k8s/` reads the folder's own files, not its subfolders."""
    applied = [doc for path in K8S.glob("*") if path.is_file() for doc in yaml_documents(path)]
    kinds = {doc["kind"] for doc in applied}
    assert kinds == {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler",
                     "PodDisruptionBudget"}  # fmt: skip
    assert all(doc["apiVersion"].split("/")[0] in ("v1", "apps", "autoscaling", "policy")
               for doc in applied)  # fmt: skip
    assert [doc["kind"] for doc in yaml_documents(SECRET_EXAMPLE)] == ["Secret"]


def test_the_manifests_validate_strictly_against_kubernetes():
    result = subprocess.run(
        [
            str(BIN / "kubernetes-validate"),
            "--kubernetes-version",
            KUBERNETES_VERSION,
            "--strict",
            *(str(K8S / name) for name in CORE_FILES),
            str(SECRET_EXAMPLE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARN" not in result.stdout + result.stderr  # no kind went unchecked


def test_the_validator_catches_a_misspelt_field(tmp_path: Path):
    broken = tmp_path / "api.yaml"
    broken.write_text((K8S / "api.yaml").read_text().replace("readinessProbe:", "readinesProbe:"))
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "-k", KUBERNETES_VERSION, "--strict", str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0


KEDA_SCHEMA = json.loads((DEPLOY / "schemas" / "keda-v1alpha1.json").read_text())


def test_kedas_resources_validate_against_their_schema():
    documents = yaml_documents(KEDA)
    assert {doc["kind"] for doc in documents} == {"ScaledObject", "TriggerAuthentication"}
    jsonschema.Draft202012Validator.check_schema(KEDA_SCHEMA)
    for doc in documents:
        jsonschema.validate(doc, KEDA_SCHEMA, cls=jsonschema.Draft202012Validator)


def test_the_keda_schema_refuses_a_misspelt_field():
    scaled = next(d for d in yaml_documents(KEDA) if d["kind"] == "ScaledObject")
    scaled["spec"]["maxReplicas"] = scaled["spec"].pop("maxReplicaCount")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, KEDA_SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("role", list(PORTS))
def test_each_role_is_a_hardened_deployment_probed_on_its_port(role):
    deployment = resources()[("Deployment", f"fetcher-{role}")]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == [role]
    name, number = PORTS[role]
    assert container["ports"] == [{"name": name, "containerPort": number}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": name}
    assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": name}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": name}
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert {"cpu", "memory"} <= set(requests) and "memory" in limits
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert [e for e in container["envFrom"]] == [
        {"configMapRef": {"name": "fetcher-config"}},
        {"secretRef": {"name": "fetcher-secrets"}},
    ]
    assert pod["terminationGracePeriodSeconds"] >= 30
    (check,) = pod["initContainers"]
    assert check["args"] == ["check", "--role", role]
    assert build_parser().parse_args(check["args"]).command == "check"
    assert check["image"] == container["image"] and check["envFrom"] == container["envFrom"]
    assert check["securityContext"] == container["securityContext"]
    budget = resources()[("PodDisruptionBudget", f"fetcher-{role}")]
    assert (
        budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )


def test_the_api_scales_on_cpu_behind_a_service():
    found = resources()
    hpa = found[("HorizontalPodAutoscaler", "fetcher-api")]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "fetcher-api",
    }
    assert hpa["spec"]["minReplicas"] >= 2
    assert "replicas" not in found[("Deployment", "fetcher-api")]["spec"]  # the HPA owns it
    service = found[("Service", "fetcher-api")]
    assert service["spec"]["ports"] == [{"name": "http", "port": 4006, "targetPort": "http"}]
    assert found[("PodDisruptionBudget", "fetcher-api")]["spec"]["minAvailable"] == 1


def test_the_worker_scales_on_the_work_queue_length():
    found = resources()
    scaled = found[("ScaledObject", "fetcher-worker")]
    config = found[("ConfigMap", "fetcher-config")]["data"]
    assert scaled["spec"]["scaleTargetRef"] == {"name": "fetcher-worker"}
    assert "replicas" not in found[("Deployment", "fetcher-worker")]["spec"]  # KEDA owns it
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "rabbitmq"
    assert trigger["metadata"]["mode"] == "QueueLength"
    assert trigger["metadata"]["queueName"] == config["RABBITMQ_FETCHER_WORK_QUEUE"]
    assert trigger["metadata"]["value"] == config["RABBITMQ_NUMBERS_OF_WORKERS"]
    auth = found[("TriggerAuthentication", trigger["authenticationRef"]["name"])]
    (reference,) = auth["spec"]["secretTargetRef"]
    assert reference == {"parameter": "host", "name": "fetcher-secrets", "key": "RABBITMQ_URL"}


def test_the_settings_are_known_and_the_secrets_are_in_the_secret():
    found = resources()
    config = found[("ConfigMap", "fetcher-config")]["data"]
    secret = found[("Secret", "fetcher-secrets")]["stringData"]
    known = {setting.name for setting in SETTINGS} | {"HEALTH_PORT"}  # `fetcher healthcheck`
    assert set(config) | set(secret) <= known, (set(config) | set(secret)) - known
    assert set(secret) == {
        "APP_ENC_KEY",
        "FETCHER_DATABASE_URL",
        "RABBITMQ_URL",
        "OBJECT_STORAGE_ACCESS_KEY_ID",
        "OBJECT_STORAGE_SECRET_KEY",
    }
    assert not {"APP_ENC_KEY", "RABBITMQ_URL", "FETCHER_DATABASE_URL"} & set(config)


def test_the_secrets_placeholders_stop_start_up_naming_the_setting():
    found = resources()
    env = {**found[("ConfigMap", "fetcher-config")]["data"]}
    env.update(found[("Secret", "fetcher-secrets")]["stringData"])
    with pytest.raises(SettingsError, match="FETCHER_DATABASE_URL"):
        Settings.from_env(env)
    env["FETCHER_DATABASE_URL"] = "postgresql://fetcher:x@db.internal:5432/fetcher"
    with pytest.raises(SettingsError, match="RABBITMQ_URL"):
        Settings.from_env(env)
    env["RABBITMQ_URL"] = "amqps://fetcher:x@rabbitmq.internal:5671/"
    settings = Settings.from_env(env)  # the rest of the ConfigMap is valid as shipped
    assert settings.security.verifies_tokens and settings.storage.uses_s3
    with pytest.raises(SettingsError, match="APP_ENC_KEY is invalid"):
        load_key_ring(settings)
