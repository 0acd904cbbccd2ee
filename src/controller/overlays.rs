//! NodeOverlay (gate `NodeOverlay`), as upstream's `nodeoverlay` controller and overlay cloud provider: the
//! overlays are evaluated against every NodePool's instance types whenever they, the NodePools or the cloud's
//! catalog change; the result (repriced offerings, added capacity) is what provisioning, consolidation and
//! what-ifs see; overlay status conditions are written when they change; NodeClaims keeping an overlaid type are
//! annotated. Overlay changes never drift nodes: only consolidation reconsiders them.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Controller, Effect};
use crate::engine::api::NodeClaim;
use crate::engine::api::nodeoverlay::{NodeOverlay, NodeOverlayStatus};
use crate::engine::api::nodepool::NodePool;
use crate::engine::catalog::InstanceType;
use crate::engine::labels;
use crate::engine::overlay::{AppliedTypes, Evaluation, overlaid_catalogs};
use crate::engine::provisioning::Millis;

/// The controller's last NodeOverlay evaluation, as the dashboard reads it (gate `NodeOverlay` on).
#[derive(Clone, Copy)]
pub struct OverlayView<'a> {
    pub evaluation: &'a Evaluation,
    /// Per NodePool: the overlaid types and which overlay changed what.
    pub applied: &'a BTreeMap<String, AppliedTypes>,
}

/// The last evaluation and what it was made from.
#[derive(Default)]
pub(super) struct OverlayState {
    key: u64,
    pub(super) evaluation: Option<Evaluation>,
    /// Per NodePool: its instance types with the overlays applied, and which overlay changed what.
    pub(super) applied: BTreeMap<String, AppliedTypes>,
}

impl Controller {
    /// Whether NodeOverlays take part (the `NodeOverlay` gate).
    pub fn overlays_on(&self) -> bool {
        self.gates.node_overlay
    }

    /// Evaluates the overlays when they, the NodePools or the catalog changed since the last evaluation, and
    /// returns the overlay status writes that differ from what the objects carry. With the gate off, nothing.
    pub fn sync_overlays(&mut self, overlays: &[NodeOverlay], pools: &[NodePool], now: Millis) -> Vec<Effect> {
        if !self.gates.node_overlay {
            return Vec::new();
        }
        let raw = self.raw_catalogs(pools);
        let key = overlay_key(overlays, pools, &raw);
        let changed = self.overlays.key != key || self.overlays.evaluation.is_none();
        if changed {
            let (evaluation, applied) = overlaid_catalogs(overlays, pools, &raw, &self.catalog.label_policy);
            let before = self.overlays.evaluation.is_some();
            self.overlays = OverlayState { key, evaluation: Some(evaluation), applied };
            // Prices and capacities may have moved: what consolidation concluded no longer holds, and types the
            // cloud could not launch may fit now.
            if before {
                self.disruption.mark_unconsolidated();
                self.unlaunchable.clear();
            }
        }
        let Some(evaluation) = &self.overlays.evaluation else { return Vec::new() };
        let mut out = Vec::new();
        for o in overlays {
            let Some(conditions) = evaluation.desired_conditions(o, now) else { continue };
            let current = o.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
            // By type, not by position: another writer may keep the list in another order.
            let by_type = |list: &[crate::engine::api::Condition]| {
                let mut l = list.to_vec();
                l.sort_by(|a, b| a.type_.cmp(&b.type_));
                l
            };
            if by_type(&conditions) != by_type(current) {
                out.push(Effect::PatchNodeOverlayStatus {
                    name: o.name().to_string(),
                    status: Box::new(NodeOverlayStatus { conditions }),
                });
            }
        }
        out
    }

    /// The overlaid instance types of a pool, or `None` when overlays are off (the raw types apply). A pool the
    /// last evaluation did not cover gets no types until it does (upstream's `UnevaluatedNodePoolError`).
    pub(super) fn overlaid_types(&self, pool: &str) -> Option<Vec<Arc<InstanceType>>> {
        if !self.gates.node_overlay {
            return None;
        }
        Some(self.overlays.applied.get(pool).map(|a| a.instance_types.clone()).unwrap_or_default())
    }

    /// What the overlays changed, per pool, for the cloud's launches (see
    /// [`super::cloud::CloudProvider::set_overlays`]): the offering prices they set, and the instance types whose
    /// capacity they set.
    pub fn overlay_store(&self) -> super::cloud::OverlayStore {
        let mut out = super::cloud::OverlayStore::default();
        for (pool, applied) in self.overlays.applied.iter().filter(|_| self.gates.node_overlay) {
            for t in &applied.instance_types {
                if applied.is_price_overlaid(&t.name) {
                    let prices = out.prices.entry(pool.clone()).or_default();
                    for o in &t.offerings {
                        prices.insert((t.name.clone(), o.zone.clone(), o.capacity_type.clone()), o.price);
                    }
                }
                if applied.is_capacity_overlaid(&t.name) {
                    out.capacity.entry(pool.clone()).or_default().insert(t.name.clone(), t.clone());
                }
            }
        }
        out
    }

    /// Which overlays changed which instance types of each pool (for the dashboard).
    pub fn overlay_provenance(&self) -> &BTreeMap<String, AppliedTypes> {
        &self.overlays.applied
    }

    /// The last evaluation, if overlays are on and one ran.
    pub fn overlay_evaluation(&self) -> Option<&Evaluation> {
        self.overlays.evaluation.as_ref().filter(|_| self.gates.node_overlay)
    }

    /// The last evaluation with what it changed per pool, if overlays are on and one ran.
    pub fn overlay_view(&self) -> Option<OverlayView<'_>> {
        Some(OverlayView { evaluation: self.overlay_evaluation()?, applied: &self.overlays.applied })
    }

    /// Upstream `ToNodeClaim`: a NodeClaim keeping an instance type with an overlaid price or capacity says so.
    pub(super) fn annotate_overlays(&self, claim: &mut NodeClaim) {
        if !self.gates.node_overlay {
            return;
        }
        let Some(applied) = claim.nodepool().and_then(|p| self.overlays.applied.get(p)) else { return };
        let kept: Vec<&str> = claim
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")
            .flat_map(|r| r.values.iter().map(String::as_str))
            .collect();
        let extra = applied.nodeclaim_annotations(kept);
        if !extra.is_empty() {
            claim.metadata.annotations.get_or_insert_with(Default::default).extend(extra);
        }
    }
}

/// What an evaluation depends on: the overlays (name, generation, spec), each NodePool's name and template labels,
/// and the identity of the instance types handed to it (a new catalog is a new evaluation).
fn overlay_key(overlays: &[NodeOverlay], pools: &[NodePool], raw: &BTreeMap<String, Vec<Arc<InstanceType>>>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for o in overlays {
        o.name().hash(&mut h);
        o.metadata.generation.hash(&mut h);
        serde_json::to_string(&o.spec).unwrap_or_default().hash(&mut h);
    }
    for p in pools {
        p.name().hash(&mut h);
        p.spec.template.metadata.labels.hash(&mut h);
        for t in raw.get(p.name()).into_iter().flatten() {
            (Arc::as_ptr(t) as usize).hash(&mut h);
        }
    }
    h.finish()
}
