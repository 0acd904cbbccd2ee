//! The dashboard's picture of the simulated world ([`crate::ui::model::ClusterView`]), read from the world's object
//! store, its records and the engine's explanations. Read-only apart from the explanation cache the world keeps.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use crate::engine::api::NodePool;
use crate::engine::api::nodeclaim::{COND_INITIALIZED, COND_LAUNCHED};
use crate::engine::catalog::PriceSource;
use crate::engine::disruption::budgets::{self, PoolCounts};
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::{Method, Reason};
use crate::engine::labels;
use crate::engine::provisioning::Millis;
use crate::engine::resources::{Resources, parse_quantity};
use crate::engine::scheduling::pod::pod_requests;
use crate::sim::cloud::InterruptionKind;
use crate::sim::world::{Decision, DisruptionState, World};
use crate::ui::model::*;

/// Above this many nodes the per-node "why not consolidated" verdicts (a full single-node pass) are skipped in
/// periodic pictures: at 1,000 nodes the pass takes over a second and would stall the clock.
const EXPLAIN_MAX_NODES: usize = 300;
/// Events kept in the picture.
const MAX_EVENTS: usize = 500;

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>, cpu: bool) -> i64 {
    q.and_then(|q| parse_quantity(&q.0).ok()).map(|v| if cpu { v.milli() } else { v.value() }).unwrap_or(0)
}

fn requests(p: &Pod) -> Resources {
    pod_requests(p).unwrap_or_default()
}

fn price_provenance(p: &PriceSource, region: &str) -> String {
    match p {
        PriceSource::Static { date, fallback_region: None } => format!("static {region} table of {date}"),
        PriceSource::Static { date, fallback_region: Some(f) } => format!("static {f} table of {date} (no {region})"),
        PriceSource::Live { at } => format!("live AWS pricing at {at}"),
        PriceSource::Simulated => "simulated".into(),
    }
}

/// Builds the dashboard's picture of `w`. `source` names the backend for the header.
pub fn view(w: &mut World, source: Source, generation: u64) -> ClusterView {
    let now = w.now;
    let outlook = if w.cluster.nodes.len() <= EXPLAIN_MAX_NODES { Some(w.explain()) } else { None };
    let catalog = w.catalog();
    let mut v = ClusterView {
        source,
        now,
        mode: w.disruption.gate.mode(),
        leadership: Leadership::Acting,
        price_provenance: price_provenance(&catalog.price_source, &catalog.region),
        generation,
        ..Default::default()
    };
    let prices: BTreeMap<&str, f64> = w.record.nodes.iter().map(|n| (n.name.as_str(), n.price)).collect();

    // Nodes, and claims that have no node yet.
    let mut pods_on: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in w.cluster.pods.values() {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            pods_on.entry(n).or_default().push(p);
        }
    }
    let busy: BTreeMap<String, ProposalState> = w
        .record
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Disruption(r) if r.state == DisruptionState::InProgress => Some(r),
            _ => None,
        })
        .flat_map(|r| r.candidates.iter().map(|c| (c.clone(), ProposalState::InProgress)))
        .collect();
    // Claims and nodes meet by provider id (a claim's status.nodeName is only set once it registers).
    let claim_of_provider: BTreeMap<&str, &crate::engine::api::NodeClaim> = w
        .cluster
        .nodeclaims
        .values()
        .filter_map(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()).map(|p| (p, c)))
        .collect();
    let mut claims_with_nodes = std::collections::BTreeSet::new();
    for (name, node) in w.cluster.nodes.iter() {
        let labels_of = node.metadata.labels.clone().unwrap_or_default();
        let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let pods = pods_on.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        let mut req = Resources::default();
        for p in pods {
            req.add(&requests(p));
        }
        let provider = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or("");
        let claim = claim_of_provider.get(provider);
        if let Some(c) = claim {
            claims_with_nodes.insert(c.name().to_string());
        }
        let state = if node.metadata.deletion_timestamp.is_some() {
            Lifecycle::Deleting
        } else if busy.contains_key(name) {
            Lifecycle::Disrupting
        } else if claim.is_some_and(|c| c.is_true("Drifted")) {
            Lifecycle::Drifted
        } else if claim.is_none_or(|c| c.is_true(COND_INITIALIZED)) {
            Lifecycle::Initialized
        } else {
            Lifecycle::Registered
        };
        let mut pod_names: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or("default"),
                    p.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        pod_names.sort();
        v.nodes.push(NodeRow {
            name: name.clone(),
            nodeclaim: claim.map(|c| c.name().to_string()),
            nodepool: labels_of.get(labels::NODEPOOL).cloned(),
            instance_type: labels_of.get(labels::INSTANCE_TYPE).cloned().unwrap_or_default(),
            zone: labels_of.get(labels::ZONE).cloned().unwrap_or_default(),
            capacity_type: labels_of.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default(),
            price: prices.get(name.as_str()).copied().unwrap_or(0.0),
            created_at: node.metadata.creation_timestamp.as_ref().map(crate::engine::lifecycle::time_ms).unwrap_or(now),
            state,
            cpu_requested: req.get("cpu"),
            cpu_allocatable: quantity(alloc.and_then(|a| a.get("cpu")), true),
            memory_requested: req.get("memory"),
            memory_allocatable: quantity(alloc.and_then(|a| a.get("memory")), false),
            pods: pods.len(),
            max_pods: quantity(alloc.and_then(|a| a.get("pods")), false),
            pod_names,
            outlook: match outlook.as_ref().and_then(|o| o.get(name)) {
                Some(Outlook::Blocked(why)) => why.iter().map(|b| b.to_string()).collect(),
                Some(Outlook::Disruptable(cmd)) => vec![format!(
                    "{} would disrupt it now (saves ${:.4}/h), subject to budgets and validation",
                    cmd.method, cmd.savings_per_hour
                )],
                None if outlook.is_none() => vec!["(explanations are skipped above 300 nodes)".into()],
                None => Vec::new(),
            },
        });
    }
    for c in w.cluster.nodeclaims.values() {
        if claims_with_nodes.contains(c.name()) {
            continue;
        }
        let l = c.metadata.labels.clone().unwrap_or_default();
        let launched = c.is_true(COND_LAUNCHED);
        v.nodes.push(NodeRow {
            name: c.name().to_string(),
            nodeclaim: Some(c.name().to_string()),
            nodepool: l.get(labels::NODEPOOL).cloned(),
            instance_type: l.get(labels::INSTANCE_TYPE).cloned().unwrap_or_default(),
            zone: l.get(labels::ZONE).cloned().unwrap_or_default(),
            capacity_type: l.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default(),
            price: 0.0,
            created_at: c.metadata.creation_timestamp.as_ref().map(crate::engine::lifecycle::time_ms).unwrap_or(now),
            state: if c.metadata.deletion_timestamp.is_some() {
                Lifecycle::Deleting
            } else if launched {
                Lifecycle::Launched
            } else {
                Lifecycle::Launching
            },
            ..Default::default()
        });
    }

    // Cost.
    for n in &v.nodes {
        if n.state == Lifecycle::Launching {
            continue;
        }
        v.cost.per_hour += n.price;
        if n.capacity_type == labels::CAPACITY_SPOT {
            v.cost.spot_nodes += 1;
        } else if !n.capacity_type.is_empty() {
            v.cost.on_demand_nodes += 1;
        }
    }

    // Disruptions: the record holds every command from computation to its end.
    let awaiting: BTreeMap<String, &crate::engine::disruption::Command> =
        w.disruption.gate.awaiting().map(|p| (p.id.clone(), &p.command)).collect();
    for d in w.record.decisions.iter().rev() {
        let Decision::Disruption(r) = d else { continue };
        let state = match &r.state {
            DisruptionState::Validating => ProposalState::Validating,
            DisruptionState::AwaitingApproval => ProposalState::AwaitingApproval,
            DisruptionState::DryRun => ProposalState::DryRun,
            DisruptionState::InProgress => ProposalState::InProgress,
            DisruptionState::Executed => ProposalState::Executed,
            DisruptionState::Rejected => ProposalState::Rejected,
            DisruptionState::Invalidated(_) => ProposalState::Invalidated,
            DisruptionState::Failed(_) => ProposalState::Failed,
        };
        let detail = match &r.state {
            DisruptionState::Invalidated(why) | DisruptionState::Failed(why) => Some(why.clone()),
            _ => None,
        };
        let cmd = awaiting.get(&r.id);
        let evictions = cmd
            .map(|c| {
                c.candidates
                    .iter()
                    .flat_map(|cand| cand.pods.iter().map(|p| (p.key(), p.pdb.clone())))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut budget_use: BTreeMap<String, usize> = BTreeMap::new();
        if let Some(c) = cmd {
            for cand in &c.candidates {
                *budget_use.entry(cand.nodepool.clone()).or_default() += 1;
            }
        }
        if matches!(r.method, Method::Emptiness | Method::Drift | Method::MultiNode | Method::SingleNode) {
            v.cost.pending_savings_per_hour += if state.is_open() { r.savings_per_hour.max(0.0) } else { 0.0 };
            if state == ProposalState::Executed {
                v.cost.saved_per_hour += r.savings_per_hour.max(0.0);
            }
        }
        let progress = (state == ProposalState::InProgress).then(|| progress_of(w, &r.id, &r.candidates, &pods_on));
        v.disruptions.push(DisruptionRow {
            id: r.id.clone(),
            at: r.at,
            method: r.method.as_str().to_string(),
            reason: r.method.reason().as_str().to_string(),
            candidates: r.candidates.clone(),
            replacements: r.replacements.clone(),
            savings_per_hour: r.savings_per_hour,
            evictions,
            budget_use: budget_use.into_iter().map(|(p, n)| (p, n, 0)).collect(),
            state,
            summary: r.summary.clone(),
            detail,
            progress,
        });
    }
    // Open proposals first, then the rest newest first.
    v.disruptions.sort_by_key(|d| (!d.state.is_open(), d.state != ProposalState::InProgress, -d.at));

    // NodePools and budgets.
    let mut counts: BTreeMap<String, PoolCounts> = BTreeMap::new();
    for n in &v.nodes {
        if let Some(p) = &n.nodepool
            && matches!(n.state, Lifecycle::Initialized | Lifecycle::Drifted | Lifecycle::Disrupting)
        {
            let c = counts.entry(p.clone()).or_default();
            c.nodes += 1;
            if n.state == Lifecycle::Disrupting {
                c.disrupting += 1;
            }
        }
    }
    let pools: Vec<NodePool> = w.cluster.nodepools.values().cloned().collect();
    let mut pool_allowed: BTreeMap<(String, String), i64> = BTreeMap::new();
    for pool in &pools {
        let name = pool.name().to_string();
        let pc = counts.get(&name).copied().unwrap_or_default();
        let mut row = NodePoolRow {
            name: name.clone(),
            weight: pool.spec.weight.unwrap_or(0),
            consolidation_policy: pool.spec.disruption.consolidation_policy.clone(),
            consolidate_after: pool.spec.disruption.consolidate_after.clone(),
            yaml: crate::ui::editor::editable_yaml(pool).unwrap_or_default(),
            ..Default::default()
        };
        let mut used = Resources::default();
        for n in v.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(name.as_str())) {
            row.nodes += 1;
            if n.state != Lifecycle::Launching {
                row.cost_per_hour += n.price;
            }
            if n.state == Lifecycle::Drifted {
                row.drifted += 1;
            }
            used.add(&Resources::new(n.cpu_allocatable, n.memory_allocatable, 0));
        }
        let limits: BTreeMap<String, i64> = pool
            .spec
            .limits
            .iter()
            .flatten()
            .filter_map(|(k, q)| {
                parse_quantity(&q.0).ok().map(|v| (k.clone(), if k == "cpu" { v.milli() } else { v.value() }))
            })
            .collect();
        for res in ["cpu", "memory"] {
            row.usage.push(ResourceUse { resource: res.into(), used: used.get(res), limit: limits.get(res).copied() });
        }
        for (k, l) in &limits {
            if k != "cpu" && k != "memory" {
                row.usage.push(ResourceUse { resource: k.clone(), used: used.get(k), limit: Some(*l) });
            }
        }
        for reason in [Reason::Empty, Reason::Drifted, Reason::Underutilized] {
            let st = budgets::status(pool, reason, pc, now);
            let why = (st.allowed == 0).then(|| st.why_zero(&name, reason));
            pool_allowed.insert((name.clone(), reason.as_str().to_string()), st.allowed);
            row.budgets.push((reason.as_str().to_string(), st.allowed, why));
            v.budgets.push(budget_row(pool, reason, &st, now));
        }
        v.nodepools.push(row);
    }
    for d in &mut v.disruptions {
        for (pool, _, allowed) in &mut d.budget_use {
            *allowed = pool_allowed.get(&(pool.clone(), d.reason.clone())).copied().unwrap_or(0);
        }
    }

    // Pending pods.
    for key in w.pending_pods() {
        let Some(p) = w.cluster.pods.get(&key) else { continue };
        let r = requests(p);
        v.pending.push(PendingPod {
            namespace: key.0.clone(),
            name: key.1.clone(),
            cpu_millis: r.get("cpu"),
            memory_bytes: r.get("memory"),
            created_at: p.metadata.creation_timestamp.as_ref().map(crate::engine::lifecycle::time_ms).unwrap_or(now),
            reasons: w.pending_reasons.get(&key).cloned().unwrap_or_default(),
            nominated: None,
        });
    }

    // Interruptions and events, from the decision record.
    let node_records: BTreeMap<&str, &crate::sim::world::NodeRecord> =
        w.record.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for d in &w.record.decisions {
        match d {
            Decision::Provision { at, nodeclaims, pods, .. } => v.events.push(EventRow {
                at: *at,
                kind: "Normal".into(),
                reason: "Provisioned".into(),
                object: format!("{} NodeClaim(s)", nodeclaims.len()),
                message: format!("launched {} for {pods} pending pod(s)", nodeclaims.join(", ")),
            }),
            Decision::Delete { at, nodeclaim, reason, .. } => v.events.push(EventRow {
                at: *at,
                kind: "Normal".into(),
                reason: "Deleted".into(),
                object: format!("nodeclaim/{nodeclaim}"),
                message: format!("deleted: {}", reason.as_str()),
            }),
            Decision::Interruption { at, node, kind, displaced, .. } => {
                let rec = node_records.get(node.as_str());
                let kind_s = interruption_name(*kind);
                // A displaced pod is running again once a pod of the same name (the controller's replacement, or
                // the pod itself) is bound to another node after the notice.
                let back: Vec<Option<Millis>> = displaced
                    .iter()
                    .map(|k| match w.record.pods.get(k) {
                        Some(p) if p.node.as_deref() != Some(node.as_str()) => p.bound_at.filter(|t| t >= at),
                        _ => None,
                    })
                    .collect();
                let running = back.iter().filter(|t| t.is_some()).count();
                let gone = rec.and_then(|r| r.deleted_at);
                let replaced_at =
                    if back.iter().all(Option::is_some) { back.iter().flatten().max().copied() } else { None };
                let progress = match kind {
                    InterruptionKind::RebalanceRecommendation => "informational only".to_string(),
                    _ => {
                        let node_state = match gone {
                            Some(t) => format!("node gone after {:.0}s", (t - at) as f64 / 1000.0),
                            None => "node draining".to_string(),
                        };
                        format!("{running}/{} pods running elsewhere; {node_state}", displaced.len())
                    }
                };
                let pods = displaced.len();
                v.interruptions.push(InterruptionRow {
                    at: *at,
                    kind: kind_s.into(),
                    node: node.clone(),
                    capacity_type: rec.map(|r| r.capacity_type.clone()).unwrap_or_default(),
                    zone: rec.map(|r| r.zone.clone()).unwrap_or_default(),
                    pods,
                    progress,
                    replaced_after: match kind {
                        InterruptionKind::RebalanceRecommendation => None,
                        _ => replaced_at
                            .or(if displaced.is_empty() { gone } else { None })
                            .map(|t| (t - at) as f64 / 1000.0),
                    },
                });
                v.events.push(EventRow {
                    at: *at,
                    kind: "Warning".into(),
                    reason: kind_s.into(),
                    object: format!("node/{node}"),
                    message: format!("{kind_s} notice for {node}"),
                });
            }
            Decision::Disruption(r) => v.events.push(EventRow {
                at: r.at,
                kind: "Normal".into(),
                reason: format!("Disruption{}", capitalise(r.method.as_str())),
                object: r.candidates.iter().map(|c| format!("node/{c}")).collect::<Vec<_>>().join(","),
                message: format!("{} ({})", r.summary, state_word(&r.state)),
            }),
        }
    }
    // The cluster's side: nodes registering, becoming ready and going away.
    for n in &w.record.nodes {
        let object = format!("node/{}", n.name);
        let what = format!("{} {} in {}", n.capacity_type, n.instance_type, n.zone);
        v.events.push(EventRow {
            at: n.created_at,
            kind: "Normal".into(),
            reason: "Registered".into(),
            object: object.clone(),
            message: format!("node registered ({what})"),
        });
        if let Some(t) = n.initialized_at {
            v.events.push(EventRow {
                at: t,
                kind: "Normal".into(),
                reason: "Ready".into(),
                object: object.clone(),
                message: format!("node ready and initialized after {:.0}s", (t - n.created_at) as f64 / 1000.0),
            });
        }
        if let Some(t) = n.deleted_at {
            v.events.push(EventRow {
                at: t,
                kind: "Normal".into(),
                reason: "NodeDeleted".into(),
                object,
                message: format!("node removed ({what})"),
            });
        }
    }
    v.interruptions.reverse();
    // Newest first; at the same instant, a stable order by object and reason.
    v.events
        .sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.object.cmp(&b.object)).then_with(|| a.reason.cmp(&b.reason)));
    v.events.truncate(MAX_EVENTS);
    v
}

/// Where a started command is: its replacements, then the candidates draining.
fn progress_of(w: &World, id: &str, candidates: &[String], pods_on: &BTreeMap<&str, Vec<&Pod>>) -> String {
    let mut parts = Vec::new();
    if let Some(f) = w.disruption.in_flight.iter().find(|f| f.id == id) {
        let ready = f
            .replacements
            .iter()
            .filter(|c| w.cluster.nodeclaims.get(*c).is_some_and(|c| c.is_true(COND_INITIALIZED)))
            .count();
        if !f.replacements.is_empty() {
            parts.push(format!("replacements initialized {ready}/{}", f.replacements.len()));
        }
    }
    let draining: Vec<String> = candidates
        .iter()
        .filter(|n| w.cluster.nodes.contains_key(*n))
        .map(|n| format!("{n} ({} pods left)", pods_on.get(n.as_str()).map_or(0, Vec::len)))
        .collect();
    if draining.is_empty() {
        parts.push("candidates gone".into());
    } else {
        parts.push(format!("draining {}", draining.join(", ")));
    }
    parts.join("; ")
}

fn capitalise(s: &str) -> String {
    s.split('-').map(|w| w[..1.min(w.len())].to_uppercase() + &w[1.min(w.len())..]).collect()
}

fn state_word(s: &DisruptionState) -> String {
    match s {
        DisruptionState::Invalidated(w) => format!("invalidated: {w}"),
        DisruptionState::Failed(w) => format!("failed: {w}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn interruption_name(k: InterruptionKind) -> &'static str {
    match k {
        InterruptionKind::SpotInterruption => "SpotInterrupted",
        InterruptionKind::RebalanceRecommendation => "SpotRebalanceRecommendation",
        InterruptionKind::ScheduledChange => "ScheduledChange",
        InterruptionKind::InstanceStopping => "InstanceStopping",
        InterruptionKind::InstanceTerminated => "InstanceTerminated",
    }
}

/// One NodePool's budget for one reason, with the scheduled windows of the next 24 hours.
fn budget_row(pool: &NodePool, reason: Reason, st: &budgets::BudgetStatus, now: Millis) -> BudgetRow {
    let mut row = BudgetRow {
        nodepool: pool.name().to_string(),
        reason: reason.as_str().to_string(),
        allowed_now: st.allowed,
        error: st.error.clone(),
        ..Default::default()
    };
    let Some(now_t) = DateTime::<Utc>::from_timestamp_millis(now) else { return row };
    for b in &pool.spec.disruption.budgets {
        if !budgets::applies(b, reason) {
            continue;
        }
        match (&b.schedule, &b.duration) {
            (Some(s), Some(d)) => {
                row.rules.push(format!("{} during \"{s}\" for {d}", b.nodes));
                row.windows.extend(windows(s, d, now_t).into_iter().map(|(a, z)| (a, z, b.nodes.clone())));
            }
            _ => row.rules.push(b.nodes.clone()),
        }
    }
    row
}

/// Scheduled windows overlapping the next 24 hours, as minutes from now.
fn windows(schedule: &str, duration: &str, now: DateTime<Utc>) -> Vec<(u32, u32)> {
    use crate::engine::api::duration::parse_go_duration;
    use crate::engine::api::validation::parse_schedule;
    let (Ok(cron), Ok(d)) = (parse_schedule(schedule), parse_go_duration(duration)) else { return Vec::new() };
    let Ok(d) = chrono::Duration::from_std(d) else { return Vec::new() };
    let horizon = now + chrono::Duration::hours(24);
    let mut out = Vec::new();
    let mut from = now - d;
    for _ in 0..64 {
        let Ok(start) = cron.find_next_occurrence(&from, false) else { break };
        if start >= horizon {
            break;
        }
        let end = start + d;
        let a = (start - now).num_minutes().clamp(0, 24 * 60) as u32;
        let z = (end - now).num_minutes().clamp(0, 24 * 60) as u32;
        if z > a {
            out.push((a, z));
        }
        from = start + chrono::Duration::minutes(1);
    }
    out
}
