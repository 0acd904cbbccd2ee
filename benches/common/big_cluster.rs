//! The large cluster the benchmarks share: 20 NodePools of 50 nodes with 20 pods each (1,000 nodes, 20,000 pods)
//! on the AWS catalog, built through the simulated world (the `nodes:` shorthand of a generated scenario) so the
//! objects are exactly what the engine sees in `simulate` and `demo`. Utilisation varies per node so that some
//! candidates can be deleted, some replaced with a cheaper type, and most not at all.

#![allow(dead_code)]

use std::time::Duration;

use karpenter_tui::sim::run::run_world;
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::sim::world::World;

pub const POOLS: usize = 20;
pub const PODS_PER_NODE: usize = 20;

/// 50 nodes per pool when benchmarking; `cargo test --all-targets` runs benches once in a debug build, where a
/// small cluster checks the same things in a fraction of the time.
pub fn nodes_per_pool() -> usize {
    if std::env::args().any(|a| a == "--bench") { 50 } else { 4 }
}
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// 4- and 8-vCPU types of three categories, mostly the cheapest of their size (so a replacement is rarely
/// cheaper) and one that is not.
const TYPES: [&str; 6] = ["m5a.xlarge", "c6a.xlarge", "r5a.xlarge", "m5a.2xlarge", "c6a.2xlarge", "m5.xlarge"];
const CATEGORIES: [&str; 4] = ["[c, m, r]", "[m]", "[c, m]", "[m, r]"];

/// A small deterministic generator: the cluster must be the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// vCPUs and GiB of the node types used.
fn capacity(t: &str) -> (f64, f64) {
    match t {
        "c6a.xlarge" => (4.0, 8.0),
        "r5a.xlarge" => (4.0, 32.0),
        "m5a.2xlarge" => (8.0, 32.0),
        "c6a.2xlarge" => (8.0, 16.0),
        _ => (4.0, 16.0),
    }
}

fn scenario_text(nodes_per_pool: usize) -> String {
    let mut rng = Lcg(42);
    let mut objects = String::from("objects:\n");
    let mut nodes = String::from("nodes:\n");
    for p in 0..POOLS {
        let cats = CATEGORIES[p % CATEGORIES.len()];
        let ct = if p % 3 == 0 { "[spot, on-demand]" } else { "[on-demand]" };
        // Most pools are amd64-only; the others could move to cheaper Graviton types.
        let arch = if p % 5 == 0 { "[amd64, arm64]" } else { "[amd64]" };
        objects.push_str(&format!(
            "  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: pool-{p:02}}}
    spec:
      weight: {weight}
      disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s, budgets: [{{nodes: \"10%\"}}]}}
      template:
        metadata: {{labels: {{team: t{p:02}}}}}
        spec:
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
          requirements:
            - {{key: karpenter.k8s.aws/instance-category, operator: In, values: {cats}}}
            - {{key: karpenter.sh/capacity-type, operator: In, values: {ct}}}
            - {{key: kubernetes.io/arch, operator: In, values: {arch}}}
",
            // The CRD takes weights 1–100.
            weight = p + 1
        ));
        for n in 0..nodes_per_pool {
            let node = format!("p{p:02}-n{n:02}");
            // Only types the pool's categories admit, or the node would be drifted rather than consolidatable.
            let admitted: Vec<&str> = TYPES.iter().copied().filter(|t| cats.contains(&t[..1])).collect();
            let t = admitted[rng.next(admitted.len() as u64) as usize];
            let zone = ZONES[(p + n) % ZONES.len()];
            nodes.push_str(&format!(
                "  - {{name: {node}, instanceType: {t}, zone: {zone}, capacityType: on-demand, nodePool: pool-{p:02}, age: 2h, labels: {{team: t{p:02}}}}}\n"
            ));
            // Load as a share of the node's capacity: every fourth pool runs hot with two large pods per node
            // that fit nowhere else, so those nodes need a replacement as large as themselves (none cheaper for
            // the cheapest types — the expensive verdict); the others between 30% and 90%, over equal pods.
            let (vcpu, gib) = capacity(t);
            let hot = p % 4 == 0;
            let load = if hot { 85 + rng.next(10) } else { 30 + rng.next(60) } as f64 / 100.0;
            let (bigs, big) = if hot { (2, 0.38) } else { (0, 0.0) };
            // The pods of a node share one spec, as replicas of a workload do (see `engine::stored_pod`). The worst
            // case for memory, every pod with a spec of its own, is measured with KTUI_BENCH_DISTINCT_SPECS=1 (a
            // container name of its own: nothing else changes).
            for k in 0..PODS_PER_NODE {
                let share = if k < bigs { big } else { (load - big * bigs as f64) / (PODS_PER_NODE - bigs) as f64 };
                let cpu = (share * vcpu * 1000.0) as u64;
                let mem = (share * gib * 1024.0 * 0.85) as u64;
                let container = if std::env::var_os("KTUI_BENCH_DISTINCT_SPECS").is_some() {
                    format!("c-{node}-{k:02}")
                } else {
                    "c".into()
                };
                objects.push_str(&format!(
                    "  - apiVersion: v1
    kind: Pod
    metadata: {{name: {node}-{k:02}, namespace: team-{p:02}, labels: {{app: a{p:02}}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: rs-{p:02}, uid: u{p:02}, controller: true}}]}}
    spec:
      nodeName: {node}
      nodeSelector: {{team: t{p:02}}}
      containers: [{{name: {container}, image: x, resources: {{requests: {{cpu: {cpu}m, memory: {mem}Mi}}}}}}]
"
                ));
            }
        }
    }
    format!(
        "name: consolidation-bench\nuntil: 1m\ncatalog: {{source: aws}}\nsettings: {{disruption: approve}}\n{objects}{nodes}"
    )
}

pub fn world(nodes_per_pool: usize) -> World {
    let text = scenario_text(nodes_per_pool);
    // Parsed on a thread of its own, as `demo` does (src/cli/demo.rs), so what the parser frees can be handed back.
    let s =
        std::thread::spawn(move || parse_scenario(&text, "consolidation-bench.yaml").unwrap_or_else(|e| panic!("{e}")))
            .join()
            .expect("parse thread");
    let mut w = run_world(&s, Some(Duration::ZERO)).unwrap_or_else(|e| panic!("{e}"));
    // The pass at t=0 proposed something; rejected, its nodes are candidates again like all the others.
    for id in w.controller().orchestrator().awaiting_approval() {
        karpenter_tui::controller::tick::reject(&mut w, &id).unwrap_or_else(|e| panic!("{e}"));
    }
    w
}
