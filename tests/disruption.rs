//! Disruption end to end through the simulated world, asserting on the report (engine.md §10 cases 22–28 and the
//! budget, emptiness, drift and approval rules of §5).

use crate::common;

use karpenter_tui::controller::tick;
use karpenter_tui::engine::disruption::Blocker;
use karpenter_tui::engine::disruption::consolidation::Outlook;
use karpenter_tui::sim::report::{DecisionDetail, DecisionState, DisruptionMethod, Report};
use karpenter_tui::sim::run::{run, run_world};
use karpenter_tui::sim::scenario::parse_scenario;

use common::SMALL_LARGE_TYPES as TYPES;

/// A NodePool (extra spec lines indented under `spec:`), and a Deployment of `replicas` 500m pods.
fn objects(pool_spec: &str, template_spec: &str, replicas: u32) -> String {
    format!(
        r#"
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
{pool_spec}
      template:
        spec:
{template_spec}
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
"#
    )
}

const ON_DEMAND_ONLY: &str =
    "          requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]";

fn scenario_text(header: &str, types: &str, objects: &str, rest: &str) -> String {
    format!("{header}{types}{objects}{rest}")
}

fn simulate(text: &str) -> Report {
    let s = parse_scenario(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

struct Disruption<'a> {
    at: f64,
    method: DisruptionMethod,
    candidates: &'a [String],
    replacements: Vec<&'a [String]>,
    state: DecisionState,
    why: Option<&'a str>,
}

fn disruptions(r: &Report) -> Vec<Disruption<'_>> {
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { method, candidates, replacements, state, why, .. } => Some(Disruption {
                at: d.at,
                method: *method,
                candidates,
                replacements: replacements.iter().map(|r| r.instance_types.as_slice()).collect(),
                state: *state,
                why: why.as_deref(),
            }),
            _ => None,
        })
        .collect()
}

fn node_named<'a>(r: &'a Report, name: &str) -> &'a karpenter_tui::sim::report::NodeRecord {
    r.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"))
}

const BIG_NODE: &str =
    "nodes:\n  - {name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default}\n";

#[test]
fn case22_expensive_node_is_replaced_by_a_cheaper_one_after_it_initializes() {
    let text = scenario_text("name: c22\nuntil: 10m\n", TYPES, &objects("", ON_DEMAND_ONLY, 1), BIG_NODE);
    let r = simulate(&text);
    let d = disruptions(&r);
    let first = d.first().expect("a consolidation");
    assert_eq!(first.method, DisruptionMethod::SingleNode);
    assert_eq!(first.candidates, ["n1"]);
    assert_eq!(first.replacements, vec![&["small".to_string()][..]], "only strictly cheaper types, never large");
    assert_eq!(first.state, DecisionState::Executed);
    let replacement = r.nodes.iter().find(|n| n.name != "n1").expect("replacement node");
    assert_eq!(replacement.instance_type, "small");
    let ready = replacement.initialized_at.expect("replacement initialized");
    let gone = node_named(&r, "n1").deleted_at.expect("n1 deleted");
    assert!(gone > ready, "the candidate goes only after its replacement is initialized ({gone} vs {ready})");
    assert!(r.pending.is_empty());
    let live: Vec<_> = r.pods.iter().filter(|p| p.deleted_at.is_none()).collect();
    assert!(live.iter().all(|p| p.node.as_deref() == Some(replacement.name.as_str())), "{live:?}");
}

fn spot_types(cheaper: usize) -> String {
    let mut t = String::from(
        "\ncatalog:\n  source: inline\n  instanceTypes:\n    - name: big-spot\n      cpu: \"8\"\n      memory: 16Gi\n      pods: 40\n      offerings: [{zone: z1, capacityType: spot, price: 1.0}]\n",
    );
    for i in 0..cheaper {
        t.push_str(&format!(
            "    - name: s{i:02}\n      cpu: \"2\"\n      memory: 4Gi\n      pods: 10\n      offerings: [{{zone: z1, capacityType: spot, price: 0.{:02}}}]\n",
            10 + i
        ));
    }
    t
}

const SPOT_NODE: &str =
    "nodes:\n  - {name: n1, instanceType: big-spot, zone: z1, capacityType: spot, nodePool: default}\n";

#[test]
fn case23_spot_to_spot_is_gated_needs_15_options_and_is_cut_to_15() {
    let spot_only = "          requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]";
    let why = |o: &Outlook| match o {
        Outlook::Blocked(b) => b.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        Outlook::Disruptable(c) => format!("disruptable: {}", c.summary()),
    };
    // Approve mode, so a command found is held as a proposal we can inspect.
    let world = |types: &str, gate: bool| {
        let header =
            format!("name: c23\nuntil: 2m\nsettings: {{spotToSpotConsolidation: {gate}, disruption: approve}}\n");
        let text = scenario_text(&header, types, &objects("", spot_only, 1), SPOT_NODE);
        let s = parse_scenario(&text, "c23.yaml").unwrap_or_else(|e| panic!("{e}"));
        run_world(&s, Some(std::time::Duration::from_secs(1))).unwrap()
    };
    let with_pod = |types: &str, gate: bool| explain(&mut world(types, gate));
    let off = with_pod(&spot_types(20), false);
    let msg = why(&off["n1"]);
    assert!(msg.contains("SpotToSpotConsolidation"), "{msg}");

    let few = with_pod(&spot_types(10), true);
    let msg = why(&few["n1"]);
    assert!(msg.contains("requires 15 cheaper instance type options, 10 available"), "{msg}");

    let w = world(&spot_types(20), true);
    let proposal = w.controller().orchestrator().gate().awaiting().next().expect("a spot-to-spot proposal");
    let r = &proposal.command.replacements[0];
    assert_eq!(proposal.command.node_names(), ["n1"]);
    assert_eq!(r.instance_types.len(), 15, "{:?}", r.instance_types);
    assert_eq!(r.instance_types[0], "s00", "cheapest first");
    assert!(!r.instance_types.contains(&"s19".to_string()), "the dearest options are cut");
}

#[test]
fn case24_a_do_not_disrupt_pod_during_validation_abandons_the_command() {
    let base = scenario_text(
        "name: c24\nuntil: 10m\nsettings: {validationDelay: 1m}\n",
        TYPES,
        &objects("", ON_DEMAND_ONLY, 1),
        BIG_NODE,
    );
    let r = simulate(&base);
    let at = disruptions(&r).first().expect("a consolidation").at;
    // Same run, but the pod gets do-not-disrupt while the command waits for validation.
    let pod = r.pods.iter().find(|p| p.name.starts_with("app-")).unwrap();
    let patch = format!(
        "events:\n  - at: {}s\n    patch: {{kind: Pod, namespace: default, name: {}, metadata: {{annotations: {{karpenter.sh/do-not-disrupt: \"true\"}}}}}}\n",
        at + 10.0,
        pod.name
    );
    let r = simulate(&format!("{base}{patch}"));
    let d = disruptions(&r);
    assert_eq!(d[0].state, DecisionState::Invalidated);
    let why = d[0].why.unwrap();
    assert!(why.starts_with("churn") && why.contains("do-not-disrupt"), "{why}");
    assert!(node_named(&r, "n1").deleted_at.is_none(), "the node is kept");
    assert!(d.iter().all(|x| x.state != DecisionState::Executed));
}

#[test]
fn case25_pods_would_land_on_an_uninitialized_node() {
    // `fresh` keeps a startup taint nobody removes: it stays uninitialized.
    let nodes = "nodes:\n  - {name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default}\n  - {name: fresh, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default, initialized: false, taints: [{key: example.com/booting, effect: NoSchedule}]}\n";
    let template =
        format!("{ON_DEMAND_ONLY}\n          startupTaints: [{{key: example.com/booting, effect: NoSchedule}}]");
    let text = scenario_text("name: c25\nuntil: 1m\n", TYPES, &objects("", &template, 1), nodes);
    let s = parse_scenario(&text, "c25.yaml").unwrap();
    let mut w = run_world(&s, Some(std::time::Duration::from_secs(1))).unwrap();
    let out = explain(&mut w);
    match &out["n1"] {
        Outlook::Blocked(b) => assert!(
            b.iter().any(|b| matches!(b, Blocker::UninitializedDestination { node, .. } if node == "fresh")),
            "{b:?}"
        ),
        Outlook::Disruptable(c) => panic!("{}", c.summary()),
    }
    assert!(matches!(&out["fresh"], Outlook::Blocked(b) if b == &[Blocker::NotInitialized]));
}

#[test]
fn case26_template_change_drifts_and_replaces_the_node() {
    let pool = objects("", ON_DEMAND_ONLY, 1);
    let edited = pool.replace(
        "      template:\n        spec:\n",
        "      template:\n        metadata: {labels: {team: b}}\n        spec:\n",
    );
    let apply = format!("events:\n  - at: 2m\n    apply:\n{}", indent(&edited.replace("\nobjects:\n", ""), 6));
    // The node is small already (no consolidation): only drift can move it.
    let node = "nodes:\n  - {name: n1, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default}\n";
    let text = scenario_text("name: c26\nuntil: 10m\n", TYPES, &pool, &format!("{node}{apply}"));
    let r = simulate(&text);
    let d = disruptions(&r);
    let drift = d.iter().find(|x| x.method == DisruptionMethod::Drift).expect("a drift decision");
    assert_eq!(drift.candidates, ["n1"]);
    assert!(drift.at >= 120.0);
    assert_eq!(drift.state, DecisionState::Executed);
    assert!(node_named(&r, "n1").deleted_at.is_some());
    let new = r.nodes.iter().find(|n| n.name != "n1").unwrap();
    assert_eq!(new.labels.get("team").map(String::as_str), Some("b"), "the replacement has the new template");

    // Without the edit nothing drifts.
    let r = simulate(&scenario_text("name: c26b\nuntil: 10m\n", TYPES, &pool, node));
    assert!(disruptions(&r).iter().all(|x| x.method != DisruptionMethod::Drift));
}

fn indent(s: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            if let Some(rest) = l.strip_prefix("  - ") {
                format!("{pad}- {rest}\n")
            } else {
                format!("{pad}{}\n", &l[2..])
            }
        })
        .collect()
}

#[test]
fn case27_expiration_ignores_budgets_and_do_not_disrupt() {
    let pool = objects("      disruption: {budgets: [{nodes: \"0\"}]}", "          expireAfter: 1h", 1);
    let node = "nodes:\n  - {name: old, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default, age: 2h, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\n";
    let r = simulate(&scenario_text("name: c27\nuntil: 5m\n", TYPES, &pool, node));
    let d = disruptions(&r);
    let exp = d.iter().find(|x| x.method == DisruptionMethod::Expiration).expect("expired");
    assert_eq!(exp.candidates, ["old"]);
    assert!(exp.at <= 1.0, "immediately: {}", exp.at);
    assert!(node_named(&r, "old").deleted_at.is_some());
    assert!(d.iter().all(|x| x.method == DisruptionMethod::Expiration), "nothing voluntary with a 0 budget");
}

#[test]
fn case28_a_replacement_that_fails_to_launch_rolls_the_command_back() {
    let off = |zone: &str| {
        format!(
            "  - at: 0s\n    capacity: {{instanceType: small, zone: {zone}, capacityType: on-demand, available: false}}\n"
        )
    };
    let events = format!("events:\n{}{}", off("z1"), off("z2"));
    let text =
        scenario_text("name: c28\nuntil: 3m\n", TYPES, &objects("", ON_DEMAND_ONLY, 1), &format!("{BIG_NODE}{events}"));
    let r = simulate(&text);
    let d = disruptions(&r);
    assert_eq!(d[0].state, DecisionState::Failed, "{:?}", d[0].why);
    assert!(d[0].why.unwrap().contains("replacement"), "{:?}", d[0].why);
    let n1 = node_named(&r, "n1");
    assert!(n1.deleted_at.is_none());
    // The pods stayed where they were.
    assert!(r.pods.iter().filter(|p| p.deleted_at.is_none()).all(|p| p.node.as_deref() == Some("n1")));
    // The failed launch taught the controller that those offerings are out (for 3 minutes, as upstream's
    // unavailable-offerings cache): later passes don't try the same replacement again.
    let retried = d[1..].iter().filter(|x| x.replacements.iter().any(|r| r.contains(&"small".to_string()))).count();
    assert_eq!(retried, 0, "a replacement on offerings known to be out of capacity was tried again");
}

const EMPTY_NODES: &str = "nodes:\n  - {name: e1, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default}\n  - {name: e2, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default}\n  - {name: e3, instanceType: small, zone: z2, capacityType: on-demand, nodePool: default}\n  - {name: e4, instanceType: small, zone: z2, capacityType: on-demand, nodePool: default}\n";

#[test]
fn emptiness_deletes_empty_nodes_within_the_budget() {
    let pool = objects("      disruption: {budgets: [{nodes: \"2\"}]}", ON_DEMAND_ONLY, 0);
    let r = simulate(&scenario_text("name: empty\nuntil: 10m\n", TYPES, &pool, EMPTY_NODES));
    let d = disruptions(&r);
    assert_eq!(d[0].method, DisruptionMethod::Emptiness);
    assert_eq!(d[0].candidates.len(), 2, "two at once: the budget");
    assert!(d.iter().all(|x| x.candidates.len() <= 2));
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_some()), "all four go eventually");
    assert!(d.iter().all(|x| x.state == DecisionState::Executed));
}

#[test]
fn a_scheduled_zero_budget_holds_emptiness_until_its_window_ends() {
    let pool = objects(
        "      disruption:\n        budgets:\n          - {nodes: \"0\", schedule: \"0 10 * * *\", duration: 1h}\n          - {nodes: \"100%\"}",
        ON_DEMAND_ONLY,
        0,
    );
    let header = "name: window\nuntil: 2h\nstart: 2026-01-05T10:00:00Z\n";
    let r = simulate(&scenario_text(header, TYPES, &pool, EMPTY_NODES));
    let d = disruptions(&r);
    assert!(!d.is_empty());
    assert!(d.iter().all(|x| x.at >= 3600.0), "nothing before 11:00: {:?}", d.iter().map(|x| x.at).collect::<Vec<_>>());
    assert_eq!(d[0].candidates.len(), 4, "100% once the window closes");

    // The explanation says until when.
    let s = parse_scenario(&scenario_text(header, TYPES, &pool, EMPTY_NODES), "w.yaml").unwrap();
    let mut w = run_world(&s, Some(std::time::Duration::from_secs(60))).unwrap();
    let why = match &explain(&mut w)["e1"] {
        Outlook::Blocked(b) => b.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        Outlook::Disruptable(c) => c.summary(),
    };
    assert!(why.contains("budget for Empty") && why.contains("until 2026-01-05 11:00 UTC"), "{why}");
}

#[test]
fn consolidate_after_delays_consolidation() {
    let pool = objects("      disruption: {consolidateAfter: 5m}", ON_DEMAND_ONLY, 0);
    let r = simulate(&scenario_text("name: after\nuntil: 20m\n", TYPES, &pool, EMPTY_NODES));
    let d = disruptions(&r);
    assert!(!d.is_empty());
    assert!(d[0].at >= 300.0, "not before consolidateAfter elapsed: {}", d[0].at);
    assert!(d[0].at < 320.0, "but right after it: {}", d[0].at);
}

#[test]
fn approve_mode_waits_for_an_operator_and_reject_is_remembered() {
    let pool = objects("      disruption: {budgets: [{nodes: \"100%\"}]}", ON_DEMAND_ONLY, 0);
    let header = "name: gate\nuntil: 30m\nsettings: {disruption: approve}\n";
    // No decision by an operator: nothing voluntary happens.
    let r = simulate(&scenario_text(header, TYPES, &pool, EMPTY_NODES));
    let d = disruptions(&r);
    assert_eq!(d.len(), 1, "the same proposal is not offered twice: {}", d.len());
    assert_eq!(d[0].state, DecisionState::AwaitingApproval);
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));

    // Rejected: not offered again while the cluster is unchanged.
    let r =
        simulate(&scenario_text(header, TYPES, &pool, &format!("{EMPTY_NODES}events:\n  - at: 5m\n    reject: all\n")));
    let d = disruptions(&r);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].state, DecisionState::Rejected);

    // Approved: validated and executed.
    let r = simulate(&scenario_text(
        header,
        TYPES,
        &pool,
        &format!("{EMPTY_NODES}events:\n  - at: 5m\n    approve: all\n"),
    ));
    let d = disruptions(&r);
    assert_eq!(d[0].state, DecisionState::Executed);
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_some_and(|t| t >= 300.0)));

    // Unknown ids are named.
    let text = scenario_text(header, TYPES, &pool, &format!("{EMPTY_NODES}events:\n  - at: 5m\n    approve: [d-99]\n"));
    let err = run(&parse_scenario(&text, "gate.yaml").unwrap(), None, None).unwrap_err().to_string();
    assert!(err.contains("d-99"), "{err}");
}

/// A pass that finds only a command already proposed or rejected has nothing new to say until the cluster changes:
/// it goes quiet like a pass that finds nothing, instead of looking again every simulated second.
#[test]
fn passes_go_quiet_while_the_only_command_is_already_proposed_or_rejected() {
    let pool = objects("      disruption: {budgets: [{nodes: \"100%\"}]}", ON_DEMAND_ONLY, 0);
    let header = "name: gate\nuntil: 2h\nsettings: {disruption: approve}\n";
    // Open and never decided; rejected, then a change that leaves the state generation (and so the rejection)
    // as it was: a no-op scale.
    let no_op = "    scale: {kind: Deployment, namespace: default, name: app, replicas: 0}\n";
    for rest in ["".to_string(), format!("events:\n  - at: 5m\n    reject: all\n  - at: 6m\n{no_op}")] {
        let s =
            parse_scenario(&scenario_text(header, TYPES, &pool, &format!("{EMPTY_NODES}{rest}")), "q.yaml").unwrap();
        let w = run_world(&s, None).unwrap();
        let passes = w.disruption_passes().len();
        // Two hours at one pass per 10 s would be 720; the few here are the first pass, the proposal's and the
        // state refreshes.
        assert!(passes < 40, "{passes} passes with nothing new to find ({rest:?})");
        assert_eq!(w.record.decisions.len(), 1, "still proposed once ({rest:?})");
    }
}

#[test]
fn dry_run_only_shows() {
    let pool = objects("", ON_DEMAND_ONLY, 0);
    let header = "name: dry\nuntil: 30m\nsettings: {disruption: dry-run}\n";
    let r = simulate(&scenario_text(
        header,
        TYPES,
        &pool,
        &format!("{EMPTY_NODES}events:\n  - at: 5m\n    approve: all\n"),
    ));
    let d = disruptions(&r);
    assert!(!d.is_empty());
    assert!(d.iter().all(|x| x.state == DecisionState::DryRun));
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));
}

#[test]
fn pdb_and_do_not_disrupt_block_consolidation_with_a_reason() {
    let pdb = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\n";
    let text =
        scenario_text("name: pdb\nuntil: 10m\n", TYPES, &format!("{}{pdb}", objects("", ON_DEMAND_ONLY, 1)), BIG_NODE);
    let r = simulate(&text);
    assert!(disruptions(&r).is_empty());
    let s = parse_scenario(&text, "pdb.yaml").unwrap();
    let mut w = run_world(&s, Some(std::time::Duration::from_secs(120))).unwrap();
    match &explain(&mut w)["n1"] {
        Outlook::Blocked(b) => {
            assert!(b.iter().any(|b| b.to_string().contains("PDB app allows 0 disruptions")), "{b:?}")
        }
        Outlook::Disruptable(c) => panic!("{}", c.summary()),
    }
}

/// Interruption notices from the cloud port (engine.md §3 Interruption): forceful, budgets do not apply.
fn interrupted(kind: &str) -> Report {
    let pool = objects("      disruption: {budgets: [{nodes: \"0\"}]}", "", 1);
    let node = "nodes:\n  - {name: s1, instanceType: small, zone: z1, capacityType: spot, nodePool: default}\n";
    let events = format!("events:\n  - at: 1m\n    interrupt: {{node: s1, kind: {kind}}}\n");
    simulate(&scenario_text("name: interruption\nuntil: 3m\n", TYPES, &pool, &format!("{node}{events}")))
}

#[test]
fn spot_interruption_deletes_the_node_and_avoids_its_offering_for_three_minutes() {
    let r = interrupted("spot-interruption");
    let d = disruptions(&r);
    let i = d.iter().find(|x| x.method == DisruptionMethod::Interruption).expect("an interruption decision");
    assert_eq!((i.candidates, i.at), (&["s1".to_string()][..], 60.0));
    assert!(node_named(&r, "s1").deleted_at.is_some(), "the interrupted node is gone despite a zero budget");
    // The pod comes back on a new node, not on the offering that was just reclaimed (small/spot/z1 is the cheapest).
    let replacement = r.nodes.iter().find(|n| n.name != "s1").expect("a replacement node for the evicted pod");
    assert!(replacement.created_at > 60.0);
    assert_ne!(
        (replacement.instance_type.as_str(), replacement.capacity_type.as_str(), replacement.zone.as_str()),
        ("small", "spot", "z1"),
        "the interrupted offering is unavailable for 3 minutes"
    );
    let pod = r.pods.iter().find(|p| p.deleted_at.is_none()).expect("the Deployment's pod");
    assert_eq!(pod.node.as_deref(), Some(replacement.name.as_str()));
}

#[test]
fn scheduled_change_and_instance_stopping_delete_but_a_rebalance_recommendation_does_not() {
    for kind in ["scheduled-change", "instance-stopping", "instance-terminated"] {
        let r = interrupted(kind);
        assert!(node_named(&r, "s1").deleted_at.is_some(), "{kind}: the node is deleted");
        assert!(disruptions(&r).iter().any(|x| x.method == DisruptionMethod::Interruption), "{kind}: recorded");
    }
    let r = interrupted("rebalance-recommendation");
    assert!(node_named(&r, "s1").deleted_at.is_none(), "a rebalance recommendation only informs");
    assert!(r.nodes.len() == 1 && r.pods.iter().all(|p| p.node.as_deref() == Some("s1")));
}

#[test]
fn malformed_do_not_disrupt_values_are_ignored_like_false() {
    // Upstream v1.12+: a value that is neither `true` nor a duration protects nothing (the live controller says so
    // in a warning Event). `false`, `forever` on the pod and `sometimes` on the node all let the large node be
    // replaced by a small one.
    let pod = |ann: &str| {
        format!(
            "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: p, namespace: default, annotations: {{karpenter.sh/do-not-disrupt: \"{ann}\"}}}}\n    spec:\n      nodeName: n1\n      containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]\n"
        )
    };
    let cases =
        [("false", ""), ("forever", ""), ("false", ", annotations: {karpenter.sh/do-not-disrupt: \"sometimes\"}")];
    for (pod_value, node_ann) in cases {
        let node = format!(
            "nodes:\n  - {{name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default{node_ann}}}\n"
        );
        let objects = format!("{}{}", objects("", ON_DEMAND_ONLY, 0), pod(pod_value));
        let r = simulate(&scenario_text("name: dnd\nuntil: 10m\n", TYPES, &objects, &node));
        assert!(
            disruptions(&r).iter().any(|d| d.candidates == ["n1"]),
            "{pod_value}/{node_ann}: an unreadable or false value does not block"
        );
    }
    // `true` does.
    let node = "nodes:\n  - {name: n1, instanceType: large, zone: z1, capacityType: on-demand, nodePool: default}\n";
    let objects = format!("{}{}", objects("", ON_DEMAND_ONLY, 0), pod("true"));
    let r = simulate(&scenario_text("name: dnd\nuntil: 10m\n", TYPES, &objects, node));
    assert!(disruptions(&r).is_empty(), "true protects the node");
}

#[test]
fn balanced_policy_refuses_a_small_saving_that_moves_many_pods() {
    // A `medium` type just 5% cheaper than `large`: worth it for WhenEmptyOrUnderutilized, not for Balanced, where
    // the score is (0.01 / 0.20) ÷ (11 / 11) = 0.05 < 1/k = 0.5.
    let types = format!(
        "{TYPES}    - name: medium\n      cpu: \"6\"\n      memory: 12Gi\n      pods: 30\n      overhead: {{cpu: 100m, memory: 100Mi}}\n      offerings:\n        - {{zone: z1, capacityType: on-demand, price: 0.19}}\n"
    );
    let run_with = |policy: &str| {
        let pool = objects(
            &format!("      disruption: {{consolidationPolicy: {policy}, consolidateAfter: 0s}}"),
            ON_DEMAND_ONLY,
            10,
        );
        let text = scenario_text("name: balanced\nuntil: 10m\n", &types, &pool, BIG_NODE);
        let s = parse_scenario(&text, "balanced.yaml").unwrap_or_else(|e| panic!("{e}"));
        (simulate(&text), run_world(&s, Some(std::time::Duration::from_secs(60))).unwrap())
    };
    let (r, _) = run_with("WhenEmptyOrUnderutilized");
    let d = disruptions(&r);
    assert!(
        d.iter().any(|x| x.candidates == ["n1"] && x.replacements.iter().any(|t| t.contains(&"medium".to_string()))),
        "WhenEmptyOrUnderutilized takes the 5% saving"
    );
    let (r, mut w) = run_with("Balanced");
    assert!(disruptions(&r).is_empty(), "Balanced does not move 10 pods for 5%");
    match &explain(&mut w)["n1"] {
        Outlook::Blocked(b) => assert!(b.iter().any(|b| matches!(b, Blocker::BalancedScore { .. })), "{b:?}"),
        Outlook::Disruptable(c) => panic!("{}", c.summary()),
    }
}

#[test]
fn a_proposal_whose_node_goes_away_is_withdrawn_with_the_reason() {
    let pool = objects("      disruption: {budgets: [{nodes: \"100%\"}]}", ON_DEMAND_ONLY, 0);
    let header = "name: stale\nuntil: 30m\nsettings: {disruption: approve}\n";
    let events = "events:\n  - at: 5m\n    interrupt: {node: e1, kind: scheduled-change}\n";
    let r = simulate(&scenario_text(header, TYPES, &pool, &format!("{EMPTY_NODES}{events}")));
    let d = disruptions(&r);
    let proposal = d.iter().find(|x| x.method == DisruptionMethod::Emptiness).expect("the emptiness proposal");
    assert!(proposal.candidates.contains(&"e1".to_string()));
    assert_eq!(proposal.state, DecisionState::Invalidated);
    assert!(proposal.why.is_some_and(|w| w.contains("e1")), "{:?}", proposal.why);
    // The other empty nodes are proposed again without e1, still waiting for an operator.
    let again = d.iter().filter(|x| x.method == DisruptionMethod::Emptiness && x.at > 300.0).collect::<Vec<_>>();
    assert!(
        again.iter().any(|x| !x.candidates.contains(&"e1".to_string()) && x.state == DecisionState::AwaitingApproval)
    );
}

#[test]
fn a_timed_do_not_disrupt_counts_from_the_pod_start_and_then_lets_the_node_go() {
    // The simulated kubelet sets status.startTime when it starts a pod (here at t=0, on an existing node), so a
    // 3-minute do-not-disrupt protects the large node for 3 minutes and no longer.
    let pod = "  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p, namespace: default, annotations: {karpenter.sh/do-not-disrupt: \"3m\"}}\n    spec:\n      nodeName: n1\n      containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]\n";
    let objects = format!("{}{pod}", objects("", ON_DEMAND_ONLY, 0));
    let r = simulate(&scenario_text("name: dnd-timed\nuntil: 15m\n", TYPES, &objects, BIG_NODE));
    let d = disruptions(&r);
    let first = d.iter().find(|x| x.candidates == ["n1"]).expect("n1 is consolidated once the 3 minutes are over");
    assert!(first.at >= 180.0, "not before the do-not-disrupt runs out: {}", first.at);
    assert!(first.at < 300.0, "and soon after: {}", first.at);
}

#[test]
fn proposals_waiting_for_approval_count_against_the_budget_of_the_next() {
    // Six empty nodes and a budget of two: in approve mode the first pass proposes two of them, and the passes
    // after it take those two as going (upstream treats a command in flight so) instead of proposing two more,
    // and two more, each valid only on its own.
    let nodes: String = (1..=6)
        .map(|i| {
            format!("  - {{name: e{i}, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default}}\n")
        })
        .collect();
    let pool = "      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s, budgets: [{nodes: \"2\"}]}";
    let text = scenario_text(
        "name: queue\nuntil: 10m\nsettings: {disruption: approve}\n",
        TYPES,
        &objects(pool, ON_DEMAND_ONLY, 0),
        &format!("nodes:\n{nodes}events:\n  - at: 5m\n    approve: all\n"),
    );
    let r = simulate(&text);
    let d = disruptions(&r);
    let before_approval: usize = d.iter().filter(|x| x.at < 300.0).map(|x| x.candidates.len()).sum();
    assert_eq!(
        before_approval,
        2,
        "only as many nodes as the budget allows wait for approval: {:?}",
        d.iter().map(|x| (x.at, x.candidates)).collect::<Vec<_>>()
    );
    assert!(
        d.iter().all(|x| x.state != DecisionState::Invalidated),
        "approved in order, nothing turns out invalid: {:?}",
        d.iter().map(|x| (x.at, x.candidates, x.why)).collect::<Vec<_>>()
    );
    assert!(d.iter().any(|x| x.state == DecisionState::Executed), "the approved ones run");
}

#[test]
fn a_node_running_a_dra_pod_is_not_consolidated_and_says_why() {
    // Upstream v1.14.1 runs with --ignore-dra-requests=true: a pod with a ResourceClaim would not schedule anywhere
    // else, so its node stays, and "why not" names DRA. The plain pod beside it changes nothing.
    let dra = r#"  - apiVersion: v1
    kind: Pod
    metadata: {name: trainer, namespace: default}
    spec:
      nodeName: n1
      resourceClaims: [{name: gpu, resourceClaimName: gpu-claim}]
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m}, claims: [{name: gpu}]}}]
"#;
    let text =
        scenario_text("name: dra\nuntil: 10m\n", TYPES, &format!("{}{dra}", objects("", ON_DEMAND_ONLY, 1)), BIG_NODE);
    let r = simulate(&text);
    assert!(disruptions(&r).is_empty(), "{:?}", r.decisions);
    assert!(node_named(&r, "n1").deleted_at.is_none());
    let s = parse_scenario(&text, "dra.yaml").unwrap();
    let mut w = run_world(&s, Some(std::time::Duration::from_secs(120))).unwrap();
    match &explain(&mut w)["n1"] {
        Outlook::Blocked(b) => assert!(
            b.iter().any(|b| b.to_string().contains("default/trainer")
                && b.to_string().contains("Dynamic Resource Allocation requirements that are not yet supported")),
            "{b:?}"
        ),
        Outlook::Disruptable(c) => panic!("{}", c.summary()),
    }
}

#[test]
fn status_check_failures_terminate_forcefully_and_scheduled_events_drain_normally() {
    // A PDB allowing no disruption holds a normal drain, not a forceful one (engine-v1x.md §5).
    let pdb = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\n";
    let run = |kind: &str| {
        let pool = format!("{}{pdb}", objects("      disruption: {budgets: [{nodes: \"0\"}]}", "", 1));
        let node = "nodes:\n  - {name: s1, instanceType: small, zone: z1, capacityType: spot, nodePool: default}\n";
        let events = format!("events:\n  - at: 1m\n    interrupt: {{node: s1, kind: {kind}}}\n");
        simulate(&scenario_text("name: status\nuntil: 5m\n", TYPES, &pool, &format!("{node}{events}")))
    };
    for kind in ["instance-status", "system-status"] {
        let r = run(kind);
        let gone = node_named(&r, "s1").deleted_at.unwrap_or_else(|| panic!("{kind}: the node is gone"));
        assert!(gone < 90.0, "{kind}: forceful, the PDB does not hold it ({gone})");
        let d = disruptions(&r);
        assert!(d.iter().any(|x| x.method == DisruptionMethod::Interruption && x.candidates == ["s1"]), "{kind}");
    }
    for kind in ["event-status", "capacity-reservation-interrupted"] {
        let r = run(kind);
        assert!(node_named(&r, "s1").deleted_at.is_none(), "{kind}: the PDB holds the drain");
        assert!(disruptions(&r).iter().any(|x| x.method == DisruptionMethod::Interruption), "{kind}: recorded");
    }
}

#[test]
fn a_failed_status_check_makes_a_drain_already_under_way_forceful() {
    // A scheduled event starts a normal drain, which the PDB holds; the system status check failing a minute later
    // makes it forceful, and the node goes.
    let pdb = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\n";
    let pool = format!("{}{pdb}", objects("      disruption: {budgets: [{nodes: \"0\"}]}", "", 1));
    let node = "nodes:\n  - {name: s1, instanceType: small, zone: z1, capacityType: spot, nodePool: default}\n";
    let events = "events:\n  - at: 1m\n    interrupt: {node: s1, kind: event-status}\n  - at: 2m\n    interrupt: {node: s1, kind: system-status}\n";
    let r = simulate(&scenario_text("name: both\nuntil: 5m\n", TYPES, &pool, &format!("{node}{events}")));
    let gone = node_named(&r, "s1").deleted_at.expect("the node is gone");
    assert!((120.0..150.0).contains(&gone), "forceful from the second notice on: {gone}");
}

/// Why each node is (not) being disrupted, as the dashboard asks the world.
fn explain(
    w: &mut karpenter_tui::sim::world::World,
) -> std::collections::BTreeMap<String, karpenter_tui::engine::disruption::consolidation::Outlook> {
    tick::immediate(tick::explain(w)).expect("the simulated world answers at once")
}
