//! Properties of disruption over randomly generated clusters and budgets:
//! - no pass disrupts more nodes of a NodePool than its budget allows;
//! - a voluntary command never leaves a running pod without a place (checked independently by provisioning the
//!   cluster as it would be after the command);
//! - in approve mode nothing voluntary happens without an approval;
//! - all of it under both packing strategies, repack's several-for-several commands included.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodCondition;
use karpenter_tui::engine::disruption::Method;
use karpenter_tui::engine::lifecycle::ms_time;
use karpenter_tui::engine::provisioning::provision;
use karpenter_tui::engine::scheduling::SchedulerOptions;
use karpenter_tui::engine::stored_pod::StoredPod;
use karpenter_tui::sim::report::{DecisionDetail, DecisionState};
use karpenter_tui::sim::run::{run, run_world};
use karpenter_tui::sim::scenario::parse_scenario;
use proptest::prelude::*;

const TYPES: &str = r#"
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      offerings: [{zone: z1, capacityType: on-demand, price: 0.05}, {zone: z2, capacityType: on-demand, price: 0.05}]
    - name: medium
      cpu: "4"
      memory: 8Gi
      pods: 20
      offerings: [{zone: z1, capacityType: on-demand, price: 0.1}, {zone: z2, capacityType: on-demand, price: 0.1}]
    - name: large
      cpu: "8"
      memory: 16Gi
      pods: 40
      offerings: [{zone: z1, capacityType: on-demand, price: LARGE}, {zone: z2, capacityType: on-demand, price: LARGE}]
"#;

const BUDGETS: [&str; 6] = ["0", "1", "2", "10%", "50%", "100%"];
const TYPE_NAMES: [&str; 3] = ["small", "medium", "large"];
const CPUS: [&str; 6] = ["100m", "500m", "1", "1500m", "2", "2500m"];

/// What the generated clusters look like.
#[derive(Clone)]
struct Shape {
    /// Node types, as indices into [`TYPE_NAMES`].
    types: std::ops::Range<usize>,
    /// Pods per node.
    pods: std::ops::Range<usize>,
    /// Pod CPU requests, as indices into [`CPUS`].
    cpus: std::ops::Range<usize>,
    /// The `large` type's price, $/h (0.2 prices it like the others).
    large_price: f64,
}

/// Mixed nodes with zero to three small pods each, all types priced alike.
const MIXED: Shape = Shape { types: 0..3, pods: 0..4, cpus: 0..4, large_price: 0.2 };

/// Overpriced large nodes with three pods of 1.5–2.5 CPUs: more than a medium holds, less than a large, so no single
/// cheaper node takes a node's pods (upstream's methods find nothing) and several smaller ones do (repack).
const OVERPRICED: Shape = Shape { types: 2..3, pods: 3..4, cpus: 3..6, large_price: 0.6 };

/// A node: (type index, zone index, pod cpu indexes).
type NodeSpec = (usize, usize, Vec<usize>);

#[derive(Debug, Clone)]
struct Cluster {
    /// Per pool: budget index and its nodes.
    pools: Vec<(usize, Vec<NodeSpec>)>,
}

/// Clusters of one or two NodePools of up to five nodes.
fn cluster(shape: &Shape) -> impl Strategy<Value = Cluster> + use<> {
    let node = (shape.types.clone(), 0..2usize, prop::collection::vec(shape.cpus.clone(), shape.pods.clone()));
    let pool = (0..BUDGETS.len(), prop::collection::vec(node, 1..6));
    prop::collection::vec(pool, 1..3).prop_map(|pools| Cluster { pools })
}

/// The scenario for `c` under `packing`, the `large` type at `large_price` $/h.
fn scenario(c: &Cluster, packing: &str, large_price: f64) -> String {
    let mut objects = String::from("objects:\n");
    let mut nodes = String::from("nodes:\n");
    for (p, (budget, ns)) in c.pools.iter().enumerate() {
        objects.push_str(&format!(
            "  - apiVersion: karpenter.sh/v1\n    kind: NodePool\n    metadata: {{name: p{p}}}\n    spec:\n      disruption: {{budgets: [{{nodes: \"{}\"}}]}}\n      template:\n        spec:\n          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n",
            BUDGETS[*budget]
        ));
        for (i, (t, z, pods)) in ns.iter().enumerate() {
            let node = format!("p{p}-n{i}");
            nodes.push_str(&format!(
                "  - {{name: {node}, instanceType: {}, zone: z{}, capacityType: on-demand, nodePool: p{p}}}\n",
                TYPE_NAMES[*t],
                z + 1
            ));
            for (k, cpu) in pods.iter().enumerate() {
                objects.push_str(&format!(
                    "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: {node}-pod{k}, namespace: default}}\n    spec:\n      nodeName: {node}\n      containers: [{{name: c, image: x, resources: {{requests: {{cpu: {}, memory: 256Mi}}}}}}]\n",
                    CPUS[*cpu]
                ));
            }
        }
    }
    let types = TYPES.replace("LARGE", &large_price.to_string());
    format!("name: prop\nuntil: 10m\nsettings: {{disruption: approve, packing: {packing}}}\n{types}{objects}{nodes}")
}

/// What the budget allows for a pool of `n` nodes with none disrupting.
fn allowed(budget: &str, n: usize) -> usize {
    match budget.strip_suffix('%') {
        Some(p) => (p.parse::<usize>().unwrap() * n).div_ceil(100),
        None => budget.parse().unwrap(),
    }
}

fn mark_pending(p: &mut StoredPod) {
    p.node_name = None;
    let st = p.status.get_or_insert_with(Default::default);
    st.phase = Some("Pending".into());
    st.conditions = Some(vec![PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        ..Default::default()
    }]);
}

/// Proposals, proposals with replacements, and repack proposals seen over the generated clusters.
#[derive(Debug, Default)]
struct Seen {
    proposals: usize,
    replacements: usize,
    repacks: usize,
}

/// Runs the properties over 32 generated clusters under `packing` (a fixed seed: besides the properties, the tests
/// check that the generator produces replacements at all, and with a random seed some 32-cluster samples, about
/// one run in thirty, happen to have none).
fn check_disruption(packing: &str, shape: &Shape) -> Seen {
    let config = ProptestConfig {
        cases: 32,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b74_7569),
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let proposals = std::cell::Cell::new(0usize);
    let replacements = std::cell::Cell::new(0usize);
    let repacks = std::cell::Cell::new(0usize);
    let outcome = runner.run(&cluster(shape), |c| {
        let text = scenario(&c, packing, shape.large_price);
        let s = parse_scenario(&text, "prop.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let w = run_world(&s, Some(Duration::ZERO)).unwrap();
        // The pass at t=0 saw exactly the generated cluster: every node initialized, none disrupting.
        for p in w.controller().orchestrator().gate().awaiting() {
            proposals.set(proposals.get() + 1);
            replacements.set(replacements.get() + usize::from(!p.command.replacements.is_empty()));
            repacks.set(repacks.get() + usize::from(p.command.method == Method::Repack));
            let mut per_pool: BTreeMap<&str, usize> = BTreeMap::new();
            for cand in &p.command.candidates {
                *per_pool.entry(cand.nodepool.as_str()).or_default() += 1;
            }
            for (pool, n) in per_pool {
                let idx: usize = pool[1..].parse().unwrap();
                let (budget, nodes) = &c.pools[idx];
                prop_assert!(
                    n <= allowed(BUDGETS[*budget], nodes.len()),
                    "{n} nodes of {pool} with budget {} over {} nodes",
                    BUDGETS[*budget],
                    nodes.len()
                );
            }

            // Independently: the cluster as it would be after the command. Candidates deleting, replacements
            // in flight, the candidates' pods waiting for a place. Provisioning must place all of them without
            // any failure.
            let mut snap = w.cluster.snapshot();
            let names = p.command.node_names();
            for n in snap.nodes.iter_mut().filter(|n| names.contains(n.metadata.name.as_ref().unwrap())) {
                std::sync::Arc::make_mut(n).metadata.deletion_timestamp = Some(ms_time(w.now));
            }
            for (i, r) in p.command.replacements.iter().enumerate() {
                let mut nc = r.nodeclaim.clone();
                nc.metadata.name = Some(format!("replacement-{i}"));
                snap.nodeclaims.push(nc.into());
            }
            let mut moved = Vec::new();
            for pod in snap.pods.iter_mut() {
                let on = pod.node_name.clone().unwrap_or_default();
                if names.contains(&on) {
                    moved.push(pod.metadata.name.clone().unwrap());
                    mark_pending(std::sync::Arc::make_mut(pod));
                }
            }
            let catalogs: BTreeMap<_, _> = snap
                .nodepools
                .iter()
                .map(|np| (np.metadata.name.clone().unwrap(), w.catalog().instance_types.clone()))
                .collect();
            let result = provision(&snap.view(), &catalogs, &w.catalog().label_policy, SchedulerOptions::default());
            let failed: Vec<String> = result.failures().iter().map(|(p, why)| format!("{}: {why}", p.name)).collect();
            prop_assert!(failed.is_empty(), "{} leaves pods without a place: {failed:?}", p.command.summary());
            if p.command.replacements.is_empty() {
                prop_assert!(result.results.new_claims.is_empty(), "a delete must not need new capacity");
            }
            if p.command.method == Method::Repack {
                // Its replacements are all the new capacity its pods need.
                prop_assert!(result.results.new_claims.is_empty(), "{} needs more capacity", p.command.summary());
            }
        }

        // Without an approval nothing voluntary is executed and no node goes away.
        let r = run(&s, None, None).unwrap();
        for d in &r.decisions {
            if let DecisionDetail::Disruption { state, .. } = &d.detail {
                prop_assert!(matches!(state, DecisionState::AwaitingApproval | DecisionState::Invalidated), "{d:?}");
            }
        }
        prop_assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{packing}: {e}");
    }
    Seen { proposals: proposals.get(), replacements: replacements.get(), repacks: repacks.get() }
}

#[test]
fn budgets_hold_pods_keep_a_place_and_approve_mode_waits() {
    let seen = check_disruption("upstream", &MIXED);
    // The generator must actually produce disruptions, deletes and replacements alike.
    assert!(seen.proposals >= 8, "only {} proposals in 32 clusters", seen.proposals);
    assert!(seen.replacements >= 1, "no replacement among {} proposals", seen.proposals);
    assert_eq!(seen.repacks, 0, "repack is cost packing's alone");
}

/// The same under cost packing, where repack (several nodes to several cheaper ones) joins the methods. `large` is
/// overpriced, so a large node whose pods no single cheaper node holds is worth replacing by several smaller ones.
#[test]
fn under_cost_packing_repacks_too_hold_budgets_and_keep_pods_a_place() {
    let seen = check_disruption("cost", &OVERPRICED);
    assert!(seen.proposals >= 8, "only {} proposals in 32 clusters", seen.proposals);
    assert!(seen.repacks >= 1, "no repack among {} proposals: {seen:?}", seen.proposals);
}
