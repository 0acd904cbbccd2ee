//! One provisioning pass and one disruption pass over a set of objects, outside any controller loop: what `plan`
//! prints and what the live dashboard shows while it observes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::controller::settings::FeatureGates;
use crate::engine::catalog::{Catalog, InstanceType};
use crate::engine::disruption::consolidation::{self, Outlook};
use crate::engine::disruption::{Context, DisruptionOptions, PassResult};
use crate::engine::manifests::ClusterObjects;
use crate::engine::overlay::overlaid_catalogs;
use crate::engine::packing::Packing;
use crate::engine::provisioning::Millis;
use crate::engine::provisioning::{ProvisioningResult, provision};
use crate::engine::scheduling::SchedulerOptions;
use crate::engine::version::KarpenterVersion;

/// Instance types per NodePool: the catalog's as the pool's EC2NodeClass sees it, with the objects' NodeOverlays
/// applied when the `NodeOverlay` gate is on (as the controller would see them).
pub fn pool_types(
    m: &ClusterObjects,
    catalog: &Catalog,
    gates: FeatureGates,
) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
    let raw = crate::engine::catalog::classes::pool_types(catalog, &m.nodepools, &m.nodeclasses, gates.node_class_cel);
    if !gates.node_overlay || m.nodeoverlays.is_empty() {
        return raw;
    }
    let (_, applied) = overlaid_catalogs(&m.nodeoverlays, &m.nodepools, &raw, &catalog.label_policy);
    applied.into_iter().map(|(pool, a)| (pool, a.instance_types)).collect()
}

/// The provisioning pass: what would be launched for the pending pods, and why the rest stay pending.
pub fn plan(m: &ClusterObjects, catalog: &Catalog) -> ProvisioningResult {
    plan_with(m, catalog, FeatureGates::default())
}

/// [`plan`] with the cluster's feature gates (NodeOverlays applied when that gate is on).
pub fn plan_with(m: &ClusterObjects, catalog: &Catalog, gates: FeatureGates) -> ProvisioningResult {
    plan_packed(m, catalog, gates, Packing::Upstream)
}

/// [`plan_with`], sizing new NodeClaims with the packing strategy `packing`.
pub fn plan_packed(m: &ClusterObjects, catalog: &Catalog, gates: FeatureGates, packing: Packing) -> ProvisioningResult {
    let catalogs = pool_types(m, catalog, gates);
    let pods = m.pending_view();
    provision(&m.view_with(&pods), &catalogs, &catalog.label_policy, SchedulerOptions { packing, ..Default::default() })
}

/// Both packing strategies' plans for the pending pods, and the LP bound (`plan`, the dashboard).
pub fn packing_comparison(
    m: &ClusterObjects,
    catalog: &Catalog,
    gates: FeatureGates,
) -> crate::engine::provisioning::PackingComparison {
    let catalogs = pool_types(m, catalog, gates);
    let pods = m.pending_view();
    crate::engine::provisioning::compare_packing(&m.view_with(&pods), &catalogs, &catalog.label_policy)
}

/// [`packing_comparison`] after `done`, the provisioning pass with strategy `packing` over the same objects: only
/// the other strategy is solved (the live dashboard while it observes).
pub fn packing_comparison_after(
    m: &ClusterObjects,
    catalog: &Catalog,
    gates: FeatureGates,
    packing: Packing,
    done: &ProvisioningResult,
) -> crate::engine::provisioning::PackingComparison {
    let catalogs = pool_types(m, catalog, gates);
    let pods = m.pending_view();
    crate::engine::provisioning::compare_packing_after(
        &m.view_with(&pods),
        &catalogs,
        &catalog.label_policy,
        packing,
        done,
    )
}

/// What applying `edited` would do (see [`crate::engine::whatif::preview`]), over the whole catalog for every
/// pool, with `overlays` applied to both sides, and new NodeClaims sized with `packing` as the controller would.
pub fn preview_edit(
    snapshot: &crate::engine::provisioning::Snapshot,
    catalog: &Catalog,
    now: Millis,
    edited: &crate::engine::api::NodePool,
    overlays: &[crate::engine::api::nodeoverlay::NodeOverlay],
    packing: Packing,
) -> crate::engine::whatif::EditPreview {
    let input = crate::engine::whatif::WhatIfInput {
        snapshot,
        instance_types: &catalog.instance_types,
        policy: &catalog.label_policy,
        now,
        options: SchedulerOptions { packing, ..Default::default() },
        overlays,
    };
    crate::engine::whatif::preview(&input, edited)
}

/// What the disruption controller would do now: the command of one pass (budgets, validation aside) and every
/// node's outlook. Nodes the provisioning pass nominated for pending pods are held back, as upstream does.
pub fn disruption(
    m: &ClusterObjects,
    catalog: &Catalog,
    provisioning: &ProvisioningResult,
    now: Millis,
) -> (PassResult, BTreeMap<String, Outlook>) {
    disruption_with(m, catalog, provisioning, now, FeatureGates::default(), KarpenterVersion::NEWEST)
}

/// [`disruption`] with the cluster's feature gates and Karpenter version.
pub fn disruption_with(
    m: &ClusterObjects,
    catalog: &Catalog,
    provisioning: &ProvisioningResult,
    now: Millis,
    gates: FeatureGates,
    version: KarpenterVersion,
) -> (PassResult, BTreeMap<String, Outlook>) {
    in_context(m, catalog, provisioning, now, gates, version, |ctx| {
        (consolidation::pass(ctx), consolidation::explain_nodes(ctx))
    })
}

/// The command of one disruption pass alone, without every node's outlook (which simulates each candidate): what
/// the dashboard shows of a cluster too large to explain node by node.
pub fn disruption_pass_with(
    m: &ClusterObjects,
    catalog: &Catalog,
    provisioning: &ProvisioningResult,
    now: Millis,
    gates: FeatureGates,
    version: KarpenterVersion,
) -> PassResult {
    in_context(m, catalog, provisioning, now, gates, version, consolidation::pass)
}

/// Runs `f` over the disruption context of `m` at `now` after `provisioning`.
fn in_context<R>(
    m: &ClusterObjects,
    catalog: &Catalog,
    provisioning: &ProvisioningResult,
    now: Millis,
    gates: FeatureGates,
    version: KarpenterVersion,
    f: impl FnOnce(&Context<'_>) -> R,
) -> R {
    let catalogs = pool_types(m, catalog, gates);
    let pods = m.pending_view();
    let snap = m.view_with(&pods);
    // v1.15's repair, by the cloud's default policies (the catalog's provider's), as the controller would run it.
    let aws = catalog.label_policy.provider_domains.iter().any(|d| d == crate::engine::catalog::aws::DOMAIN);
    let policies = if aws {
        crate::controller::cloud::aws_repair_policies()
    } else {
        crate::controller::cloud::kwok_repair_policies()
    };
    let repair = crate::controller::repair::one_pass_repair_inputs(policies, gates, version, false, &snap, now);
    let busy = Default::default();
    let nominated: BTreeMap<String, Millis> =
        provisioning.results.existing.iter().map(|p| (p.node.clone(), now + NOMINATION_HOLD)).collect();
    // The gates that change disruption decisions, as the controller would run them (`gates` are the version's).
    let options = DisruptionOptions {
        spot_to_spot: gates.spot_to_spot_consolidation,
        terminate_first_drift: gates.terminate_first_drift,
        terminate_first_repair: gates.terminate_first_repair,
        estimate_compatible_offerings: version.estimates_compatible_offerings(),
        ..Default::default()
    };
    let ctx = Context {
        snap,
        catalogs: &catalogs,
        policy: &catalog.label_policy,
        now,
        busy: &busy,
        nominated: &nominated,
        buffer_nodes: &BTreeMap::new(),
        options: &options,
        repair: &repair,
    };
    f(&ctx)
}

/// How long a node nominated for a pending pod is kept out of consolidation (upstream: 20 s after nomination).
const NOMINATION_HOLD: Millis = 20_000;
