//! Packing strategies on the issue #19 workload (plain pods, one on-demand amd64 NodePool over three zones, the
//! embedded AWS catalog): solve time for `upstream` and `cost` at 1,000 and 20,000 pods, and each plan's cost as a
//! ratio to the LP lower bound (printed once per size before timing).
//!
//! `cargo bench --bench packing`; one size: `cargo bench --bench packing -- 20000`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::InstanceType;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::packing::Packing;
use karpenter_tui::engine::scheduling::cost::lower_bound;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::workload::{plain_pods_seeded, shared};
use karpenter_tui::engine::scheduling::{Input, SchedulerOptions, solve};

fn pool() -> NodePool {
    serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}\n",
    )
    .expect("valid nodepool")
}

fn packing(c: &mut Criterion) {
    let catalog = aws_catalog("us-east-1", None, None, 0).expect("embedded catalog");
    let pools = vec![pool()];
    let types: BTreeMap<String, Vec<Arc<InstanceType>>> =
        [("default".to_string(), catalog.instance_types.clone())].into();
    let usage = BTreeMap::new();
    let node_labels = BTreeMap::new();
    let volumes = VolumeIndex::default();
    let input = |packing| Input {
        nodepools: &pools,
        instance_types: &types,
        policy: &catalog.label_policy,
        nodes: &[],
        nodepool_usage: &usage,
        bound_pods: &[],
        node_labels: &node_labels,
        daemonsets: &[],
        volumes: &volumes,
        options: SchedulerOptions { packing, ..Default::default() },
    };
    let mut group = c.benchmark_group("packing");
    group.sample_size(10);
    for n in [1_000usize, 20_000] {
        let pods = plain_pods_seeded(n, 1);
        let bound = {
            let up = input(Packing::Upstream);
            let r = solve(&up, &shared(&pods));
            lower_bound(&up, &shared(&pods), &r).expect("the LP has an optimum")
        };
        for strategy in [Packing::Upstream, Packing::Cost] {
            let inp = input(strategy);
            let r = solve(&inp, &shared(&pods));
            assert!(r.failures.is_empty(), "{strategy}: {} pods failed", r.failures.len());
            let price: f64 = r.new_claims.iter().filter_map(|c| c.cheapest_price()).sum();
            println!(
                "packing/{strategy}/{n}: ${price:.2}/h on {} nodes, {:.3}x the LP bound ${bound:.2}/h",
                r.new_claims.len(),
                price / bound
            );
            group.bench_with_input(BenchmarkId::new(strategy.as_str(), n), &pods, |b, pods| {
                b.iter(|| black_box(solve(&inp, &shared(pods))));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, packing);
criterion_main!(benches);
