//! CapacityBuffers end to end through the simulated world (engine-v1x.md §7): virtual pods launch real capacity,
//! the buffer's status says where they went, emptiness leaves the nodes holding them, real pods take the room and
//! the buffer refills, NodePool limits bound it, and with the gate off nothing happens.

use crate::common;

use karpenter_tui::controller::tick;
use karpenter_tui::engine::api::capacitybuffer::{COND_PROVISIONING, COND_READY_FOR_PROVISIONING, CapacityBuffer};
use karpenter_tui::sim::report::Report;
use karpenter_tui::sim::run::{run, run_world};
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::sim::world::World;

use common::SMALL_LARGE_TYPES as TYPES;

/// A NodePool (`pool` lines under its spec), a PodTemplate of 1 CPU pods, a buffer of it, and `rest`.
fn scenario(gate: bool, pool: &str, buffer: &str, rest: &str) -> String {
    scenario_cpu(gate, pool, buffer, "1", rest)
}

/// [`scenario`] with the template's pods requesting `cpu`.
fn scenario_cpu(gate: bool, pool: &str, buffer: &str, cpu: &str, rest: &str) -> String {
    format!(
        r#"name: buffers
until: 20m
settings:
  featureGates: {{CapacityBuffer: {gate}}}
{TYPES}
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
{pool}
      disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}}
      template:
        spec:
          requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: v1
    kind: PodTemplate
    metadata: {{name: worker, namespace: default}}
    template:
      metadata: {{labels: {{app: worker}}}}
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]
  - apiVersion: autoscaling.x-k8s.io/v1beta1
    kind: CapacityBuffer
    metadata: {{name: spare, namespace: default}}
    spec: {buffer}
{rest}"#
    )
}

fn world(text: &str, until_minutes: u64) -> World {
    world_at(text, until_minutes * 60)
}

fn world_at(text: &str, seconds: u64) -> World {
    let s = parse_scenario(text, "buffers.yaml").unwrap_or_else(|e| panic!("{e}"));
    run_world(&s, Some(std::time::Duration::from_secs(seconds))).unwrap_or_else(|e| panic!("{e}"))
}

fn report(text: &str) -> Report {
    let s = parse_scenario(text, "buffers.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

fn buffer(w: &World) -> CapacityBuffer {
    (**w.cluster.capacitybuffers.get(&("default".to_string(), "spare".to_string())).expect("the buffer")).clone()
}

fn condition(b: &CapacityBuffer, t: &str) -> (String, String, String) {
    let c = b.condition(t).unwrap_or_else(|| panic!("no {t} condition: {:?}", b.status));
    (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
}

fn live_nodes(w: &World) -> Vec<String> {
    w.cluster
        .nodes
        .values()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .map(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("node.kubernetes.io/instance-type").cloned())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn a_buffer_launches_room_for_its_virtual_pods_and_says_where_they_went() {
    let text = scenario(true, "", "{podTemplateRef: {name: worker}, replicas: 3}", "");
    // Right after the first solve: the virtual pods needed new capacity.
    let w = world_at(&text, 5);
    let b = buffer(&w);
    assert_eq!(condition(&b, COND_READY_FOR_PROVISIONING).0, "True");
    assert_eq!(b.status.as_ref().unwrap().replicas, Some(3));
    let (status, reason, message) = condition(&b, COND_PROVISIONING);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "RequiresNewCapacity"), "{message}");
    assert_eq!(message, "3/3 virtual pods required new capacity");
    // From the next solve on (the claim in flight counts as a node), the buffer fits; the node is real capacity.
    let w = world(&text, 20);
    let (status, reason, _) = condition(&buffer(&w), COND_PROVISIONING);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "FitsExistingCapacity"));
    assert_eq!(live_nodes(&w), ["large"], "3 CPU of room: one large node (8 CPU), the only type that holds 3");
    // Virtual pods are not pods: nothing pending, nothing bound, no events about them.
    let r = report(&text);
    assert!(r.pending.is_empty(), "{:?}", r.pending);
    assert!(r.pods.is_empty(), "{:?}", r.pods);
    // Emptiness leaves the node alone over the whole run (consolidateAfter 0s, no real pods on it).
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()), "{:?}", r.nodes);
    let mut w = world(&text, 20);
    let outlook = explain(&mut w);
    let why = format!("{:?}", outlook.values().next().unwrap());
    assert!(why.contains("BufferPods"), "{why}");
}

#[test]
fn real_pods_take_the_room_and_the_buffer_refills() {
    // Two buffer pods of 3 CPU take one large node (7.9 CPU allocatable); then a Deployment of two 3 CPU pods
    // arrives: kube-scheduler puts them in the room at once, and the next solve launches new room for the buffer.
    let deployment = r#"events:
  - at: 5m
    apply:
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {name: app, namespace: default}
        spec:
          replicas: 2
          selector: {matchLabels: {app: app}}
          template:
            metadata: {labels: {app: app}}
            spec:
              containers: [{name: c, image: x, resources: {requests: {cpu: "3", memory: 1Gi}}}]
"#;
    let text = scenario_cpu(true, "", "{podTemplateRef: {name: worker}, replicas: 2}", "3", deployment);
    let before = world(&text, 4);
    let nodes_before = live_nodes(&before).len();
    assert!(nodes_before >= 1);
    let r = report(&text);
    let app: Vec<_> = r.pods.iter().filter(|p| p.name.starts_with("app-")).collect();
    assert_eq!(app.len(), 2);
    let first_nodes: Vec<_> = r.nodes.iter().filter(|n| n.created_at < 300.0).map(|n| n.name.clone()).collect();
    assert!(
        app.iter().all(|p| p.node.as_ref().is_some_and(|n| first_nodes.contains(n))),
        "the app's pods land in the buffer's room at once: {app:?} on {first_nodes:?}"
    );
    assert!(app.iter().all(|p| p.bound_at.is_some_and(|t| t < 310.0)), "no wait for a launch: {app:?}");
    let after = world(&text, 20);
    assert!(live_nodes(&after).len() > nodes_before, "the buffer refilled: {:?}", live_nodes(&after));
    assert_eq!(condition(&buffer(&after), COND_PROVISIONING).1, "FitsExistingCapacity");
}

#[test]
fn a_nodepool_cpu_limit_bounds_the_buffer() {
    // › "should not provision buffer capacity beyond NodePool CPU limit": 10 buffer pods of 1 CPU, a 4 CPU limit.
    let text = scenario(true, "      limits: {cpu: \"4\"}", "{podTemplateRef: {name: worker}, replicas: 10}", "");
    let w = world(&text, 10);
    let cpus: i64 = live_nodes(&w).iter().map(|t| if t == "large" { 8 } else { 2 }).sum();
    assert_eq!(cpus, 4, "two small nodes fill the limit, one buffer pod each: {:?}", live_nodes(&w));
    let (status, reason, message) = condition(&buffer(&w), COND_PROVISIONING);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "RequiresNewCapacity"));
    assert_eq!(message, "0/10 virtual pods required new capacity, 8 failed");
}

#[test]
fn with_the_gate_off_buffers_do_nothing() {
    let text = scenario(false, "", "{podTemplateRef: {name: worker}, replicas: 3}", "");
    let r = report(&text);
    assert!(r.nodes.is_empty(), "{:?}", r.nodes);
    assert_eq!(buffer(&world(&text, 5)).status, None, "no controller writes its status");
}

#[test]
fn a_missing_template_is_reported_and_launches_nothing() {
    let text = scenario(true, "", "{podTemplateRef: {name: nope}, replicas: 3}", "");
    let w = world(&text, 5);
    let b = buffer(&w);
    let (status, reason, message) = condition(&b, COND_READY_FOR_PROVISIONING);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PodTemplateNotFound"));
    assert_eq!(message, "podtemplates \"nope\" not found");
    assert!(live_nodes(&w).is_empty());
}

#[test]
fn a_deleted_buffer_lets_emptiness_take_its_nodes() {
    let text = scenario(
        true,
        "",
        "{podTemplateRef: {name: worker}, replicas: 3}",
        "events:\n  - at: 5m\n    delete: [{kind: CapacityBuffer, name: spare, namespace: default}]\n",
    );
    let r = report(&text);
    assert_eq!(r.nodes.len(), 1, "{:?}", r.nodes);
    let gone = r.nodes[0].deleted_at.expect("emptiness removed the buffer's node once the buffer was gone");
    assert!(gone > 300.0, "{gone}");
}

/// Why each node is (not) being disrupted, as the dashboard asks the world.
fn explain(
    w: &mut karpenter_tui::sim::world::World,
) -> std::collections::BTreeMap<String, karpenter_tui::engine::disruption::consolidation::Outlook> {
    tick::immediate(tick::explain(w)).expect("the simulated world answers at once")
}
