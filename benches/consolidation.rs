//! The disruption engine at scale (issue: 1,000 nodes, 20,000 pods, 20 NodePools on the AWS catalog).
//!
//! - `single-node/full-pass`: every candidate gets its own verdict (delete, replace with something cheaper, or why
//!   not) — `explain_nodes`, the dashboard's "why won't this node consolidate" view and the upper bound of a
//!   single-node consolidation pass that finds nothing. Upstream simulates each candidate separately (about 0.9 s
//!   each); the bar here is the whole pass in at most 2 s.
//! - `multi-node/pass`: the binary search over the budgeted candidate prefix (cap 100); bar: at most 1 s.
//!
//! The cluster is built through the simulated world (the `nodes:` shorthand of a generated scenario) so the
//! objects are exactly what the engine sees in `simulate` and `demo`. Utilisation varies per node so that some
//! candidates can be deleted, some replaced with a cheaper type, and most not at all.
//!
//! `cargo bench --bench consolidation`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use karpenter_tui::engine::disruption::consolidation::{Outlook, explain_nodes, multi_node_consolidation};

#[path = "common/big_cluster.rs"]
mod big_cluster;

use big_cluster::{PODS_PER_NODE, POOLS, nodes_per_pool, world};

fn consolidation(c: &mut Criterion) {
    let nodes = POOLS * nodes_per_pool();
    let mut w = world(nodes_per_pool());
    assert_eq!(w.cluster.nodes.len(), nodes);
    w.with_disruption_context(None, |ctx| {
        assert_eq!(ctx.snap.pods.len(), nodes * PODS_PER_NODE);
        // The workload is what it claims: every node a candidate with a verdict, and some of each kind.
        let outlook = explain_nodes(ctx);
        assert_eq!(outlook.len(), nodes);
        let disruptable = outlook.values().filter(|o| matches!(o, Outlook::Disruptable(_))).count();
        let mut why: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        for o in outlook.values() {
            if let Outlook::Blocked(b) = o {
                let kind = b.last().map(|b| format!("{b:?}")).unwrap_or_default();
                *why.entry(kind.split([' ', '{', '(']).next().unwrap_or_default().to_string()).or_default() += 1;
            }
        }
        eprintln!("{disruptable} of {} nodes could be consolidated on their own; the rest: {why:?}", outlook.len());
        for n in ["p04-n00", "p04-n01", "p08-n02", "p01-n00"] {
            if let Some(Outlook::Disruptable(c)) = outlook.get(n) {
                eprintln!("{n}: {}", c.summary());
            }
        }
        assert!(disruptable > 0 && disruptable < outlook.len());
        let multi = multi_node_consolidation(ctx).expect("some nodes can go together");
        eprintln!("multi-node: {}", multi.summary());

        let mut group = c.benchmark_group("consolidation");
        group.sample_size(10);
        group.bench_function("single-node/full-pass", |b| b.iter(|| black_box(explain_nodes(ctx))));
        group.bench_function("multi-node/pass", |b| b.iter(|| black_box(multi_node_consolidation(ctx))));
        group.finish();
    });
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
