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
use karpenter_tui::engine::labels;
use karpenter_tui::engine::resources::{CPU, MEMORY, PODS, Resources};
use karpenter_tui::engine::scheduling::pod::{AffinityTerm, Namespaces, PodData, SpreadConstraint};
use karpenter_tui::engine::scheduling::selector::Selector;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::{Input, SchedulerOptions, solve};

/// A small deterministic generator (the benchmark must not depend on a seed-less RNG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

const CPUS: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMS: [i64; 6] = [100 << 20, 256 << 20, 512 << 20, 1 << 30, 2 << 30, 4 << 30];

fn base(i: usize, rng: &mut Lcg, labels_: &[(&str, String)]) -> PodData {
    let mut requests = Resources::default();
    requests.set_value(CPU, rng.pick(&CPUS));
    requests.set_value(MEMORY, rng.pick(&MEMS));
    requests.set_value(PODS, 1);
    PodData {
        uid: format!("pod-{i:06}"),
        namespace: "default".into(),
        name: format!("pod-{i:06}"),
        labels: labels_.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        created: 0,
        requests,
        tolerations: Vec::new(),
        node_selector: Default::default(),
        required_terms: Vec::new(),
        preferred_terms: Vec::new(),
        spreads: Vec::new(),
        affinity: Vec::new(),
        preferred_affinity: Vec::new(),
        anti_affinity: Vec::new(),
        preferred_anti_affinity: Vec::new(),
        host_ports: Vec::new(),
        pvcs: Vec::new(),
        tolerate_prefer_no_schedule: false,
        priority: 0,
        daemonset: None,
    }
}

fn selector(labels_: &[(&str, String)]) -> Selector {
    labels_.iter().fold(Selector::default(), |s, (k, v)| s.with_label(k, v))
}

/// The diverse pod mix, deterministic for a given count.
pub fn diverse_pods(count: usize) -> Vec<PodData> {
    let mut rng = Lcg(42);
    let fifth = count / 5;
    let mut pods = Vec::with_capacity(count);
    let values = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    for i in 0..count {
        let kind = i.checked_div(fifth).unwrap_or(0).min(4);
        let pod = match kind {
            0 => base(i, &mut rng, &[]),
            1 | 2 => {
                let l = vec![("my-label", rng.pick(&values).to_string())];
                let mut p = base(i, &mut rng, &l);
                let sel = vec![("my-label", rng.pick(&values).to_string())];
                p.spreads.push(SpreadConstraint {
                    key: if kind == 1 { labels::ZONE.into() } else { labels::HOSTNAME.into() },
                    max_skew: 1,
                    min_domains: None,
                    required: true,
                    selector: selector(&sel),
                    honor_node_affinity: true,
                    honor_taints: false,
                });
                p
            }
            3 => {
                let l = vec![("my-affinity", rng.pick(&values).to_string())];
                let mut p = base(i, &mut rng, &l);
                p.affinity.push(AffinityTerm {
                    key: labels::ZONE.into(),
                    selector: selector(&l),
                    namespaces: Namespaces::Some(vec!["default".into()]),
                    weight: 0,
                });
                p
            }
            _ => {
                let l = vec![("app", "nginx".to_string())];
                let mut p = base(i, &mut rng, &l);
                p.anti_affinity.push(AffinityTerm {
                    key: labels::HOSTNAME.into(),
                    selector: selector(&l),
                    namespaces: Namespaces::Some(vec!["default".into()]),
                    weight: 0,
                });
                p
            }
        };
        pods.push(pod);
    }
    pods
}

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
        let r = solve(&input, &pods);
        assert!(r.failures.is_empty(), "{} pods failed to schedule", r.failures.len());
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &pods, |b, pods| {
            b.iter(|| black_box(solve(&input, pods)));
        });
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
