//! NodeOverlay evaluation and application (upstream core `controllers/nodeoverlay/{controller,store}.go` and
//! `cloudprovider/overlay/`, v1.14.1), pure: overlays, NodePools and their raw instance types in, an [`Evaluation`]
//! out; the time for status conditions is an argument.
//!
//! [`evaluate`] is the controller's pass: it decides, per overlay, whether it is applied, invalid or in conflict, and
//! builds the store (price changes per offering, capacity per instance type, per NodePool). [`Evaluation::apply`]
//! is the wrapped cloud provider's `GetInstanceTypes`: copy-on-write instance types with the store applied, prices
//! computed at read time from the current base price.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::engine::api::common::Condition;
use crate::engine::api::nodeoverlay::{NodeOverlay, runtime_validate, validate_nodeoverlay};
use crate::engine::api::nodepool::NodePool;
use crate::engine::catalog::aws::CAPACITY_RESERVATION_ID;
use crate::engine::catalog::{InstanceType, Offering};
use crate::engine::labels::{self, LabelPolicy};
use crate::engine::lifecycle::rfc3339;
use crate::engine::provisioning::Millis;
use crate::engine::requirements::{Operator, Requirement, Requirements};
use crate::engine::resources::{Quantity, parse_quantity};

/// Set to `"true"` on a dynamic NodeClaim when any instance type it keeps has an overlaid offering price.
pub const ANNOTATION_PRICE_OVERLAY_APPLIED: &str = "karpenter.sh/price-overlay-applied";
/// Set to `"true"` on a dynamic NodeClaim when any instance type it keeps has overlaid capacity.
pub const ANNOTATION_CAPACITY_OVERLAY_APPLIED: &str = "karpenter.sh/capacity-overlay-applied";

pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const CONDITION_READY: &str = "Ready";
pub const REASON_RUNTIME_VALIDATION: &str = "RuntimeValidation";
pub const REASON_CONFLICT: &str = "Conflict";
pub const CONFLICT_MESSAGE: &str = "conflict with another overlay";
/// operatorpkg's reason for a False root condition; its message lists the False dependents.
pub const REASON_UNHEALTHY_DEPENDENTS: &str = "UnhealthyDependents";

const HUGEPAGES_PREFIX: &str = "hugepages-";

// ---------------------------------------------------------------------------------------------------------------
// Price changes
// ---------------------------------------------------------------------------------------------------------------

/// A parsed `price` or `priceAdjustment`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceChange {
    /// Unsigned: the new price.
    Replace(f64),
    /// Signed: added to the base price.
    Add(f64),
    /// Signed with `%`: `base × (1 + p/100)`.
    Percent(f64),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid price {input:?}: expected a price (1.5), a signed delta (+1.2, -0.5) or a signed percentage (+10%, -15%)"
)]
pub struct PriceChangeError {
    pub input: String,
}

/// `\d*\.?\d+`-ish: digits with at most one dot and at least one digit. Rejects what `f64::from_str` would also
/// read but no CRD pattern allows (`inf`, `NaN`, exponents), so every parsed value is finite.
fn decimal(s: &str) -> Option<f64> {
    let ok = s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && s.bytes().filter(|&b| b == b'.').count() <= 1;
    if ok { s.parse::<f64>().ok().filter(|v| v.is_finite()) } else { None }
}

impl PriceChange {
    /// Reads a price string the way upstream's `AdjustedPrice` does: no sign replaces, a sign adds, a trailing `%`
    /// scales. Malformed input is an error, never a panic (upstream relies on the CRD pattern and `lo.Must`).
    pub fn parse(s: &str) -> Result<PriceChange, PriceChangeError> {
        let err = || PriceChangeError { input: s.to_string() };
        let (sign, rest) = match s.as_bytes().first() {
            Some(b'+') => (1.0, &s[1..]),
            Some(b'-') => (-1.0, &s[1..]),
            _ => return decimal(s).map(PriceChange::Replace).ok_or_else(err),
        };
        match rest.strip_suffix('%') {
            Some(pct) => decimal(pct).map(|p| PriceChange::Percent(sign * p)).ok_or_else(err),
            None => decimal(rest).map(|d| PriceChange::Add(sign * d)).ok_or_else(err),
        }
    }

    /// The price after the change, clamped at 0 (a replacement can't be negative by construction).
    pub fn apply(self, base: f64) -> f64 {
        let p = match self {
            PriceChange::Replace(v) => v,
            PriceChange::Add(d) => base + d,
            PriceChange::Percent(p) => base * (1.0 + p / 100.0),
        };
        // `>=` is false for NaN too, so a NaN base never leaks through as a price.
        if p >= 0.0 { p } else { 0.0 }
    }
}

impl fmt::Display for PriceChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriceChange::Replace(v) => write!(f, "{v}"),
            PriceChange::Add(d) => write!(f, "{d:+}"),
            PriceChange::Percent(p) => write!(f, "{p:+}%"),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs and outcomes
// ---------------------------------------------------------------------------------------------------------------

/// One NodePool as the evaluation sees it: its name, its template's `metadata.labels` (not its requirements, as
/// upstream) and the raw instance types the undecorated provider returns for it.
#[derive(Debug, Clone, Default)]
pub struct OverlayPool {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub instance_types: Vec<Arc<InstanceType>>,
}

impl OverlayPool {
    pub fn new(
        name: impl Into<String>,
        labels: BTreeMap<String, String>,
        instance_types: Vec<Arc<InstanceType>>,
    ) -> Self {
        OverlayPool { name: name.into(), labels, instance_types }
    }

    pub fn from_nodepool(pool: &NodePool, instance_types: Vec<Arc<InstanceType>>) -> Self {
        let mut labels = pool.spec.template.metadata.labels.clone();
        let class = &pool.spec.template.spec.node_class_ref;
        if let Some(key) = crate::engine::labels::node_class_key(class) {
            labels.insert(key, class.name.clone());
        }
        OverlayPool::new(pool.name(), labels, instance_types)
    }
}

/// What upstream keys an offering's price by (`offering.Requirements.String()`): capacity type, zone and, for
/// reserved offerings, the reservation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferingKey {
    pub capacity_type: String,
    pub zone: String,
    pub reservation_id: Option<String>,
}

impl OfferingKey {
    pub fn of(o: &Offering) -> Self {
        OfferingKey {
            capacity_type: o.capacity_type.clone(),
            zone: o.zone.clone(),
            reservation_id: o.reservation_id().map(str::to_string),
        }
    }
}

impl fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.capacity_type, self.zone)?;
        if let Some(r) = &self.reservation_id {
            write!(f, "/{r}")?;
        }
        Ok(())
    }
}

/// How one overlay came out of an evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverlayOutcome {
    /// Valid and conflict-free: applied wherever it matched (possibly nowhere).
    Applied,
    /// Failed validation; the message says why. Skipped.
    RuntimeValidation(String),
    /// Matched an offering (price) or instance type (capacity) already set by an overlay of the same weight.
    /// Applied nowhere, in no NodePool.
    Conflict,
}

impl OverlayOutcome {
    pub fn is_applied(&self) -> bool {
        matches!(self, OverlayOutcome::Applied)
    }

    /// The `ValidationSucceeded` condition's reason when False.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            OverlayOutcome::Applied => None,
            OverlayOutcome::RuntimeValidation(_) => Some(REASON_RUNTIME_VALIDATION),
            OverlayOutcome::Conflict => Some(REASON_CONFLICT),
        }
    }

    /// The `ValidationSucceeded` condition's message when False.
    pub fn message(&self) -> Option<&str> {
        match self {
            OverlayOutcome::Applied => None,
            OverlayOutcome::RuntimeValidation(m) => Some(m),
            OverlayOutcome::Conflict => Some(CONFLICT_MESSAGE),
        }
    }
}

/// Upstream `UnevaluatedNodePoolError`: the store has not evaluated this NodePool yet, so provisioning and disruption
/// skip it ("skipping, awaiting nodeoverlay evaluation").
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("awaiting nodeoverlay evaluation, nodepool {node_pool}")]
pub struct UnevaluatedNodePoolError {
    pub node_pool: String,
}

// ---------------------------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct PriceEntry {
    /// The first writer, i.e. the highest weight: its change is the one applied.
    overlay: String,
    change: PriceChange,
    /// Weight of the last overlay that matched this offering (upstream `lowestWeight`): what conflicts compare.
    lowest_weight: i32,
}

#[derive(Debug, Clone, PartialEq)]
struct CapacityValue {
    overlay: String,
    quantity: String,
    parsed: Quantity,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct CapacityEntry {
    merged: BTreeMap<String, CapacityValue>,
    /// The resource names and weight of the last capacity overlay stored for the type: what conflicts compare.
    lowest_resources: BTreeSet<String>,
    lowest_weight: i32,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct TypeUpdate {
    prices: BTreeMap<OfferingKey, PriceEntry>,
    capacity: Option<CapacityEntry>,
}

/// An overlay checked and parsed, ready to match.
struct Prepared<'a> {
    name: &'a str,
    weight: i32,
    requirements: Requirements,
    price: Option<PriceChange>,
    capacity: Option<BTreeMap<String, CapacityValue>>,
}

/// CRD rules (which the API server would have enforced; checked here because scenario files bypass it) plus
/// upstream's runtime validation, then parsing. Any failure is reported as `RuntimeValidation`.
fn prepare<'a>(overlay: &'a NodeOverlay, policy: &LabelPolicy) -> Result<Prepared<'a>, String> {
    let crd = validate_nodeoverlay(overlay);
    if !crd.is_empty() {
        return Err(crd.iter().map(|e| format!("{}: {}", e.path, e.message)).collect::<Vec<_>>().join("; "));
    }
    runtime_validate(overlay, policy)?;
    let mut requirements = Requirements::new();
    for r in &overlay.spec.requirements {
        let op = Operator::parse(&r.operator).ok_or_else(|| format!("unsupported operator {:?}", r.operator))?;
        let req = Requirement::new(op, r.values.as_deref().unwrap_or_default()).map_err(|e| e.to_string())?;
        requirements.add(&r.key, req);
    }
    let price = overlay.price_string().map(PriceChange::parse).transpose().map_err(|e| e.to_string())?;
    let capacity = match &overlay.spec.capacity {
        None => None,
        Some(map) => {
            let mut out = BTreeMap::new();
            for (k, q) in map {
                let parsed = parse_quantity(&q.0).map_err(|e| format!("capacity {k}: {e}"))?;
                out.insert(
                    k.clone(),
                    CapacityValue { overlay: overlay.name().to_string(), quantity: q.0.clone(), parsed },
                );
            }
            Some(out)
        }
    };
    Ok(Prepared { name: overlay.name(), weight: overlay.weight(), requirements, price, capacity })
}

/// Upstream's `Offerings.Compatible(overlayReqs)` for the offering's labels: zone, capacity type, and the
/// reservation id when the offering has one (keys the overlay doesn't mention don't constrain).
fn offering_matches(o: &Offering, reqs: &Requirements) -> bool {
    o.compatible(reqs)
        && o.reservation_id().is_none_or(|id| reqs.get_ref(CAPACITY_RESERVATION_ID).is_none_or(|r| r.has(id)))
}

/// The offerings of `it` in `pool` that `reqs` selects; empty when the overlay doesn't match the type. The base is
/// `karpenter.sh/nodepool=<pool>` ∧ template labels ∧ the type's requirements, and must be compatible with the
/// overlay without undefined keys allowed (a key the base lacks fails, unless asked for negatively: upstream
/// `Requirements.Compatible`).
fn overlaid_offerings(pool: &OverlayPool, it: &InstanceType, reqs: &Requirements) -> Vec<OfferingKey> {
    let mut base = Requirements::new();
    base.add(labels::NODEPOOL, Requirement::in_values([pool.name.clone()]));
    base.add_all(&Requirements::from_labels(&pool.labels));
    base.add_all(&it.requirements);
    if !base.admits(reqs, None) {
        return Vec::new();
    }
    it.offerings.iter().filter(|o| offering_matches(o, reqs)).map(OfferingKey::of).collect()
}

/// The result of one evaluation pass: each overlay's outcome and the store the wrapped provider applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    evaluated: BTreeSet<String>,
    /// pool → instance type → update.
    updates: BTreeMap<String, BTreeMap<String, TypeUpdate>>,
    outcomes: BTreeMap<String, OverlayOutcome>,
    order: Vec<String>,
}

/// [`evaluate_with`] under the core label policy.
pub fn evaluate(overlays: &[NodeOverlay], pools: &[OverlayPool]) -> Evaluation {
    evaluate_with(overlays, pools, &LabelPolicy::default())
}

/// One controller pass. Every pool given counts as evaluated; leave out a pool whose instance types could not be
/// listed and it stays unevaluated (as upstream, the others proceed). `policy` decides restricted labels in runtime
/// validation.
pub fn evaluate_with(overlays: &[NodeOverlay], pools: &[OverlayPool], policy: &LabelPolicy) -> Evaluation {
    let mut ev = Evaluation { evaluated: pools.iter().map(|p| p.name.clone()).collect(), ..Default::default() };
    let mut sorted: Vec<&NodeOverlay> = overlays.iter().collect();
    // Weight descending, then name DESCENDING on ties: upstream `OrderByWeight` compares `a.Name > b.Name`, though
    // the CRD text says ties merge "in alphabetical order". The code is what runs, so the later name wins.
    sorted.sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| b.name().cmp(a.name())));
    for overlay in sorted {
        ev.order.push(overlay.name().to_string());
        let outcome = match prepare(overlay, policy) {
            Err(msg) => OverlayOutcome::RuntimeValidation(msg),
            Ok(p) => ev.add(&p, pools),
        };
        ev.outcomes.insert(overlay.name().to_string(), outcome);
    }
    ev
}

impl Evaluation {
    /// Checks an overlay against the store across all pools, then stores it everywhere or nowhere (upstream splits
    /// validation and storage so a conflicting overlay is never partially applied).
    fn add(&mut self, p: &Prepared<'_>, pools: &[OverlayPool]) -> OverlayOutcome {
        let mut matches: Vec<(&str, &str, Vec<OfferingKey>)> = Vec::new();
        for pool in pools {
            for it in &pool.instance_types {
                let offerings = overlaid_offerings(pool, it, &p.requirements);
                if !offerings.is_empty() {
                    matches.push((&pool.name, &it.name, offerings));
                }
            }
        }
        let conflict = matches.iter().any(|(pool, it, offerings)| {
            let Some(update) = self.updates.get(*pool).and_then(|u| u.get(*it)) else { return false };
            let price_conflict = p.price.is_some()
                && offerings.iter().any(|k| update.prices.get(k).is_some_and(|e| e.lowest_weight == p.weight));
            let capacity_conflict = p.capacity.as_ref().is_some_and(|cap| {
                update
                    .capacity
                    .as_ref()
                    .is_some_and(|c| c.lowest_weight == p.weight && cap.keys().any(|k| c.lowest_resources.contains(k)))
            });
            price_conflict || capacity_conflict
        });
        if conflict {
            return OverlayOutcome::Conflict;
        }
        for (pool, it, offerings) in matches {
            let update = self.updates.entry(pool.to_string()).or_default().entry(it.to_string()).or_default();
            if let Some(change) = p.price {
                for key in offerings {
                    match update.prices.get_mut(&key) {
                        // The higher weight already set it; only the weight conflicts compare moves down.
                        Some(e) => e.lowest_weight = p.weight,
                        None => {
                            let entry = PriceEntry { overlay: p.name.to_string(), change, lowest_weight: p.weight };
                            update.prices.insert(key, entry);
                        }
                    }
                }
            }
            // One matching offering is enough for the whole type to take the capacity.
            if let Some(cap) = &p.capacity {
                let entry = update.capacity.get_or_insert_with(CapacityEntry::default);
                for (k, v) in cap {
                    // Higher weights came first: lower ones only add resources not set yet.
                    entry.merged.entry(k.clone()).or_insert_with(|| v.clone());
                }
                entry.lowest_resources = cap.keys().cloned().collect();
                entry.lowest_weight = p.weight;
            }
        }
        OverlayOutcome::Applied
    }

    /// Whether this pass evaluated the pool.
    pub fn is_evaluated(&self, pool: &str) -> bool {
        self.evaluated.contains(pool)
    }

    /// `Err` for a pool this pass did not evaluate: the caller must not provision or disrupt with it yet.
    pub fn check_evaluated(&self, pool: &str) -> Result<(), UnevaluatedNodePoolError> {
        if self.is_evaluated(pool) { Ok(()) } else { Err(UnevaluatedNodePoolError { node_pool: pool.to_string() }) }
    }

    /// The evaluated pools, sorted.
    pub fn evaluated_pools(&self) -> impl Iterator<Item = &str> {
        self.evaluated.iter().map(String::as_str)
    }

    pub fn outcome(&self, overlay: &str) -> Option<&OverlayOutcome> {
        self.outcomes.get(overlay)
    }

    /// Every overlay's outcome by name.
    pub fn outcomes(&self) -> &BTreeMap<String, OverlayOutcome> {
        &self.outcomes
    }

    /// Overlay names in evaluation order (weight descending, name descending).
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The instance types of `pool` with the store applied; `None` when the pool was not evaluated (upstream
    /// `UnevaluatedNodePoolError`).
    pub fn apply(&self, pool: &str, instance_types: &[Arc<InstanceType>]) -> Option<Vec<Arc<InstanceType>>> {
        self.apply_detailed(pool, instance_types).map(|a| a.instance_types)
    }

    /// [`apply`](Self::apply) plus which overlay changed what. Types without updates are the same `Arc`s; the others
    /// are copies. Prices are recomputed from each offering's current price, so a moved spot price passes through a
    /// relative adjustment; offerings that appeared after the evaluation are left alone until the next pass.
    pub fn apply_detailed(&self, pool: &str, instance_types: &[Arc<InstanceType>]) -> Option<AppliedTypes> {
        if !self.is_evaluated(pool) {
            return None;
        }
        let mut out = AppliedTypes::default();
        let updates = self.updates.get(pool);
        for it in instance_types {
            let Some(update) = updates.and_then(|u| u.get(&it.name)) else {
                out.instance_types.push(Arc::clone(it));
                continue;
            };
            let mut copy = InstanceType::clone(it);
            let mut prov = TypeProvenance::default();
            for o in &mut copy.offerings {
                let key = OfferingKey::of(o);
                if let Some(e) = update.prices.get(&key) {
                    let base_price = o.price;
                    o.price = e.change.apply(base_price);
                    prov.prices.push(PriceProvenance {
                        offering: key,
                        overlay: e.overlay.clone(),
                        change: e.change,
                        base_price,
                        price: o.price,
                    });
                }
            }
            if let Some(cap) = update.capacity.as_ref().filter(|c| !c.merged.is_empty()) {
                for (k, v) in &cap.merged {
                    let before = it.capacity.get(k);
                    copy.capacity.set(k, v.parsed);
                    // Hugepages are carved out of memory (upstream `computeAllocatable`). The catalog's
                    // `allocatable()` doesn't model that, so the overlay's change in hugepages is charged to the
                    // overhead's memory, which `allocatable()` subtracts (floored at zero as upstream).
                    if k.starts_with(HUGEPAGES_PREFIX) {
                        copy.overhead.memory =
                            copy.overhead.memory.saturating_add(copy.capacity.get(k).saturating_sub(before));
                    }
                    prov.capacity.push(CapacityProvenance {
                        resource: k.clone(),
                        overlay: v.overlay.clone(),
                        quantity: v.quantity.clone(),
                    });
                }
            }
            if prov.prices.is_empty() && prov.capacity.is_empty() {
                // Matched offerings this pool no longer lists: nothing to change, keep sharing.
                out.instance_types.push(Arc::clone(it));
                continue;
            }
            out.provenance.insert(it.name.clone(), prov);
            out.instance_types.push(Arc::new(copy));
        }
        Some(out)
    }

    /// Where an overlay took effect: the (pool, type, offering) prices it set and the (pool, type, resource)
    /// capacities it won, sorted.
    pub fn effects(&self, overlay: &str) -> OverlayEffects {
        let mut fx = OverlayEffects::default();
        for (pool, types) in &self.updates {
            for (it, update) in types {
                for (key, e) in &update.prices {
                    if e.overlay == overlay {
                        fx.prices.push((pool.clone(), it.clone(), key.clone()));
                    }
                }
                for (res, v) in update.capacity.iter().flat_map(|c| &c.merged) {
                    if v.overlay == overlay {
                        fx.capacity.push((pool.clone(), it.clone(), res.clone()));
                    }
                }
            }
        }
        fx
    }

    /// The overlay's status conditions after this pass (see [`overlay_conditions`]); `None` if the overlay was not
    /// part of it.
    pub fn desired_conditions(&self, overlay: &NodeOverlay, now: Millis) -> Option<Vec<Condition>> {
        let outcome = self.outcomes.get(overlay.name())?;
        let existing = overlay.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        Some(overlay_conditions(outcome, existing, overlay.metadata.generation, now))
    }
}

/// Where one overlay took effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlayEffects {
    /// (pool, instance type, offering) whose price it set.
    pub prices: Vec<(String, String, OfferingKey)>,
    /// (pool, instance type, resource) whose capacity it set.
    pub capacity: Vec<(String, String, String)>,
}

/// One offering repriced by an overlay.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceProvenance {
    pub offering: OfferingKey,
    pub overlay: String,
    pub change: PriceChange,
    pub base_price: f64,
    pub price: f64,
}

/// One resource of an instance type set by an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityProvenance {
    pub resource: String,
    pub overlay: String,
    pub quantity: String,
}

/// What overlays changed on one instance type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeProvenance {
    pub prices: Vec<PriceProvenance>,
    pub capacity: Vec<CapacityProvenance>,
}

impl TypeProvenance {
    /// Upstream `IsPricingOverlayApplied`: any offering repriced.
    pub fn price_overlaid(&self) -> bool {
        !self.prices.is_empty()
    }

    /// Upstream `IsCapacityOverlayApplied`.
    pub fn capacity_overlaid(&self) -> bool {
        !self.capacity.is_empty()
    }

    /// The overlays that changed this type, sorted.
    pub fn overlays(&self) -> BTreeSet<&str> {
        self.prices.iter().map(|p| p.overlay.as_str()).chain(self.capacity.iter().map(|c| c.overlay.as_str())).collect()
    }
}

/// A pool's instance types with the store applied, and per overlaid type what changed.
#[derive(Debug, Clone, Default)]
pub struct AppliedTypes {
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Only types some overlay changed, by name.
    pub provenance: BTreeMap<String, TypeProvenance>,
}

impl AppliedTypes {
    pub fn is_price_overlaid(&self, instance_type: &str) -> bool {
        self.provenance.get(instance_type).is_some_and(TypeProvenance::price_overlaid)
    }

    pub fn is_capacity_overlaid(&self, instance_type: &str) -> bool {
        self.provenance.get(instance_type).is_some_and(TypeProvenance::capacity_overlaid)
    }

    /// Whether any of the kept types (a NodeClaim's, after filtering and truncation) has an overlaid price.
    pub fn any_price_overlaid<'a>(&self, kept: impl IntoIterator<Item = &'a str>) -> bool {
        kept.into_iter().any(|t| self.is_price_overlaid(t))
    }

    pub fn any_capacity_overlaid<'a>(&self, kept: impl IntoIterator<Item = &'a str>) -> bool {
        kept.into_iter().any(|t| self.is_capacity_overlaid(t))
    }

    /// The overlay annotations a dynamic NodeClaim keeping these types gets (upstream `ToNodeClaim`).
    pub fn nodeclaim_annotations<'a>(&self, kept: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
        let kept: Vec<&str> = kept.into_iter().collect();
        let mut a = BTreeMap::new();
        if self.any_price_overlaid(kept.iter().copied()) {
            a.insert(ANNOTATION_PRICE_OVERLAY_APPLIED.to_string(), "true".to_string());
        }
        if self.any_capacity_overlaid(kept.iter().copied()) {
            a.insert(ANNOTATION_CAPACITY_OVERLAY_APPLIED.to_string(), "true".to_string());
        }
        a
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Status conditions
// ---------------------------------------------------------------------------------------------------------------

/// The status conditions an overlay should carry for `outcome`, operatorpkg style: `ValidationSucceeded` True (reason
/// `ValidationSucceeded`) or False (reason/message of the outcome), and the root `Ready` following it (False with
/// reason `UnhealthyDependents`, message `ValidationSucceeded=False`). A condition whose status is unchanged keeps
/// its lastTransitionTime; others get `now`. Other condition types in `existing` are kept, so `result != existing`
/// tells a controller to patch.
pub fn overlay_conditions(
    outcome: &OverlayOutcome,
    existing: &[Condition],
    generation: Option<i64>,
    now: Millis,
) -> Vec<Condition> {
    let ok = outcome.is_applied();
    let status = if ok { "True" } else { "False" };
    let validation = (
        CONDITION_VALIDATION_SUCCEEDED,
        if ok { CONDITION_VALIDATION_SUCCEEDED } else { outcome.reason().unwrap_or(REASON_CONFLICT) },
        outcome.message().unwrap_or_default().to_string(),
    );
    let ready = (
        CONDITION_READY,
        if ok { CONDITION_READY } else { REASON_UNHEALTHY_DEPENDENTS },
        if ok { String::new() } else { format!("{CONDITION_VALIDATION_SUCCEEDED}=False") },
    );
    let mut out: Vec<Condition> = existing
        .iter()
        .filter(|c| c.type_ != CONDITION_VALIDATION_SUCCEEDED && c.type_ != CONDITION_READY)
        .cloned()
        .collect();
    for (type_, reason, message) in [validation, ready] {
        let prev = existing.iter().find(|c| c.type_ == type_);
        let last_transition_time = match prev {
            Some(c) if c.status == status && c.last_transition_time.is_some() => c.last_transition_time.clone(),
            _ => Some(rfc3339(now)),
        };
        out.push(Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time,
            reason: Some(reason.to_string()),
            message: Some(message),
            observed_generation: generation,
        });
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Upstream v1.14's `GetOverlayPrice` (AWS provider): an instance type the price list has no price for takes the
/// `price` of an overlay that has `ValidationSucceeded=True` and whose only requirement is
/// `node.kubernetes.io/instance-type In [...]`. When several name a type, the one evaluated first (weight, then
/// name descending) gives it.
pub fn instance_type_prices(overlays: &[NodeOverlay]) -> BTreeMap<String, f64> {
    let mut ordered: Vec<&NodeOverlay> = overlays
        .iter()
        .filter(|o| o.condition(CONDITION_VALIDATION_SUCCEEDED).is_some_and(|c| c.status == "True"))
        .filter(|o| o.spec.price.is_some())
        .collect();
    ordered.sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| b.name().cmp(a.name())));
    let mut out = BTreeMap::new();
    for o in ordered {
        let [r] = o.spec.requirements.as_slice() else { continue };
        if r.key != labels::INSTANCE_TYPE || r.operator != "In" {
            continue;
        }
        let Some(PriceChange::Replace(price)) = o.spec.price.as_deref().and_then(|p| PriceChange::parse(p).ok()) else {
            continue;
        };
        for t in r.values.iter().flatten() {
            out.entry(t.clone()).or_insert(price);
        }
    }
    out
}

/// Evaluates `overlays` over `pools`, each with its raw instance types from `raw`, and applies the result: the
/// evaluation, and per evaluated pool its overlaid types with what changed. The one place the controller, `plan`
/// and the what-if preview get their overlaid types from.
pub fn overlaid_catalogs(
    overlays: &[NodeOverlay],
    pools: &[NodePool],
    raw: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    policy: &LabelPolicy,
) -> (Evaluation, BTreeMap<String, AppliedTypes>) {
    let inputs: Vec<OverlayPool> =
        pools.iter().map(|p| OverlayPool::from_nodepool(p, raw.get(p.name()).cloned().unwrap_or_default())).collect();
    let evaluation = evaluate_with(overlays, &inputs, policy);
    let applied = pools
        .iter()
        .filter_map(|p| {
            let types = raw.get(p.name())?;
            Some((p.name().to_string(), evaluation.apply_detailed(p.name(), types)?))
        })
        .collect();
    (evaluation, applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::nodeoverlay::NodeOverlaySpec;
    use crate::engine::resources::Resources;
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;

    fn offering(ct: &str, zone: &str, price: f64) -> Offering {
        Offering { zone: zone.to_string(), capacity_type: ct.to_string(), price, available: true, reservation: None }
    }

    fn it(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
        let mut r = Requirements::new();
        r.add(labels::INSTANCE_TYPE, Requirement::in_values([name]));
        r.add(labels::ZONE, Requirement::in_values(offerings.iter().map(|o| o.zone.clone())));
        r.add(labels::CAPACITY_TYPE, Requirement::in_values(offerings.iter().map(|o| o.capacity_type.clone())));
        Arc::new(InstanceType {
            name: name.to_string(),
            requirements: r,
            capacity: Resources::new(4000, 8 << 30, 110),
            overhead: Resources::new(100, 1 << 30, 0),
            offerings,
            volume_limits: Default::default(),
        })
    }

    fn overlay(name: &str, weight: Option<i32>, reqs: &[(&str, &str, &[&str])]) -> NodeOverlay {
        let mut o = NodeOverlay::new(
            name,
            NodeOverlaySpec {
                requirements: reqs
                    .iter()
                    .map(|(k, op, v)| NodeSelectorRequirement {
                        key: k.to_string(),
                        operator: op.to_string(),
                        values: Some(v.iter().map(|s| s.to_string()).collect()),
                    })
                    .collect(),
                weight,
                ..Default::default()
            },
        );
        o.metadata.generation = Some(3);
        o
    }

    #[test]
    fn parse_and_apply() {
        assert_eq!(PriceChange::parse("1.5"), Ok(PriceChange::Replace(1.5)));
        assert_eq!(PriceChange::parse("+2"), Ok(PriceChange::Add(2.0)));
        assert_eq!(PriceChange::parse("-10%"), Ok(PriceChange::Percent(-10.0)));
        for bad in ["", "+", "-%", "abc", "+inf", "NaN", "1e3", "10%", "+1.2.3"] {
            assert!(PriceChange::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(PriceChange::Add(-5.0).apply(2.0), 0.0);
        assert_eq!(PriceChange::Percent(-100.0).apply(2.0), 0.0);
        assert_eq!(PriceChange::Add(1.0).apply(f64::NAN), 0.0);
        assert_eq!(PriceChange::Percent(-10.0).to_string(), "-10%");
        assert_eq!(PriceChange::Add(1.5).to_string(), "+1.5");
    }

    #[test]
    fn hugepages_reduce_allocatable_memory() {
        let mut o = overlay("huge", Some(1), &[(labels::INSTANCE_TYPE, "In", &["t"])]);
        let cap = BTreeMap::from([
            ("hugepages-2Mi".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into())),
            ("example.com/fuse".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("3".into())),
        ]);
        o.spec.capacity = Some(cap);
        let t = it("t", vec![offering("on-demand", "z1", 1.0)]);
        let ev = evaluate(&[o], &[OverlayPool::new("p", BTreeMap::new(), vec![t.clone()])]);
        let applied = ev.apply_detailed("p", std::slice::from_ref(&t)).unwrap();
        let got = &applied.instance_types[0];
        assert_eq!(got.capacity.get("hugepages-2Mi"), 1 << 30);
        assert_eq!(got.capacity.get("example.com/fuse"), 3);
        assert_eq!(got.allocatable().memory, t.allocatable().memory - (1 << 30));
        assert!(applied.is_capacity_overlaid("t") && !applied.is_price_overlaid("t"));
        assert_eq!(applied.nodeclaim_annotations(["t"]).len(), 1);
    }

    #[test]
    fn conditions_keep_transition_time_while_status_holds() {
        let first = overlay_conditions(&OverlayOutcome::Conflict, &[], Some(3), 1_000);
        assert_eq!(first.len(), 2);
        let v = first.iter().find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED).unwrap();
        assert_eq!((v.status.as_str(), v.reason.as_deref()), ("False", Some(REASON_CONFLICT)));
        assert_eq!(v.message.as_deref(), Some(CONFLICT_MESSAGE));
        let r = first.iter().find(|c| c.type_ == CONDITION_READY).unwrap();
        assert_eq!(r.reason.as_deref(), Some(REASON_UNHEALTHY_DEPENDENTS));
        let again = overlay_conditions(&OverlayOutcome::Conflict, &first, Some(3), 9_000);
        assert_eq!(again, first, "nothing to patch");
        let fixed = overlay_conditions(&OverlayOutcome::Applied, &first, Some(4), 9_000);
        assert!(fixed.iter().all(|c| c.status == "True" && c.last_transition_time.as_deref() == Some(&rfc3339(9_000))));
    }
}
