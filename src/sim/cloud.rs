//! The simulated EC2: launches the cheapest available compatible offering for a NodeClaim, keeps instances,
//! refuses offerings switched to insufficient capacity, terminates, lists, and queues interruption events — the
//! cloud side of the world behind `simulate` and `demo`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use thiserror::Error;

use crate::controller::cloud::{self, BoxFuture, CloudInstance, CloudProvider, LaunchFailure, Notice, Retry};
use crate::controller::interruption::Kind as InterruptionKind;
use crate::controller::timing::ICE_TTL;
use crate::engine::api::NodeClaim;
use crate::engine::catalog::{Catalog, InstanceType, Offering, OfferingFilter};
use crate::engine::labels;
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;
use crate::engine::requirements::{Requirements, claim_requirements};
use crate::engine::resources::Resources;

/// What a launch produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    /// Labels the cloud resolves (the type's single-valued labels, zone, capacity type).
    pub labels: BTreeMap<String, String>,
    pub capacity: Resources,
    pub allocatable: Resources,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CloudError {
    /// Every compatible offering is out of capacity (the engine deletes the NodeClaim and retries elsewhere).
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    /// The NodeClaim's requirements match nothing this cloud offers.
    #[error("no compatible instance type: {0}")]
    NoCompatibleType(String),
    #[error("instance {0} not found")]
    NotFound(String),
    /// The claim's EC2NodeClass is refused (its kubelet expressions).
    #[error("node class not ready: {0}")]
    NodeClassNotReady(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InstanceState {
    /// Launched, booting: becomes a Node after the registration latency.
    Pending,
    Running,
    Terminated,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub launched: Launched,
    pub nodeclaim: String,
    pub launched_at: Millis,
    pub state: InstanceState,
    pub terminated_at: Option<Millis>,
    /// Its reservation ended under it: EC2 runs (and bills) it as on-demand from this moment, at this price.
    pub on_demand_from: Option<(Millis, f64)>,
}

impl Instance {
    /// What it cost over `[from, to)`: its launch price, then the on-demand price once its reservation ended.
    pub fn cost(&self, from: Millis, to: Millis) -> f64 {
        let hours = |a: Millis, b: Millis| (b - a).max(0) as f64 / 3_600_000.0;
        match self.on_demand_from {
            Some((at, od)) => {
                let at = at.clamp(from, to.max(from));
                self.launched.price * hours(from, at) + od * hours(at, to)
            }
            None => self.launched.price * hours(from, to),
        }
    }

    /// Its hourly price at `t`.
    pub fn price_at(&self, t: Millis) -> f64 {
        match self.on_demand_from {
            Some((at, od)) if at <= t => od,
            _ => self.launched.price,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    pub provider_id: String,
    pub kind: InterruptionKind,
    pub at: Millis,
}

/// Provider ids of simulated instances start with this (as AWS's do: `aws:///<zone>/<instance id>`).
pub const PROVIDER_PREFIX: &str = "aws:///";

/// An offering: (instance type, zone, capacity type).
pub type OfferingKey = (String, String, String);

/// What decides the types a claim may launch: its requirements, its NodePool (overlays are per pool) and its class.
type LaunchKey = (Requirements, Option<String>, (String, String, String));

/// The simulated cloud.
#[derive(Debug, Clone)]
pub struct SimCloud {
    types: BTreeMap<String, Arc<InstanceType>>,
    /// Offerings switched to insufficient capacity: (instance type, zone, capacity type).
    ice: BTreeSet<(String, String, String)>,
    /// The provider's cache of offerings to avoid, and until when.
    unavailable: BTreeMap<(String, String, String), Millis>,
    /// The catalog the cloud was built with.
    catalog: Arc<Catalog>,
    /// Offerings the provider learned are out of capacity (a launch's capacity error, a spot interruption) and
    /// until when: the controller's catalog shows them unavailable meanwhile, as AWS's unavailable-offerings cache.
    learned: BTreeMap<(String, String, String), Millis>,
    /// The catalog as last handed out, and the learned offerings it marks.
    marked: Option<(BTreeSet<OfferingKey>, Arc<Catalog>)>,
    /// Interruption notices handed out so far (their event ids).
    notices: u64,
    instances: BTreeMap<String, Instance>,
    interruptions: Vec<Interruption>,
    next_id: u64,
    /// Bumped by every change to the instances (a reader that saw the same value needn't look again).
    generation: u64,
    region: String,
    /// Which provider's repair policies it plays (AWS's unless told).
    repair: Vec<cloud::RepairPolicy>,
    /// NodeOverlay prices: a claim annotated as overlay-priced launches by them (a prioritized fleet).
    overlays: Arc<cloud::OverlayStore>,
    /// Capacity reservations by id: what each holds and which instances run in it.
    reservations: BTreeMap<String, SimReservation>,
    /// Instances asked to reboot since the world last took them (it plays their kubelets going down and back).
    reboots: Vec<String>,
    /// The types a claim may launch, by what decides them (its requirements, NodePool and class): its class's view
    /// of the types it names, NodeOverlays applied, whose requirements overlap its own. The claims of one launch
    /// share a few such sets, and working one out walks hundreds of types. Emptied when classes or overlays change.
    launchable: rustc_hash::FxHashMap<LaunchKey, Arc<[Arc<InstanceType>]>>,
    /// The catalog as each EC2NodeClass sees it: a claim launches the types of its class.
    classes: crate::engine::catalog::classes::ClassCatalogs,
    /// The AWS gate `NodeClassCEL` (v1.15).
    cel: bool,
    /// EC2NodeClasses whose kubelet expressions upstream's validation refuses, with its reason and message.
    refused_classes: BTreeMap<String, (&'static str, String)>,
}

/// How long before a capacity block's end its instances are reclaimed by Karpenter (upstream marks the block
/// `expiring` then; EC2 itself takes the instances back at the end).
pub const CAPACITY_BLOCK_EXPIRY: Millis = 40 * 60 * 1000;

/// A capacity reservation of the simulated EC2.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReservation {
    pub instance_type: String,
    pub zone: String,
    pub total: i64,
    pub kind: String,
    pub interruptible: bool,
    pub end: Option<Millis>,
    /// Instances running in it.
    pub used: BTreeSet<String>,
    /// Its owner took it back (an interruptible reservation's interruption): nothing more launches into it.
    pub reclaimed: bool,
}

impl SimReservation {
    /// Whether launches may use it at `now`: not ended, not reclaimed, and for a capacity block not within
    /// [`CAPACITY_BLOCK_EXPIRY`] of its end.
    pub fn usable(&self, now: Millis) -> bool {
        let cutoff = match self.end {
            Some(e) if self.kind == crate::engine::catalog::RESERVATION_CAPACITY_BLOCK => e - CAPACITY_BLOCK_EXPIRY,
            Some(e) => e,
            None => Millis::MAX,
        };
        !self.reclaimed && now < cutoff
    }

    /// Instances it can still take at `now`.
    pub fn left(&self, now: Millis) -> i64 {
        if self.usable(now) { (self.total - self.used.len() as i64).max(0) } else { 0 }
    }
}

impl SimCloud {
    pub fn new(catalog: &Catalog) -> Self {
        SimCloud {
            types: catalog.instance_types.iter().map(|t| (t.name.clone(), t.clone())).collect(),
            ice: BTreeSet::new(),
            unavailable: BTreeMap::new(),
            catalog: Arc::new(catalog.clone()),
            learned: BTreeMap::new(),
            marked: None,
            notices: 0,
            instances: BTreeMap::new(),
            interruptions: Vec::new(),
            next_id: 0,
            generation: 0,
            region: catalog.region.clone(),
            repair: cloud::aws_repair_policies(),
            overlays: Arc::default(),
            reservations: reservations_of(catalog),
            launchable: Default::default(),
            reboots: Vec::new(),
            classes: Default::default(),
            cel: false,
            refused_classes: BTreeMap::new(),
        }
    }

    /// The capacity reservations, by id.
    pub fn reservations(&self) -> &BTreeMap<String, SimReservation> {
        &self.reservations
    }

    /// The next moment a reservation changes by itself (a capacity block starts expiring, a reservation ends).
    pub fn next_reservation_change(&self, now: Millis) -> Option<Millis> {
        self.reservations
            .values()
            .filter_map(|r| r.end)
            .flat_map(|e| [e - CAPACITY_BLOCK_EXPIRY, e])
            .filter(|t| *t > now)
            .min()
    }

    /// The repair policies it names (a scenario's KWOK or inline catalog plays KWOK's provider).
    pub fn with_repair_policies(mut self, policies: Vec<cloud::RepairPolicy>) -> Self {
        self.repair = policies;
        self
    }

    /// With the AWS gate `NodeClassCEL` (Karpenter v1.15): kubelet expressions are resolved per type; without it a
    /// class holding any launches nothing, as upstream's validation refuses it.
    pub fn with_kubelet_expressions(mut self, on: bool) -> Self {
        self.cel = on;
        self.classes = std::mem::take(&mut self.classes).with_kubelet_expressions(on);
        self
    }

    /// The cluster's EC2NodeClasses: each class's claims launch the catalog as that class sees it.
    pub fn set_node_classes(&mut self, classes: &[crate::engine::api::EC2NodeClass]) {
        let base = self.catalog.clone();
        self.classes.sync(&base, classes);
        self.launchable.clear();
        self.refused_classes = classes
            .iter()
            .filter_map(|c| {
                let why = crate::engine::catalog::aws::validate_kubelet(c, self.cel).err()?;
                Some((c.metadata.name.clone()?, why))
            })
            .collect();
    }

    /// Switches an offering's capacity on or off (scenario `capacity` events).
    pub fn set_capacity(&mut self, instance_type: &str, zone: &str, capacity_type: &str, available: bool) {
        let key = (instance_type.to_string(), zone.to_string(), capacity_type.to_string());
        if available {
            self.ice.remove(&key);
        } else {
            self.ice.insert(key);
        }
    }

    /// The provider's unavailable-offerings cache (what a spot interruption teaches it): launches skip the offering
    /// until `until`, although EC2 itself may have capacity again.
    pub fn mark_unavailable(&mut self, instance_type: &str, zone: &str, capacity_type: &str, until: Millis) {
        let key = (instance_type.to_string(), zone.to_string(), capacity_type.to_string());
        self.unavailable.insert(key, until);
    }

    /// The provider learned an offering is out of capacity: the controller's catalog shows it unavailable until
    /// `until`.
    pub fn learn_unavailable(&mut self, offering: (String, String, String), until: Millis) {
        self.learned.insert(offering, until);
    }

    /// When the soonest learned offering comes back, if any is held out.
    pub fn soonest_return(&self) -> Option<Millis> {
        self.learned.values().min().copied()
    }

    /// The catalog as the controller should see it at `now`: the learned offerings marked unavailable, and each
    /// reserved offering with what its reservation can still take (unavailable at 0).
    /// Whether the catalog handed to the controller keeps the types' declared CSI attach limits (Karpenter v1.15);
    /// the instances, and the CSINodes of their nodes, keep them either way.
    pub fn with_declared_volume_limits(mut self, declared: bool) -> Self {
        if !declared {
            self.catalog = Arc::new(self.catalog.without_volume_limits());
            self.marked = None;
        }
        self
    }

    /// A type's attach limits as its instances have them.
    pub fn volume_limits(&self, instance_type: &str) -> Option<&crate::engine::catalog::VolumeLimits> {
        self.types.get(instance_type).map(|t| &t.volume_limits).filter(|l| !l.is_empty())
    }

    pub fn catalog_at(&mut self, now: Millis) -> Arc<Catalog> {
        self.learned.retain(|_, until| *until > now);
        let mut keys: BTreeSet<OfferingKey> = self.learned.keys().cloned().collect();
        // The reservations' state is part of what was handed out: (id, left, "reservation").
        for (id, r) in &self.reservations {
            keys.insert((id.clone(), r.left(now).to_string(), "reservation".into()));
        }
        if let Some((at, c)) = &self.marked
            && *at == keys
        {
            return c.clone();
        }
        let mut catalog = (*self.catalog).clone();
        if !self.reservations.is_empty() {
            for t in &mut catalog.instance_types {
                if !t.offerings.iter().any(|o| o.reservation.is_some()) {
                    continue;
                }
                let t = Arc::make_mut(t);
                for o in &mut t.offerings {
                    if let Some(res) = &mut o.reservation
                        && let Some(r) = self.reservations.get(&res.id)
                    {
                        res.capacity = r.left(now);
                        res.usable = res.usable && r.usable(now);
                        o.available = o.available && res.capacity > 0;
                    }
                }
            }
        }
        if !keys.is_empty() {
            for t in &mut catalog.instance_types {
                if !keys.iter().any(|(n, _, _)| *n == t.name) {
                    continue;
                }
                let mut t2 = (**t).clone();
                for o in &mut t2.offerings {
                    if keys.contains(&(t.name.clone(), o.zone.clone(), o.capacity_type.clone())) {
                        o.available = false;
                        if let Some(r) = &mut o.reservation {
                            r.usable = false;
                        }
                    }
                }
                *t = Arc::new(t2);
            }
        }
        let catalog = Arc::new(catalog);
        self.marked = Some((keys, catalog.clone()));
        catalog
    }

    fn avoided(&self, t: &str, o: &Offering, now: Millis) -> bool {
        // The map's keys are owned; don't build one to probe an empty map (every offering of every launch asks).
        !self.unavailable.is_empty()
            && self
                .unavailable
                .get(&(t.to_string(), o.zone.clone(), o.capacity_type.clone()))
                .is_some_and(|until| *until > now)
    }

    pub fn has_capacity(&self, t: &str, o: &Offering) -> bool {
        self.ice.is_empty() || !self.ice.contains(&(t.to_string(), o.zone.clone(), o.capacity_type.clone()))
    }

    /// Whether a reserved offering's reservation can take one more instance now (other offerings: always).
    fn reservation_room(&self, o: &Offering, now: Millis) -> bool {
        match &o.reservation {
            Some(res) => self.reservations.get(&res.id).is_some_and(|r| r.left(now) > 0),
            None => true,
        }
    }

    /// An interruptible reservation's owner took it back: nothing more launches into it (upstream marks its
    /// availability 0).
    pub fn reclaim_reservation(&mut self, id: &str) {
        if let Some(r) = self.reservations.get_mut(id) {
            r.reclaimed = true;
        }
    }

    /// Reservations that have ended: EC2 takes back a capacity block's instances (returned, already terminated),
    /// and runs a default reservation's on as on-demand, billed at the on-demand price from the end.
    pub fn end_reservations(&mut self, now: Millis) -> Vec<String> {
        use crate::engine::catalog::RESERVATION_CAPACITY_BLOCK;
        let mut ended = Vec::new();
        let mut fallen_back = Vec::new();
        for r in self.reservations.values_mut() {
            let Some(end) = r.end.filter(|e| *e <= now) else { continue };
            if r.kind == RESERVATION_CAPACITY_BLOCK {
                ended.extend(r.used.iter().cloned());
            } else if !r.used.is_empty() {
                // The zone's on-demand price; without one there, the type's cheapest on-demand price.
                let od = self.catalog.get(&r.instance_type).and_then(|t| {
                    let on_demand =
                        || t.offerings.iter().filter(|o| o.capacity_type == crate::engine::labels::CAPACITY_ON_DEMAND);
                    on_demand()
                        .find(|o| o.zone == r.zone)
                        .or_else(|| on_demand().min_by(|a, b| a.price.total_cmp(&b.price)))
                        .map(|o| o.price)
                });
                fallen_back.extend(std::mem::take(&mut r.used).into_iter().map(|p| (p, end, od)));
            }
        }
        for p in &ended {
            let _ = self.terminate(p, now);
        }
        for (p, end, od) in fallen_back {
            if let Some(i) = self.instances.get_mut(&p) {
                let price = od.unwrap_or(i.launched.price);
                i.on_demand_from = Some((end, price));
                self.generation += 1;
            }
        }
        ended
    }

    /// The capacity type EC2 reports for an instance now: a reserved one whose reservation ended is on-demand.
    pub fn capacity_type_of<'a>(&self, provider_id: &str, i: &'a Instance) -> &'a str {
        let t = i.launched.capacity_type.as_str();
        if t == crate::engine::labels::CAPACITY_RESERVED && self.reservation_of(provider_id).is_none() {
            crate::engine::labels::CAPACITY_ON_DEMAND
        } else {
            t
        }
    }

    /// An instance launched into a reservation: labelled as upstream's AWS provider labels the claim, and counted.
    fn label_reserved(&mut self, launched: &mut Launched, res: &crate::engine::catalog::Reservation) {
        use crate::engine::catalog::aws::{
            CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_INTERRUPTIBLE, CAPACITY_RESERVATION_TYPE,
        };
        launched.labels.insert(CAPACITY_RESERVATION_ID.into(), res.id.clone());
        launched.labels.insert(CAPACITY_RESERVATION_TYPE.into(), res.kind.clone());
        launched.labels.insert(CAPACITY_RESERVATION_INTERRUPTIBLE.into(), res.interruptible.to_string());
        if let Some(r) = self.reservations.get_mut(&res.id) {
            r.used.insert(launched.provider_id.clone());
        }
    }

    /// The reservation an instance runs in, if any.
    pub fn reservation_of(&self, provider_id: &str) -> Option<(&str, &SimReservation)> {
        self.reservations.iter().find(|(_, r)| r.used.contains(provider_id)).map(|(id, r)| (id.as_str(), r))
    }

    /// Launches an instance for the claim: among the instance types its requirements allow and whose allocatable
    /// fits its requests, the cheapest available offering — reserved before spot before on-demand, as the AWS
    /// provider prefers when the claim allows them.
    pub fn create(&mut self, claim: &NodeClaim, now: Millis) -> Result<Launched, CloudError> {
        if let Some((reason, message)) = self.refused_classes.get(&claim.spec.node_class_ref.name) {
            return Err(CloudError::NodeClassNotReady(format!(
                "EC2NodeClass {} is not ready: ValidationSucceeded=False: {reason}: {message}",
                claim.spec.node_class_ref.name
            )));
        }
        let reqs = claim_requirements(claim);
        let requests = crate::engine::requirements::claim_requests(claim);
        let types = self.launchable_types(claim, &reqs);
        let mut candidates: Vec<(Arc<InstanceType>, &Offering)> = Vec::new();
        let mut compatible_types = 0;
        let offerings = OfferingFilter::new(&reqs);
        for t in types.iter() {
            if !requests.fits_in(&t.allocatable()) {
                continue;
            }
            compatible_types += 1;
            // An overlaid type keeps its offerings: overlays change capacity here, prices below.
            for o in &t.offerings {
                if o.available
                    && offerings.admits(o)
                    && self.has_capacity(&t.name, o)
                    && !self.avoided(&t.name, o, now)
                    && self.reservation_room(o, now)
                {
                    candidates.push((t.clone(), o));
                }
            }
        }
        if compatible_types == 0 {
            return Err(CloudError::NoCompatibleType(format!(
                "none of NodeClaim {}'s instance types can hold its requests ({})",
                claim.name(),
                requests
            )));
        }
        let rank = |ct: &str| match ct {
            labels::CAPACITY_RESERVED => 0,
            labels::CAPACITY_SPOT => 1,
            _ => 2,
        };
        // With overlaid prices the fleet is prioritized by them (upstream's AWS provider), not by list prices.
        let price_of = |t: &InstanceType, o: &Offering| cloud::launch_price(&self.overlays, claim, &t.name, o);
        let best = candidates.into_iter().min_by(|(ta, a), (tb, b)| {
            rank(&a.capacity_type)
                .cmp(&rank(&b.capacity_type))
                .then(price_of(ta, a).total_cmp(&price_of(tb, b)))
                .then_with(|| ta.name.cmp(&tb.name))
                .then_with(|| a.zone.cmp(&b.zone))
        });
        let Some((t, o)) = best else {
            return Err(CloudError::InsufficientCapacity(format!(
                "no capacity for any of the {compatible_types} compatible instance types of {}",
                claim.name()
            )));
        };
        let (t, zone, capacity_type, price) = (t.clone(), o.zone.clone(), o.capacity_type.clone(), o.price);
        let reservation = o.reservation.clone();
        let mut launched = self.new_instance(&t, &zone, &capacity_type, price);
        if let Some(res) = reservation {
            self.label_reserved(&mut launched, &res);
        }
        let provider_id = launched.provider_id.clone();
        self.instances.insert(
            provider_id,
            Instance {
                launched: launched.clone(),
                nodeclaim: claim.name().to_string(),
                launched_at: now,
                state: InstanceState::Pending,
                terminated_at: None,
                on_demand_from: None,
            },
        );
        Ok(launched)
    }

    /// The types `claim` may launch, requests aside (see [`SimCloud::launchable`]), in name order.
    fn launchable_types(&mut self, claim: &NodeClaim, reqs: &Requirements) -> Arc<[Arc<InstanceType>]> {
        let r = &claim.spec.node_class_ref;
        let key: LaunchKey =
            (reqs.clone(), claim.nodepool().map(str::to_string), (r.group.clone(), r.kind.clone(), r.name.clone()));
        if let Some(types) = self.launchable.get(&key) {
            return types.clone();
        }
        let class = self.classes.for_ref(r);
        let types: Arc<[Arc<InstanceType>]> = self
            .named_types(reqs)
            .map(|raw| class.and_then(|c| c.get(&raw.name)).unwrap_or(raw))
            // The capacity the claim's NodePool sees, with its NodeOverlays applied.
            .map(|raw| cloud::launch_type(&self.overlays, claim, raw))
            .filter(|t| t.requirements.overlaps(reqs))
            .collect();
        self.launchable.insert(key, types.clone());
        types
    }

    /// The types a claim's requirements may name, in name order: those of its `In` list of instance types when it
    /// has one, else all of them. Every catalog type requires its own name, so no other type could overlap the claim;
    /// this only spares the walk over the rest of the catalog.
    fn named_types<'a>(&'a self, reqs: &Requirements) -> Box<dyn Iterator<Item = &'a Arc<InstanceType>> + 'a> {
        match reqs.get_ref(labels::INSTANCE_TYPE).filter(|r| !r.complement) {
            Some(r) => {
                let names: BTreeSet<String> = r.values.iter().cloned().collect();
                Box::new(names.into_iter().filter_map(|n| self.types.get(&n)))
            }
            None => Box::new(self.types.values()),
        }
    }

    /// The claim's offerings that are out of capacity now: what an insufficient-capacity error teaches the engine.
    pub fn exhausted_offerings_for(&self, claim: &NodeClaim) -> Vec<(String, String, String)> {
        let reqs = claim_requirements(claim);
        let mut out = Vec::new();
        let class = self.classes.for_ref(&claim.spec.node_class_ref);
        for t in self.types.values() {
            let t = class.and_then(|c| c.get(&t.name)).unwrap_or(t);
            if !t.requirements.overlaps(&reqs) {
                continue;
            }
            for o in &t.offerings {
                if o.available && o.compatible(&reqs) && !self.has_capacity(&t.name, o) {
                    out.push((t.name.clone(), o.zone.clone(), o.capacity_type.clone()));
                }
            }
        }
        out
    }

    /// A fresh instance id and what the cloud reports for it: the type's single-valued labels, zone, capacity
    /// type and region.
    fn new_instance(&mut self, t: &InstanceType, zone: &str, capacity_type: &str, price: f64) -> Launched {
        self.next_id += 1;
        self.generation += 1;
        let mut labels_out = t.requirements.single_valued_labels();
        labels_out.insert(labels::ZONE.to_string(), zone.to_string());
        labels_out.insert(labels::CAPACITY_TYPE.to_string(), capacity_type.to_string());
        labels_out.insert(labels::REGION.to_string(), self.region.clone());
        Launched {
            provider_id: format!("{PROVIDER_PREFIX}{zone}/i-{:017x}", self.next_id),
            instance_type: t.name.clone(),
            zone: zone.to_string(),
            capacity_type: capacity_type.to_string(),
            price,
            labels: labels_out,
            capacity: t.capacity.clone(),
            allocatable: t.allocatable(),
        }
    }

    /// Records an instance that already exists (a scenario's pre-existing node), running since `since`.
    pub fn adopt(
        &mut self,
        t: &InstanceType,
        zone: &str,
        capacity_type: &str,
        nodeclaim: &str,
        since: Millis,
    ) -> Launched {
        // A reserved node runs in the first reservation of its type and zone with room (and counts against it).
        let offering = t.offerings.iter().find(|o| {
            o.zone == zone
                && o.capacity_type == capacity_type
                && o.reservation
                    .as_ref()
                    .is_none_or(|r| self.reservations.get(&r.id).is_some_and(|s| s.left(since) > 0))
        });
        let price = offering.map_or(0.0, |o| o.price);
        let reservation = offering.and_then(|o| o.reservation.clone());
        let mut launched = self.new_instance(t, zone, capacity_type, price);
        let provider_id = launched.provider_id.clone();
        if let Some(res) = reservation {
            self.label_reserved(&mut launched, &res);
        }
        self.instances.insert(
            provider_id,
            Instance {
                launched: launched.clone(),
                nodeclaim: nodeclaim.to_string(),
                launched_at: since,
                state: InstanceState::Running,
                terminated_at: None,
                on_demand_from: None,
            },
        );
        launched
    }

    pub fn mark_running(&mut self, provider_id: &str) {
        if let Some(i) = self.instances.get_mut(provider_id)
            && i.state == InstanceState::Pending
        {
            i.state = InstanceState::Running;
        }
    }

    pub fn terminate(&mut self, provider_id: &str, now: Millis) -> Result<(), CloudError> {
        match self.instances.get_mut(provider_id) {
            Some(i) if i.state != InstanceState::Terminated => {
                self.generation += 1;
                i.state = InstanceState::Terminated;
                i.terminated_at = Some(now);
                for r in self.reservations.values_mut() {
                    r.used.remove(provider_id);
                }
                Ok(())
            }
            _ => Err(CloudError::NotFound(provider_id.to_string())),
        }
    }

    /// The instances asked to reboot since the last call, oldest first.
    pub fn take_reboots(&mut self) -> Vec<String> {
        std::mem::take(&mut self.reboots)
    }

    /// Changes with every instance created or terminated.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn get(&self, provider_id: &str) -> Option<&Instance> {
        self.instances.get(provider_id).filter(|i| i.state != InstanceState::Terminated)
    }

    /// Instances that exist (not terminated), by provider ID.
    pub fn list(&self) -> BTreeSet<String> {
        self.instances.iter().filter(|(_, i)| i.state != InstanceState::Terminated).map(|(k, _)| k.clone()).collect()
    }

    /// Queues an interruption notice for an instance (scenario `interrupt` events).
    pub fn interrupt(&mut self, provider_id: &str, kind: InterruptionKind, now: Millis) -> Result<(), CloudError> {
        if self.get(provider_id).is_none() {
            return Err(CloudError::NotFound(provider_id.to_string()));
        }
        if matches!(kind, InterruptionKind::InstanceStopping | InterruptionKind::InstanceTerminated) {
            // The state change is what the notice reports.
            let _ = self.terminate(provider_id, now);
        }
        self.interruptions.push(Interruption { provider_id: provider_id.to_string(), kind, at: now });
        Ok(())
    }

    /// Takes the queued notices (what the interruption controller reads from SQS).
    pub fn drain_interruptions(&mut self) -> Vec<Interruption> {
        std::mem::take(&mut self.interruptions)
    }

    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.instances.values()
    }
}

/// The simulated EC2 as the controller's executors see it. It answers at once: how long a launch takes is the
/// world's business (its timers), as it is EC2's, not the call's.
impl CloudProvider for SimCloud {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        now: Millis,
    ) -> BoxFuture<'a, Vec<Result<cloud::Launched, LaunchFailure>>> {
        let out = claims
            .iter()
            .map(|claim| match SimCloud::create(self, claim, now) {
                Ok(l) => Ok(cloud::Launched {
                    result: LaunchResult {
                        provider_id: l.provider_id,
                        instance_type: l.instance_type,
                        zone: l.zone,
                        capacity_type: l.capacity_type,
                        labels: l.labels,
                        capacity: l.capacity,
                        allocatable: l.allocatable,
                        image_id: None,
                    },
                    annotations: BTreeMap::new(),
                }),
                Err(CloudError::InsufficientCapacity(m)) => {
                    Err(LaunchFailure::Cloud(LaunchError::InsufficientCapacity(m)))
                }
                Err(CloudError::NoCompatibleType(m)) => Err(LaunchFailure::Cloud(LaunchError::NoCompatibleType(m))),
                Err(CloudError::NotFound(m)) => Err(LaunchFailure::Cloud(LaunchError::Other(m))),
                Err(CloudError::NodeClassNotReady(m)) => Err(LaunchFailure::Cloud(LaunchError::NodeClassNotReady(m))),
            })
            .collect();
        Box::pin(std::future::ready(out))
    }

    fn expiring_claims(&mut self, _claims: &mut dyn Iterator<Item = &NodeClaim>, now: Millis) -> Vec<String> {
        let mut out = Vec::new();
        for r in self.reservations.values() {
            let Some(end) = r.end else { continue };
            if r.kind != crate::engine::catalog::RESERVATION_CAPACITY_BLOCK || now < end - CAPACITY_BLOCK_EXPIRY {
                continue;
            }
            out.extend(r.used.iter().filter_map(|p| self.instances.get(p)).map(|i| i.nodeclaim.clone()));
        }
        out.sort();
        out
    }

    fn instance_types(&mut self, now: Millis) -> Option<cloud::InstanceTypes> {
        Some(cloud::InstanceTypes::All(self.catalog_at(now)))
    }

    fn interruptions(&mut self, _claims: &mut dyn Iterator<Item = &NodeClaim>, now: Millis) -> Vec<Notice> {
        let mut out = Vec::new();
        for i in self.drain_interruptions() {
            // A reservation interruption: its owner takes it back, nothing more launches into it.
            if i.kind == InterruptionKind::CapacityReservationInterruption
                && let Some(id) = self.reservation_of(&i.provider_id).map(|(id, _)| id.to_string())
            {
                self.reclaim_reservation(&id);
            }
            if i.kind == InterruptionKind::SpotInterruption
                && let Some(l) = self.get(&i.provider_id).map(|inst| inst.launched.clone())
            {
                self.mark_unavailable(&l.instance_type, &l.zone, &l.capacity_type, now + ICE_TTL);
                self.learn_unavailable((l.instance_type, l.zone, l.capacity_type), now + ICE_TTL);
            }
            self.notices += 1;
            let message = crate::controller::interruption::Message {
                kind: i.kind,
                id: format!("sim-{}", self.notices),
                time: crate::engine::lifecycle::rfc3339(i.at),
                instance_ids: vec![i.provider_id.rsplit('/').next().unwrap_or_default().to_string()],
            };
            out.push(Notice { message, answer: Box::new(|_| {}) });
        }
        out
    }

    fn set_overlays(&mut self, store: Arc<cloud::OverlayStore>) {
        self.overlays = store;
        self.launchable.clear();
    }

    fn set_node_classes(&mut self, classes: &[crate::engine::api::EC2NodeClass]) {
        SimCloud::set_node_classes(self, classes);
    }

    /// AWS's policies when it plays EC2 (the aws catalog), KWOK's for the kwok and inline catalogs.
    fn repair_policies(&self) -> Vec<cloud::RepairPolicy> {
        self.repair.clone()
    }

    fn list<'a>(&'a mut self, _now: Millis) -> BoxFuture<'a, Result<Option<Vec<CloudInstance>>, Retry>> {
        let list = self
            .instances
            .iter()
            .filter(|(_, i)| i.state != InstanceState::Terminated)
            .map(|(pid, i)| CloudInstance {
                provider_id: pid.clone(),
                launched_at: Some(i.launched_at),
                terminating: false,
                capacity_type: Some(self.capacity_type_of(pid, i).to_string()),
            })
            .collect();
        Box::pin(std::future::ready(Ok(Some(list))))
    }

    /// EC2's RebootInstances: a running instance reboots; the world plays its kubelet going NotReady and coming
    /// back with a new boot id.
    fn reboot<'a>(
        &'a mut self,
        provider_id: &'a str,
        _op_id: &'a str,
        _now: Millis,
    ) -> BoxFuture<'a, Result<(), Retry>> {
        let running = self.instances.get(provider_id).is_some_and(|i| i.state != InstanceState::Terminated);
        let r = if running {
            self.reboots.push(provider_id.to_string());
            Ok(())
        } else {
            Err(Retry { message: format!("instance {provider_id} is not running"), conflict: false })
        };
        Box::pin(std::future::ready(r))
    }

    fn delete<'a>(&'a mut self, provider_id: &'a str, now: Millis) -> BoxFuture<'a, Result<Option<String>, Retry>> {
        // Terminating what is already gone is done.
        let done = self.terminate(provider_id, now).ok().map(|()| format!("terminating instance {provider_id}"));
        Box::pin(std::future::ready(Ok(done)))
    }
}

/// The reservations behind a catalog's reserved offerings.
fn reservations_of(catalog: &Catalog) -> BTreeMap<String, SimReservation> {
    let mut out = BTreeMap::new();
    for t in &catalog.instance_types {
        for o in &t.offerings {
            if let Some(r) = &o.reservation {
                out.entry(r.id.clone()).or_insert_with(|| SimReservation {
                    instance_type: t.name.clone(),
                    zone: o.zone.clone(),
                    total: r.capacity,
                    kind: r.kind.clone(),
                    interruptible: r.interruptible,
                    end: r.end,
                    used: BTreeSet::new(),
                    reclaimed: false,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_cloud_repairs_as_ec2_does() {
        let cloud = SimCloud::new(&crate::engine::catalog::fake::fake_catalog());
        assert_eq!(CloudProvider::repair_policies(&cloud), cloud::aws_repair_policies());
    }
    use crate::engine::api::NodeClaimSpec;
    use crate::engine::api::common::NodeSelectorRequirementWithMinValues;
    use crate::engine::catalog::fake;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn claim(reqs: &[(&str, &[&str])], cpu: &str) -> NodeClaim {
        let mut c = NodeClaim::new(
            "c1",
            NodeClaimSpec {
                requirements: reqs
                    .iter()
                    .map(|(k, v)| NodeSelectorRequirementWithMinValues {
                        key: k.to_string(),
                        operator: "In".into(),
                        values: v.iter().map(|s| s.to_string()).collect(),
                        min_values: None,
                    })
                    .collect(),
                ..Default::default()
            },
        );
        c.spec.resources.requests.insert("cpu".into(), Quantity(cpu.into()));
        c
    }

    #[test]
    fn launches_cheapest_spot_then_falls_back() {
        let mut cloud = SimCloud::new(&fake::fake_catalog());
        let c = claim(&[(labels::INSTANCE_TYPE, &["default-instance-type", "small-instance-type"])], "1");
        let l = cloud.create(&c, 0).unwrap();
        assert_eq!((l.instance_type.as_str(), l.capacity_type.as_str()), ("small-instance-type", "spot"));
        assert_eq!(l.zone, "test-zone-1");
        // Out of spot capacity for small everywhere: the next cheapest spot option.
        cloud.set_capacity("small-instance-type", "test-zone-1", "spot", false);
        cloud.set_capacity("small-instance-type", "test-zone-2", "spot", false);
        let l = cloud.create(&c, 0).unwrap();
        assert_eq!((l.instance_type.as_str(), l.capacity_type.as_str()), ("default-instance-type", "spot"));
        // On-demand only.
        let od = claim(&[(labels::CAPACITY_TYPE, &["on-demand"]), (labels::ZONE, &["test-zone-3"])], "1");
        let l = cloud.create(&od, 0).unwrap();
        assert_eq!((l.capacity_type.as_str(), l.zone.as_str()), ("on-demand", "test-zone-3"));
    }

    #[test]
    fn a_launch_reads_the_overlays_in_force_not_those_of_the_launch_before() {
        let mut cloud = SimCloud::new(&fake::fake_catalog());
        let mut c = claim(&[(labels::INSTANCE_TYPE, &["default-instance-type", "small-instance-type"])], "1");
        c.metadata.labels = Some([(labels::NODEPOOL.to_string(), "pool".to_string())].into());
        assert_eq!(cloud.create(&c, 0).unwrap().instance_type, "small-instance-type");
        // An overlay leaves the small type no room for the claim's requests in its pool.
        let small = cloud.types["small-instance-type"].clone();
        let shrunk = Arc::new(InstanceType { overhead: small.capacity.clone(), ..(*small).clone() });
        let mut store = cloud::OverlayStore::default();
        store.capacity.insert("pool".into(), [("small-instance-type".to_string(), shrunk)].into());
        CloudProvider::set_overlays(&mut cloud, Arc::new(store));
        assert_eq!(cloud.create(&c, 0).unwrap().instance_type, "default-instance-type");
    }

    #[test]
    fn insufficient_capacity_and_lifecycle() {
        let mut cloud = SimCloud::new(&fake::fake_catalog());
        let c = claim(&[(labels::INSTANCE_TYPE, &["small-instance-type"]), (labels::CAPACITY_TYPE, &["spot"])], "1");
        for z in ["test-zone-1", "test-zone-2"] {
            cloud.set_capacity("small-instance-type", z, "spot", false);
        }
        assert!(matches!(cloud.create(&c, 0), Err(CloudError::InsufficientCapacity(_))));
        cloud.set_capacity("small-instance-type", "test-zone-2", "spot", true);
        let l = cloud.create(&c, 5).unwrap();
        assert_eq!(l.zone, "test-zone-2");
        assert!(cloud.list().contains(&l.provider_id));
        cloud.interrupt(&l.provider_id, InterruptionKind::SpotInterruption, 10).unwrap();
        assert_eq!(cloud.drain_interruptions().len(), 1);
        cloud.terminate(&l.provider_id, 20).unwrap();
        assert!(cloud.list().is_empty());
        assert!(cloud.terminate(&l.provider_id, 21).is_err());
        let too_big = claim(&[], "1000");
        assert!(matches!(cloud.create(&too_big, 0), Err(CloudError::NoCompatibleType(_))));
    }
}
