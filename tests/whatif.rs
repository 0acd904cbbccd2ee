//! What-if previews of NodePool edits (engine::whatif): drift, pending pods, cost, budgets and limits, on small
//! clusters built by the simulated world at t=0 (nodes registered and initialized, pending pods marked
//! unschedulable by the kube-scheduler stand-in, nothing provisioned yet).

use crate::common;

use std::time::Duration;

use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::disruption::Reason;
use karpenter_tui::engine::drift::DriftReason;
use karpenter_tui::engine::provisioning::{Millis, Snapshot};
use karpenter_tui::engine::whatif::{
    Destination, EditPreview, ReplacementEstimate, preview_nodepool_edit, summary_lines,
};
use karpenter_tui::sim::run::run_world;
use karpenter_tui::sim::scenario::parse_scenario;

use common::SMALL_LARGE_TYPES as TYPES;

/// The NodePool `default`: `spec` lines are indented under `spec:`, `template` lines under `template.spec:`.
fn pool_yaml(spec: &str, template: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default}}\nspec:\n{spec}  template:\n    spec:\n{template}      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n"
    )
}

fn pool(spec: &str, template: &str) -> NodePool {
    serde_yaml::from_str(&pool_yaml(spec, template)).expect("valid nodepool")
}

/// A pod object; `node` binds it.
fn pod(name: &str, cpu: &str, node: Option<&str>) -> String {
    let node = node.map(|n| format!("      nodeName: {n}\n")).unwrap_or_default();
    format!(
        "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: {name}, namespace: default}}\n    spec:\n{node}      containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}, memory: 256Mi}}}}}}]\n"
    )
}

/// Indents a document as one item of the scenario's `objects` list.
fn as_object(doc: &str) -> String {
    let mut out = String::new();
    for (i, line) in doc.lines().enumerate() {
        out.push_str(if i == 0 { "  - " } else { "    " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

struct Cluster {
    snapshot: Snapshot,
    catalog: Catalog,
    now: Millis,
}

impl Cluster {
    /// `nodes`: (name, type, zone, capacity type), all in `default`.
    fn new(live: &str, nodes: &[(&str, &str, &str, &str)], pods: &[String]) -> Cluster {
        let mut text = format!("name: whatif\nuntil: 1m\nsettings: {{disruption: approve}}\n{TYPES}objects:\n");
        text.push_str(&as_object(live));
        for p in pods {
            text.push_str(p);
        }
        if !nodes.is_empty() {
            text.push_str("nodes:\n");
            for (n, t, z, ct) in nodes {
                text.push_str(&format!(
                    "  - {{name: {n}, instanceType: {t}, zone: {z}, capacityType: {ct}, nodePool: default}}\n"
                ));
            }
        }
        let s = parse_scenario(&text, "whatif.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let w = run_world(&s, Some(Duration::ZERO)).unwrap_or_else(|e| panic!("{e}"));
        Cluster { snapshot: w.cluster.snapshot(), catalog: w.catalog().clone(), now: w.now }
    }

    fn preview(&self, edited: &NodePool) -> EditPreview {
        preview_nodepool_edit(&self.snapshot, &self.catalog, self.now, edited)
    }
}

const THREE_NODES: [(&str, &str, &str, &str); 3] =
    [("n1", "small", "z1", "on-demand"), ("n2", "large", "z1", "on-demand"), ("n3", "small", "z2", "on-demand")];

fn bound_pods() -> Vec<String> {
    vec![pod("a", "500m", Some("n1")), pod("b", "1", Some("n2")), pod("c", "500m", Some("n3"))]
}

fn drifted_names(p: &EditPreview) -> Vec<&str> {
    p.drifted.iter().map(|d| d.node.as_deref().unwrap_or(&d.nodeclaim)).collect()
}

#[test]
fn an_unchanged_pool_yields_an_empty_preview() {
    let live = pool_yaml("  limits: {cpu: \"100\"}\n", "");
    let c = Cluster::new(&live, &THREE_NODES, &[bound_pods(), vec![pod("pending", "1", None)]].concat());
    let p = c.preview(&pool("  limits: {cpu: \"100\"}\n", ""));
    assert!(p.is_empty(), "{p:#?}");
    assert!(p.drifted.is_empty() && p.pods.is_empty() && p.limits.is_empty());
    assert_eq!(p.budgets.len(), 3, "budgets are always reported");
    let lines = summary_lines(&p);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("No effect"), "{lines:?}");
}

#[test]
fn narrowing_instance_types_drifts_exactly_the_claims_that_no_longer_match() {
    let c = Cluster::new(&pool_yaml("", ""), &THREE_NODES, &bound_pods());
    let edited =
        pool("", "      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [small]}]\n");
    let p = c.preview(&edited);
    assert_eq!(drifted_names(&p), ["n2"], "{p:#?}");
    let d = &p.drifted[0];
    assert_eq!(d.drift.reason, DriftReason::RequirementsDrifted);
    assert!(d.drift.message().contains("node.kubernetes.io/instance-type") && d.drift.message().contains("large"));
    assert_eq!(d.instance_type, "large");
    // The large node costs $0.20/h; its one pod fits on a small node or a new small one: cheaper either way.
    assert_eq!(d.current_price, Some(0.2));
    assert!(
        matches!(&d.replacement, ReplacementEstimate::NoneNeeded)
            || matches!(&d.replacement, ReplacementEstimate::Launch { instance_types, .. } if instance_types == &["small"]),
        "{:?}",
        d.replacement
    );
    assert!(p.cost.drift.delta() < -0.1, "{:?}", p.cost);
    assert_eq!(p.cost.drift.unpriced, 0);
    let text = summary_lines(&p).join("\n");
    assert!(text.contains("n2") && text.contains("RequirementsDrifted"), "{text}");
}

#[test]
fn narrowing_zones_and_capacity_types_drifts_the_nodes_outside() {
    let c = Cluster::new(&pool_yaml("", ""), &THREE_NODES, &bound_pods());

    let zone = pool("", "      requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [z1]}]\n");
    let p = c.preview(&zone);
    assert_eq!(drifted_names(&p), ["n3"]);
    assert!(p.drifted[0].drift.message().contains("z2"), "{}", p.drifted[0].drift);

    let spot = pool("", "      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]\n");
    let p = c.preview(&spot);
    assert_eq!(drifted_names(&p), ["n1", "n2", "n3"]);
    assert!(p.drifted.iter().all(|d| d.drift.reason == DriftReason::RequirementsDrifted));

    // Widening drifts nothing.
    let wide =
        pool("", "      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]\n");
    assert!(c.preview(&wide).drifted.is_empty());
}

#[test]
fn adding_a_taint_makes_a_pending_pod_without_the_toleration_unschedulable() {
    let c = Cluster::new(&pool_yaml("", ""), &[], &[pod("web", "500m", None)]);
    let edited = pool("", "      taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n");
    let p = c.preview(&edited);
    assert_eq!(p.pods.newly_unschedulable.len(), 1, "{p:#?}");
    let (pod, why) = &p.pods.newly_unschedulable[0];
    assert_eq!(pod, "default/web");
    assert!(why.contains("default") && why.contains("dedicated"), "{why}");
    // Nothing would be launched any more.
    assert_eq!((p.cost.claims_before, p.cost.claims_after), (1, 0));
    assert!(p.cost.pending_delta() < 0.0);
    let text = summary_lines(&p).join("\n");
    assert!(text.contains("default/web") && text.contains("1 unschedulable"), "{text}");
}

#[test]
fn widening_requirements_makes_an_unschedulable_pod_schedulable() {
    let small_only = "      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [small]}]\n";
    let c = Cluster::new(&pool_yaml("", small_only), &[], &[pod("big", "4", None)]);
    let p = c.preview(&pool("", ""));
    assert_eq!(
        p.pods.newly_schedulable,
        vec![("default/big".to_string(), Destination::NewNodeClaim("default".into()))]
    );
    assert!(p.pods.newly_unschedulable.is_empty());
    assert_eq!((p.cost.claims_before, p.cost.claims_after), (0, 1));
    // The cheapest large offering is spot in z1.
    assert!((p.cost.pending_after - 0.08).abs() < 1e-9, "{:?}", p.cost);
    assert!((p.cost.total_delta() - 0.08).abs() < 1e-9);
}

#[test]
fn lowering_limits_shows_reduced_headroom() {
    let c = Cluster::new(&pool_yaml("  limits: {cpu: \"100\"}\n", ""), &THREE_NODES, &bound_pods());
    let p = c.preview(&pool("  limits: {cpu: \"20\", memory: 64Gi}\n", ""));
    let cpu = p.limits.iter().find(|l| l.resource == "cpu").expect("cpu limit change");
    // In use: 2 + 8 + 2 cores of capacity.
    assert_eq!(cpu.usage, 12_000);
    assert_eq!((cpu.limit_before, cpu.limit_after), (Some(100_000), Some(20_000)));
    assert_eq!((cpu.headroom_before(), cpu.headroom_after()), (Some(88_000), Some(8_000)));
    let mem = p.limits.iter().find(|l| l.resource == "memory").expect("new memory limit");
    assert_eq!(mem.limit_before, None);
    assert_eq!(mem.headroom_after(), Some(64 * 1024 * 1024 * 1024 - 24 * 1024 * 1024 * 1024));
    assert!(!p.is_empty());
    let text = summary_lines(&p).join("\n");
    assert!(text.contains("cpu: 100 → 20, in use 12, headroom 88 → 8"), "{text}");
}

#[test]
fn a_budget_change_shows_the_new_allowed_counts() {
    let live = pool_yaml("  disruption:\n    budgets: [{nodes: \"10%\"}]\n", "");
    let c = Cluster::new(&live, &THREE_NODES, &bound_pods());
    let edited = pool("  disruption:\n    budgets: [{nodes: \"2\"}, {nodes: \"0\", reasons: [Drifted]}]\n", "");
    let p = c.preview(&edited);
    let allowed = |r: Reason| {
        let b = p.budgets.iter().find(|b| b.reason == r).expect("reason reported");
        (b.before.as_ref().map(|s| s.allowed), b.after.allowed)
    };
    // 10% of 3 nodes rounds up to 1.
    assert_eq!(allowed(Reason::Empty), (Some(1), 2));
    assert_eq!(allowed(Reason::Drifted), (Some(1), 0));
    assert_eq!(allowed(Reason::Underutilized), (Some(1), 2));
    assert!(p.drifted.is_empty() && p.limits.is_empty());
    let text = summary_lines(&p).join("\n");
    assert!(text.contains("Drifted: 1 → 0  (changed)"), "{text}");
}

#[test]
fn a_new_pool_is_previewed_against_no_live_pool() {
    let c = Cluster::new(&pool_yaml("", ""), &[], &[]);
    let mut edited = pool("", "");
    edited.metadata.name = Some("batch".into());
    let p = c.preview(&edited);
    assert!(p.is_new && !p.is_empty());
    assert!(p.budgets.iter().all(|b| b.before.is_none()));
}

#[test]
fn the_preview_applies_node_overlays_to_each_side() {
    use karpenter_tui::engine::api::nodeoverlay::NodeOverlay;
    use karpenter_tui::engine::whatif::preview_nodepool_edit_with_overlays;
    // A discount on `large` for pools labelled team=batch: the edit that adds the label makes the pending pod's
    // claim cheaper in the preview (the "after" side sees the overlay, the "before" side does not).
    let live = pool_yaml("", "");
    let c = Cluster::new(&live, &[], &[pod("p", "3", None)]);
    let overlay: NodeOverlay = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: batch-discount}\nspec:\n  requirements: [{key: team, operator: In, values: [batch]}]\n  priceAdjustment: \"-90%\"\n",
    )
    .expect("overlay");
    let mut edited = pool("", "");
    edited.spec.template.metadata.labels.insert("team".into(), "batch".into());
    let plain = preview_nodepool_edit(&c.snapshot, &c.catalog, c.now, &edited);
    let with =
        preview_nodepool_edit_with_overlays(&c.snapshot, &c.catalog, c.now, &edited, std::slice::from_ref(&overlay));
    assert!((plain.cost.pending_after - plain.cost.pending_before).abs() < 1e-9, "{:?}", plain.cost);
    assert!(
        with.cost.pending_after < with.cost.pending_before * 0.2,
        "the overlay applies after the edit only: {:?}",
        with.cost
    );
}
