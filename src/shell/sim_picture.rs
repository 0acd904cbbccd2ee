//! What the dashboard's picture of the simulated world is built from ([`picture::build`]): the world's object
//! store, its controller, its records and the engine's explanations. Read-only apart from the explanation cache
//! the world keeps.

use std::collections::BTreeMap;

use crate::controller::disruption::CommandState;
use crate::controller::interruption::Kind as InterruptionKind;
use crate::controller::tick;
use crate::engine::provisioning::Millis;
use crate::protocol::view::*;
use crate::shell::picture::{self, Objects};
use crate::sim::world::{Decision, World};

/// Builds the dashboard's picture of `w`. `source` names the backend for the header.
pub fn view(w: &mut World, source: Source, generation: u64) -> ClusterView {
    let now = w.now;
    let outlook =
        if w.cluster.nodes.len() <= picture::EXPLAIN_MAX_NODES { tick::immediate(tick::explain(w)) } else { None };
    let w = &*w;
    let prices: BTreeMap<&str, f64> = w.record.nodes.iter().map(|n| (n.name.as_str(), n.price)).collect();
    let objects = Objects {
        nodes: w.cluster.nodes.values().map(|o| &**o).collect(),
        nodeclaims: w.cluster.nodeclaims.values().map(|o| &**o).collect(),
        pods: w.cluster.pods.values().map(|o| &**o).collect(),
        nodepools: w.cluster.nodepools.values().map(|o| &**o).collect(),
        nodeoverlays: w.cluster.nodeoverlays.values().map(|o| &**o).collect(),
    };
    let mut pending = Vec::new();
    for key in w.pending_pods() {
        let Some(p) = w.cluster.pods.get(&key) else { continue };
        pending.push(picture::pending_row(p, w.pending_reasons.get(&key).cloned().unwrap_or_default(), None, now));
    }
    let (interruptions, events) = record_rows(w);
    picture::build(picture::Input {
        source,
        now,
        mode: w.controller().orchestrator().mode(),
        packing: w.controller().packing(),
        version: w.controller().karpenter_version(),
        version_source: "the scenario's settings.karpenterVersion".to_string(),
        gates: w.settings().controller.gates,
        repair_policies: w.controller().active_repair_policies(),
        overlays: w.controller().overlay_view(),
        leadership: Leadership::Acting,
        catalog: w.catalog(),
        generation,
        objects,
        price: &|name, _| prices.get(name).copied().unwrap_or(0.0),
        outlook: outlook.as_ref(),
        orchestrator: Some(w.controller().orchestrator()),
        would_disrupt: None,
        pending,
        packing_pass: w.controller().last_packing().map(picture::packing_row),
        buffers: w.controller().buffer_rows(),
        reservations: w
            .cloud
            .reservations()
            .iter()
            .map(|(id, r)| crate::protocol::view::ReservationRow {
                id: id.clone(),
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                kind: if r.interruptible { format!("{}, interruptible", r.kind) } else { r.kind.clone() },
                used: r.used.len(),
                total: r.total,
                ends: r.end,
            })
            .collect(),
        interruptions: &|_| interruptions.clone(),
        events,
    })
}

/// The interruptions (newest first) and events (newest first; at the same instant by object and reason) from the
/// world's record: its decisions, the nodes coming and going, and the Events the controller wrote.
fn record_rows(w: &World) -> (Vec<InterruptionRow>, Vec<EventRow>) {
    let mut interruptions = Vec::new();
    let mut events = Vec::new();
    // Interruptions and events, from the decision record.
    let node_records: BTreeMap<&str, &crate::sim::world::NodeRecord> =
        w.record.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for d in &w.record.decisions {
        match d {
            Decision::Provision { at, nodeclaims, pods, .. } => events.push(EventRow {
                at: *at,
                kind: "Normal".into(),
                reason: "Provisioned".into(),
                object: format!("{} NodeClaim(s)", nodeclaims.len()),
                message: format!("launched {} for {pods} pending pod(s)", nodeclaims.join(", ")),
            }),
            Decision::Delete { at, nodeclaim, reason, .. } => events.push(EventRow {
                at: *at,
                kind: "Normal".into(),
                reason: "Deleted".into(),
                object: format!("nodeclaim/{nodeclaim}"),
                message: format!("deleted: {}", reason.as_str()),
            }),
            Decision::Interruption { at, node, kind, displaced, .. } => {
                let rec = node_records.get(node.as_str());
                let kind_s = InterruptionKind::label(*kind);
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
                interruptions.push(InterruptionRow {
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
                // The notice's Event is the controller's (below).
            }
            Decision::Disruption(id) => {
                let Some(r) = w.disruption_record(id) else { continue };
                events.push(EventRow {
                    at: r.at,
                    kind: "Normal".into(),
                    reason: format!("Disruption{}", capitalise(r.method.as_str())),
                    object: r.candidates.iter().map(|c| format!("node/{c}")).collect::<Vec<_>>().join(","),
                    message: format!("{} ({})", r.summary, state_word(&r.state)),
                })
            }
        }
    }
    // The cluster's side: nodes registering, becoming ready and going away.
    for n in &w.record.nodes {
        let object = format!("node/{}", n.name);
        let what = format!("{} {} in {}", n.capacity_type, n.instance_type, n.zone);
        events.push(EventRow {
            at: n.created_at,
            kind: "Normal".into(),
            reason: "Registered".into(),
            object: object.clone(),
            message: format!("node registered ({what})"),
        });
        if let Some(t) = n.initialized_at {
            events.push(EventRow {
                at: t,
                kind: "Normal".into(),
                reason: "Ready".into(),
                object: object.clone(),
                message: format!("node ready and initialized after {:.0}s", (t - n.created_at) as f64 / 1000.0),
            });
        }
        if let Some(t) = n.deleted_at {
            events.push(EventRow {
                at: t,
                kind: "Normal".into(),
                reason: "NodeDeleted".into(),
                object,
                message: format!("node removed ({what})"),
            });
        }
    }
    // The Events the controller wrote (Nominated, FailedScheduling, DisruptionTerminating, ...).
    for e in &w.record.events {
        events.push(EventRow {
            at: e.at,
            kind: if e.warning { "Warning" } else { "Normal" }.into(),
            reason: e.reason.clone(),
            object: e.object.clone(),
            message: e.message.clone(),
        });
    }
    interruptions.reverse();
    events.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.object.cmp(&b.object)).then_with(|| a.reason.cmp(&b.reason)));
    (interruptions, events)
}

/// A method's name as an event reason's tail: `single-node` → `SingleNode`.
fn capitalise(s: &str) -> String {
    s.split('-').map(|w| w[..1.min(w.len())].to_uppercase() + &w[1.min(w.len())..]).collect()
}

fn state_word(s: &CommandState) -> String {
    match s {
        CommandState::Invalidated(w) => format!("invalidated: {w}"),
        CommandState::Failed(w) => format!("failed: {w}"),
        other => format!("{other:?}").to_lowercase(),
    }
}
