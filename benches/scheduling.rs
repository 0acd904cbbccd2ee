//! Upstream's scheduling benchmark shape (shared/spec/engine.md §8.1): 400 fake instance types, one NodePool with
//! huge limits, no existing nodes, and "diverse" pods in fifths — plain, zonal spread (maxSkew 1, DoNotSchedule),
//! hostname spread, zonal self-affinity, hostname self anti-affinity — with CPU in {100m, 250m, 500m, 1, 1.5} and
//! memory in {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}. Measures one full solve; criterion reports pods per second.
//!
//! `cargo bench --bench scheduling`; the pod counts can be narrowed with criterion's filter, e.g.
//! `cargo bench --bench scheduling -- 20000`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::fake;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::workload::{diverse_pods, shared};
use karpenter_tui::engine::scheduling::{Input, SchedulerOptions, solve};

fn bench_nodepool() -> NodePool {
    serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  limits: {cpu: \"10000000\", memory: 10000000Gi}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
    )
    .expect("valid nodepool")
}

fn scheduling(c: &mut Criterion) {
    let catalog = fake::fake_catalog_with(fake::fake_instance_types(400));
    let pools = vec![bench_nodepool()];
    let types: BTreeMap<String, Vec<Arc<_>>> = [("default".to_string(), catalog.instance_types.clone())].into();
    let usage = BTreeMap::new();
    let node_labels = BTreeMap::new();
    let volumes = VolumeIndex::default();
    let input = Input {
        nodepools: &pools,
        instance_types: &types,
        policy: &catalog.label_policy,
        nodes: &[],
        nodepool_usage: &usage,
        bound_pods: &[],
        node_labels: &node_labels,
        daemonsets: &[],
        volumes: &volumes,
        options: SchedulerOptions::default(),
    };
    let mut group = c.benchmark_group("scheduling");
    group.sample_size(10);
    for n in [100usize, 1_000, 5_000, 20_000] {
        let pods = diverse_pods(n);
        // Every pod of the mix must schedule, as upstream's benchmark requires.
        let r = solve(&input, &shared(&pods));
        assert!(r.failures.is_empty(), "{} pods failed to schedule", r.failures.len());
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &pods, |b, pods| {
            b.iter(|| black_box(solve(&input, &shared(pods))));
        });
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
