//! The same situations through `simulate` (the simulated world) and through the live path (the live controller,
//! its effects applied to an in-memory cluster with KWOK instances, tests/harness) give the same decisions: what is
//! provisioned, and which disruption commands are made (method, how many candidates, which replacements) and how
//! they end, and what an interruption notice leads to. Node names and times differ between the two (the world has launch and registration latencies and
//! names nodes like EC2; KWOK nodes are named after their claims), so decisions are compared by what they do.

use crate::harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use harness::{Harness, OBJECTS, manifests};
use karpenter_tui::controller::CommandState;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::sim::report::{DecisionDetail, DecisionState, Report};
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

/// A disruption decision as both paths can describe it: method, number of candidates, the instance-type options
/// of each replacement (sorted), and how it ended.
type Command = (String, usize, Vec<Vec<String>>, String);

fn simulate(mode: &str, events: &str, until: &str) -> Report {
    simulate_with(OBJECTS, "", mode, events, until)
}

/// The objects as a scenario's `objects:` (from the multi-document YAML the harness takes), with extra header lines.
fn simulate_with(objects: &str, header: &str, mode: &str, events: &str, until: &str) -> Report {
    let objects: String = objects
        .split("\n---\n")
        .map(|doc| {
            let doc = doc.trim();
            let mut lines = doc.lines();
            let first = lines.next().unwrap_or_default();
            let rest: Vec<String> = lines.map(|l| format!("    {l}")).collect();
            format!("  - {first}\n{}\n", rest.join("\n"))
        })
        .collect();
    let text = format!(
        "name: parity\nseed: 3\n{header}until: {until}\ncatalog: {{source: kwok}}\nsettings: {{disruption: {mode}}}\nobjects:\n{objects}events:\n{events}"
    );
    let s = parse_scenario(&text, "parity.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    run(&s, None, None).expect("the scenario runs")
}

fn state_word(s: &DecisionState) -> &'static str {
    match s {
        DecisionState::Executed => "executed",
        DecisionState::AwaitingApproval => "awaiting",
        DecisionState::Rejected => "rejected",
        DecisionState::Invalidated => "invalidated",
        DecisionState::Failed => "failed",
        DecisionState::InProgress => "in-progress",
        DecisionState::DryRun => "dry-run",
    }
}

fn sim_commands(r: &Report) -> Vec<Command> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { method, candidates, replacements, state, .. } => {
                let method = serde_json::to_value(method).unwrap().as_str().unwrap().to_string();
                if method == "interruption" || method == "expiration" {
                    return None;
                }
                let mut repl: Vec<Vec<String>> =
                    replacements.iter().map(|x| sorted(x.instance_types.clone())).collect();
                repl.sort();
                Some((method, candidates.len(), repl, state_word(state).to_string()))
            }
            DecisionDetail::Provision { .. } | DecisionDetail::Repair { .. } | DecisionDetail::Reboot { .. } => None,
        })
        .collect()
}

fn live_commands(h: &Harness) -> Vec<Command> {
    h.controller
        .records()
        .iter()
        .map(|r| {
            let mut repl: Vec<Vec<String>> =
                r.command.replacements.iter().map(|x| sorted(x.instance_types.clone())).collect();
            repl.sort();
            let state = match &r.state {
                CommandState::Executed => "executed",
                CommandState::AwaitingApproval => "awaiting",
                CommandState::Rejected => "rejected",
                CommandState::Invalidated(_) => "invalidated",
                CommandState::Failed(_) => "failed",
                CommandState::InProgress | CommandState::Validating => "in-progress",
                CommandState::DryRun => "dry-run",
            };
            (r.command.method.as_str().to_string(), r.command.candidates.len(), repl, state.to_string())
        })
        .collect()
}

/// Ids of the live controller's proposals waiting for approval, oldest first.
fn awaiting(h: &Harness) -> Vec<String> {
    h.controller.records().iter().filter(|r| r.state == CommandState::AwaitingApproval).map(|r| r.id.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Instance types of the nodes that exist, by count.
fn sim_nodes_alive(r: &Report) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in r.nodes.iter().filter(|n| n.deleted_at.is_none()) {
        *out.entry(n.instance_type.clone()).or_insert(0) += 1;
    }
    out
}

fn live_nodes_alive(h: &Harness) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in h.cluster.nodes.values().filter(|n| n.metadata.deletion_timestamp.is_none()) {
        let t = n.metadata.labels.as_ref().and_then(|l| l.get("node.kubernetes.io/instance-type")).cloned();
        *out.entry(t.unwrap_or_default()).or_insert(0) += 1;
    }
    out
}

/// The instance-type options of every NodeClaim made to provision (not to replace), sorted.
fn sim_provisioned(r: &Report) -> Vec<Vec<String>> {
    let made: Vec<&String> = r
        .decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Provision { node_claims, .. } => Some(node_claims),
            _ => None,
        })
        .flatten()
        .collect();
    let mut out: Vec<Vec<String>> =
        r.node_claims.iter().filter(|c| made.contains(&&c.name)).map(|c| sorted(c.instance_types.clone())).collect();
    out.sort();
    out
}

fn live_claims(h: &Harness) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = h
        .cluster
        .nodeclaims
        .values()
        .map(|c| {
            let types = c.spec.requirements.iter().find(|r| r.key == "node.kubernetes.io/instance-type");
            sorted(types.map(|r| r.values.to_vec()).unwrap_or_default())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn scale_out_then_to_zero_with_approval() {
    let report = simulate(
        "approve",
        "  - at: 5m\n    scale: {kind: Deployment, namespace: default, name: inflate, replicas: 0}\n  - at: 10m\n    approve: all\n",
        "20m",
    );

    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let provisioned = live_claims(&h);
    // The scenario's timeline from the scale-down on: the operator approves what is open 5 minutes later, and
    // the run goes on for 10 more.
    h.scale(0);
    for _ in 0..300 {
        h.tick();
    }
    let open = awaiting(&h);
    assert!(!open.is_empty(), "proposals are waiting");
    for id in open {
        let m = manifests(&h.cluster);
        if let Ok((effects, _)) = h.controller.approve(&m, &id, h.now) {
            h.apply(effects);
        }
    }
    for _ in 0..600 {
        h.tick();
    }

    assert_eq!(sim_provisioned(&report), provisioned, "the same NodeClaims are made for the same pods");
    let (sim, live) = (sim_commands(&report), live_commands(&h));
    assert!(!sim.is_empty(), "scale to zero leads to disruption");
    assert_eq!(sim, live, "the same commands, ending the same way");
    assert!(
        sim.iter().all(|c| c.3 == "executed" || c.3 == "awaiting"),
        "a queue approved in order stays valid: nothing approved is invalidated: {sim:?}"
    );
    assert_eq!(sim_nodes_alive(&report), live_nodes_alive(&h), "the same nodes left");
}

#[test]
fn a_rejected_proposal_is_not_offered_again() {
    let report = simulate(
        "approve",
        "  - at: 5m\n    scale: {kind: Deployment, namespace: default, name: inflate, replicas: 0}\n  - at: 10m\n    reject: all\n",
        "20m",
    );

    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    h.scale(0);
    for _ in 0..300 {
        h.tick();
    }
    let open = awaiting(&h);
    assert!(!open.is_empty(), "proposals are waiting");
    let m = manifests(&h.cluster);
    let state = karpenter_tui::controller::state_key(&m.view());
    for id in open {
        h.controller.reject(&id, state, h.now).expect("an open proposal can be rejected");
    }
    // The rest of the simulated 20 minutes.
    for _ in 0..600 {
        h.tick();
    }
    let (sim, live) = (sim_commands(&report), live_commands(&h));
    assert!(!sim.is_empty());
    assert_eq!(sim, live, "the same proposals, rejected, and none again");
    assert!(sim.iter().all(|c| c.3 == "rejected"), "{sim:?}");
    assert_eq!(sim_nodes_alive(&report), live_nodes_alive(&h), "nothing was disrupted");
}

#[test]
fn a_nodepool_edit_drifts_and_auto_mode_replaces_the_nodes() {
    let report = simulate(
        "auto",
        "  - at: 5m\n    patch:\n      kind: NodePool\n      name: default\n      spec:\n        template:\n          spec:\n            requirements:\n              - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n              - {key: karpenter.kwok.sh/instance-cpu, operator: In, values: [\"8\"]}\n",
        "40m",
    );

    let mut h = Harness::new(Mode::Auto);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let before: Vec<String> = h.cluster.nodeclaims.keys().cloned().collect();
    for p in h.cluster.nodepools.values_mut() {
        for r in &mut p.spec.template.spec.requirements {
            if r.key == "karpenter.kwok.sh/instance-cpu" {
                r.values = ["8".to_string()].into();
            }
        }
    }
    h.run_until("every old claim replaced", 1800, |h| {
        before.iter().all(|c| !h.cluster.nodeclaims.contains_key(c)) && h.all_bound()
    });
    // Settle: consolidation of the replacements, if any, as in the simulated 35 minutes after the edit.
    for _ in 0..1200 {
        h.tick();
    }

    let (sim, live) = (sim_commands(&report), live_commands(&h));
    assert!(sim.iter().any(|c| c.0 == "drift"), "{sim:?}");
    let drift = |v: &[Command]| v.iter().filter(|c| c.0 == "drift").cloned().collect::<Vec<_>>();
    assert_eq!(drift(&sim), drift(&live), "the same drift replacements");
    assert_eq!(sim_nodes_alive(&report), live_nodes_alive(&h), "the same fleet after");
}

/// A spot node running three pods gets an interruption notice: both paths delete its NodeClaim, drain it, and
/// provision for the displaced pods. The live side starts from the very objects the world built for the scenario's
/// `nodes:` entry (the instance renamed as a KWOK one, so the live KWOK controller owns it).
#[test]
fn a_spot_interruption_replaces_the_node() {
    let pool = r#"
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
      template:
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
            - {key: karpenter.kwok.sh/instance-cpu, operator: In, values: ["4"]}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: inflate, namespace: default}
    spec:
      replicas: 3
      selector: {matchLabels: {app: inflate}}
      template:
        metadata: {labels: {app: inflate}}
        spec:
          terminationGracePeriodSeconds: 0
          containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;
    let text = format!(
        "name: parity-spot\nseed: 3\nuntil: 15m\ncatalog: {{source: kwok}}\nobjects:{pool}nodes:\n  - {{name: spot-1, instanceType: c-4x-amd64-linux, zone: test-zone-a, capacityType: spot, nodePool: default}}\nevents:\n  - at: 2m\n    interrupt: {{node: spot-1, kind: spot-interruption}}\n"
    );
    let s = parse_scenario(&text, "parity-spot.yaml").unwrap_or_else(|e| panic!("{e}"));
    let report = run(&s, None, None).expect("runs");

    // The live side, from the world's objects one minute in (pods bound to spot-1).
    let w = karpenter_tui::sim::run::run_world(&s, Some(std::time::Duration::from_secs(60))).expect("runs");
    let kwok_id = "kwok://spot-1".to_string();
    // The harness's read of a cluster, plus the Deployment its replica controller keeps.
    let mut m = manifests(&w.cluster);
    m.deployments = w.cluster.deployments.values().map(|o| (**o).clone()).collect();
    for n in &mut m.nodes {
        Arc::make_mut(n).spec.get_or_insert_with(Default::default).provider_id = Some(kwok_id.clone());
    }
    for c in &mut m.nodeclaims {
        Arc::make_mut(c).status.get_or_insert_with(Default::default).provider_id = Some(kwok_id.clone());
    }
    let mut h = Harness::with_objects(Mode::Auto, "");
    h.cluster.apply(&m);
    assert!(h.all_bound(), "the pods run on spot-1");
    for _ in 0..60 {
        h.tick();
    }
    assert!(h.cluster.nodes.contains_key("spot-1"), "nothing happens to a healthy node");
    let notice = karpenter_tui::controller::interruption::Message {
        kind: karpenter_tui::controller::interruption::Kind::SpotInterruption,
        id: "e-1".into(),
        time: String::new(),
        instance_ids: vec!["spot-1".into()],
    };
    let effects = h.controller.interruption(&manifests(&h.cluster).view(), &notice, h.now);
    h.apply(effects);
    for _ in 0..780 {
        h.tick();
    }

    let interrupted: Vec<&Vec<String>> = report
        .decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { candidates, .. } if d.id.starts_with('d') => Some(candidates),
            _ => None,
        })
        .collect();
    assert_eq!(interrupted, vec![&vec!["spot-1".to_string()]], "the world handled the notice");
    let live: Vec<_> = h.controller.interruptions.iter().map(|r| r.node.clone()).collect();
    assert_eq!(live, vec![Some("spot-1".to_string())], "the live controller handled the notice");
    assert!(!h.cluster.nodes.contains_key("spot-1"), "the live path drained and deleted the node");
    assert!(report.nodes.iter().any(|n| n.name == "spot-1" && n.deleted_at.is_some()), "so did the world");
    assert!(h.all_bound() && report.pending.is_empty(), "the displaced pods run elsewhere on both");
    assert!(!sim_nodes_alive(&report).is_empty(), "a replacement");
    assert_eq!(sim_nodes_alive(&report), live_nodes_alive(&h), "the same replacement capacity");
}

/// A budget window that allows no disruption holds emptiness back on both paths until it ends (cron in UTC on the
/// same wall clock: the scenario starts when the harness's clock does).
#[test]
fn a_budget_window_holds_disruption_until_it_ends() {
    let objects = OBJECTS.replace(
        "disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}",
        "disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s, budgets: [{nodes: \"0\", schedule: \"10 22 * * *\", duration: 1h}]}",
    );
    assert_ne!(objects, OBJECTS, "the budget is in");
    let start = 1_700_000_000_000; // 2023-11-14T22:13:20Z; the window is 22:10–23:10
    let window_end = start + (56 * 60 + 40) * 1_000;
    let report = simulate_with(
        &objects,
        "start: 2023-11-14T22:13:20Z\n",
        "auto",
        "  - at: 2m\n    scale: {kind: Deployment, namespace: default, name: inflate, replicas: 0}\n",
        "75m",
    );

    let mut h = Harness::with_objects(Mode::Auto, &objects);
    assert_eq!(h.now, start);
    h.run_until("all pods bound", 120, Harness::all_bound);
    h.scale(0);
    while h.now < start + 75 * 60 * 1_000 {
        h.tick();
    }

    let (sim, live) = (sim_commands(&report), live_commands(&h));
    assert!(!sim.is_empty() && sim.iter().all(|c| c.0 == "emptiness" && c.3 == "executed"), "{sim:?}");
    assert_eq!(sim, live, "the same commands once the window is over");
    let sim_first = report
        .decisions
        .iter()
        .find(|d| matches!(d.detail, DecisionDetail::Disruption { .. }))
        .map(|d| d.at)
        .expect("a disruption");
    assert!(sim_first * 1_000.0 >= (window_end - start) as f64, "not in the window: {sim_first} s");
    let live_first = h.controller.records().first().expect("a disruption").at;
    assert!(live_first >= window_end, "not in the window: {} s", (live_first - start) / 1_000);
    assert_eq!(sim_nodes_alive(&report), live_nodes_alive(&h));
}
