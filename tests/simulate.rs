//! End-to-end scenarios through the simulated world: pods pending → NodeClaim → instance → Node → initialized →
//! pods bound; insufficient capacity → fallback; registration timeout → NodeClaim deleted and pods re-provisioned;
//! node deletion drains respecting a PDB; determinism of the report.

use crate::common;

use karpenter_tui::sim::report::{DecisionDetail, Report};
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

use common::{POOL_AND_APP, SMALL_LARGE_TYPES as TYPES};

fn scenario(header: &str, rest: &str) -> Report {
    let text = format!("{header}{TYPES}{POOL_AND_APP}{rest}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn pods_go_from_pending_to_bound_on_a_new_node() {
    let r = scenario("name: basic\nuntil: 5m\n", "");
    assert_eq!(r.node_claims.len(), 1);
    let claim = &r.node_claims[0];
    assert_eq!(claim.created_at, 1.0, "batch idle window of 1 s");
    let launched = claim.launched.as_ref().expect("launched");
    assert_eq!((launched.instance_type.as_str(), launched.capacity_type.as_str()), ("small", "spot"));
    assert_eq!(r.nodes.len(), 1);
    let node = &r.nodes[0];
    // launch 5 s + registration 30 s after the claim; ready 10 s later; initialized on the next reconcile.
    assert_eq!(node.created_at, 36.0);
    let init = node.initialized_at.expect("initialized");
    assert!((46.0..50.0).contains(&init), "initialized at {init}");
    assert_eq!(node.node_claim.as_deref(), Some(claim.name.as_str()));
    assert!(r.pending.is_empty());
    for p in r.pods.iter().filter(|p| p.name.starts_with("app-")) {
        assert_eq!(p.node.as_deref(), Some(node.name.as_str()));
        assert!(p.bound_at.unwrap() >= 46.0, "bound only once the node is ready");
    }
    assert!(matches!(r.decisions[0].detail, DecisionDetail::Provision { pods: 2, .. }));
    // 0.02 $/h from the launch request at 1 s to the end at 300 s.
    assert!((r.cost.total - 0.02 * 299.0 / 3600.0).abs() < 1e-6, "{}", r.cost.total);
    assert!((r.cost.final_per_hour - 0.02).abs() < 1e-9);
}

#[test]
fn insufficient_capacity_deletes_the_claim_and_retries_elsewhere() {
    // Only `small` is allowed. Its spot offering is out of capacity: the cloud falls back to on-demand within the
    // same launch, as EC2 Fleet does.
    let only_small = POOL_AND_APP.replace(
        "          nodeClassRef:",
        "          requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [small]}]\n          nodeClassRef:",
    );
    let run_with = |events: &str| {
        let text = format!("name: ice\nuntil: 10m\n{TYPES}{only_small}events:\n{events}");
        run(&parse_scenario(&text, "ice.yaml").unwrap_or_else(|e| panic!("{e}")), None, None).unwrap()
    };
    let off = |zone: &str, ct: &str, at: &str, available: bool| {
        format!(
            "  - at: {at}\n    capacity: {{instanceType: small, zone: {zone}, capacityType: {ct}, available: {available}}}\n"
        )
    };
    let r = run_with(&off("z1", "spot", "0s", false));
    let l = r.node_claims[0].launched.as_ref().unwrap();
    assert_eq!(l.capacity_type, "on-demand");
    // Consolidation then tries a spot replacement (cheaper on paper); it is spot-only, so it can't fall back, its
    // launch fails and the command is rolled back: the on-demand node stays.
    for c in &r.node_claims[1..] {
        assert!(c.launched.is_none(), "{c:?}");
    }
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));

    // Every offering out: the launch fails, the claim is deleted, the engine stops asking for those offerings
    // (the pods stay pending with a reason) until capacity returns and the 3-minute memory expires.
    let all_off = format!(
        "{}{}{}",
        off("z1", "spot", "0s", false),
        off("z1", "on-demand", "0s", false),
        off("z2", "on-demand", "0s", false)
    );
    let r = run_with(&format!("{all_off}{}", off("z2", "on-demand", "2m", true)));
    let first = &r.node_claims[0];
    assert!(first.launched.is_none());
    assert!(first.deleted_at.is_some());
    let last = r.node_claims.iter().find(|c| c.launched.is_some()).expect("launched once capacity returned");
    let l = last.launched.as_ref().unwrap();
    assert_eq!((l.zone.as_str(), l.capacity_type.as_str()), ("z2", "on-demand"));
    assert!(last.created_at >= 180.0, "retried only after the offerings' unavailability expired: {}", last.created_at);
    assert!(r.pending.is_empty());
}

#[test]
fn registration_timeout_deletes_and_reprovisions() {
    let r = scenario("name: slow-boot\nuntil: 40m\nsettings:\n  registrationLatency: 20m\n", "");
    // Launched at 6 s, never registered by 15 min later: deleted, and a new claim is made for the pods.
    let first = &r.node_claims[0];
    let deleted = first.deleted_at.expect("deleted by the registration timeout");
    assert!((906.0..912.0).contains(&deleted), "deleted at {deleted}");
    assert!(r.node_claims.len() >= 2);
    assert!(r.node_claims[1].created_at >= deleted);
}

#[test]
fn draining_respects_a_pod_disruption_budget() {
    // do-not-disrupt keeps consolidation away from n1 (it is oversized); a user delete still drains it.
    let node = "nodes:\n  - {name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default, \
                annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\n";
    let pdb = "  - at: 1m\n    apply:\n      - apiVersion: policy/v1\n        kind: PodDisruptionBudget\n        metadata: {name: app}\n        spec:\n          minAvailable: 2\n          selector: {matchLabels: {app: app}}\n";
    let delete = "  - at: 2m\n    delete: [{kind: Node, name: n1}]\n";

    // Both replicas run on n1; a PDB that allows no disruption keeps them there: the node stays, draining.
    let r = scenario("name: pdb\nuntil: 10m\n", &format!("{node}events:\n{pdb}{delete}"));
    let n1 = r.nodes.iter().find(|n| n.name == "n1").unwrap();
    assert_eq!(n1.deleted_at, None, "eviction is refused while the PDB allows 0 disruptions");
    let on_n1 = r.pods.iter().filter(|p| p.name.starts_with("app-") && p.node.as_deref() == Some("n1")).count();
    assert_eq!(on_n1, 2);

    // Without the PDB the node drains, goes away, and the replicas come back on new capacity.
    let r = scenario("name: no-pdb\nuntil: 10m\n", &format!("{node}events:\n{delete}"));
    let n1 = r.nodes.iter().find(|n| n.name == "n1").unwrap();
    let gone = n1.deleted_at.expect("drained and deleted");
    assert!(gone >= 125.0, "minimum drain time and pod grace: {gone}");
    let live: Vec<_> = r.pods.iter().filter(|p| p.name.starts_with("app-") && p.deleted_at.is_none()).collect();
    assert_eq!(live.len(), 2);
    assert!(live.iter().all(|p| p.node.as_deref().is_some_and(|n| n != "n1")), "{live:?}");
}

#[test]
fn deleting_a_node_karpenter_does_not_manage_removes_it_at_once() {
    // No NodePool, so no termination finalizer: the API server removes it, the pod garbage collector its pods, and
    // the Deployment's replicas come back on capacity Karpenter launches.
    let node = "nodes:\n  - {name: u1, instanceType: large, zone: z1, capacityType: on-demand}\n";
    let delete = "  - at: 2m\n    delete: [{kind: Node, name: u1}]\n";
    let r = scenario("name: unmanaged\nuntil: 10m\n", &format!("{node}events:\n{delete}"));
    let u1 = r.nodes.iter().find(|n| n.name == "u1").unwrap();
    assert_eq!(u1.deleted_at, Some(120.0));
    let old: Vec<_> = r.pods.iter().filter(|p| p.node.as_deref() == Some("u1")).collect();
    assert!(!old.is_empty() && old.iter().all(|p| p.deleted_at == Some(120.0)), "{old:?}");
    let live: Vec<_> = r.pods.iter().filter(|p| p.name.starts_with("app-") && p.deleted_at.is_none()).collect();
    assert_eq!(live.len(), 2);
    assert!(live.iter().all(|p| p.node.as_deref().is_some_and(|n| n != "u1")), "{live:?}");
}

#[test]
fn the_world_keeps_the_controllers_events_as_kubectl_would_show_them() {
    let text = format!("name: events\nuntil: 5m\n{TYPES}{POOL_AND_APP}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let w = karpenter_tui::sim::run::run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
    let claim = w.record.nodeclaims[0].name.clone();
    // Pods still pending at the next solve wait for the claim launched for them: upstream names the claim then.
    let nominated: Vec<_> = w.record.events.iter().filter(|e| e.reason == "Nominated").collect();
    assert!(
        nominated.iter().any(|e| e.object.starts_with("pod/default/app-")
            && e.message == format!("Pod should schedule on: nodeclaim/{claim}")),
        "{nominated:?}"
    );
    assert!(nominated.iter().all(|e| !e.warning));
}

/// The world runs the controller's NodePool status as a cluster would: upstream's resources and node count from
/// the pool's claims and nodes, and its conditions; a registration timeout shows as NodeRegistrationHealthy False.
#[test]
fn nodepools_in_the_world_carry_upstreams_status() {
    let text = format!("name: status\nuntil: 5m\n{TYPES}{POOL_AND_APP}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let w = karpenter_tui::sim::run::run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
    let pool = w.cluster.nodepools.get("default").expect("the pool");
    let status = pool.status.as_ref().expect("a status written by the controller");
    let claims: Vec<_> = w.cluster.nodeclaims.values().collect();
    assert!(!claims.is_empty());
    assert_eq!(status.nodes, Some(claims.len() as i64));
    assert_eq!(status.resources.get("nodes").map(|q| q.0.clone()), Some(claims.len().to_string()));
    assert!(status.resources.contains_key("cpu") && status.resources.contains_key("memory"), "{:?}", status.resources);
    let cond = |t: &str| status.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
    assert_eq!(cond("ValidationSucceeded").as_deref(), Some("True"));
    assert_eq!(cond("Ready").as_deref(), Some("True"), "{:?}", status.conditions);

    // A node that never registers: the claim is deleted at the registration timeout, and the pool says so.
    let text = format!("name: slow\nuntil: 17m\nsettings:\n  registrationLatency: 20m\n{TYPES}{POOL_AND_APP}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let w = karpenter_tui::sim::run::run_world(&s, None).unwrap_or_else(|e| panic!("{e}"));
    let status = w.cluster.nodepools.get("default").and_then(|p| p.status.clone()).expect("a status");
    let healthy = status.conditions.iter().find(|c| c.type_ == "NodeRegistrationHealthy").expect("the condition");
    assert_eq!(healthy.status, "False", "{healthy:?}");
}

/// With the explanatory Events on (as `demo` runs), the world publishes why a node is not disrupted, as the live
/// controller does: a node with `do-not-disrupt` gets `DisruptionBlocked` on the Node and its NodeClaim, once.
#[test]
fn the_world_explains_why_nodes_are_not_disrupted_when_asked_to() {
    let node = "nodes:\n  - {name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default, \
                annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\n";
    let text = format!("name: explain\nuntil: 12m\n{TYPES}{POOL_AND_APP}{node}");
    let s = parse_scenario(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let events_with = |explain: bool| {
        let mut p = karpenter_tui::sim::run::Playback::new(&s).unwrap_or_else(|e| panic!("{e}"));
        p.world.explain_events = explain;
        let end = p.start + 12 * 60_000;
        p.advance(end).unwrap_or_else(|e| panic!("{e}"));
        p.world.record.events.iter().cloned().collect::<Vec<_>>()
    };
    let blocked = |events: &[karpenter_tui::sim::world::EventRecord]| -> Vec<(i64, String)> {
        let b = events.iter().filter(|e| e.reason == "DisruptionBlocked");
        b.map(|e| (e.at, format!("{} {}", e.object, e.message))).collect()
    };
    let on = events_with(true);
    let b = blocked(&on);
    assert!(b.iter().any(|(_, e)| e.starts_with("node/n1 Cannot disrupt Node")), "{b:?}");
    assert!(b.iter().any(|(_, e)| e.starts_with("nodeclaim/n1 Cannot disrupt NodeClaim")), "{b:?}");
    let times: Vec<i64> = b.iter().filter(|(_, e)| e.starts_with("node/n1")).map(|(t, _)| *t).collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 10 * 60_000), "repeated at most every 10 minutes: {b:?}");
    assert!(blocked(&events_with(false)).is_empty(), "simulate leaves them out");
}

#[test]
fn shipped_scenarios_run_deterministically() {
    let mut seen = 0;
    for entry in std::fs::read_dir("scenarios").unwrap() {
        let path = entry.unwrap().path();
        let benchmark = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("bench-"));
        // Benchmark scenarios are for release builds (docs/performance.md).
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") || benchmark {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let s = parse_scenario(&text, &path.to_string_lossy()).unwrap();
        let a = run(&s, None, None).unwrap();
        let b = run(&s, None, None).unwrap();
        assert_eq!(a.to_json_without_timings(), b.to_json_without_timings(), "{}", path.display());
        // Whatever a scenario does, every pod that is still pending has a reason.
        for p in &a.pending {
            assert!(!p.reasons.is_empty(), "{}: {}/{} pending without a reason", path.display(), p.namespace, p.name);
        }
        seen += 1;
    }
    assert!(seen >= 6);
}

#[test]
fn walkthrough_scales_out_and_binds_everything() {
    let text = std::fs::read_to_string("scenarios/walkthrough.yaml").unwrap();
    let s = parse_scenario(&text, "scenarios/walkthrough.yaml").unwrap();
    // Stop at the peak (20 replicas after 15 min + time to launch).
    let r = run(&s, Some(std::time::Duration::from_secs(20 * 60)), None).unwrap();
    let live: Vec<_> = r.pods.iter().filter(|p| p.deleted_at.is_none()).collect();
    assert_eq!(live.len(), 20);
    assert!(live.iter().all(|p| p.node.is_some()), "all 20 replicas bound");
    assert!(r.pending.is_empty());
    assert!(r.nodes.iter().all(|n| n.initialized_at.is_some()));
    assert!(r.decisions.iter().filter(|d| matches!(d.detail, DecisionDetail::Provision { .. })).count() >= 2);
}

#[test]
fn unknown_objects_in_events_are_named() {
    let text = format!(
        "name: bad\nuntil: 5m\n{TYPES}{POOL_AND_APP}events:\n  - at: 1m\n    interrupt: {{node: ghost, kind: spot-interruption}}\n"
    );
    let s = parse_scenario(&text, "bad.yaml").unwrap();
    let err = run(&s, None, None).unwrap_err().to_string();
    assert!(err.contains("bad.yaml") && err.contains("events[0]") && err.contains("ghost"), "{err}");
}

/// A scenario file on disk (the form `simulate` reads), with `settings` as given.
fn scenario_file(name: &str, settings: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ktui-simulate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.yaml");
    std::fs::write(&path, format!("name: packing\nuntil: 5m\n{settings}{TYPES}{POOL_AND_APP}")).unwrap();
    path
}

#[test]
fn the_scenarios_packing_reaches_the_controller_and_the_flag_goes_over_it() {
    use karpenter_tui::cli::simulate::load_scenario;
    use karpenter_tui::engine::packing::Packing;
    use karpenter_tui::sim::run::Playback;
    let cost = scenario_file("cost", "settings:\n  packing: cost\n");
    let plain = scenario_file("plain", "");
    let packing_of = |path: &std::path::Path, flag: Option<Packing>| {
        let s = load_scenario(path.to_str().unwrap(), flag, None).unwrap_or_else(|e| panic!("{e}"));
        let p = Playback::new(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.world.settings().controller.packing, s.settings.controller.packing);
        (s.settings.controller.packing, p.world.controller().packing())
    };
    assert_eq!(packing_of(&cost, None), (Packing::Cost, Packing::Cost), "the file's setting");
    assert_eq!(packing_of(&plain, None), (Packing::Upstream, Packing::Upstream), "the default");
    assert_eq!(packing_of(&cost, Some(Packing::Upstream)), (Packing::Upstream, Packing::Upstream), "--packing wins");
    assert_eq!(packing_of(&plain, Some(Packing::Cost)), (Packing::Cost, Packing::Cost), "--packing wins");
}

#[test]
fn simulate_takes_packing_on_the_command_line_and_refuses_unknown_strategies() {
    let bin = env!("CARGO_BIN_EXE_karpenter-tui");
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).output().expect("runs the binary");
    let plain = scenario_file("flag", "");
    let path = plain.to_str().unwrap();
    let upstream = run(&["simulate", path, "-o", "json"]);
    assert!(upstream.status.success(), "{}", String::from_utf8_lossy(&upstream.stderr));
    let flagged = run(&["simulate", path, "-o", "json", "--packing", "upstream"]);
    assert!(flagged.status.success(), "{}", String::from_utf8_lossy(&flagged.stderr));
    let strip = |out: &[u8]| {
        let mut v: serde_json::Value = serde_json::from_slice(out).expect("JSON report");
        v.as_object_mut().unwrap().remove("timings");
        v
    };
    assert_eq!(strip(&upstream.stdout), strip(&flagged.stdout), "--packing upstream is the default");
    let cost = run(&["simulate", path, "--packing", "cost"]);
    assert!(cost.status.success(), "{}", String::from_utf8_lossy(&cost.stderr));

    let bad = run(&["simulate", path, "--packing", "cheapest"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("cheapest") && err.contains("upstream") && err.contains("cost"), "{err}");
    // In the file: its line, column and field.
    let file = scenario_file("bad", "settings:\n  packing: cheapest\n");
    let bad = run(&["simulate", file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("s.yaml:4:3: settings.packing: unknown packing strategy \"cheapest\""), "{err}");
}

/// The report's `packing` object: for the pods of every provisioning pass that launched, what each strategy
/// would have launched and the LP bound. `gpu.yaml` has a real gap: upstream grows claims onto the big GPU types.
#[test]
fn the_report_compares_both_packing_strategies_over_the_pods_it_provisioned_for() {
    use karpenter_tui::cli::simulate::load_scenario;
    use karpenter_tui::engine::packing::Packing;
    let report = |packing: Packing| {
        let s = load_scenario("scenarios/gpu.yaml", Some(packing), None).unwrap_or_else(|e| panic!("{e}"));
        run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
    };
    for packing in [Packing::Upstream, Packing::Cost] {
        let r = report(packing);
        let p = &r.packing;
        assert_eq!(p.strategy, packing.as_str());
        let bound = p.lower_bound_per_hour.expect("every pass has a bound");
        assert!(p.cost_per_hour <= p.upstream_per_hour + 1e-9, "{p:?}");
        assert!(bound <= p.cost_per_hour + 1e-9 && bound <= p.upstream_per_hour + 1e-9, "{p:?}");
        assert!(p.cost_per_hour < 0.5 * p.upstream_per_hour, "this workload's gap shows: {p:?}");
        // The strategy in use is what the run launched: its claims (no capacity errors here, so at their cheapest
        // option's price).
        let claims: Vec<&String> = r
            .decisions
            .iter()
            .flat_map(|d| match &d.detail {
                DecisionDetail::Provision { node_claims, is_static: false, .. } => node_claims.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        let launched: f64 = r
            .nodes
            .iter()
            .filter(|n| n.node_claim.as_ref().is_some_and(|c| claims.contains(&c)))
            .map(|n| n.price_per_hour)
            .sum();
        let (in_use, nodes) = match packing {
            Packing::Upstream => (p.upstream_per_hour, p.upstream_nodes),
            Packing::Cost => (p.cost_per_hour, p.cost_nodes),
        };
        assert_eq!(nodes as usize, claims.len(), "{p:?}");
        assert!((in_use - launched).abs() < 1e-6, "{in_use} against {launched} launched: {p:?}");
        // The human form says it in plan's words.
        let table = karpenter_tui::sim::report::render_table(&r);
        assert!(table.contains(&format!("Packing ({packing} in use)")), "{table}");
        assert!(table.contains("upstream packing: $") && table.contains("LP lower bound $"), "{table}");
        // Same inputs, same report.
        assert_eq!(r.to_json_without_timings(), report(packing).to_json_without_timings());
    }
}

#[test]
fn a_run_that_launches_nothing_reports_zeros() {
    // Two pods: one claim either way.
    let r = scenario("name: two\nuntil: 1m\n", "").packing;
    assert_eq!((r.upstream_nodes, r.cost_nodes), (1, 1), "{r:?}");
    // No pods: no pass launched, all zero.
    let text = format!("name: none\nuntil: 1m\n{TYPES}objects: []\n");
    let s = parse_scenario(&text, "none.yaml").unwrap_or_else(|e| panic!("{e}"));
    let p = run(&s, None, None).unwrap_or_else(|e| panic!("{e}")).packing;
    assert_eq!((p.upstream_per_hour, p.cost_per_hour, p.upstream_nodes, p.cost_nodes), (0.0, 0.0, 0, 0));
    assert_eq!(p.lower_bound_per_hour, Some(0.0));
}

/// A Windows EC2NodeClass on the AWS catalog: its pool's claims launch Windows instance types (as upstream computes
/// instance types per class), and the Windows pods run on nodes labelled with the OS and Windows build.
#[test]
fn a_windows_nodeclass_launches_windows_nodes() {
    let text = r#"
name: windows
until: 5m
catalog:
  source: aws
objects:
  - apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: windows2022}
    spec:
      amiSelectorTerms: [{alias: windows2022@latest}]
      role: KarpenterNodeRole-my-cluster
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: windows}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: windows2022}
          requirements:
            - {key: kubernetes.io/os, operator: In, values: [windows]}
            - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: iis}
    spec:
      replicas: 2
      selector: {matchLabels: {app: iis}}
      template:
        metadata: {labels: {app: iis}}
        spec:
          nodeSelector: {kubernetes.io/os: windows}
          containers: [{name: iis, image: iis, resources: {requests: {cpu: "1", memory: 2Gi}}}]
"#;
    let s = parse_scenario(text, "windows.yaml").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&s, None, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.pending.is_empty(), "{:?}", r.pending);
    assert!(!r.nodes.is_empty());
    for n in &r.nodes {
        assert_eq!(n.labels.get("kubernetes.io/os").map(String::as_str), Some("windows"), "{:?}", n.labels);
        assert_eq!(n.labels.get("node.kubernetes.io/windows-build").map(String::as_str), Some("10.0.20348"));
    }
    assert!(r.pods.iter().filter(|p| p.name.starts_with("iis-")).all(|p| p.node.is_some()));
}

#[test]
fn scaling_a_deployment_to_the_replicas_it_has_is_no_write_and_wakes_no_pass() {
    // As on an API server, an update that changes nothing is no event: the controller has nothing to look at
    // again. A real change of replicas is looked at.
    let events = "events:\n  - at: 30m\n    scale: {kind: Deployment, name: app, replicas: 2}\n  - at: 60m\n    \
                  scale: {kind: Deployment, name: app, replicas: 1}\n";
    let r = scenario("name: noop-scale\nuntil: 90m\n", events);
    let at = |from: f64, to: f64| r.timings.disruption_passes.iter().filter(|p| (from..to).contains(&p.at)).count();
    assert_eq!(at(1800.0, 3600.0), 0, "passes after the no-op scale: {:?}", r.timings.disruption_passes);
    assert!(at(3600.0, 5400.0) > 0, "a real scale-in is looked at: {:?}", r.timings.disruption_passes);
}
