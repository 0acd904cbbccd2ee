//! The dashboard's picture ([`ClusterView`]), built by [`build`] the same way for every backend: node rows (with
//! ghost rows for NodeClaims that have no node yet), cost, the controller's commands and proposals, NodePool rows
//! with usage and budgets, the budget timeline, pending pods, interruptions and events. Backends hand it what only
//! they know ([`Input`]): prices, why pods are pending, the interruptions and events they have seen.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;

use crate::controller::disruption::{CommandState, Orchestrator};
use crate::engine::api::nodeclaim::{COND_INITIALIZED, COND_LAUNCHED};
use crate::engine::api::{NodeClaim, NodePool};
use crate::engine::catalog::{Catalog, PriceSource};
use crate::engine::disruption::budgets::{self, PoolCounts};
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::Mode;
use crate::engine::disruption::{Command, Reason};
use crate::engine::labels;
use crate::engine::lifecycle::time_ms;
use crate::engine::provisioning::Millis;
use crate::engine::resources::{Resources, parse_quantity};
use crate::engine::scheduling::pod::pod_requests;
use crate::engine::state::Nodes;
use crate::engine::stored_pod::StoredPod;
use crate::protocol::view::*;

/// Above this many nodes the per-node "why not consolidated" verdicts (a full single-node pass) are skipped in
/// periodic pictures: at 1,000 nodes the pass takes over a second and would stall the backend.
pub const EXPLAIN_MAX_NODES: usize = 300;

/// The objects a picture is drawn from.
pub struct Objects<'a> {
    pub nodes: Vec<&'a Node>,
    pub nodeclaims: Vec<&'a NodeClaim>,
    pub pods: Vec<&'a StoredPod>,
    pub nodepools: Vec<&'a NodePool>,
    pub nodeoverlays: Vec<&'a crate::engine::api::nodeoverlay::NodeOverlay>,
}

pub use crate::controller::overlays::OverlayView as Overlays;

/// Events kept in a picture.
pub const MAX_EVENTS: usize = 500;

/// Everything a picture is built from: a read of the cluster, the controller's state, and what only the backend
/// knows (how it prices a node, why pods are pending, the interruptions and events it has seen).
pub struct Input<'a> {
    pub source: Source,
    pub now: Millis,
    pub mode: Mode,
    /// The packing strategy provisioning uses (acting) or would use (observing).
    pub packing: crate::engine::packing::Packing,
    /// Whose decisions apply, and where that came from.
    pub version: crate::engine::version::KarpenterVersion,
    pub version_source: String,
    pub gates: crate::controller::settings::FeatureGates,
    /// The repair policies node repair acts on (empty: repair is off).
    pub repair_policies: &'a [crate::controller::cloud::RepairPolicy],
    /// The NodeOverlays' evaluation, when the gate is on.
    pub overlays: Option<Overlays<'a>>,
    pub leadership: Leadership,
    /// Where prices come from, for the header.
    pub catalog: &'a Catalog,
    pub generation: u64,
    pub objects: Objects<'a>,
    /// A node's price per hour, by name and labels.
    pub price: &'a dyn Fn(&str, &BTreeMap<String, String>) -> f64,
    /// Why each node is not being disrupted, when it was worked out.
    pub outlook: Option<&'a BTreeMap<String, Outlook>>,
    /// The acting controller's disruption state: its commands and proposals.
    pub orchestrator: Option<&'a Orchestrator>,
    /// What an engine that only observes would start now (shown as a dry-run proposal).
    pub would_disrupt: Option<&'a Command>,
    pub pending: Vec<PendingPod>,
    /// Both packing strategies over the latest launching pass's pods (or the pods pending now), when there is one.
    pub packing_pass: Option<PackingRow>,
    /// CapacityBuffers as the acting controller resolved them.
    pub buffers: Vec<crate::protocol::view::BufferRow>,
    /// Capacity reservations, by id.
    pub reservations: Vec<ReservationRow>,
    /// The interruption notices seen, newest first, given where the pods are now.
    pub interruptions: &'a dyn Fn(&Nodes<'_>) -> Vec<InterruptionRow>,
    /// Events, in the order the pane shows them.
    pub events: Vec<EventRow>,
}

/// The packing row of a controller's launching pass.
pub fn packing_row(p: &crate::controller::provisioning::PackingPass) -> PackingRow {
    PackingRow { at: Some(p.at), packing: p.packing, pods: p.pods, comparison: p.comparison }
}

/// The dashboard's picture, the same way for every backend.
pub fn build(input: Input<'_>) -> ClusterView {
    let Input {
        source,
        now,
        mode,
        packing,
        version,
        version_source,
        gates,
        repair_policies,
        overlays,
        leadership,
        catalog,
        generation,
        objects,
        price,
        outlook,
        orchestrator,
        would_disrupt,
        pending,
        packing_pass,
        buffers,
        reservations,
        interruptions,
        mut events,
    } = input;
    let mut v = ClusterView {
        source,
        now,
        mode,
        packing,
        karpenter_version: version,
        karpenter_version_source: version_source,
        feature_gates: gates.entries(),
        leadership,
        price_provenance: price_provenance(&catalog.price_source, &catalog.region),
        generation,
        packing_pass,
        buffers,
        ..Default::default()
    };
    v.paused = orchestrator
        .and_then(Orchestrator::hold)
        .map(|h| crate::protocol::view::PauseRow {
            since: Some(h.since),
            by: h.by.clone(),
            how: "held by this engine".into(),
        })
        .or_else(|| crate::shell::disruption_pause::status(&objects.nodepools));
    // The one join of the picture: nodes with their claims and pods.
    let joined = Nodes::new(objects.nodes.iter().copied(), objects.nodeclaims.iter().copied())
        .with_pods(objects.pods.iter().copied());
    let busy = orchestrator.map(disrupting).unwrap_or_default();
    let health = NodeHealth { repair_policies, overlays };
    fill_nodes(&mut v, &objects, &joined, price, &busy, outlook, health);
    fill_overlays(&mut v, &objects.nodeoverlays, overlays);
    v.reservations = reservations;
    if let Some(o) = orchestrator {
        fill_disruptions(&mut v, o, &joined);
    }
    if let Some(cmd) = would_disrupt {
        let mut row = proposal_row(cmd, &format!("dry-run:{}", cmd.key()), now, ProposalState::DryRun);
        row.detail = Some("observing: the engine would start this now; nothing is done".into());
        v.disruptions.push(row);
        v.cost.pending_savings_per_hour = cmd.savings_per_hour.max(0.0);
    }
    fill_nodepools(&mut v, &objects.nodepools, overlays);
    v.pending = pending;
    v.interruptions = interruptions(&joined);
    events.truncate(MAX_EVENTS);
    v.events = events;
    v
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>, cpu: bool) -> i64 {
    q.and_then(|q| parse_quantity(&q.0).ok()).map(|v| if cpu { v.milli() } else { v.value() }).unwrap_or(0)
}

pub fn requests(p: &StoredPod) -> Resources {
    pod_requests(p).unwrap_or_default()
}

pub fn price_provenance(p: &PriceSource, region: &str) -> String {
    match p {
        PriceSource::Static { date, fallback_region: None } => format!("static {region} table of {date}"),
        PriceSource::Static { date, fallback_region: Some(f) } => format!("static {f} table of {date} (no {region})"),
        PriceSource::Live { at } => format!("live AWS pricing at {at}"),
        PriceSource::LiveSpot { at, date } => format!("live spot prices at {at}, on-demand from the {date} table"),
        PriceSource::Simulated => "simulated".into(),
    }
}

/// The catalog's price of a node from its well-known labels (instance type, zone, capacity type); 0 when the
/// catalog doesn't know the offering (a node Karpenter didn't launch, another region's type).
pub fn catalog_price(catalog: &Catalog, node_labels: &BTreeMap<String, String>) -> f64 {
    let (Some(it), Some(zone), Some(ct)) =
        (node_labels.get(labels::INSTANCE_TYPE), node_labels.get(labels::ZONE), node_labels.get(labels::CAPACITY_TYPE))
    else {
        return 0.0;
    };
    catalog
        .get(it)
        .and_then(|t| t.offerings.iter().find(|o| &o.zone == zone && &o.capacity_type == ct))
        .map_or(0.0, |o| o.price)
}

/// What the v1.x controllers add to a node's row: node repair's verdict and NodeOverlay prices.
#[derive(Clone, Copy)]
pub struct NodeHealth<'a> {
    pub repair_policies: &'a [crate::controller::cloud::RepairPolicy],
    pub overlays: Option<Overlays<'a>>,
}

/// Node rows, ghost rows for claims without a node, and the cost summary. `price` gives a node's $/h from its
/// name and labels; `disrupting` names the nodes a started disruption is working on; `outlook` is the engine's
/// verdict per node (`None`: skipped at this size).
pub fn fill_nodes(
    v: &mut ClusterView,
    o: &Objects<'_>,
    joined: &Nodes<'_>,
    price: &dyn Fn(&str, &BTreeMap<String, String>) -> f64,
    disrupting: &BTreeSet<String>,
    outlook: Option<&BTreeMap<String, Outlook>>,
    health: NodeHealth<'_>,
) {
    let NodeHealth { repair_policies, overlays } = health;
    let now = v.now;
    // Claims and nodes meet by provider id (a claim's status.nodeName is only set once it registers).
    let mut claims_with_nodes = BTreeSet::new();
    for node in &o.nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let labels_of = node.metadata.labels.clone().unwrap_or_default();
        let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let pods = joined.pods_on(name);
        let mut req = Resources::default();
        for p in pods {
            req.add(&requests(p));
        }
        let claim = joined.claim_of(name);
        if let Some(c) = claim {
            claims_with_nodes.insert(c.name().to_string());
        }
        let repair =
            claim.and_then(|_| crate::controller::repair::unhealthy(node, repair_policies)).map(|u| RepairInfo {
                condition: u.condition,
                status: u.status,
                reason: u.reason,
                since: u.since,
                repair_at: u.deadline,
            });
        let state = if node.metadata.deletion_timestamp.is_some() {
            Lifecycle::Deleting
        } else if disrupting.contains(name) {
            Lifecycle::Disrupting
        } else if claim.is_some_and(crate::controller::reboot::in_progress) {
            Lifecycle::Rebooting
        } else if repair.is_some() {
            Lifecycle::Unhealthy
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
            name: name.to_string(),
            nodeclaim: claim.map(|c| c.name().to_string()),
            nodepool: labels_of.get(labels::NODEPOOL).cloned(),
            instance_type: labels_of.get(labels::INSTANCE_TYPE).cloned().unwrap_or_default(),
            zone: labels_of.get(labels::ZONE).cloned().unwrap_or_default(),
            capacity_type: labels_of.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default(),
            price: price(name, &labels_of),
            created_at: node.metadata.creation_timestamp.as_ref().map(time_ms).unwrap_or(now),
            state,
            cpu_requested: req.get("cpu"),
            cpu_allocatable: quantity(alloc.and_then(|a| a.get("cpu")), true),
            memory_requested: req.get("memory"),
            memory_allocatable: quantity(alloc.and_then(|a| a.get("memory")), false),
            pods: pods.len(),
            max_pods: quantity(alloc.and_then(|a| a.get("pods")), false),
            pod_names,
            outlook: match outlook.and_then(|o| o.get(name)) {
                Some(Outlook::Blocked(why)) => why.iter().map(|b| b.to_string()).collect(),
                Some(Outlook::Disruptable(cmd)) => vec![format!(
                    "{} would disrupt it now (saves ${:.4}/h), subject to budgets and validation",
                    cmd.method, cmd.savings_per_hour
                )],
                None if outlook.is_none() => {
                    vec![format!("(explanations are skipped above {EXPLAIN_MAX_NODES} nodes)")]
                }
                None => Vec::new(),
            },
            repair,
            price_overlay: None,
            labels: labels_of,
        });
    }
    for c in &o.nodeclaims {
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
            created_at: c.metadata.creation_timestamp.as_ref().map(time_ms).unwrap_or(now),
            state: if c.metadata.deletion_timestamp.is_some() {
                Lifecycle::Deleting
            } else if launched {
                Lifecycle::Launched
            } else {
                Lifecycle::Launching
            },
            labels: l,
            ..Default::default()
        });
    }

    if let Some(o) = overlays {
        overlay_prices(v, o);
    }
    for n in &v.nodes {
        if n.state == Lifecycle::Launching {
            continue;
        }
        v.cost.per_hour += n.price;
        if n.capacity_type == labels::CAPACITY_SPOT {
            v.cost.spot_nodes += 1;
        } else if n.capacity_type == labels::CAPACITY_RESERVED {
            v.cost.reserved_nodes += 1;
        } else if !n.capacity_type.is_empty() {
            v.cost.on_demand_nodes += 1;
        }
    }
}

/// NodePool rows and budget rows, from the node rows already in `v`; then fills in the budget each proposal in
/// `v.disruptions` would use.
/// A node whose offering a NodeOverlay repriced shows the overlaid price (what Karpenter decides with), naming the
/// overlay.
fn overlay_prices(v: &mut ClusterView, o: Overlays<'_>) {
    for n in &mut v.nodes {
        let Some(applied) = n.nodepool.as_deref().and_then(|p| o.applied.get(p)) else { continue };
        let Some(prov) = applied.provenance.get(&n.instance_type) else { continue };
        if let Some(p) =
            prov.prices.iter().find(|p| p.offering.zone == n.zone && p.offering.capacity_type == n.capacity_type)
        {
            n.price = p.price;
            n.price_overlay = Some(p.overlay.clone());
        }
    }
}

/// The NodeOverlays, in evaluation order, with how each came out.
fn fill_overlays(
    v: &mut ClusterView,
    objects: &[&crate::engine::api::nodeoverlay::NodeOverlay],
    o: Option<Overlays<'_>>,
) {
    let mut rows: Vec<OverlayRow> = objects
        .iter()
        .map(|ov| {
            let name = ov.name().to_string();
            let (state, prices, capacity) = match o {
                None => ("not evaluated (feature gate NodeOverlay is off)".to_string(), 0, 0),
                Some(o) => {
                    let fx = o.evaluation.effects(&name);
                    let state = match o.evaluation.outcome(&name) {
                        Some(out) if out.is_applied() => "Applied".to_string(),
                        Some(out) => {
                            format!("{}: {}", out.reason().unwrap_or_default(), out.message().unwrap_or_default())
                        }
                        None => "not evaluated yet".to_string(),
                    };
                    (state, fx.prices.len(), fx.capacity.len())
                }
            };
            let yaml = crate::engine::api::strict::editable_overlay_yaml(ov).unwrap_or_default();
            OverlayRow { name, weight: ov.weight(), state, prices, capacity, yaml }
        })
        .collect();
    let order: Vec<String> = o.map(|o| o.evaluation.order().to_vec()).unwrap_or_default();
    let rank = |n: &str| order.iter().position(|x| x == n).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| rank(&a.name).cmp(&rank(&b.name)).then(b.weight.cmp(&a.weight)).then(b.name.cmp(&a.name)));
    v.overlays = rows;
}

pub fn fill_nodepools(v: &mut ClusterView, nodepools: &[&NodePool], overlays: Option<Overlays<'_>>) {
    let now = v.now;
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
    let mut pool_allowed: BTreeMap<(String, String), i64> = BTreeMap::new();
    for pool in nodepools {
        let name = pool.name().to_string();
        let pc = counts.get(&name).copied().unwrap_or_default();
        let mut row = NodePoolRow {
            name: name.clone(),
            weight: pool.spec.weight.unwrap_or(0),
            consolidation_policy: pool.spec.disruption.consolidation_policy.clone(),
            consolidate_after: pool.spec.disruption.consolidate_after.clone(),
            replicas: pool.spec.replicas,
            yaml: crate::engine::api::strict::editable_yaml(pool).unwrap_or_default(),
            ..Default::default()
        };
        if let Some(applied) = overlays.and_then(|o| o.applied.get(&name)) {
            for (t, prov) in &applied.provenance {
                for p in &prov.prices {
                    row.overlays.push(format!(
                        "{t} {}: ${:.4} → ${:.4}/h by {} ({})",
                        p.offering, p.base_price, p.price, p.overlay, p.change
                    ));
                }
                for c in &prov.capacity {
                    row.overlays.push(format!("{t}: {}={} by {}", c.resource, c.quantity, c.overlay));
                }
            }
        }
        let mut used = Resources::default();
        for n in v.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(name.as_str())) {
            row.nodes += 1;
            if n.state != Lifecycle::Launching {
                row.cost_per_hour += n.price;
            }
            if n.state == Lifecycle::Drifted {
                row.drifted += 1;
            }
            if matches!(n.state, Lifecycle::Initialized | Lifecycle::Drifted | Lifecycle::Unhealthy) {
                row.ready += 1;
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
        // What a repair proposal (Karpenter v1.15) uses of the pool's budget.
        let unhealthy = budgets::status(pool, Reason::Unhealthy, pc, now);
        pool_allowed.insert((name.clone(), Reason::Unhealthy.as_str().to_string()), unhealthy.allowed);
        v.nodepools.push(row);
    }
    for d in &mut v.disruptions {
        for (pool, _, allowed) in &mut d.budget_use {
            *allowed = pool_allowed.get(&(pool.clone(), d.reason.clone())).copied().unwrap_or(0);
        }
    }
}

/// A pending pod's row.
pub fn pending_row(
    p: &StoredPod,
    reasons: Vec<(String, String)>,
    nominated: Option<String>,
    now: Millis,
) -> PendingPod {
    let r = requests(p);
    PendingPod {
        namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        name: p.metadata.name.clone().unwrap_or_default(),
        cpu_millis: r.get("cpu"),
        memory_bytes: r.get("memory"),
        created_at: p.metadata.creation_timestamp.as_ref().map(time_ms).unwrap_or(now),
        reasons,
        nominated,
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

/// A disruption command's row; the budget each NodePool allows now is filled in with the NodePool rows.
pub fn proposal_row(cmd: &Command, id: &str, at: Millis, state: ProposalState) -> DisruptionRow {
    let mut budget_use: BTreeMap<String, usize> = BTreeMap::new();
    for c in &cmd.candidates {
        *budget_use.entry(c.nodepool.clone()).or_default() += 1;
    }
    DisruptionRow {
        id: id.to_string(),
        at,
        method: cmd.method.as_str().to_string(),
        reason: cmd.reason().as_str().to_string(),
        candidates: cmd.node_names(),
        replacements: cmd.replacements.iter().map(|r| r.instance_types.clone()).collect(),
        savings_per_hour: cmd.savings_per_hour,
        evictions: cmd.candidates.iter().flat_map(|c| c.pods.iter().map(|p| (p.key(), p.pdb.clone()))).collect(),
        budget_use: budget_use.into_iter().map(|(p, n)| (p, n, 0)).collect(),
        state,
        summary: cmd.summary(),
        detail: match &cmd.repair {
            Some(r) => Some(repair_detail(r, cmd.terminate_first)),
            None if cmd.terminate_first => Some(TERMINATE_FIRST.to_string()),
            None => None,
        },
        progress: None,
    }
}

/// The detail line of a terminate-first command.
const TERMINATE_FIRST: &str = "terminate first: no replacement can be staged before the node goes (a static NodePool \
     at its node limit, or a full capacity reservation), so it is deleted first and provisioning refills its slot";

/// Why a repair proposal repairs, for its detail line: the condition, since when it has been due, its urgency and
/// how long the drain may take.
fn repair_detail(r: &crate::engine::disruption::repair::RepairDetail, terminate_first: bool) -> String {
    let when = if terminate_first { "at once" } else { "once the replacement is up" };
    let drain = match r.drain {
        Some(0) => format!("forceful {when}"),
        Some(d) => format!("bounded to {} {when}", crate::engine::disruption::human_duration(d)),
        None => "as the NodeClaim's terminationGracePeriod allows".to_string(),
    };
    let first = if terminate_first { "; terminate first, provisioning refills its slot" } else { "" };
    format!(
        "{} past its repair policy's toleration since {}; urgency {:.2}; drain {drain}{first}",
        r.condition,
        crate::engine::lifecycle::rfc3339(r.eligible_since),
        r.score
    )
}

/// The Disruptions pane and the header's savings from the disruption controller's records, the same for every
/// backend: open proposals first, then the rest newest first. `joined` says which nodes still exist, with their
/// pods, and which NodeClaims are initialized (a started command's replacements).
pub fn fill_disruptions(v: &mut ClusterView, orchestrator: &Orchestrator, joined: &Nodes<'_>) {
    let node_exists = |n: &str| joined.by_node(n).is_some();
    let claim_ready =
        |c: &str| joined.by_claim(c).and_then(|s| s.nodeclaim).is_some_and(|c| c.is_true(COND_INITIALIZED));
    for r in orchestrator.records.iter().rev() {
        let mut row = proposal_row(&r.command, &r.id, r.at, r.state.phase());
        if let Some(why) = r.state.reason() {
            row.detail = Some(why.to_string());
        }
        if row.state == ProposalState::InProgress {
            let mut parts = Vec::new();
            if let Some(f) = orchestrator.in_flight().iter().find(|f| f.id == r.id)
                && !f.replacements.is_empty()
            {
                let ready = f.replacements.iter().filter(|c| claim_ready(c)).count();
                parts.push(format!("replacements initialized {ready}/{}", f.replacements.len()));
            }
            let draining: Vec<String> = r
                .command
                .node_names()
                .iter()
                .filter(|n| node_exists(n))
                .map(|n| format!("{n} ({} pods left)", joined.pods_on(n).len()))
                .collect();
            parts.push(if draining.is_empty() {
                "candidates gone".into()
            } else {
                format!("draining {}", draining.join(", "))
            });
            row.progress = Some(parts.join("; "));
        }
        if row.state.is_open() {
            v.cost.pending_savings_per_hour += r.command.savings_per_hour.max(0.0);
        }
        if row.state == ProposalState::Executed {
            v.cost.saved_per_hour += r.command.savings_per_hour.max(0.0);
        }
        v.disruptions.push(row);
    }
    v.disruptions.sort_by_key(|d| (!d.state.is_open(), d.state != ProposalState::InProgress, -d.at));
}

/// Nodes a started command is taking (shown as being disrupted).
pub fn disrupting(orchestrator: &Orchestrator) -> BTreeSet<String> {
    orchestrator
        .records
        .iter()
        .filter(|r| r.state == CommandState::InProgress)
        .flat_map(|r| r.command.node_names())
        .collect()
}

/// A live catalog's capacity reservations with the nodes running in each (by their reservation-id label). The
/// catalog's capacity is what each can still take, so its size is that plus the nodes in it. (A simulated world
/// knows its reservations exactly: see `sim_picture`.)
pub fn reservation_rows(catalog: &Catalog, nodes: &[&Node]) -> Vec<ReservationRow> {
    let mut rows: BTreeMap<String, ReservationRow> = BTreeMap::new();
    for t in &catalog.instance_types {
        for o in &t.offerings {
            let Some(r) = &o.reservation else { continue };
            rows.entry(r.id.clone()).or_insert_with(|| ReservationRow {
                id: r.id.clone(),
                instance_type: t.name.clone(),
                zone: o.zone.clone(),
                kind: if r.interruptible { format!("{}, interruptible", r.kind) } else { r.kind.clone() },
                used: 0,
                total: r.capacity.max(0),
                ends: r.end,
            });
        }
    }
    for n in nodes.iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
        let id = n.metadata.labels.as_ref().and_then(|l| l.get(crate::engine::catalog::aws::CAPACITY_RESERVATION_ID));
        if let Some(row) = id.and_then(|id| rows.get_mut(id)) {
            row.used += 1;
            row.total += 1;
        }
    }
    rows.into_values().collect()
}
