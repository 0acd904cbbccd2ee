use std::collections::BTreeMap;
use std::sync::Arc;
use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::fake;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::resources::{CPU, MEMORY, PODS, Resources};
use karpenter_tui::engine::scheduling::pod::{AffinityTerm, Namespaces, PodData, SpreadConstraint};
use karpenter_tui::engine::scheduling::selector::Selector;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::{Input, SchedulerOptions, solve};
include!("/tmp/gen.rs");
fn main() {
    let n: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let catalog = fake::fake_catalog_with(fake::fake_instance_types(400));
    let pools: Vec<NodePool> = vec![serde_yaml::from_str("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: a, kind: b, name: c}\n").unwrap()];
    let types: BTreeMap<String, Vec<Arc<_>>> = [("default".to_string(), catalog.instance_types.clone())].into();
    let usage = BTreeMap::new(); let nl = BTreeMap::new(); let v = VolumeIndex::default();
    let input = Input { nodepools: &pools, instance_types: &types, policy: &catalog.label_policy, nodes: &[], nodepool_usage: &usage, bound_pods: &[], node_labels: &nl, daemonsets: &[], volumes: &v, options: SchedulerOptions::default() };
    let kind: Option<usize> = std::env::args().nth(2).map(|k| k.parse().unwrap());
    let all = diverse_pods(n);
    let fifth = n / 5;
    let pods: Vec<PodData> = match kind { None => all, Some(k) => all[k*fifth..(k+1)*fifth].to_vec() };
    let n = pods.len();
    let t = std::time::Instant::now();
    let r = solve(&input, &pods);
    println!("{} pods -> {} claims, {} failures in {:?}", n, r.new_claims.len(), r.failures.len(), t.elapsed());
    let mut hist = BTreeMap::new();
    for c in &r.new_claims { *hist.entry(c.pods.len()).or_insert(0) += 1; }
    println!("pods per claim: {:?}", hist.iter().take(12).collect::<Vec<_>>());
}
