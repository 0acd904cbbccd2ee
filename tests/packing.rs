//! Cost packing (issue #19): on the plain workload the cost strategy provisions within 5% of the LP lower bound,
//! upstream's decisions are unchanged, and every cost plan honours the same constraints.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::InstanceType;
use karpenter_tui::engine::catalog::aws::aws_catalog;
use karpenter_tui::engine::labels::LabelPolicy;
use karpenter_tui::engine::packing::Packing;
use karpenter_tui::engine::resources::Resources;
use karpenter_tui::engine::scheduling::cost::{bound_mix, lower_bound};
use karpenter_tui::engine::scheduling::pod::PodData;
use karpenter_tui::engine::scheduling::volumes::VolumeIndex;
use karpenter_tui::engine::scheduling::workload::{plain_pods_seeded, shared};
use karpenter_tui::engine::scheduling::{ExistingNode, Input, Results, SchedulerOptions, solve};

fn on_demand_pool() -> NodePool {
    common::nodepool_yaml(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}\n",
    )
}

struct World {
    pools: Vec<NodePool>,
    types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: LabelPolicy,
    usage: BTreeMap<String, Resources>,
    labels: karpenter_tui::engine::scheduling::topology::NodeLabels,
    volumes: VolumeIndex,
}

impl World {
    /// The scheduler's input: this world, `nodes`, no DaemonSets.
    fn input<'a>(&'a self, nodes: &'a [ExistingNode], options: SchedulerOptions) -> Input<'a> {
        Input {
            nodepools: &self.pools,
            instance_types: &self.types,
            policy: &self.policy,
            nodes,
            nodepool_usage: &self.usage,
            bound_pods: &[],
            node_labels: &self.labels,
            daemonsets: &[],
            volumes: &self.volumes,
            options,
        }
    }
}

fn aws_world() -> World {
    let catalog = aws_catalog("us-east-1", None, None, 0).expect("catalog");
    World {
        pools: vec![on_demand_pool()],
        types: [("default".to_string(), catalog.instance_types.clone())].into(),
        policy: catalog.label_policy.clone(),
        usage: BTreeMap::new(),
        labels: BTreeMap::new(),
        volumes: VolumeIndex::default(),
    }
}

fn run(w: &World, pods: &[PodData], packing: Packing) -> (Results, Option<f64>) {
    let input = w.input(&[], SchedulerOptions { packing, ..Default::default() });
    let r = solve(&input, &shared(pods));
    let b = lower_bound(&input, &shared(pods), &r);
    (r, b)
}

fn price(r: &Results) -> f64 {
    r.new_claims.iter().map(|c| c.cheapest_price().unwrap_or(f64::NAN)).sum()
}

fn by_type(r: &Results) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = BTreeMap::new();
    for c in &r.new_claims {
        *m.entry(c.instance_types[0].name.clone()).or_default() += 1;
    }
    m
}

/// The issue's workload: 1,500 plain pods, one on-demand amd64 NodePool over three zones, the AWS catalog.
/// Upstream packs every seed onto 2 nodes (a u7i-12tb.224xlarge and an m8i.96xlarge) for $145.90/h. Measured on
/// 2026-11-27 over seeds 1–1000 (docs/packing.md, "Whole-instance patterns"): cost 1.015–1.048× the bound. Seeds
/// 148 and 154 were the worst before the plan's LP had whole-instance patterns (1.061× and 1.059×); 154 is the
/// worst of seeds 1–200 since (1.044×), and 271 of all 1,000 (1.048×).
#[test]
fn cost_packing_is_far_cheaper_than_upstream_and_near_the_lp_bound() {
    let w = aws_world();
    for seed in [1u64, 2, 3, 148, 154, 271] {
        let pods = plain_pods_seeded(1500, seed);
        let (up, bound_up) = run(&w, &pods, Packing::Upstream);
        let (cost, bound) = run(&w, &pods, Packing::Cost);
        let bound = bound.expect("the LP has an optimum");
        assert!(up.failures.is_empty() && cost.failures.is_empty());
        assert_eq!(cost.scheduled_pods(), pods.len(), "seed {seed}: every pod bound");
        // Both plans put the same pods on new capacity, so they share one bound.
        assert!((bound_up.unwrap() - bound).abs() < 1e-6);
        let (p_up, p_cost) = (price(&up), price(&cost));
        assert!(bound <= p_cost + 1e-9 && bound <= p_up + 1e-9, "the bound is a bound");
        assert!(p_cost <= 1.05 * bound, "seed {seed}: cost ${p_cost:.2} vs bound ${bound:.2}: {:?}", by_type(&cost));
        assert!(p_up > 3.0 * p_cost, "seed {seed}: upstream ${p_up:.2}, cost ${p_cost:.2}");
        // Every node each claim may become holds its pods, in a zone and type they accept.
        assert_eq!(
            common::plan_check::plan_violations(&pods, &[], &w.pools, Default::default(), &cost),
            Vec::<String>::new()
        );
    }
}

#[test]
fn upstream_packing_is_what_it_always_was() {
    // The default is upstream, and asking for it explicitly changes nothing.
    assert_eq!(SchedulerOptions::default().packing, Packing::Upstream);
    let w = aws_world();
    let pods = plain_pods_seeded(300, 9);
    let (a, _) = run(&w, &pods, Packing::Upstream);
    let sig = |r: &Results| -> Vec<(Vec<usize>, Vec<String>)> {
        r.new_claims
            .iter()
            .map(|c| (c.pods.clone(), c.instance_types.iter().map(|t| t.name.clone()).collect()))
            .collect()
    };
    let input = w.input(&[], SchedulerOptions::default());
    assert_eq!(sig(&solve(&input, &shared(&pods))), sig(&a));
}

#[test]
fn cost_packing_honours_weights_and_limits() {
    // A heavy NodePool limited to 64 CPUs takes what it can; the rest goes to the light one, as upstream does.
    let heavy = common::nodepool_yaml(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: heavy}\nspec:\n  weight: 50\n  limits: {cpu: \"64\"}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n",
    );
    let catalog = aws_catalog("us-east-1", None, None, 0).expect("catalog");
    let w = World {
        pools: vec![heavy, on_demand_pool()],
        types: [
            ("default".to_string(), catalog.instance_types.clone()),
            ("heavy".to_string(), catalog.instance_types.clone()),
        ]
        .into(),
        ..aws_world()
    };
    let pods = plain_pods_seeded(400, 5);
    let (r, bound) = run(&w, &pods, Packing::Cost);
    assert!(r.failures.is_empty());
    assert_eq!(r.scheduled_pods(), pods.len());
    let heavy_cpu: i64 = r
        .new_claims
        .iter()
        .filter(|c| c.nodepool == "heavy")
        .map(|c| c.instance_types.iter().map(|t| t.capacity.cpu).max().unwrap_or(0))
        .sum();
    assert!(heavy_cpu > 0, "the heavier pool is used first");
    assert!(heavy_cpu <= 64_000, "the limit holds even counting each claim's largest option: {heavy_cpu}m");
    assert!(r.new_claims.iter().any(|c| c.nodepool == "default"), "the rest spills to the lighter pool");
    assert!(bound.unwrap() <= price(&r) + 1e-9);
    assert_eq!(common::plan_check::plan_violations(&pods, &[], &w.pools, Default::default(), &r), Vec::<String>::new());
}

#[test]
fn cost_packing_keeps_pods_on_existing_room_first() {
    // Existing room is free: pods that fit on a node already there go there in both strategies.
    let w = aws_world();
    let pods = plain_pods_seeded(50, 4);
    let node = ExistingNode {
        name: "node-a".into(),
        labels: [
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("topology.kubernetes.io/zone".to_string(), "us-east-1a".to_string()),
            ("karpenter.sh/capacity-type".to_string(), "on-demand".to_string()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
        ]
        .into_iter()
        .collect::<BTreeMap<_, _>>()
        .into(),
        allocatable: karpenter_tui::engine::resources::Resources::new(8000, 16 << 30, 110),
        capacity: karpenter_tui::engine::resources::Resources::new(8000, 16 << 30, 110),
        initialized: true,
        ..Default::default()
    };
    let nodes = vec![node];
    let mk = |packing| w.input(&nodes, SchedulerOptions { packing, ..Default::default() });
    let (up_in, cost_in) = (mk(Packing::Upstream), mk(Packing::Cost));
    let (up, cost) = (solve(&up_in, &shared(&pods)), solve(&cost_in, &shared(&pods)));
    let on_node = |r: &Results| -> Resources {
        let mut sum = Resources::default();
        for p in r.existing.iter().flat_map(|p| p.pods.iter()) {
            sum.add(&pods[*p].requests);
        }
        sum
    };
    assert!(!cost.existing.is_empty() && !up.existing.is_empty());
    // Cost packing fills the node at least as well as upstream's first fit, and no more than it holds.
    let (u, c) = (on_node(&up), on_node(&cost));
    assert!(c.fits_in(&nodes[0].allocatable), "{c:?}");
    assert!(c.cpu + c.memory / (1 << 18) >= u.cpu + u.memory / (1 << 18), "cost {c:?} vs upstream {u:?}");
    assert_eq!(cost.scheduled_pods(), pods.len());
}

#[test]
fn plan_shows_both_strategies_and_the_bound() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(["plan", "--file", "examples/inflate.yaml", "--packing", "cost", "--output", "json"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let p = &v["packing"];
    assert_eq!(p["strategy"], "cost");
    let (up, cost) = (p["upstream"]["pricePerHour"].as_f64().unwrap(), p["cost"]["pricePerHour"].as_f64().unwrap());
    let bound = p["lowerBoundPerHour"].as_f64().expect("a bound");
    assert!(bound > 0.0 && bound <= cost + 1e-9 && bound <= up + 1e-9, "{p}");
    // Six zone-spread pods. Opening the fractions of a first plan that buys no whole instance, or planning such pods
    // with whole-instance patterns, each made five claims for $0.17/h, where upstream's path (which cost packing
    // leaves such a batch to) makes three for $0.15/h.
    assert!(cost <= up + 1e-9, "cost packing ${cost} against upstream's ${up}: {p}");
    assert!(p["cost"]["nodes"].as_u64().unwrap() > 0);
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(["plan", "--file", "examples/inflate.yaml"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("PACKING (upstream in use)") && text.contains("LP lower bound $"), "{text}");
}

#[test]
#[ignore = "diagnostics: cargo test --test integration packing::diagnostics -- --ignored --nocapture"]
fn diagnostics() {
    let w = aws_world();
    let n: usize = std::env::var("PODS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let seeds: Vec<u64> =
        std::env::var("SEEDS").ok().map_or(vec![1, 2, 3], |v| v.split(',').filter_map(|s| s.parse().ok()).collect());
    for seed in seeds {
        let pods = plain_pods_seeded(n, seed);
        let timed = |packing| {
            let input = w.input(&[], SchedulerOptions { packing, ..Default::default() });
            let t0 = std::time::Instant::now();
            let r = solve(&input, &shared(&pods));
            let el = t0.elapsed();
            let b = lower_bound(&input, &shared(&pods), &r);
            (r, b, el)
        };
        let (_, _, up_el) = timed(Packing::Upstream);
        let (cost, bound, el) = timed(Packing::Cost);
        println!("solve: upstream {up_el:?}, cost {el:?}");
        let mut per: BTreeMap<String, (usize, f64, f64, f64)> = BTreeMap::new();
        for c in &cost.new_claims {
            let t = &c.instance_types[0];
            let a = t.allocatable();
            let e = per.entry(t.name.clone()).or_default();
            e.0 += 1;
            e.1 += c.requests.cpu as f64 / a.cpu as f64;
            e.2 += c.requests.memory as f64 / a.memory as f64;
            e.3 += c.requests.pods as f64 / a.pods as f64;
        }
        println!(
            "seed {seed}: ${:.2} bound ${:.2} ratio {:.3} ({el:?})",
            price(&cost),
            bound.unwrap(),
            price(&cost) / bound.unwrap()
        );
        for (n, (k, c, m, p)) in per {
            let k = k as f64;
            println!("  {n:>14} x{k:<4} cpu {:.2} mem {:.2} pods {:.2}", c / k, m / k, p / k);
        }
        let input = w.input(&[], SchedulerOptions { packing: Packing::Cost, ..Default::default() });
        let (_, mix) = bound_mix(&input, &shared(&pods), &cost).expect("the LP has an optimum");
        for (_, name, amount) in mix {
            println!("  bound buys {name:>14} x{amount:.2}");
        }
    }
}

/// One overpriced 16-CPU node holding 5 CPUs of pods: no single cheaper node holds them (upstream's consolidation
/// may launch only one), four small ones do for a fifth of the price.
fn repack_scenario(packing: &str) -> String {
    format!(
        r#"name: repack
until: 15m
settings:
  packing: {packing}
catalog:
  source: inline
  instanceTypes:
    - name: small
      cpu: "2"
      memory: 4Gi
      pods: 10
      overhead: {{cpu: 100m, memory: 100Mi}}
      offerings:
        - {{zone: z1, capacityType: on-demand, price: 0.05}}
    - name: huge
      cpu: "16"
      memory: 32Gi
      pods: 40
      overhead: {{cpu: 100m, memory: 100Mi}}
      offerings:
        - {{zone: z1, capacityType: on-demand, price: 1.0}}
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      template:
        spec:
          requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: app}}
    spec:
      replicas: 10
      selector: {{matchLabels: {{app: app}}}}
      template:
        metadata: {{labels: {{app: app}}}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
nodes:
  - {{name: n1, instanceType: huge, zone: z1, capacityType: on-demand, nodePool: default}}
"#
    )
}

fn with_settings(text: &str, extra: &str) -> String {
    text.replacen("settings:\n", &format!("settings:\n{extra}"), 1)
}

fn simulate_text(text: &str) -> karpenter_tui::sim::report::Report {
    let s = karpenter_tui::sim::scenario::parse_scenario(text, "repack.yaml").unwrap_or_else(|e| panic!("{e}"));
    karpenter_tui::sim::run::run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn repack_replaces_one_node_with_several_cheaper_ones_only_under_cost_packing() {
    use karpenter_tui::sim::report::{DecisionDetail, DecisionState, DisruptionMethod};
    let disruptions =
        |r: &karpenter_tui::sim::report::Report| -> Vec<(DisruptionMethod, Vec<String>, usize, DecisionState)> {
            r.decisions
                .iter()
                .filter_map(|d| match &d.detail {
                    DecisionDetail::Disruption { method, candidates, replacements, state, .. } => {
                        Some((*method, candidates.clone(), replacements.len(), *state))
                    }
                    _ => None,
                })
                .collect()
        };
    // Upstream: nothing single-node or multi-node can do.
    let up = simulate_text(&repack_scenario("upstream"));
    assert!(disruptions(&up).is_empty(), "{:?}", disruptions(&up));
    // Cost: one repack, 1 node to 4, executed; every pod runs on the small nodes and the huge one is gone.
    let cost = simulate_text(&repack_scenario("cost"));
    let d = disruptions(&cost);
    assert_eq!(d.len(), 1, "{d:?}");
    let (method, candidates, replacements, state) = &d[0];
    assert_eq!(*method, DisruptionMethod::Repack);
    assert_eq!(candidates, &["n1".to_string()]);
    assert_eq!(*replacements, 4, "ten 500m pods, three to a 1.9-CPU node");
    assert_eq!(*state, DecisionState::Executed);
    let huge = cost.nodes.iter().find(|n| n.name == "n1").expect("n1");
    assert!(huge.deleted_at.is_some());
    let smalls: Vec<&str> = cost
        .nodes
        .iter()
        .filter(|n| n.instance_type == "small" && n.deleted_at.is_none())
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(smalls.len(), 4);
    let live: Vec<_> = cost.pods.iter().filter(|p| p.deleted_at.is_none()).collect();
    assert_eq!(live.len(), 10);
    assert!(live.iter().all(|p| p.node.as_deref().is_some_and(|n| smalls.contains(&n))), "{live:?}");
    assert!(cost.pending.is_empty());
}

#[test]
fn repack_goes_through_the_approval_gate_with_its_savings_and_respects_pdbs() {
    use karpenter_tui::sim::report::{DecisionDetail, DecisionState, DisruptionMethod};
    // Approve mode: proposed with its savings ($1.00 − 4 × $0.05), nothing moves until approved.
    let r = simulate_text(&with_settings(&repack_scenario("cost"), "  disruption: approve\n"));
    let proposals: Vec<(DisruptionMethod, f64, DecisionState)> = r
        .decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Disruption { method, savings_per_hour, state, .. } => {
                Some((*method, *savings_per_hour, *state))
            }
            _ => None,
        })
        .collect();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!(proposals[0].0, DisruptionMethod::Repack);
    assert!((proposals[0].1 - 0.8).abs() < 1e-9, "{proposals:?}");
    assert_eq!(proposals[0].2, DecisionState::AwaitingApproval);
    assert!(r.nodes.iter().all(|n| n.deleted_at.is_none()));

    // A PDB that allows no disruption keeps the node: repack never lowers availability below it.
    let pdb = "  - apiVersion: policy/v1\n    kind: PodDisruptionBudget\n    metadata: {name: app}\n    spec:\n      maxUnavailable: 0\n      selector: {matchLabels: {app: app}}\nnodes:\n";
    let text = repack_scenario("cost").replacen("nodes:\n", pdb, 1);
    let r = simulate_text(&text);
    assert!(
        r.decisions.iter().all(|d| !matches!(d.detail, DecisionDetail::Disruption { .. })),
        "the PDB blocks repack"
    );
    assert!(r.nodes.iter().find(|n| n.name == "n1").is_some_and(|n| n.deleted_at.is_none()));
}

/// A second solve while the first solve's claims are in flight (counted at their smallest option, as the cluster
/// state counts an unlaunched claim): with the first solve's placements as hints every pod goes back to the claim
/// made for it and nothing launches twice.
#[test]
fn hints_put_pods_back_on_the_claims_made_for_them() {
    let w = aws_world();
    let pods = plain_pods_seeded(1500, 2);
    let (first, _) = run(&w, &pods, Packing::Cost);
    let nodes: Vec<ExistingNode> = first
        .new_claims
        .iter()
        .map(|c| {
            let mut alloc = c.instance_types[0].allocatable();
            let mut cap = c.instance_types[0].capacity.clone();
            for t in &c.instance_types {
                let a = t.allocatable();
                alloc = Resources::new(alloc.cpu.min(a.cpu), alloc.memory.min(a.memory), alloc.pods.min(a.pods));
                cap = Resources::new(
                    cap.cpu.min(t.capacity.cpu),
                    cap.memory.min(t.capacity.memory),
                    cap.pods.min(t.capacity.pods),
                );
            }
            let mut labels: BTreeMap<String, String> = c.labels.clone();
            labels.insert("karpenter.sh/nodepool".into(), c.nodepool.clone());
            ExistingNode {
                name: c.hostname.clone(),
                labels: labels.into(),
                allocatable: alloc,
                capacity: cap,
                initialized: false,
                managed: true,
                nodepool: Some(c.nodepool.clone()),
                ..Default::default()
            }
        })
        .collect();
    let pods_ref = &pods;
    let hints: BTreeMap<String, String> = first
        .new_claims
        .iter()
        .flat_map(|c| c.pods.iter().map(move |&i| (pods_ref[i].uid.clone(), c.hostname.clone())))
        .collect();
    let solve_with = |hints: BTreeMap<String, String>| {
        let options = SchedulerOptions { packing: Packing::Cost, hints: Arc::new(hints), ..Default::default() };
        solve(&w.input(&nodes, options), &shared(&pods))
    };
    let again = solve_with(hints);
    assert!(again.new_claims.is_empty(), "{} claims launched twice", again.new_claims.len());
    assert_eq!(again.scheduled_pods(), pods.len());
    for p in &again.existing {
        let claim = first.new_claims.iter().find(|c| c.hostname == p.node).expect("an in-flight claim");
        let mut mine = p.pods.clone();
        mine.sort_unstable();
        let mut planned = claim.pods.clone();
        planned.sort_unstable();
        assert_eq!(mine, planned, "{} got other pods", p.node);
    }
}

/// `scenarios/packing.yaml` with `packing` in force.
fn packing_scenario(packing: Packing) -> karpenter_tui::sim::scenario::Scenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/packing.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut s = karpenter_tui::sim::scenario::parse_scenario(&text, path).unwrap_or_else(|e| panic!("{e}"));
    s.settings.controller.packing = packing;
    s
}

/// Provisioning decisions for pods, in time order: (seconds, claims, pods).
fn provisions(r: &karpenter_tui::sim::report::Report) -> Vec<(f64, usize, u64)> {
    use karpenter_tui::sim::report::DecisionDetail;
    r.decisions
        .iter()
        .filter_map(|d| match &d.detail {
            DecisionDetail::Provision { node_claims, pods, is_static: false } => Some((d.at, node_claims.len(), *pods)),
            _ => None,
        })
        .collect()
}

/// Cost packing sizes each claim for the pods a solve planned onto it; when the Nodes register, each pod is
/// nominated to its claim's Node and the stand-in kube-scheduler binds it there (as kube-scheduler honours
/// `status.nominatedNodeName`) instead of first fit. Measured on 2026-11-26 (debug): before nominations, first fit
/// left 309 of the 1,502 pods without room when the Nodes became Ready and 52 more claims were launched for them at
/// 51 s (418 nodes in all, $37.99/h at the end, $6.29 in all); with them, nothing is launched after the first pass
/// (366 claims) and the run ends at $35.69/h ($6.06 in all).
#[test]
fn under_cost_packing_the_first_passs_pods_bind_where_planned_and_nothing_is_launched_again() {
    let r = karpenter_tui::sim::run::run(&packing_scenario(Packing::Cost), None, None).unwrap();
    let p = provisions(&r);
    let (first, later) = p.split_first().expect("a provisioning pass");
    assert_eq!(first.2, 1502, "the first pass provisions for every pod: {p:?}");
    assert!(later.is_empty(), "claims launched again after the first pass: {later:?}");
    assert!(r.pending.is_empty(), "{:?}", r.pending);
    // No dearer than before nominations, nor than what the first pass planned (before, the relaunches made it
    // $37.99/h at the end, above the first pass's $36.05/h).
    assert!(r.cost.final_per_hour < 37.99, "${:.2}/h at the end", r.cost.final_per_hour);
    assert!(
        r.cost.final_per_hour <= r.packing.cost_per_hour,
        "${:.2}/h at the end, the first pass planned ${:.2}/h",
        r.cost.final_per_hour,
        r.packing.cost_per_hour
    );
}

/// Nominations are cost packing's alone: sampled every second through the first provisioning, launches and
/// bindings, pods are nominated under cost packing (each to a Node that exists and is Ready or registering) and
/// never under upstream packing.
#[test]
fn only_cost_packing_nominates_and_only_to_nodes_that_exist() {
    use karpenter_tui::sim::run::Playback;
    let observed = |packing: Packing| {
        let s = packing_scenario(packing);
        let mut p = Playback::new(&s).unwrap();
        let mut seen: std::collections::BTreeSet<(String, String)> = Default::default();
        for t in 1..=90 {
            p.advance(p.start + t * 1000).unwrap();
            let c = &p.world.cluster;
            for (key, pod) in c.pods.iter() {
                let Some(n) = pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()) else { continue };
                assert!(c.nodes.contains_key(&n), "{}/{} nominated to {n}, which does not exist", key.0, key.1);
                assert!(pod.node_name.is_none(), "a bound pod keeps no nomination");
                seen.insert((key.1.clone(), n));
            }
        }
        seen
    };
    assert!(observed(Packing::Upstream).is_empty(), "upstream packing nominates nothing");
    let cost = observed(Packing::Cost);
    assert!(cost.len() >= 1000, "{} pods nominated under cost packing", cost.len());
}

/// The longest any pod waited to be bound (to the end of the run if it never was, or to its deletion).
fn longest_wait(r: &karpenter_tui::sim::report::Report) -> f64 {
    r.pods.iter().map(|p| p.bound_at.or(p.deleted_at).unwrap_or(r.simulated_seconds) - p.created_at).fold(0.0, f64::max)
}

/// `scenarios/bench-day-aws.yaml` (bench-day's day of churn on the AWS catalog) at a tenth of its replicas, so a
/// debug build runs it in seconds: cost packing spends less over the day than upstream's, and no pod waits longer
/// for it. Measured on 2026-11-26 (debug): $431.81 against $151.91 over the day, the longest wait 46 s in both.
/// (bench-day itself allows one instance shape, so both strategies launch the same fleet there: docs/packing.md.)
#[test]
fn over_bench_days_churn_on_the_aws_catalog_cost_packing_spends_less_and_no_pod_waits_longer() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/bench-day-aws.yaml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("replicas: 1000", "replicas: 100")
        .replace("replicas: 600", "replicas: 60");
    let run = |packing: Packing| {
        let mut s = karpenter_tui::sim::scenario::parse_scenario(&text, path).unwrap_or_else(|e| panic!("{e}"));
        s.settings.controller.packing = packing;
        karpenter_tui::sim::run::run(&s, None, None).unwrap_or_else(|e| panic!("{e}"))
    };
    let (up, cost) = (run(Packing::Upstream), run(Packing::Cost));
    for r in [&up, &cost] {
        assert!(r.pending.is_empty(), "{}: pending at the end: {:?}", r.packing.strategy, r.pending);
        assert!(r.pods.len() >= 1000, "{} pods", r.pods.len());
    }
    assert!(
        cost.cost.total < up.cost.total * 0.9,
        "cost packing ${:.2} over the day, upstream ${:.2}",
        cost.cost.total,
        up.cost.total
    );
    assert!(
        longest_wait(&cost) <= longest_wait(&up),
        "longest wait {} s under cost packing, {} s under upstream",
        longest_wait(&cost),
        longest_wait(&up)
    );
}
