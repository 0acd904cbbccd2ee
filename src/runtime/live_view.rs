//! The dashboard's picture of a live cluster: what the watch cache holds, priced from the catalog, with one
//! provisioning and one disruption pass run over it to say why each pod is pending, what the engine would launch,
//! and what it would disrupt and why not the rest. Pure: the same objects and time give the same picture.

use std::collections::{BTreeMap, BTreeSet};

use crate::controller::Controller;
use crate::engine::api::nodeclaim::COND_INITIALIZED;
use crate::engine::catalog::Catalog;
use crate::engine::disruption::consolidation::Outlook;
use crate::engine::disruption::gate::Mode;
use crate::engine::manifests::Manifests;
use crate::engine::provisioning::{Millis, is_provisionable};
use crate::kube::cache::Problem;
use crate::protocol::view::*;
use crate::runtime::passes;
use crate::runtime::picture::{self, Objects};

/// Who is looking, and why this instance observes rather than acts.
#[derive(Debug, Clone, Default)]
pub struct LiveInfo {
    pub context: String,
    pub cluster: String,
    pub leadership: Leadership,
    /// What the header's clock cell says: "live", "live (disconnected: ...)".
    pub clock: String,
}

/// Events kept in the picture.
const MAX_EVENTS: usize = 500;

/// Builds the picture of `m` at `now`.
pub fn picture(
    m: &Manifests,
    catalog: &Catalog,
    now: Millis,
    info: &LiveInfo,
    skipped: &[Problem],
    generation: u64,
    engine: Option<&Controller>,
) -> ClusterView {
    let provisioning = passes::plan(m, catalog);
    let (mut pass, mut outlook) = passes::disruption(m, catalog, &provisioning, now);
    if let Some(c) = engine {
        // The acting engine's own proposals and verdicts (they count the nodes its commands hold).
        pass.command = None;
        outlook = c.explain(m, now);
    }
    let mut v = ClusterView {
        source: Source { context: info.context.clone(), cluster: info.cluster.clone(), clock: info.clock.clone() },
        now,
        mode: engine.map_or(Mode::DryRun, Controller::mode),
        leadership: info.leadership.clone(),
        price_provenance: picture::price_provenance(&catalog.price_source, &catalog.region),
        generation,
        ..Default::default()
    };
    let objects = Objects {
        nodes: m.nodes.iter().collect(),
        nodeclaims: m.nodeclaims.iter().collect(),
        pods: m.pods.iter().map(|p| &**p).collect(),
        nodepools: m.nodepools.iter().collect(),
    };
    let pods_on = picture::pods_by_node(&objects.pods);
    let price = |_: &str, labels: &BTreeMap<String, String>| picture::catalog_price(catalog, labels);
    let outlook = (m.nodes.len() <= picture::EXPLAIN_MAX_NODES).then_some(&outlook);
    let disrupting: BTreeSet<String> = engine.map(|c| picture::disrupting(c.orchestrator())).unwrap_or_default();
    picture::fill_nodes(&mut v, &objects, &pods_on, &price, &disrupting, outlook.map(|o| o as _));
    if let Some(c) = engine {
        let node_exists = |n: &str| m.nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n));
        let claim_ready = |n: &str| m.nodeclaims.iter().any(|c| c.name() == n && c.is_true(COND_INITIALIZED));
        picture::fill_disruptions(&mut v, c.orchestrator(), &pods_on, &node_exists, &claim_ready);
    }

    // What the engine would start now, shown as a dry-run proposal.
    if let Some(cmd) = &pass.command {
        let mut row = picture::proposal_row(cmd, &format!("dry-run:{}", cmd.key()), now, ProposalState::DryRun);
        row.detail = Some("observing: the engine would start this now; nothing is done".into());
        v.disruptions.push(row);
        v.cost.pending_savings_per_hour = cmd.savings_per_hour.max(0.0);
    }
    picture::fill_nodepools(&mut v, &objects.nodepools);

    // Interruption notices the acting engine handled, newest first, with how far the replacement has come.
    for r in engine.iter().flat_map(|c| c.interruptions.iter()).rev() {
        let node_alive =
            r.node.as_deref().is_some_and(|n| m.nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n)));
        let progress = if !r.kind.deletes_nodeclaim() {
            "informational only".to_string()
        } else if node_alive {
            let left = r.node.as_deref().and_then(|n| pods_on.get(n)).map_or(0, Vec::len);
            format!("node draining, {left} pod(s) left")
        } else {
            "node gone".to_string()
        };
        v.interruptions.push(InterruptionRow {
            at: r.at,
            kind: r.kind.reason().to_string(),
            node: r.node.clone().unwrap_or_else(|| r.instance_id.clone()),
            capacity_type: r.capacity_type.clone(),
            zone: r.zone.clone(),
            pods: r.pods,
            progress,
            replaced_after: None,
        });
    }

    // Pending pods, with the pass's reasons; pods it would place get the NodePool that would take them.
    let mut reasons = provisioning.pending_reasons();
    for c in &provisioning.results.new_claims {
        let types: Vec<&str> = c.instance_types.iter().take(3).map(|t| t.name.as_str()).collect();
        for &i in &c.pods {
            let p = &provisioning.pods[i];
            reasons.insert(
                (p.namespace.clone(), p.name.clone()),
                vec![(c.nodepool.clone(), format!("would launch a NodeClaim ({}, …)", types.join(", ")))],
            );
        }
    }
    for p in m.pods.iter().filter(|p| is_provisionable(p)) {
        let key = (
            p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            p.metadata.name.clone().unwrap_or_default(),
        );
        let why = reasons.remove(&key).unwrap_or_default();
        v.pending.push(picture::pending_row(p, why, None, now));
    }
    v.pending.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));

    // Events: objects the cache could not read, and what the engine would do.
    for s in skipped {
        v.events.push(EventRow {
            at: now,
            kind: "Warning".into(),
            reason: "Unreadable".into(),
            object: format!("{}/{}", s.kind.resource_name(), s.key),
            message: format!("skipped: {}", s.message),
        });
    }
    let launches = provisioning.results.new_claims.len();
    if launches > 0 {
        v.events.push(EventRow {
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
    if let Some(cmd) = &pass.command {
        v.events.push(EventRow {
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
            v.events.push(EventRow {
                at: now,
                kind: "Normal".into(),
                reason: "Unconsolidatable".into(),
                object: format!("node/{node}"),
                message: first.to_string(),
            });
        }
    }
    v.events.truncate(MAX_EVENTS);
    v
}
