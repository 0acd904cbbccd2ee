//! Capacity reservations through the simulated world (engine-v1x.md §4): the scheduler's strict reservation
//! handling, pinning, the simulated EC2's accounting, consolidation into free reservations, capacity blocks
//! expiring 40 minutes before their end, reservation interruptions, and the gate.

use karpenter_tui::sim::report::{DecisionDetail, DisruptionMethod, Report};
use karpenter_tui::sim::run::run;
use karpenter_tui::sim::scenario::parse_scenario;

/// small (1 pod per node) and medium, each with a 1-instance reservation and on-demand offerings.
const TYPES: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      offerings:
        - {zone: z1, capacityType: reserved, price: 0.00000001, reservationId: cr-small, reservationCapacity: 1}
        - {zone: z1, capacityType: on-demand, price: 0.1}
    - name: medium
      cpu: "4"
      memory: 8Gi
      pods: 10
      offerings:
        - {zone: z1, capacityType: reserved, price: 0.00000002, reservationId: cr-medium, reservationCapacity: 1}
        - {zone: z1, capacityType: on-demand, price: 0.2}
"#;

fn pool(name: &str, weight: u32) -> String {
    format!(
        r#"  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: {name}}}
    spec:
      weight: {weight}
      disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}}
      template:
        spec:
          requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}}]
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
"#
    )
}

/// `replicas` pods of 1 CPU, one per node (hostname anti-affinity).
fn app(replicas: u32) -> String {
    format!(
        r#"  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          affinity:
            podAntiAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                - {{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: app}}}}}}
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
"#
    )
}

fn simulate(text: &str) -> Report {
    let s = parse_scenario(text, "reserved.yaml").unwrap_or_else(|e| panic!("{e}"));
    run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

/// (instance type, capacity type, reservation id label, node pool) of the nodes, in creation order.
fn nodes(r: &Report) -> Vec<(String, String, String, String)> {
    let mut n: Vec<_> = r.nodes.iter().collect();
    n.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then(a.name.cmp(&b.name)));
    n.into_iter()
        .map(|n| {
            (
                n.instance_type.clone(),
                n.capacity_type.clone(),
                n.labels.get("karpenter.k8s.aws/capacity-reservation-id").cloned().unwrap_or_default(),
                n.node_pool.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn t(it: &str, ct: &str, id: &str, pool: &str) -> (String, String, String, String) {
    (it.into(), ct.into(), id.into(), pool.into())
}

#[test]
fn reservations_are_used_first_one_claim_per_pass_without_falling_back() {
    // › "shouldn't fallback to on-demand or spot when compatible reserved offerings are available": the first
    // claim holds both reservations (any of its options could use either), so the other pods wait; the next pass
    // uses the medium reservation, and only then does a pod go on-demand.
    let text = format!("name: r1\nuntil: 10m\n{TYPES}objects:\n{}{}", pool("default", 10), app(3));
    let r = simulate(&text);
    assert_eq!(
        nodes(&r),
        [
            t("small", "reserved", "cr-small", "default"),
            t("medium", "reserved", "cr-medium", "default"),
            t("small", "on-demand", "", "default"),
        ]
    );
    let created: Vec<f64> = r.nodes.iter().map(|n| n.created_at).collect();
    assert!(created.iter().all(|c| created.iter().filter(|d| *d == c).count() == 1), "one per pass: {created:?}");
    assert!(r.pending.is_empty());
    let reserved = r.nodes.iter().find(|n| n.instance_type == "small" && n.capacity_type == "reserved").unwrap();
    assert_eq!(reserved.labels.get("karpenter.k8s.aws/capacity-reservation-type").map(String::as_str), Some("default"));
    assert_eq!(
        reserved.labels.get("karpenter.k8s.aws/capacity-reservation-interruptible").map(String::as_str),
        Some("false")
    );
}

#[test]
fn a_held_reservation_does_not_let_pods_fall_back_to_a_lower_weight_pool() {
    // › "shouldn't fallback to a lower weight NodePool if a reserved offering is available": weight 100 with the
    // small reservation only (medium's capacity 0), weight 50: the second pod waits, then goes on-demand in the
    // weight-100 pool, never to the weight-50 one.
    let types = TYPES.replace(
        "reservationId: cr-medium, reservationCapacity: 1",
        "reservationId: cr-medium, reservationCapacity: 0",
    );
    let text = format!("name: r2\nuntil: 10m\n{types}objects:\n{}{}{}", pool("heavy", 100), pool("light", 50), app(2));
    let r = simulate(&text);
    assert_eq!(nodes(&r), [t("small", "reserved", "cr-small", "heavy"), t("small", "on-demand", "", "heavy")]);
    let mut created: Vec<f64> = r.nodes.iter().map(|n| n.created_at).collect();
    created.sort_by(f64::total_cmp);
    assert!(created[1] > created[0], "the second pod waited for a later pass: {created:?}");
}

#[test]
fn an_on_demand_node_is_consolidated_into_a_free_reservation() {
    // › "can consolidate into reserved capacity for the same instance pool": an on-demand small node, and a small
    // reservation with room: single-node consolidation replaces it with the reserved small.
    let text = format!(
        "name: r3\nuntil: 10m\n{TYPES}objects:\n{}{}nodes:\n  - {{name: od, instanceType: small, zone: z1, capacityType: on-demand, nodePool: default}}\n",
        pool("default", 10),
        app(1)
    );
    let r = simulate(&text);
    let d = r.decisions.iter().find_map(|d| match &d.detail {
        DecisionDetail::Disruption { method, candidates, .. } => Some((*method, candidates.clone())),
        _ => None,
    });
    assert_eq!(d, Some((DisruptionMethod::SingleNode, vec!["od".to_string()])), "{:?}", r.decisions);
    let live: Vec<_> = nodes(&r).into_iter().collect();
    let od = r.nodes.iter().find(|n| n.name == "od").unwrap();
    assert!(od.deleted_at.is_some());
    assert!(live.contains(&t("small", "reserved", "cr-small", "default")), "{live:?}");
}

#[test]
fn a_capacity_block_is_left_40_minutes_before_its_end_and_not_launched_into_after() {
    // A capacity block of 2 small instances ending at 2h: the pod's node runs in it until 1h20m, when its claim
    // is deleted at once (a PDB would not hold it) and the pod moves to on-demand.
    // (The medium reservation is full, so the only reservation is the block.)
    let types = TYPES
        .replace(
            "reservationId: cr-small, reservationCapacity: 1}",
            "reservationId: cr-small, reservationCapacity: 2, reservationType: capacity-block, endsAt: 2h}",
        )
        .replace(
            "reservationId: cr-medium, reservationCapacity: 1",
            "reservationId: cr-medium, reservationCapacity: 0",
        );
    let pdb = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\n";
    let text = format!(
        "name: r4\nuntil: 3h\n{types}objects:\n{}{}{pdb}",
        pool("default", 10).replace("consolidateAfter: 0s", "consolidateAfter: Never"),
        app(1)
    );
    let r = simulate(&text);
    let block = r.nodes.iter().find(|n| n.capacity_type == "reserved").expect("launched into the block");
    assert_eq!(
        block.labels.get("karpenter.k8s.aws/capacity-reservation-type").map(String::as_str),
        Some("capacity-block")
    );
    let gone = block.deleted_at.expect("deleted before the block ends");
    assert!((4800.0..4900.0).contains(&gone), "at end − 40 min (4800 s), got {gone}");
    // Reported as the cloud taking the node back, at the expiry.
    let taken = r.decisions.iter().find(|d| match &d.detail {
        DecisionDetail::Disruption { method: DisruptionMethod::Interruption, candidates, .. } => {
            candidates.contains(&block.name)
        }
        _ => false,
    });
    assert!(taken.is_some_and(|d| (4800.0..4801.0).contains(&d.at)), "{:?}", r.decisions);
    let after: Vec<_> = r.nodes.iter().filter(|n| n.created_at >= 4800.0).collect();
    assert!(after.iter().all(|n| n.capacity_type == "on-demand"), "the expiring block takes no launch: {after:?}");
    assert!(!after.is_empty() && r.pending.is_empty());
}

#[test]
fn a_reservation_interruption_deletes_the_node_and_the_reservation_takes_no_more() {
    // An interruptible small reservation of 3; the medium one is full.
    let types = TYPES
        .replace(
            "reservationCapacity: 1}\n        - {zone: z1, capacityType: on-demand, price: 0.1}",
            "reservationCapacity: 3, interruptible: true}\n        - {zone: z1, capacityType: on-demand, price: 0.1}",
        )
        .replace(
            "reservationId: cr-medium, reservationCapacity: 1",
            "reservationId: cr-medium, reservationCapacity: 0",
        );
    let events = "events:\n  - at: 5m\n    interrupt: {node: NODE, kind: capacity-reservation-interrupted}\n";
    let base = format!("name: r5\nuntil: 10m\n{types}objects:\n{}{}", pool("default", 10), app(1));
    let first = simulate(&base);
    let node = first.nodes[0].name.clone();
    assert_eq!(first.nodes[0].capacity_type, "reserved");
    assert_eq!(
        first.nodes[0].labels.get("karpenter.k8s.aws/capacity-reservation-interruptible").map(String::as_str),
        Some("true")
    );
    let r = simulate(&format!("{base}{}", events.replace("NODE", &node)));
    assert!(r.nodes.iter().find(|n| n.name == node).unwrap().deleted_at.is_some());
    let replacement: Vec<_> = r.nodes.iter().filter(|n| n.name != node).collect();
    assert!(!replacement.is_empty() && replacement.iter().all(|n| n.capacity_type != "reserved"), "{replacement:?}");
    assert!(
        r.decisions
            .iter()
            .any(|d| matches!(&d.detail, DecisionDetail::Disruption { method: DisruptionMethod::Interruption, .. }))
    );
}

#[test]
fn with_the_gate_off_reservations_do_not_exist() {
    let text = format!(
        "name: r6\nuntil: 5m\nsettings:\n  featureGates: {{ReservedCapacity: false}}\n{TYPES}objects:\n{}{}",
        pool("default", 10),
        app(2)
    );
    let r = simulate(&text);
    assert_eq!(nodes(&r), [t("small", "on-demand", "", "default"), t("small", "on-demand", "", "default")]);
}

#[test]
fn the_shipped_scenario_uses_reservations_first_and_leaves_the_block_before_it_ends() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/reserved.yaml")).expect("file");
    let r = simulate(&text);
    let reserved: Vec<_> = r.nodes.iter().filter(|n| n.capacity_type == "reserved").collect();
    let other: Vec<_> = r.nodes.iter().filter(|n| n.capacity_type != "reserved").collect();
    assert_eq!(reserved.len(), 4, "both reservations filled: {reserved:?}");
    let last_reserved = reserved.iter().map(|n| n.created_at).fold(0.0, f64::max);
    assert!(other.iter().all(|n| n.created_at > last_reserved), "reservations before anything else");
    let block: Vec<_> = reserved
        .iter()
        .filter(|n| {
            n.labels.get("karpenter.k8s.aws/capacity-reservation-type").map(String::as_str) == Some("capacity-block")
        })
        .collect();
    assert_eq!(block.len(), 2);
    assert!(block.iter().all(|n| n.deleted_at.is_some_and(|d| (8400.0..8410.0).contains(&d))), "{block:?}");
    let odcr: Vec<_> = reserved.iter().filter(|n| !block.iter().any(|b| b.name == n.name)).collect();
    assert!(odcr.iter().all(|n| n.deleted_at.is_none()), "the ODCR has no end");
    assert!(other.iter().all(|n| n.capacity_type == "spot"), "spot is cheaper than on-demand: {other:?}");
    assert!(r.pending.is_empty());
    let web: Vec<_> = r.pods.iter().filter(|p| p.deleted_at.is_none()).collect();
    assert_eq!(web.len(), 6);
    assert!(web.iter().all(|p| p.node.as_ref().is_some_and(|n| !block.iter().any(|b| &b.name == n))));
}

#[test]
fn a_scenario_node_in_a_reservation_counts_against_it() {
    // The one-instance small reservation is taken by the scenario's own reserved node: the pod that needs a node
    // goes on-demand, and the node carries the reservation's labels.
    let types = TYPES.replace(
        "reservationId: cr-medium, reservationCapacity: 1",
        "reservationId: cr-medium, reservationCapacity: 0",
    );
    let text = format!(
        "name: r7\nuntil: 5m\n{types}objects:\n{}{}nodes:\n  - {{name: held, instanceType: small, zone: z1, capacityType: reserved, nodePool: default}}\n",
        pool("default", 10).replace("consolidateAfter: 0s", "consolidateAfter: Never"),
        app(2)
    );
    let r = simulate(&text);
    let held = r.nodes.iter().find(|n| n.name == "held").unwrap();
    assert_eq!(held.labels.get("karpenter.k8s.aws/capacity-reservation-id").map(String::as_str), Some("cr-small"));
    let new: Vec<_> = r.nodes.iter().filter(|n| n.name != "held").map(|n| n.capacity_type.as_str()).collect();
    assert_eq!(new, ["on-demand"]);
}

#[test]
fn an_aws_catalog_takes_capacity_reservations_priced_as_upstream() {
    let text = format!(
        r#"name: aws-reserved
until: 10m
region: us-east-1
catalog:
  source: aws
  capacityReservations:
    - {{id: cr-0abc1234, instanceType: m5.large, zone: us-east-1a, count: 2}}
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      template:
        spec:
          requirements:
            - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
            - {{key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}}
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
{}"#,
        app(3)
    );
    let r = simulate(&text);
    let mut kinds: Vec<(String, String)> = r.nodes.iter().map(|n| (n.capacity_type.clone(), n.zone.clone())).collect();
    kinds.sort();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert_eq!(kinds[0].0, "on-demand");
    assert_eq!(
        kinds[1..],
        [("reserved".to_string(), "us-east-1a".to_string()), ("reserved".to_string(), "us-east-1a".to_string())]
    );
    let reserved: Vec<_> = r.nodes.iter().filter(|n| n.capacity_type == "reserved").collect();
    assert_eq!(reserved.len(), 2, "{:?}", r.nodes);
    let od_price = r.nodes.iter().find(|n| n.capacity_type == "on-demand").map(|n| n.price_per_hour).unwrap();
    assert!((reserved[0].price_per_hour - 0.096 / 10_000_000.0).abs() < 1e-12, "{}", reserved[0].price_per_hour);
    assert!((od_price - 0.096).abs() < 1e-9, "m5.large on-demand in us-east-1: {od_price}");

    // A reservation of a type the catalog lacks is refused, naming it.
    let bad = text.replace("instanceType: m5.large, zone", "instanceType: m9.huge, zone");
    let s = parse_scenario(&bad, "bad.yaml").unwrap();
    let e = run(&s, None, None).unwrap_err().to_string();
    assert!(e.contains("catalog.capacityReservations[0]") && e.contains("m9.huge"), "{e}");
}

fn world_at(text: &str, seconds: u64) -> karpenter_tui::sim::world::World {
    let s = parse_scenario(text, "reserved.yaml").unwrap_or_else(|e| panic!("{e}"));
    karpenter_tui::sim::run::run_world(&s, Some(std::time::Duration::from_secs(seconds)))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// (capacity type, reservation id, reservation type, interruptible) labels of the world's only live claim and node.
fn live_labels(w: &karpenter_tui::sim::world::World) -> [[Option<String>; 4]; 2] {
    let keys = [
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/capacity-reservation-id",
        "karpenter.k8s.aws/capacity-reservation-type",
        "karpenter.k8s.aws/capacity-reservation-interruptible",
    ];
    let pick = |l: Option<&std::collections::BTreeMap<String, String>>| keys.map(|k| l.and_then(|l| l.get(k)).cloned());
    let claims: Vec<_> = w.cluster.nodeclaims.values().filter(|c| c.metadata.deletion_timestamp.is_none()).collect();
    let nodes: Vec<_> = w.cluster.nodes.values().filter(|n| n.metadata.deletion_timestamp.is_none()).collect();
    assert_eq!((claims.len(), nodes.len()), (1, 1), "one claim and one node");
    [pick(claims[0].metadata.labels.as_ref()), pick(nodes[0].metadata.labels.as_ref())]
}

#[test]
fn a_node_whose_reservation_ended_becomes_on_demand_and_drifts_only_where_on_demand_is_not_allowed() {
    // The small reservation (1 instance) ends at 1h; the medium one is full. EC2 keeps the instance running as
    // on-demand: the claim and node are relabelled on the next instance list (within 2 minutes), keeping
    // `-interruptible`, and the run is billed on-demand from the end.
    let types = TYPES
        .replace(
            "reservationId: cr-small, reservationCapacity: 1}",
            "reservationId: cr-small, reservationCapacity: 1, endsAt: 1h}",
        )
        .replace(
            "reservationId: cr-medium, reservationCapacity: 1",
            "reservationId: cr-medium, reservationCapacity: 0",
        );
    let text = |pool: String, until: &str| format!("name: r7\nuntil: {until}\n{types}objects:\n{pool}{}", app(1));
    let keep = pool("default", 10).replace("consolidateAfter: 0s", "consolidateAfter: Never");
    let s = |v: &str| Some(v.to_string());
    let before = world_at(&text(keep.clone(), "2h"), 59 * 60);
    let reserved = [s("reserved"), s("cr-small"), s("default"), s("false")];
    assert_eq!(live_labels(&before), [reserved.clone(), reserved]);
    let after = world_at(&text(keep.clone(), "2h"), 63 * 60);
    let on_demand = [s("on-demand"), None, None, s("false")];
    assert_eq!(live_labels(&after), [on_demand.clone(), on_demand]);
    // The pool allows on-demand: not drifted, and the same node carries on.
    let r = simulate(&text(keep.clone(), "2h"));
    assert_eq!(r.nodes.len(), 1, "{:?}", r.nodes);
    assert!(r.nodes[0].deleted_at.is_none());
    // 1h at the reserved price, 1h at the on-demand 0.1.
    assert!((r.cost.total - (0.00000001 + 0.1)).abs() < 1e-6, "{}", r.cost.total);
    assert!((r.cost.final_per_hour - 0.1).abs() < 1e-9, "{}", r.cost.final_per_hour);

    // A reserved-only pool: the relabelled claim no longer meets the pool's requirements (upstream's drift
    // compares the pool's requirements with the claim's labels), so it is drifted.
    let strict = keep.replace("values: [reserved, on-demand]", "values: [reserved]");
    let w = world_at(&text(strict, "2h"), 66 * 60);
    let claim = w.cluster.nodeclaims.values().find(|c| c.metadata.deletion_timestamp.is_none()).unwrap();
    let drifted = claim.condition("Drifted").expect("drifted");
    assert_eq!((drifted.status.as_str(), drifted.reason.as_deref()), ("True", Some("RequirementsDrifted")));
}
