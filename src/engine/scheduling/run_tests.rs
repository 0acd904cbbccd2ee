//! `grow_claim_run` (a run of interchangeable pods added in one step) leaves a NodeClaim exactly as adding the same
//! pods one by one through `can_add_to_claim` does: same pods taken, same options, requests and minValues outcome.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::pod::{HostPort, PodData};
use super::volumes::VolumeIndex;
use super::workload::{plain_pods_seeded, shared};
use super::{Input, MinValuesPolicy, Scheduler, SchedulerOptions};
use crate::engine::api::NodePool;
use crate::engine::catalog::InstanceType;
use crate::engine::catalog::aws::aws_catalog;
use crate::engine::resources::{CPU, MEMORY, Resources};

fn pool(extra: &str) -> NodePool {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements:\n      - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}\n      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n{extra}"
    ))
    .expect("valid nodepool")
}

/// `count` copies of one pod (names and uids apart) asking `cpu` millicores and `mem` bytes.
fn copies(count: usize, cpu: i64, mem: i64) -> Vec<PodData> {
    let base = plain_pods_seeded(1, 7).remove(0);
    (0..count)
        .map(|i| {
            let mut p = base.clone();
            p.uid = format!("run-{i:04}");
            p.name = p.uid.clone();
            p.requests.set_value(CPU, cpu);
            p.requests.set_value(MEMORY, mem);
            p
        })
        .collect()
}

struct Outcome {
    taken: usize,
    pods: Vec<usize>,
    types: Vec<usize>,
    requests: Resources,
    relaxed: bool,
}

/// Opens a claim for pod 0, then adds pods 1.. either as one run or one by one until one is refused.
fn grow(input: &Input<'_>, pods: &[PodData], as_run: bool) -> Option<Outcome> {
    let mut s = Scheduler::new(input, &shared(pods));
    let reqs = pods[0].requirements();
    let c = s.open_claim(0, 0, &pods[0], &reqs, &[], None, true).ok()?;
    let rest: Vec<usize> = (1..pods.len()).collect();
    let taken = if as_run {
        s.grow_claim_run(c, &rest, &shared(pods), &reqs)?
    } else {
        let mut n = 0;
        for &i in &rest {
            match s.can_add_to_claim(c, i, &pods[i], &reqs, &[], false) {
                Ok(cand) => {
                    s.grow_claim(c, i, &pods[i], cand);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    };
    let claim = &s.claims[c];
    Some(Outcome {
        taken,
        pods: claim.pods.clone(),
        types: claim.types.iter().collect(),
        requests: claim.requests.clone(),
        relaxed: claim.min_values_relaxed,
    })
}

/// Runs `f` on the scheduler's input for `pools` over the embedded AWS catalog, no nodes, no DaemonSets.
fn with_input<R>(pools: &[NodePool], policy: MinValuesPolicy, f: impl FnOnce(&Input<'_>) -> R) -> R {
    let catalog = aws_catalog("us-east-1", None, None, 0).expect("embedded catalog");
    let types: BTreeMap<String, Vec<Arc<InstanceType>>> =
        [("default".to_string(), catalog.instance_types.clone())].into();
    let (usage, labels, volumes) = (BTreeMap::new(), BTreeMap::new(), VolumeIndex::default());
    f(&Input {
        nodepools: pools,
        instance_types: &types,
        policy: &catalog.label_policy,
        nodes: &[],
        nodepool_usage: &usage,
        bound_pods: &[],
        node_labels: &labels,
        daemonsets: &[],
        volumes: &volumes,
        options: SchedulerOptions { min_values: policy, ..Default::default() },
    })
}

fn same_either_way(pools: &[NodePool], pods: &[PodData], policy: MinValuesPolicy) -> usize {
    with_input(pools, policy, |input| {
        let one = grow(input, pods, false).expect("the first pod opens a claim");
        let run = grow(input, pods, true).expect("plain pods go as a run");
        assert_eq!(run.taken, one.taken, "pods taken");
        assert_eq!(run.pods, one.pods);
        assert_eq!(run.types, one.types, "the claim's options");
        assert_eq!(run.requests, one.requests);
        assert_eq!(run.relaxed, one.relaxed, "minValues outcome");
        one.taken
    })
}

#[test]
fn a_run_that_fits_whole_ends_as_one_by_one() {
    let taken = same_either_way(&[pool("")], &copies(40, 1000, 2 << 30), MinValuesPolicy::Strict);
    assert_eq!(taken, 39);
}

#[test]
fn a_run_larger_than_any_type_stops_where_one_by_one_stops() {
    // 1,000 CPUs of pods: more than the largest type, so both stop at the same pod short of the run.
    let taken = same_either_way(&[pool("")], &copies(1000, 1000, 1 << 30), MinValuesPolicy::Strict);
    assert!(taken > 100 && taken < 999, "{taken}");
}

#[test]
fn min_values_stop_a_run_where_they_stop_one_by_one() {
    // Strict minValues over instance families: the claim may not narrow below 30 of them, which bites long before
    // the largest type is full.
    let extra = "      - {key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 30}\n";
    let strict = same_either_way(&[pool(extra)], &copies(400, 1000, 4 << 30), MinValuesPolicy::Strict);
    let resources = same_either_way(&[pool("")], &copies(400, 1000, 4 << 30), MinValuesPolicy::Strict);
    assert!(strict < resources, "minValues should stop the claim first: {strict} vs {resources}");
    // BestEffort lets the claim grow past them, relaxed.
    let best = same_either_way(&[pool(extra)], &copies(400, 1000, 4 << 30), MinValuesPolicy::BestEffort);
    assert!(best > strict, "{best} vs {strict}");
}

#[test]
fn pods_with_host_ports_are_not_run() {
    let mut pods = copies(5, 500, 1 << 30);
    for p in &mut pods {
        p.host_ports.push(HostPort { ip: "0.0.0.0".into(), port: 8080, protocol: "TCP".into() });
    }
    with_input(&[pool("")], MinValuesPolicy::Strict, |input| {
        assert!(grow(input, &pods, true).is_none(), "host ports conflict pod to pod: one by one only");
    });
}
