//! What the dashboard's picture of a live cluster is built from ([`picture::build`]): what the watch cache holds,
//! priced from the catalog. Acting, it reads the controller's decisions (its latest solve says why each pod is
//! pending and what it launched; its verdicts say why nodes are not disrupted). Observing, one provisioning and one
//! disruption pass over the cache say what an engine would launch and disrupt. Pure: the same objects, controller
//! and time give the same picture.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use crate::controller::Controller;
use crate::engine::catalog::Catalog;
use crate::engine::disruption::Command;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::Mode;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::{Millis, ProvisioningResult, is_provisionable};
use crate::engine::state::Nodes;
use crate::kube::cache::Problem;
use crate::protocol::view::*;
use crate::shell::passes;
use crate::shell::picture::{self, Objects};

/// Who is looking, and why this instance observes rather than acts.
#[derive(Debug, Clone, Default)]
pub struct LiveInfo {
    pub context: String,
    pub cluster: String,
    pub leadership: Leadership,
    /// What the header's clock cell says: "live", "live (disconnected: ...)".
    pub clock: String,
    /// The feature gates the cluster's Karpenter runs with, as `--feature-gates` and the config say (an observing
    /// instance decides with them too).
    pub gates: crate::controller::settings::FeatureGates,
    /// The packing strategy an observing instance's provisioning pass uses (`--packing`, the config file's
    /// `packing:`); an acting one uses its controller's.
    pub packing: crate::engine::packing::Packing,
    /// Whose decisions and validation apply, and where that came from (see [`ClusterView::karpenter_version`]).
    pub version: crate::engine::version::KarpenterVersion,
    pub version_source: String,
}

/// Builds the picture of `m` at `now`.
pub fn picture(
    m: &ClusterObjects,
    catalog: &Catalog,
    now: Millis,
    info: &LiveInfo,
    skipped: &[Problem],
    generation: u64,
    engine: Option<&Controller>,
) -> ClusterView {
    let decisions = match engine {
        Some(c) => Decisions::Controller(c),
        None => Decisions::Own,
    };
    build(m, catalog, now, info, skipped, generation, decisions)
}

/// The picture of what the cache holds before the engine has decided anything: objects, prices and usage, but no
/// reasons, proposals or verdicts. Shown while the initial lists run, and while the first engine pass over the
/// cluster is worked out, so the panes fill as data arrives rather than after one blank wait.
pub fn objects_picture(
    m: &ClusterObjects,
    catalog: &Catalog,
    now: Millis,
    info: &LiveInfo,
    skipped: &[Problem],
    generation: u64,
) -> ClusterView {
    build(m, catalog, now, info, skipped, generation, Decisions::NotYet)
}

/// Whose decisions a picture shows.
#[derive(Clone, Copy)]
enum Decisions<'a> {
    /// The acting controller's latest ones.
    Controller(&'a Controller),
    /// Those of the picture's own passes (observing).
    Own,
    /// None yet.
    NotYet,
}

fn build(
    m: &ClusterObjects,
    catalog: &Catalog,
    now: Millis,
    info: &LiveInfo,
    skipped: &[Problem],
    generation: u64,
    decisions: Decisions<'_>,
) -> ClusterView {
    let engine = match decisions {
        Decisions::Controller(c) => Some(c),
        Decisions::Own | Decisions::NotYet => None,
    };
    let own = matches!(decisions, Decisions::Own);
    let gates = engine.map(Controller::gates).unwrap_or(info.gates);
    let packing = engine.map(Controller::packing).unwrap_or(info.packing);
    // Acting, the picture reads what the controller decided (its latest solve; its proposals and verdicts); only
    // an observing instance runs passes of its own.
    let solved = match decisions {
        Decisions::Controller(c) => c.last_solve().cloned(),
        Decisions::Own => Some(std::sync::Arc::new(passes::plan_packed(m, catalog, gates, packing))),
        Decisions::NotYet => None,
    };
    let no_solve = ProvisioningResult::default();
    let provisioning: &ProvisioningResult = solved.as_deref().unwrap_or(&no_solve);
    // Both packing strategies: the acting controller's latest launching pass; observing, the pods pending now
    // (worked out only when the pass would launch something; its own plan is reused).
    let packing_pass = match engine {
        Some(c) => c.last_packing().map(picture::packing_row),
        None if own && !provisioning.results.new_claims.is_empty() => Some(PackingRow {
            at: None,
            packing,
            pods: provisioning.results.new_claims.iter().map(|c| c.pods.len()).sum(),
            comparison: passes::packing_comparison_after(m, catalog, gates, packing, provisioning),
        }),
        None => None,
    };
    let (would_disrupt, outlook) = match engine {
        // The controller's own verdicts (they count the nodes its commands hold): worked out afresh on a small
        // cluster, else those of its latest explanatory round.
        Some(c) if m.nodes.len() <= picture::EXPLAIN_MAX_NODES => (None, Some(Cow::Owned(c.explain(m, now)))),
        Some(c) => (None, c.last_outlook().map(|o| Cow::Borrowed(&**o))),
        None if !own => (None, None),
        // Every node's outlook simulates each candidate: only worked out where the picture shows it.
        None if m.nodes.len() <= picture::EXPLAIN_MAX_NODES => {
            let (pass, outlook) = passes::disruption_with(m, catalog, provisioning, now, gates, info.version);
            (pass.command, Some(Cow::Owned(outlook)))
        }
        None => (passes::disruption_pass_with(m, catalog, provisioning, now, gates, info.version).command, None),
    };
    let objects = Objects {
        nodes: m.nodes.iter().map(|n| &**n).collect(),
        nodeclaims: m.nodeclaims.iter().map(|c| &**c).collect(),
        pods: m.pods.iter().map(|p| &**p).collect(),
        nodepools: m.nodepools.iter().collect(),
        nodeoverlays: m.nodeoverlays.iter().collect(),
    };

    // Interruption notices the acting engine handled, newest first, with how far the replacement has come.
    let interruptions = |joined: &Nodes<'_>| {
        let nodes: BTreeSet<&str> = m.nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        engine
            .iter()
            .flat_map(|c| c.interruptions.iter())
            .rev()
            .map(|r| {
                let node_alive = r.node.as_deref().is_some_and(|n| nodes.contains(n));
                let progress = if !r.kind.deletes_nodeclaim() {
                    "informational only".to_string()
                } else if node_alive {
                    let left = r.node.as_deref().map_or(0, |n| joined.pods_on(n).len());
                    format!("node draining, {left} pod(s) left")
                } else {
                    "node gone".to_string()
                };
                InterruptionRow {
                    at: r.at,
                    kind: r.kind.label().to_string(),
                    node: r.node.clone().unwrap_or_else(|| r.instance_id.clone()),
                    capacity_type: r.capacity_type.clone(),
                    zone: r.zone.clone(),
                    pods: r.pods,
                    progress,
                    replaced_after: None,
                }
            })
            .collect()
    };

    // Pending pods, with the pass's reasons. Observing, pods the pass would place get the NodePool that would take
    // them; acting, they are being provisioned (no reason), as in the simulated picture.
    let mut reasons = provisioning.pending_reasons();
    let would_place = if engine.is_none() { &provisioning.results.new_claims[..] } else { &[] };
    for c in would_place {
        let types: Vec<&str> = c.instance_types.iter().take(3).map(|t| t.name.as_str()).collect();
        for &i in &c.pods {
            let p = &provisioning.pods[i];
            reasons.insert(
                (p.namespace.clone(), p.name.clone()),
                vec![(c.nodepool.clone(), format!("would launch a NodeClaim ({}, …)", types.join(", ")))],
            );
        }
    }
    let mut pending = Vec::new();
    for p in m.pods.iter().filter(|p| is_provisionable(p)) {
        let key = (
            p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            p.metadata.name.clone().unwrap_or_default(),
        );
        let why = reasons.remove(&key).unwrap_or_default();
        pending.push(picture::pending_row(p, why, None, now));
    }
    pending.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));

    let outlook = outlook.as_deref();
    // Acting, the controller's launches are real events of their own; "would" is for an observer.
    let would_provision = if engine.is_none() { Some(provisioning) } else { None };
    let mut events = events(skipped, would_provision, would_disrupt.as_ref(), outlook, now);
    if let Some(c) = engine {
        events.splice(0..0, refused_writes(c));
    }
    // Observing with the cluster's NodeOverlay gate on: the overlays as the cluster's Karpenter would evaluate them.
    let observed = (engine.is_none() && gates.node_overlay && !m.nodeoverlays.is_empty()).then(|| {
        let raw =
            crate::engine::catalog::classes::pool_types(catalog, &m.nodepools, &m.nodeclasses, gates.node_class_cel);
        crate::engine::overlay::overlaid_catalogs(&m.nodeoverlays, &m.nodepools, &raw, &catalog.label_policy)
    });
    picture::build(picture::Input {
        source: Source { context: info.context.clone(), cluster: info.cluster.clone(), clock: info.clock.clone() },
        now,
        mode: engine.map_or(Mode::DryRun, Controller::mode),
        packing,
        version: info.version,
        version_source: info.version_source.clone(),
        gates,
        repair_policies: engine.map(Controller::active_repair_policies).unwrap_or_default(),
        overlays: engine.and_then(Controller::overlay_view).or_else(|| {
            observed
                .as_ref()
                .map(|(evaluation, applied)| crate::controller::overlays::OverlayView { evaluation, applied })
        }),
        leadership: info.leadership.clone(),
        catalog,
        generation,
        objects,
        price: &|_, labels| picture::catalog_price(catalog, labels),
        outlook,
        orchestrator: engine.map(Controller::orchestrator),
        would_disrupt: would_disrupt.as_ref(),
        pending,
        packing_pass,
        buffers: engine.map(Controller::buffer_rows).unwrap_or_default(),
        reservations: picture::reservation_rows(catalog, &m.nodes.iter().map(|n| &**n).collect::<Vec<_>>()),
        interruptions: &interruptions,
        events,
    })
}

/// Writes the cluster or the cloud keeps refusing, each with its last error and when it is tried again.
fn refused_writes(c: &Controller) -> Vec<EventRow> {
    c.refused_writes()
        .map(|(key, r)| EventRow {
            at: r.since,
            kind: "Warning".into(),
            reason: "WriteRefused".into(),
            object: key.to_string(),
            message: format!(
                "{}: {} (refused {} time(s) in a row; next try {})",
                r.effect,
                r.error,
                r.failures,
                chrono::DateTime::<chrono::Utc>::from_timestamp_millis(r.retry_at)
                    .map_or_else(|| "later".to_string(), |t| format!("at {}", t.format("%H:%M:%S")))
            ),
        })
        .collect()
}

/// Events: objects the cache could not read, and what the engine would do.
fn events(
    skipped: &[Problem],
    provisioning: Option<&ProvisioningResult>,
    would_disrupt: Option<&Command>,
    outlook: Option<&BTreeMap<String, Outlook>>,
    now: Millis,
) -> Vec<EventRow> {
    let mut events = Vec::new();
    for s in skipped {
        events.push(EventRow {
            at: now,
            kind: "Warning".into(),
            reason: "Unreadable".into(),
            object: format!("{}/{}", s.kind.resource_name(), s.key),
            message: format!("skipped: {}", s.message),
        });
    }
    let launches = provisioning.map_or(0, |p| p.results.new_claims.len());
    if let Some(provisioning) = provisioning.filter(|_| launches > 0) {
        events.push(EventRow {
            at: now,
            kind: "Normal".into(),
            reason: "WouldProvision".into(),
            object: format!("{launches} NodeClaim(s)"),
            message: format!(
                "would launch {launches} NodeClaim(s) for {} pending pod(s)",
                provisioning.results.new_claims.iter().map(|c| c.pods.len()).sum::<usize>()
            ),
        });
    }
    if let Some(cmd) = would_disrupt {
        events.push(EventRow {
            at: now,
            kind: "Normal".into(),
            reason: "WouldDisrupt".into(),
            object: cmd.node_names().iter().map(|n| format!("node/{n}")).collect::<Vec<_>>().join(","),
            message: cmd.summary(),
        });
    }
    for (node, o) in outlook.into_iter().flatten() {
        if let Outlook::Blocked(why) = o
            && let Some(first) = why.first()
        {
            events.push(EventRow {
                at: now,
                kind: "Normal".into(),
                reason: "Unconsolidatable".into(),
                object: format!("node/{node}"),
                message: first.to_string(),
            });
        }
    }
    events
}
