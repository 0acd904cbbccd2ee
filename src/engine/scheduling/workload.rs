//! Synthetic workloads for the scheduling benchmark and the scheduler's own tests: upstream's "diverse pods" mix
//! (engine.md §8.1), deterministic for a given count and seed.

use crate::engine::labels;
use crate::engine::resources::{CPU, MEMORY, PODS, Resources};
use crate::engine::scheduling::pod::{AffinityTerm, Namespaces, PodData, SpreadConstraint};
use crate::engine::scheduling::selector::Selector;

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
        labels: std::sync::Arc::new(labels_.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
        created: 0,
        requests,
        tolerations: std::sync::Arc::from([]),
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
        dra: false,
        buffer: None,
    }
}

fn selector(labels_: &[(&str, String)]) -> Selector {
    labels_.iter().fold(Selector::default(), |s, (k, v)| s.with_label(k, v))
}

/// The diverse pod mix, deterministic for a given count.
pub fn diverse_pods(count: usize) -> Vec<PodData> {
    diverse_pods_seeded(count, 42)
}

/// The same mix from another seed.
pub fn diverse_pods_seeded(count: usize, seed: u64) -> Vec<PodData> {
    let mut rng = Lcg(seed);
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

/// CPU and memory size classes of [`plain_pods_seeded`]: 250m … 4 CPUs and 512Mi … 8Gi, each class half as
/// likely as the one below it (the last two equally likely), drawn independently for CPU and memory.
const PLAIN_CPUS: [i64; 5] = [250, 500, 1000, 2000, 4000];
const PLAIN_MEMS: [i64; 5] = [512 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30];
const PLAIN_WEIGHTS: [u64; 5] = [8, 4, 2, 1, 1];

fn weighted(rng: &mut Lcg) -> usize {
    let total: u64 = PLAIN_WEIGHTS.iter().sum();
    let mut r = rng.next() % total;
    for (i, w) in PLAIN_WEIGHTS.iter().enumerate() {
        if r < *w {
            return i;
        }
        r -= w;
    }
    PLAIN_WEIGHTS.len() - 1
}

/// Plain pods (no constraints) with requests from 250m/512Mi to 4/8Gi: the cost-packing workload of issue #19,
/// deterministic for a given count and seed.
pub fn plain_pods_seeded(count: usize, seed: u64) -> Vec<PodData> {
    let mut rng = Lcg(seed);
    (0..count)
        .map(|i| {
            let mut p = base(i, &mut rng, &[]);
            p.requests.set_value(CPU, PLAIN_CPUS[weighted(&mut rng)]);
            p.requests.set_value(MEMORY, PLAIN_MEMS[weighted(&mut rng)]);
            p
        })
        .collect()
}

/// Pods as the scheduler takes them (shared, as a pass shares them with the digests it keeps).
pub fn shared(pods: &[PodData]) -> Vec<std::sync::Arc<PodData>> {
    pods.iter().cloned().map(std::sync::Arc::new).collect()
}
