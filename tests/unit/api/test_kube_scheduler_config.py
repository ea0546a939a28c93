"""KubeSchedulerConfiguration (v1) <-> SchedulingProfiles: configurations shaped like upstream's own
(``cmd/kube-scheduler/app/options/options_test.go``, ``pkg/scheduler/apis/config/v1/defaults_test.go``, the
kube-scheduler configuration reference) import and export back to an equivalent configuration, warn of
exactly the fields without an equivalent, and bad input fails naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.kube_scheduler_config import (
    KUBE_SCHEDULER_PLUGINS,
    export_config,
    export_profile,
    import_config,
)
from kopf_scheduler.api.profile import parse_profile

PROFILES = Path(__file__).resolve().parents[3] / "profiles"
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

#: options_test.go's "plugin config" (out-of-tree ``foo``/``bar`` left out: kube-scheduler's registry)
PLUGIN_CONFIG = (
    HEAD
    + """
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- plugins:
    reserve:
      disabled:
      - name: VolumeBinding
    preBind:
      disabled:
      - name: VolumeBinding
  pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 2
"""
)

#: options_test.go's "multiple profiles" and "high throughput" profiles, with upstream's defaults spelled out
MULTI_PROFILES = (
    HEAD
    + """
parallelism: 16
percentageOfNodesToScore: 0
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 10
enableProfiling: true
enableContentionProfiling: true
leaderElection:
  leaderElect: true
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
  resourceLock: leases
  resourceNamespace: kube-system
  resourceName: kube-scheduler
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  acceptContentTypes: ""
  contentType: application/vnd.kubernetes.protobuf
  qps: 50
  burst: 100
profiles:
- schedulerName: foo-profile
  plugins:
    reserve:
      enabled:
      - name: VolumeBinding
      disabled:
      - name: VolumeBinding
- schedulerName: bar-profile
  plugins:
    preBind:
      disabled:
      - name: VolumeBinding
- schedulerName: high-throughput-profile
  percentageOfNodesToScore: 30
  plugins:
    preScore:
      enabled:
      - name: InterPodAffinity
  pluginConfig:
  - name: InterPodAffinity
    args:
      ignorePreferredTermsOfExistingPods: true
"""
)

#: the reference's multiPoint examples and typed plugin args (defaults_test.go's shapes)
MULTI_POINT = (
    HEAD
    + """
percentageOfNodesToScore: 50
extenders:
- urlPrefix: http://127.0.0.1:12346/scheduler
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  enableHTTPS: false
  nodeCacheCapable: true
  managedResources:
  - name: example.com/foo
    ignoredByScheduler: true
profiles:
- schedulerName: multipoint-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
        weight: 3
      - name: PodTopologySpread
        weight: 2
      disabled:
      - name: '*'
    queueSort:
      enabled:
      - name: PrioritySort
    bind:
      enabled:
      - name: DefaultBinder
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
        requestedToCapacityRatio:
          shape:
          - {utilization: 0, score: 0}
          - {utilization: 100, score: 10}
  - name: PodTopologySpread
    args:
      kind: PodTopologySpreadArgs
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway
- schedulerName: no-scoring-scheduler
  percentageOfNodesToScore: 100
  plugins:
    preScore:
      disabled:
      - name: '*'
    score:
      disabled:
      - name: '*'
      enabled:
      - name: NodeAffinity
        weight: 2
  pluginConfig:
  - name: DefaultPreemption
    args:
      minCandidateNodesPercentage: 20
      minCandidateNodesAbsolute: 50
  - name: VolumeBinding
    args:
      bindTimeoutSeconds: 300
"""
)

#: no profiles at all: kube-scheduler serves default-scheduler with the defaults
EMPTY = HEAD

CONFIGS = {
    "plugin-config": PLUGIN_CONFIG,
    "multi-profiles": MULTI_PROFILES,
    "multi-point": MULTI_POINT,
    "empty": EMPTY,
}

UNMAPPED_TOP = {
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "delayCacheUntilActive",
}


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """What kube-scheduler serves by ``config``, as far as a SchedulingProfile can say it (upstream's
    defaulting: one default-scheduler profile when none, a lone profile's name defaulted, the top-level
    percentage for every profile without its own, args typed or not)."""
    config = copy.deepcopy(config)
    top = config.pop("percentageOfNodesToScore", None)
    for key in UNMAPPED_TOP:
        config.pop(key, None)
    profiles = config.get("profiles") or [{}]
    if len(profiles) == 1:
        profiles[0].setdefault("schedulerName", "default-scheduler")
    for profile in profiles:
        if top is not None:
            profile.setdefault("percentageOfNodesToScore", top)
        for entry in profile.get("pluginConfig") or ():
            for key in ("apiVersion", "kind"):
                (entry.get("args") or {}).pop(key, None)
    config["profiles"] = profiles
    return config


@pytest.mark.parametrize("text", CONFIGS.values(), ids=CONFIGS.keys())
def test_import_then_export_gives_an_equivalent_configuration(text: str) -> None:
    config = yaml.safe_load(text)
    imported = import_config(config)
    for manifest in imported.profiles:
        parse_profile(manifest)  # a valid SchedulingProfile
    exported, warnings = export_config(imported.profiles)
    assert warnings == []
    assert effective(exported) == effective(config)


def test_each_profile_becomes_one_schedulingprofile_with_the_shared_settings() -> None:
    imported = import_config(yaml.safe_load(MULTI_POINT))
    names = [(m["metadata"]["name"], m["spec"]["schedulerName"]) for m in imported.profiles]
    assert names == [
        ("multipoint-scheduler", "multipoint-scheduler"),
        ("no-scoring-scheduler", "no-scoring-scheduler"),
    ]
    first, second = (m["spec"] for m in imported.profiles)
    assert first["percentageOfNodesToScore"] == 50  # the top-level value
    assert second["percentageOfNodesToScore"] == 100  # its own
    assert first["extenders"] == second["extenders"] == yaml.safe_load(MULTI_POINT)["extenders"]
    assert first["pluginConfig"][0]["args"] == {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
            },
        }
    }
    assert imported.warnings == []


def test_no_profiles_is_one_default_scheduler_profile_and_its_name_is_reserved() -> None:
    imported = import_config(yaml.safe_load(EMPTY))
    assert imported.profiles == [
        {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": "default-scheduler"},
            "spec": {"schedulerName": "default-scheduler"},
        }
    ]
    assert imported.warnings == [
        "profiles[0].schedulerName: 'default-scheduler' is reserved: the operator serves it only when run "
        "with --allow-scheduler-name default-scheduler"
    ]


def test_every_field_without_an_equivalent_is_warned_about_by_its_path() -> None:
    warned = [w.split(":")[0] for w in import_config(yaml.safe_load(MULTI_PROFILES)).warnings]
    assert warned == [
        "parallelism",
        "leaderElection.leaderElect",
        "leaderElection.leaseDuration",
        "leaderElection.renewDeadline",
        "leaderElection.retryPeriod",
        "leaderElection.resourceLock",
        "leaderElection.resourceNamespace",
        "leaderElection.resourceName",
        "clientConnection.kubeconfig",
        "clientConnection.acceptContentTypes",
        "clientConnection.contentType",
        "clientConnection.qps",
        "clientConnection.burst",
        "enableProfiling",
        "enableContentionProfiling",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
    ]


BAD = {
    "old-api-version": (
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        "apiVersion: must be kubescheduler.config.k8s.io/v1, not 'kubescheduler.config.k8s.io/v1beta3'",
    ),
    "wrong-kind": (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n",
        "kind: must be KubeSchedulerConfiguration, not 'KubeProxyConfiguration'",
    ),
    "unknown-plugin": (
        HEAD + "profiles:\n- plugins:\n    reserve:\n      enabled:\n      - name: foo\n",
        "profiles[0].plugins.reserve.enabled[0].name: unknown plugin 'foo'",
    ),
    "unknown-plugin-config": (
        HEAD + "profiles:\n- pluginConfig:\n  - name: foo\n",
        "profiles[0].pluginConfig[0].name: unknown plugin 'foo'",
    ),
    "star-enabled": (
        HEAD + "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: '*'\n",
        "profiles[0].plugins.score.enabled[0].name: '*' may only disable plugins",
    ),
    "string-percentage": (
        HEAD + "percentageOfNodesToScore: '50'\n",
        "percentageOfNodesToScore: must be of type integer, not '50'",
    ),
    "percentage-over-100": (
        HEAD + "profiles:\n- percentageOfNodesToScore: 150\n",
        "profiles[0].percentageOfNodesToScore: must be <= 100, not 150",
    ),
    "unknown-field": (HEAD + "foo: bar\n", "unknown field(s) ('foo' was unexpected)"),
    "unknown-extension-point": (
        HEAD + "profiles:\n- plugins:\n    scoring: {}\n",
        "profiles[0].plugins: unknown field(s) ('scoring' was unexpected)",
    ),
    "weight-as-string": (
        HEAD
        + "profiles:\n- plugins:\n    score:\n      enabled:\n      - {name: NodeAffinity, weight: '2'}\n",
        "profiles[0].plugins.score.enabled[0].weight: must be of type integer, not '2'",
    ),
    "unnamed-second-profile": (
        HEAD + "profiles:\n- schedulerName: a\n- {}\n",
        "profiles[1].schedulerName: is required when there are several profiles",
    ),
    "duplicate-profile": (
        HEAD + "profiles:\n- schedulerName: a\n- schedulerName: a\n",
        "profiles[1].schedulerName: 'a' is the name of an earlier profile",
    ),
    "args-of-another-kind": (
        HEAD + "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args: {kind: NodeResourcesFitArgs}\n",
        "profiles[0].pluginConfig[0].args.kind: must be NodeAffinityArgs, not 'NodeResourcesFitArgs'",
    ),
    "duplicate-plugin-config": (
        HEAD + "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n  - name: NodeAffinity\n",
        "profiles[0].pluginConfig[1].name: duplicate entry for plugin 'NodeAffinity'",
    ),
    "extender-without-url": (
        HEAD + "extenders:\n- filterVerb: filter\n",
        "extenders[0]: 'urlPrefix' is required",
    ),
    "not-an-object": ("- a\n", "a KubeSchedulerConfiguration must be an object"),
    # kube-scheduler v1.37's pod group extension points: carried, but kopf-scheduler has no plugin there
    "pod-group-point-enabled": (
        HEAD + "profiles:\n- plugins:\n    placementScore:\n      enabled:\n"
        "      - {name: PodGroupPodsCount, weight: 1}\n",
        "profiles[0].plugins.placementScore.enabled[0].name: plugin 'PodGroupPodsCount' does not extend "
        "placementScore: kopf-scheduler has no plugin at kube-scheduler v1.37's pod group extension points "
        "(GenericWorkload)",
    ),
}


@pytest.mark.parametrize(("text", "error"), BAD.values(), ids=BAD.keys())
def test_bad_configuration_fails_naming_the_field(text: str, error: str) -> None:
    with pytest.raises(ProfileError) as raised:
        import_config(yaml.safe_load(text))
    assert str(raised.value) == error


def test_plugins_outside_kube_scheduler_import_when_known_and_export_with_a_warning() -> None:
    text = (
        HEAD
        + "profiles:\n- schedulerName: gangs\n  plugins: {multiPoint: {enabled: [{name: Coscheduling}]}}\n"
    )
    with pytest.raises(ProfileError, match="unknown plugin 'Coscheduling'"):
        import_config(yaml.safe_load(text))
    imported = import_config(yaml.safe_load(text), KUBE_SCHEDULER_PLUGINS | {"Coscheduling"})
    _, warnings = export_config(imported.profiles)
    assert warnings == [
        "[0].spec.plugins.multiPoint.enabled[0].name: plugin 'Coscheduling' is not in kube-scheduler v1.37's "
        "registry: only a kube-scheduler built with it accepts this configuration"
    ]


def test_shipped_profiles_export_and_import_back_unchanged() -> None:
    manifests = [
        d for path in sorted(PROFILES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d
    ]
    config, _ = export_config(manifests)
    back = import_config(config, KUBE_SCHEDULER_PLUGINS | {"Coscheduling"})
    assert [m["spec"] for m in back.profiles] == [m["spec"] for m in manifests]
    assert back.warnings == []


def test_export_refuses_profiles_whose_extenders_differ() -> None:
    profile = import_config(yaml.safe_load(MULTI_POINT)).profiles
    profile[1]["spec"]["extenders"][0]["weight"] = 6
    with pytest.raises(ProfileError) as raised:
        export_config(profile)
    assert str(raised.value) == (
        "[1].spec.extenders: differs from the first profile's: kube-scheduler has one list of extenders "
        "for all profiles"
    )


def test_export_profile_copies_the_profile_fields() -> None:
    spec = {"schedulerName": "s", "plugins": {"score": {"disabled": [{"name": "*"}]}}}
    assert export_profile(spec) == (spec, [])


# -- the command line -------------------------------------------------------------------------------------


def test_cli_import_prints_a_stream_and_warns_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "config.yaml"
    source.write_text(MULTI_PROFILES)
    assert main(["profiles", "import", str(source)]) == 0
    out, err = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    assert [d["spec"]["schedulerName"] for d in docs] == [
        "foo-profile",
        "bar-profile",
        "high-throughput-profile",
    ]
    lines = err.splitlines()
    assert len(lines) == 17
    assert lines[0] == (
        "kopf-scheduler profiles import: warning: parallelism: no SchedulingProfile equivalent "
        "(the operator scores nodes in one process)"
    )
    # and back: the stream exports to the equivalent configuration
    stream = tmp_path / "profiles.yaml"
    stream.write_text(out)
    assert main(["profiles", "export", str(stream)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert effective(yaml.safe_load(out)) == effective(yaml.safe_load(MULTI_PROFILES))


def test_cli_import_to_a_directory_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "config.yaml"
    source.write_text(MULTI_POINT)
    out_dir = tmp_path / "profiles"
    assert main(["profiles", "import", str(source), "--output-dir", str(out_dir)]) == 0
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["multipoint-scheduler.yaml", "no-scoring-scheduler.yaml"]
    before = {p: p.read_text() for p in out_dir.iterdir()}
    capsys.readouterr()
    assert main(["profiles", "import", str(source), "--output-dir", str(out_dir)]) == 2
    assert "already exists; nothing written" in capsys.readouterr().err
    assert {p: p.read_text() for p in out_dir.iterdir()} == before
    assert main(["profiles", "export", str(out_dir)]) == 0
    assert effective(yaml.safe_load(capsys.readouterr().out)) == effective(yaml.safe_load(MULTI_POINT))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (": [", "line 1 not valid YAML"),
        (HEAD + "profiles:\n- plugins: {score: {enabled: [{name: Foo}]}}\n", "unknown plugin 'Foo'"),
        (
            HEAD + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n"
            "    args: {scoringStrategy: {type: Most}}\n",
            'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Most": supported '
            'values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        ),
        (
            HEAD + "profiles:\n- plugins: {bind: {disabled: [{name: '*'}]}}\n",
            "profiles[0].plugins.bind: at least one bind plugin is required",
        ),
    ],
    ids=["yaml", "plugin", "plugin-args", "no-binder"],
)
def test_cli_import_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, error: str
) -> None:
    source = tmp_path / "config.yaml"
    source.write_text(text)
    assert main(["profiles", "import", str(source)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err.count("\n") == 1 and error in err and err.startswith(f"kopf-scheduler profiles: error: {source}")
    )


def test_cli_export_names_the_file_and_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "p.yaml"
    source.write_text(
        "kind: SchedulingProfile\napiVersion: kopf-scheduler.io/v1alpha1\nmetadata: {name: x}\nspec: {}\n"
    )
    assert main(["profiles", "export", str(source)]) == 2
    assert capsys.readouterr().err == (
        f"kopf-scheduler profiles: error: {source} (document 1): spec: 'schedulerName' is required\n"
    )


#: a configuration of kube-scheduler v1.37 with what v1.37 added: the pod group extension points (carried;
#: kopf-scheduler has no plugin there, so they only disable), the v1.37 plugins kopf-scheduler lacks
#: disabled, ``DynamicResourcesArgs.bindingTimeout`` and v1.37's NodeResourcesFit arguments
V1_37_CONFIG = (
    HEAD
    + """profiles:
- schedulerName: v137
  plugins:
    multiPoint:
      disabled:
      - name: GangScheduling
      - name: DeferredPodScheduling
    placementGenerate:
      disabled:
      - name: TopologyPlacementGenerator
    placementScore:
      disabled:
      - name: '*'
    podGroupPostFilter: {}
  pluginConfig:
  - name: DynamicResources
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: DynamicResourcesArgs
      filterTimeout: 10s
      bindingTimeout: 5m
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 1}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
"""
)


def test_v1_37_configuration_is_carried_both_ways() -> None:
    source = yaml.safe_load(V1_37_CONFIG)
    imported = import_config(source)
    assert imported.warnings == []
    [manifest] = imported.profiles
    assert manifest["spec"]["plugins"] == source["profiles"][0]["plugins"]
    assert manifest["spec"]["pluginConfig"][0] == {
        "name": "DynamicResources",
        "args": {"filterTimeout": "10s", "bindingTimeout": "5m"},
    }
    parse_profile(manifest)
    config, warnings = export_config(imported.profiles)
    assert warnings == []
    assert config["profiles"][0]["plugins"] == source["profiles"][0]["plugins"]


def test_cli_imports_a_v1_37_configuration_and_exports_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "kube-scheduler.yaml"
    source.write_text(V1_37_CONFIG)
    assert main(["profiles", "import", str(source), "--output-dir", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["profiles", "export", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    exported = yaml.safe_load(out)
    expected = yaml.safe_load(V1_37_CONFIG)
    del expected["profiles"][0]["pluginConfig"][0]["args"]["apiVersion"]
    del expected["profiles"][0]["pluginConfig"][0]["args"]["kind"]
    assert exported == expected


#: kube-scheduler v1.37's plugins less the ones kopf-scheduler lacks (as the command line's registry)
_KNOWN = KUBE_SCHEDULER_PLUGINS - {"GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"}


@pytest.mark.parametrize(
    ("profile", "error"),
    [
        (
            "- plugins: {multiPoint: {enabled: [{name: GangScheduling}]}}\n",
            "profiles[0].plugins.multiPoint.enabled[0].name: plugin 'GangScheduling' is in kube-scheduler "
            "v1.37's registry, not in kopf-scheduler",
        ),
        (
            "- pluginConfig: [{name: TopologyPlacementGenerator, args: {}}]\n",
            "profiles[0].pluginConfig[0].name: plugin 'TopologyPlacementGenerator' is in kube-scheduler "
            "v1.37's registry, not in kopf-scheduler",
        ),
        ("- plugins: {multiPoint: {enabled: [{name: GangSchedulin}]}}\n", None),
        ("- plugins: {multiPoint: {disabled: [{name: GangScheduling}, {name: PodGroupPodsCount}]}}\n", ""),
    ],
    ids=["enabled", "configured", "unknown", "disabled"],
)
def test_v1_37_plugins_kopf_scheduler_lacks_may_only_be_disabled(profile: str, error: str | None) -> None:
    config = yaml.safe_load(HEAD + "profiles:\n" + profile)
    if error == "":
        import_config(config, _KNOWN)
        return
    with pytest.raises(ProfileError) as raised:
        import_config(config, _KNOWN)
    assert str(raised.value) == (
        error or "profiles[0].plugins.multiPoint.enabled[0].name: unknown plugin 'GangSchedulin'"
    )


def _fit(strategy: str) -> str:
    return (
        HEAD
        + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n"
        + strategy
    )


_ARGS = "profiles[0].pluginConfig[0].args"
_RATIO = f"{_ARGS}.scoringStrategy.requestedToCapacityRatio"


#: v1.37's plugin-argument rules, as the command line's build of the profile checks them
@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            HEAD
            + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args: {bindingTimeout: 500ms}\n",
            f'{_ARGS}.bindingTimeout: Invalid value: "500ms": must be at least 1 second',
        ),
        (
            _fit("        type: RequestedToCapacityRatio\n"),
            f"{_RATIO}: Required value: must be specified when type is RequestedToCapacityRatio",
        ),
        (
            _fit(
                "        type: MostAllocated\n"
                "        requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}\n"
            ),
            f"{_RATIO}: Forbidden: must be nil when type is not RequestedToCapacityRatio",
        ),
        (
            _fit("        type: RequestedToCapacityRatio\n        requestedToCapacityRatio: {shape: []}\n"),
            f"{_RATIO}.shape: Required value: at least one point must be specified",
        ),
        (
            _fit(
                "        type: RequestedToCapacityRatio\n        requestedToCapacityRatio:\n"
                "          shape: [{utilization: 50, score: 1}, {utilization: 50, score: 11}]\n"
            ),
            f"{_RATIO}.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
        ),
        (
            _fit(
                "        type: RequestedToCapacityRatio\n        requestedToCapacityRatio:\n"
                "          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 11}]\n"
            ),
            f"{_RATIO}.shape[1].score: Invalid value: 11: not in valid range [0, 10]",
        ),
    ],
    ids=[
        "binding-timeout",
        "ratio-required",
        "ratio-forbidden",
        "ratio-empty-shape",
        "ratio-unsorted",
        "ratio-score",
    ],
)
def test_cli_import_checks_v1_37_plugin_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, error: str
) -> None:
    source = tmp_path / "config.yaml"
    source.write_text(text)
    assert main(["profiles", "import", str(source)]) == 2
    assert capsys.readouterr().err == f"kopf-scheduler profiles: error: {source}: {error}\n"
