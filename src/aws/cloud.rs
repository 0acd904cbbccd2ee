//! The AWS cloud provider (`--cloud aws`): the live catalog (instance types, offerings and prices from the EC2 and
//! Pricing APIs, less offerings that just failed), EC2NodeClass resolution, launches through CreateFleet,
//! termination, the instance list that finalization and garbage collection read, and unused launch templates
//! cleaned up. It keeps what it learns behind locks so the planner can read it between calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use aws_config::SdkConfig;

use crate::controller::cloud::{CloudInstance, LaunchFailure, Launched};
use crate::engine::api::{EC2NodeClass, NodeClaim};
use crate::engine::catalog::aws::build_catalog;
use crate::engine::catalog::{Catalog, CatalogError};
use crate::engine::labels;
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;

use super::config::AwsError;
use super::ec2::{self, Ec2Instance, Templates};
use super::instanceprofile::ProfileError;
use super::instancetypes::{Discovered, discover};
use super::launch::{ClusterInfo, FleetPlan, TAG_NODECLAIM, plan, plan_with};
use super::nodeclass::{AliasContext, INSTANCE_PROFILE_READY, Problem, VALIDATION_SUCCEEDED, resolve, status};
use super::pricing::{PriceBook, PriceError, on_demand_prices, spot_prices};
use super::unavailable::{Unavailable, is_capacity_error};

pub const PROVIDER_PREFIX: &str = "aws:///";

/// Whether a NodeClaim is this cloud's to launch and judge: its `nodeClassRef` names an EC2NodeClass (an unset
/// group or kind counts, as claims written before they were defaulted have none). Claims of another provider's
/// class (a KWOKNodeClass, say) are left alone even when a class of the same name exists here.
pub fn is_ec2_claim(claim: &NodeClaim) -> bool {
    let r = &claim.spec.node_class_ref;
    (r.group.is_empty() || r.group == crate::engine::catalog::aws::DOMAIN)
        && (r.kind.is_empty() || r.kind == "EC2NodeClass")
}

/// Claims whose fleet requests are the same (templates, overrides, capacity type, tags but the claim's own) can
/// share one CreateFleet.
fn request_key(f: &FleetPlan) -> String {
    let mut key = format!("{}{}", f.capacity_type, if f.prioritized { "/prioritized" } else { "" });
    for (t, overrides) in &f.configs {
        key.push_str(&t.name());
        for o in overrides {
            key.push_str(&format!("|{}/{}/{}/{}/{}", o.instance_type, o.subnet_id, o.zone, o.image_id, o.priority));
        }
    }
    for (k, v) in f.tags.iter().filter(|(k, _)| *k != TAG_NODECLAIM) {
        key.push_str(&format!("|{k}={v}"));
    }
    key
}

/// Whether the class's last capacity reservation lookup succeeded (its list can be trusted for drift).
fn reservations_ready(nc: &EC2NodeClass) -> bool {
    nc.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| c.type_ == super::nodeclass::CAPACITY_RESERVATIONS_READY && c.status == "True")
    })
}

/// The reservation a reserved fleet launched `instance_type` in `zone` into.
fn reservation_at<'a>(
    fleet: &'a FleetPlan,
    instance_type: &str,
    zone: &str,
) -> Option<&'a crate::engine::catalog::Reservation> {
    fleet
        .configs
        .iter()
        .flat_map(|(_, o)| o)
        .find(|o| o.instance_type == instance_type && o.zone == zone)
        .and_then(|o| o.reservation.as_ref())
}

/// The class's resolved capacity reservations as reserved offerings of its catalog (upstream's reserved capacity
/// resolver): each for its type and zone where the class has a subnet, with what it can still take; an `expiring`
/// capacity block takes nothing more.
fn add_reservations(c: &mut Catalog, nc: &EC2NodeClass, left: &BTreeMap<String, i64>, seen: &mut BTreeSet<String>) {
    let Some(st) = nc.status.as_ref() else { return };
    for r in &st.capacity_reservations {
        if !st.subnets.iter().any(|s| s.zone == r.availability_zone) || !seen.insert(r.id.clone()) {
            continue;
        }
        let count = if r.state == "expiring" { 0 } else { left.get(&r.id).copied().unwrap_or(0).max(0) };
        let reservation = crate::engine::catalog::Reservation {
            id: r.id.clone(),
            capacity: count,
            kind: r.reservation_type.clone(),
            interruptible: r.interruptible,
            end: r.end_time.as_deref().and_then(crate::engine::lifecycle::parse_rfc3339),
            // A capacity error zeroes `left`; the offering's unavailable mark (applied later) says it was refused.
            usable: r.state != "expiring",
        };
        // A type the class does not offer (or not in that zone) has no reserved offering.
        let _ = c.add_reservation(&r.instance_type, &r.availability_zone, reservation);
    }
}

/// What the provider has learnt, readable without an await.
#[derive(Default)]
struct Known {
    discovered: Option<Arc<Discovered>>,
    prices: PriceBook,
    unavailable: Unavailable,
    /// The last instance list (provider ids), `None` before the first.
    instances: Option<Vec<Ec2Instance>>,
    /// EC2NodeClasses as last resolved (status filled in), by name.
    nodeclasses: BTreeMap<String, EC2NodeClass>,
    /// Bumped whenever something a catalog is built from changes.
    generation: u64,
    /// Free addresses per subnet at the last DescribeSubnets, and what launches since then will take (the pods of
    /// each instance, as upstream predicts), so launches spread over a zone's subnets before the next refresh.
    free_ips: BTreeMap<String, i64>,
    in_flight_ips: BTreeMap<String, i64>,
    /// Prices of instance-type-only NodeOverlays, for types the price list has none for (upstream v1.14's
    /// `GetOverlayPrice`): without them those types' offerings are unavailable.
    type_price_overlays: BTreeMap<String, f64>,
    /// Per capacity reservation id, how many instances it can still take (upstream's availability count): EC2's
    /// `AvailableInstanceCount` at each lookup, less launches into it since, plus terminations, and 0 after a
    /// capacity error.
    reservation_left: BTreeMap<String, i64>,
}

/// Catalogs by NodeClass name, with the generation and time they were built at.
type BuiltCatalogs = (u64, Millis, Arc<BTreeMap<String, Arc<Catalog>>>);

/// Catalogs are rebuilt when their inputs change, and at least this often (unavailable offerings expire by time).
const CATALOG_TTL: Millis = 10_000;

pub struct AwsCloud {
    /// Gate `ReservedCapacity` (see [`AwsCloud::with_reserved_capacity`]).
    reserved_capacity: bool,
    /// AWS gate `NodeClassCEL` under Karpenter v1.15 (see [`AwsCloud::with_kubelet_expressions`]).
    kubelet_expressions: bool,
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub iam: aws_sdk_iam::Client,
    pub sdk: SdkConfig,
    pub region: String,
    pub cluster: ClusterInfo,
    pub alias: AliasContext,
    known: Mutex<Known>,
    templates: tokio::sync::Mutex<Templates>,
    /// The per-NodeClass catalogs as last built: (generation, when, catalogs).
    catalogs: Mutex<Option<BuiltCatalogs>>,
    /// NodeClass validations by what was resolved: (when, the problem if any).
    validations: Mutex<BTreeMap<String, (Millis, Option<Problem>)>>,
    /// NodeOverlay prices launches of overlay-priced claims are prioritized by (set by the controller).
    overlays: Mutex<Arc<crate::controller::cloud::OverlayStore>>,
}

/// A NodeClass validation is trusted this long.
const VALIDATION_TTL: Millis = 30 * 60 * 1000;

fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

impl AwsCloud {
    pub fn new(sdk: &SdkConfig, cluster: ClusterInfo, alias: AliasContext) -> AwsCloud {
        AwsCloud {
            ec2: aws_sdk_ec2::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            iam: aws_sdk_iam::Client::new(sdk),
            sdk: sdk.clone(),
            region: sdk.region().map(|r| r.to_string()).unwrap_or_default(),
            cluster,
            alias,
            known: Mutex::new(Known::default()),
            templates: tokio::sync::Mutex::new(Templates::default()),
            catalogs: Mutex::new(None),
            validations: Mutex::new(BTreeMap::new()),
            overlays: Mutex::new(Arc::default()),
            reserved_capacity: true,
            kubelet_expressions: false,
        }
    }

    /// With the `ReservedCapacity` gate (upstream's default: on), EC2NodeClasses' capacity reservations are looked
    /// up and written to their status with `CapacityReservationsReady`.
    pub fn with_reserved_capacity(mut self, on: bool) -> AwsCloud {
        self.reserved_capacity = on;
        self
    }

    /// With the AWS gate `NodeClassCEL` (Karpenter v1.15): an EC2NodeClass's kubelet expressions are resolved per
    /// instance type; without it a class holding any is refused (`ValidationSucceeded=False`).
    pub fn with_kubelet_expressions(mut self, on: bool) -> AwsCloud {
        self.kubelet_expressions = on;
        self
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        // A panic while holding this lock cannot leave it half-written (every update is one assignment).
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Instance types and offerings (startup, then every 12 h).
    pub async fn refresh_types(&self) -> Result<usize, AwsError> {
        let d = discover(&self.ec2).await?;
        let n = d.types.len();
        let mut k = self.known();
        k.discovered = Some(Arc::new(d));
        k.generation += 1;
        Ok(n)
    }

    /// Spot prices, then on-demand prices; a failure keeps the last prices (on-demand falls back to the embedded
    /// table) and is returned, saying what stands in, to be logged at warn.
    pub async fn refresh_prices(&self) -> Vec<PriceError> {
        let mut errors = Vec::new();
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match spot_prices(&self.ec2).await {
            Ok(p) => {
                let mut k = self.known();
                k.prices.merge_spot(p, at.clone());
                k.generation += 1;
            }
            Err(error) => errors.push(PriceError::Spot { error, last_read: self.known().prices.spot_at.clone() }),
        }
        match on_demand_prices(&self.sdk, &self.region).await {
            Ok(p) => {
                let mut k = self.known();
                k.prices.merge_on_demand(p, at);
                k.generation += 1;
            }
            Err(error) => errors.push(PriceError::OnDemand {
                error,
                last_read: self.known().prices.on_demand_at.clone(),
                table_date: crate::engine::catalog::aws::static_price_date(),
            }),
        }
        errors
    }

    /// The catalog for a NodeClass (its subnets' zones, its kubelet and AMI family), with unavailable offerings
    /// marked; `None` before the first discovery.
    pub fn catalog_for(&self, nodeclass: Option<&EC2NodeClass>, now: Millis) -> Option<Result<Catalog, CatalogError>> {
        let mut k = self.known();
        // Expired marks go, so the cache holds only what is still kept out.
        k.unavailable.expire(now);
        let d = k.discovered.clone()?;
        let zones = d.zones();
        let offered = d.offered();
        let prices = &k.prices;
        let overlay_prices = &k.type_price_overlays;
        let built = build_catalog(
            &self.region,
            &zones,
            &offered,
            nodeclass,
            self.kubelet_expressions,
            |f, ct, z| prices.price(f, ct, z).or_else(|| overlay_prices.get(&f.name).copied()),
            prices.source(),
        );
        let reserved = self.reserved_capacity;
        Some(built.map(|mut c| {
            k.unavailable.apply(&mut c, now);
            if reserved && let Some(nc) = nodeclass {
                add_reservations(&mut c, nc, &k.reservation_left, &mut BTreeSet::new());
            }
            c
        }))
    }

    /// Every type and zone, with the reservations of every resolved class (for the dashboard's prices and its
    /// reservations list).
    pub fn live_catalog(&self, now: Millis) -> Option<Catalog> {
        let mut c = self.catalog_for(None, now).and_then(Result::ok)?;
        if self.reserved_capacity {
            let k = self.known();
            let mut seen = BTreeSet::new();
            for nc in k.nodeclasses.values() {
                add_reservations(&mut c, nc, &k.reservation_left, &mut seen);
            }
        }
        Some(c)
    }

    /// Catalogs per resolved NodeClass, for the planner: rebuilt when what they are built from changed, else at
    /// most every 10 s (the planner asks every tick).
    pub fn catalogs(&self, now: Millis) -> BTreeMap<String, Arc<Catalog>> {
        let (generation, classes) = {
            let k = self.known();
            (k.generation, k.nodeclasses.values().cloned().collect::<Vec<EC2NodeClass>>())
        };
        let mut cache = self.catalogs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, at, c)) = cache.as_ref()
            && *g == generation
            && now - at < CATALOG_TTL
            && now >= *at
        {
            return (**c).clone();
        }
        let built: BTreeMap<String, Arc<Catalog>> = classes
            .iter()
            .filter_map(|nc| {
                let c = self.catalog_for(Some(nc), now)?.ok()?;
                Some((nc.metadata.name.clone().unwrap_or_default(), Arc::new(c)))
            })
            .collect();
        *cache = Some((generation, now, Arc::new(built.clone())));
        built
    }

    /// Resolves a NodeClass's selectors and returns the status to write; the resolved class is kept for launches.
    pub async fn resolve_nodeclass(
        &self,
        nc: &EC2NodeClass,
    ) -> Result<crate::engine::api::ec2nodeclass::EC2NodeClassStatus, AwsError> {
        let mut r = resolve(&self.ec2, &self.ssm, nc, &self.alias).await.map_err(|e| match e {
            super::nodeclass::ResolveError::Aws(a) => a,
        })?;
        {
            let mut k = self.known();
            for sn in &r.subnets {
                k.free_ips.insert(sn.id.clone(), i64::from(sn.available_ips));
                k.in_flight_ips.remove(&sn.id);
            }
        }
        match (&nc.spec.instance_profile, &nc.spec.role) {
            (Some(p), _) => r.instance_profile = Some(p.clone()),
            (None, Some(role)) => {
                match super::instanceprofile::ensure(&self.iam, &self.cluster.name, &self.region, nc, role).await {
                    Ok(name) => r.instance_profile = Some(name),
                    Err(e @ ProfileError::RoleNotFound { .. }) => r.problems.push(Problem::new(
                        INSTANCE_PROFILE_READY,
                        "RoleNotFound",
                        format!("{e}; nodes need an instance profile holding an existing role"),
                    )),
                    Err(e) if e.is_transient() => {
                        r.problems.push(Problem::unknown(
                            INSTANCE_PROFILE_READY,
                            "InstanceProfileNotReady",
                            format!("the instance profile for role {role} could not be made ready, retrying: {e}"),
                        ));
                    }
                    Err(e) => r.problems.push(Problem::new(
                        INSTANCE_PROFILE_READY,
                        "InstanceProfileNotReady",
                        format!("the instance profile for role {role} could not be made ready: {e}"),
                    )),
                }
            }
            (None, None) => r.problems.push(Problem::new(
                INSTANCE_PROFILE_READY,
                "InstanceProfileNotReady",
                "neither spec.role nor spec.instanceProfile is set",
            )),
        }
        // v1.15's kubelet expressions: validated by the nodeclass controller, not the CRD.
        if let Err((reason, message)) = crate::engine::catalog::aws::validate_kubelet(nc, self.kubelet_expressions) {
            r.problems.push(Problem::new(VALIDATION_SUCCEEDED, reason, message));
        }
        if self.reserved_capacity {
            let now = chrono::Utc::now().timestamp();
            match super::capacityreservation::describe(&self.ec2, &nc.spec.capacity_reservation_selector_terms, now)
                .await
            {
                Ok(found) => {
                    let mut k = self.known();
                    for f in &found {
                        if k.reservation_left.insert(f.status.id.clone(), f.available) != Some(f.available) {
                            k.generation += 1;
                        }
                    }
                    drop(k);
                    r.capacity_reservations = Some(found.into_iter().map(|f| f.status).collect());
                }
                Err(e) => {
                    // The last list stands (a failed lookup is not an empty one: clearing it would drift every
                    // reserved node of the class).
                    r.capacity_reservations = nc.status.as_ref().map(|s| s.capacity_reservations.clone());
                    r.problems.push(Problem::unknown(
                        super::nodeclass::CAPACITY_RESERVATIONS_READY,
                        "CapacityReservationsNotReady",
                        format!("looking up capacity reservations, retrying: {e}"),
                    ))
                }
            }
        }
        // As upstream, the dry runs only run once everything they need resolved.
        if r.dependencies_ready()
            && let Some(problem) = self.validate(nc, &r).await
        {
            r.problems.push(problem);
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut st = status(&r, &now);
        // Keep transition times of conditions whose status did not change (status writes stay quiet).
        if let Some(old) = &nc.status {
            for c in &mut st.conditions {
                if let Some(o) = old.conditions.iter().find(|o| o.type_ == c.type_ && o.status == c.status) {
                    c.last_transition_time = o.last_transition_time.clone();
                }
            }
        }
        for c in &mut st.conditions {
            c.observed_generation = nc.metadata.generation;
        }
        let mut resolved = nc.clone();
        resolved.status = Some(st.clone());
        let mut k = self.known();
        let name = nc.metadata.name.clone().unwrap_or_default();
        if k.nodeclasses.get(&name).map(|o| (&o.spec, &o.status)) != Some((&resolved.spec, &resolved.status)) {
            k.nodeclasses.insert(name, resolved);
            k.generation += 1;
        }
        drop(k);
        Ok(st)
    }

    /// Upstream's NodeClass validation: with everything resolved, may this account create the launch template and
    /// launch from it? A real template for a probe claim, then CreateFleet and RunInstances as dry runs. A refusal
    /// is upstream's `...AuthCheckFailed` reason; it and a pass are kept for 30 minutes per resolution, while a
    /// check that failed for another reason leaves the condition Unknown and is tried again at the next
    /// resolution. `None` is fine (or not checkable yet: no instance types).
    async fn validate(&self, nc: &EC2NodeClass, r: &super::nodeclass::Resolved) -> Option<Problem> {
        let now = now_ms();
        let amis: Vec<&str> = r.amis.iter().map(|a| a.id.as_str()).collect();
        let groups: Vec<&str> = r.security_groups.iter().map(|(id, _)| id.as_str()).collect();
        let subnets: Vec<&str> = r.subnets.iter().map(|s| s.id.as_str()).collect();
        let key = format!(
            "{}/{}/{}/{}/{}/{}",
            nc.metadata.name.as_deref().unwrap_or(""),
            nc.metadata.generation.unwrap_or(0),
            r.instance_profile.as_deref().unwrap_or(""),
            amis.join(","),
            groups.join(","),
            subnets.join(",")
        );
        if let Some((at, answer)) = self.validations.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
            && now - at < VALIDATION_TTL
        {
            return answer.clone();
        }
        let mut probe = nc.clone();
        probe.status = Some(status(r, ""));
        let catalog = self.catalog_for(Some(&probe), now)?.ok()?;
        let mut claim = NodeClaim::new("validation", Default::default());
        claim.metadata.labels = Some([(labels::NODEPOOL.to_string(), "karpenter-tui-validation".to_string())].into());
        claim.spec.node_class_ref.name = nc.metadata.name.clone().unwrap_or_default();
        // Not into a reservation: the dry run asks about permissions, not about a reservation's room.
        claim.spec.requirements = vec![crate::engine::api::NodeSelectorRequirementWithMinValues {
            key: labels::CAPACITY_TYPE.into(),
            operator: "NotIn".into(),
            values: [labels::CAPACITY_RESERVED.to_string()].into(),
            min_values: None,
        }];
        // Nothing fits or is offered: a capacity question, not a permission one.
        let fleet = plan(&claim, &probe, &catalog, &self.cluster, &Default::default()).ok()?;
        let outcome = async {
            let mut templates = self.templates.lock().await;
            for (t, _) in fleet.configs.iter().take(1) {
                templates.ensure(&self.ec2, t, &self.cluster.name, now / 1000).await.map_err(|e| {
                    let refused = e.code() == Some("UnauthorizedOperation");
                    ec2::DryRunFailure { call: "CreateLaunchTemplate", refused, message: e.to_string() }
                })?;
            }
            drop(templates);
            ec2::dry_run(&self.ec2, &fleet).await
        }
        .await;
        let answer = match outcome {
            Ok(()) => None,
            Err(f) if f.refused => Some(Problem::new(
                VALIDATION_SUCCEEDED,
                f.reason(),
                format!("Controller isn't authorized to call ec2:{}", f.call),
            )),
            Err(f) => {
                // Not an answer about rights: say so, and ask again next time rather than keeping it.
                return Some(Problem::unknown(
                    VALIDATION_SUCCEEDED,
                    f.reason(),
                    format!("validating ec2:{} authorization failed, retrying: {}", f.call, f.message),
                ));
            }
        };
        self.validations.lock().unwrap_or_else(|p| p.into_inner()).insert(key, (now, answer.clone()));
        answer
    }

    /// Forgets NodeClasses no longer in the cluster.
    pub fn retain_nodeclasses(&self, names: &BTreeSet<String>) {
        let mut k = self.known();
        let before = k.nodeclasses.len();
        k.nodeclasses.retain(|n, _| names.contains(n));
        if k.nodeclasses.len() != before {
            k.generation += 1;
        }
    }

    pub fn nodeclass(&self, name: &str) -> Option<EC2NodeClass> {
        self.known().nodeclasses.get(name).cloned()
    }

    /// Lists this cluster's live instances and keeps the list.
    pub async fn refresh_instances(&self) -> Result<Vec<Ec2Instance>, AwsError> {
        let list = ec2::list(&self.ec2, &self.cluster.name).await?;
        self.known().instances = Some(list.clone());
        Ok(list)
    }

    /// Provider ids of live instances as last listed; `None` before the first list.
    pub fn live_provider_ids(&self) -> Option<BTreeSet<String>> {
        self.known().instances.as_ref().map(|l| l.iter().map(Ec2Instance::provider_id).collect())
    }

    /// A reservation EC2 said is full, or whose owner is taking it back, takes nothing more until the next lookup
    /// says otherwise (upstream's `MarkUnavailable`).
    pub fn reservation_unavailable(&self, id: &str) {
        let mut k = self.known();
        if k.reservation_left.insert(id.to_string(), 0) != Some(0) {
            k.generation += 1;
        }
    }

    /// An interruption for a spot instance keeps its offering out for a while, as a capacity error does.
    pub fn spot_interrupted(&self, instance_type: &str, zone: &str) {
        let mut k = self.known();
        k.unavailable.mark(labels::CAPACITY_SPOT, instance_type, zone, now_ms());
        k.generation += 1;
    }

    /// An instance's capacity type: with the gate `ReservedCapacity` off nothing is `reserved`, as upstream.
    fn reported_capacity_type(&self, i: &Ec2Instance) -> &'static str {
        match i.capacity_type() {
            "reserved" if !self.reserved_capacity => labels::CAPACITY_ON_DEMAND,
            t => t,
        }
    }

    /// What a launch records on its claim. `launched_into` is the reservation a fresh launch targeted (an adopted
    /// instance's is looked up in the class's status).
    fn result(
        &self,
        nc: &EC2NodeClass,
        catalog: &Catalog,
        i: &Ec2Instance,
        launched_into: Option<&crate::engine::catalog::Reservation>,
    ) -> LaunchResult {
        let t = catalog.get(&i.instance_type);
        let mut labels_out = t.map(|t| t.requirements.single_valued_labels()).unwrap_or_default();
        labels_out.insert(labels::ZONE.into(), i.zone.clone());
        labels_out.insert(labels::CAPACITY_TYPE.into(), self.reported_capacity_type(i).into());
        labels_out.insert(labels::INSTANCE_TYPE.into(), i.instance_type.clone());
        // A reserved instance carries its reservation's labels, as upstream's provider labels the claim.
        if self.reported_capacity_type(i) == labels::CAPACITY_RESERVED
            && let Some(id) = &i.capacity_reservation_id
        {
            use crate::engine::catalog::aws::{
                CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_INTERRUPTIBLE, CAPACITY_RESERVATION_TYPE,
            };
            let st = nc.status.as_ref().and_then(|s| s.capacity_reservations.iter().find(|r| &r.id == id));
            let (kind, interruptible) = match (launched_into.filter(|r| &r.id == id), st) {
                (Some(r), _) => (r.kind.clone(), r.interruptible),
                (None, Some(r)) => (r.reservation_type.clone(), r.interruptible),
                (None, None) => (crate::engine::catalog::RESERVATION_DEFAULT.into(), false),
            };
            labels_out.insert(CAPACITY_RESERVATION_ID.into(), id.clone());
            labels_out.insert(CAPACITY_RESERVATION_TYPE.into(), kind);
            labels_out.insert(CAPACITY_RESERVATION_INTERRUPTIBLE.into(), interruptible.to_string());
        }
        if let Some(zone_id) =
            nc.status.as_ref().and_then(|s| s.subnets.iter().find(|s| s.zone == i.zone)).and_then(|s| s.zone_id.clone())
        {
            labels_out.insert(crate::engine::catalog::aws::ZONE_ID.into(), zone_id);
        }
        LaunchResult {
            provider_id: i.provider_id(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: self.reported_capacity_type(i).into(),
            labels: labels_out,
            capacity: t.map(|t| t.capacity.clone()).unwrap_or_default(),
            allocatable: t.map(|t| t.allocatable()).unwrap_or_default(),
            image_id: i.image_id.clone(),
        }
    }

    /// The prices instance-type-only NodeOverlays give types the price list lacks (see
    /// [`crate::engine::overlay::instance_type_prices`]); the catalogs are rebuilt when they change.
    pub fn set_type_price_overlays(&self, prices: &BTreeMap<String, f64>) {
        let mut k = self.known();
        if &k.type_price_overlays != prices {
            k.type_price_overlays = prices.clone();
            k.generation += 1;
        }
    }

    /// What NodeOverlays changed, which the next launches see: overlaid prices prioritize the fleet, overlaid
    /// capacity is what a claim's requests must fit.
    pub fn set_overlays(&self, store: Arc<crate::controller::cloud::OverlayStore>) {
        *self.overlays.lock().unwrap_or_else(|p| p.into_inner()) = store;
    }

    /// The cloud provider's Create for one claim (see [`AwsCloud::launch_batch`]).
    pub async fn launch(&self, claim: &NodeClaim) -> Result<LaunchResult, LaunchError> {
        self.launch_batch(std::slice::from_ref(claim))
            .await
            .pop()
            .unwrap_or_else(|| Err(LaunchError::Other(format!("no launch result for NodeClaim {}", claim.name()))))
    }

    /// The cloud provider's Create for several claims, one result per claim in order: instances earlier attempts
    /// launched are adopted; the rest are planned, and claims whose requests are the same go in one CreateFleet
    /// for as many instances (upstream's batching), each instance then tagged with its claim.
    pub async fn launch_batch(&self, claims: &[NodeClaim]) -> Vec<Result<LaunchResult, LaunchError>> {
        let now = now_ms();
        let mut results: Vec<Option<Result<LaunchResult, LaunchError>>> = vec![None; claims.len()];
        let names: Vec<&str> = claims.iter().map(|c| c.name()).collect();
        let adopted = match ec2::find_for_claims(&self.ec2, &self.cluster.name, &names).await {
            Ok(a) => a,
            Err(e) => {
                let why = format!("looking for instances earlier launches made: {e}");
                return claims.iter().map(|_| Err(LaunchError::Other(why.clone()))).collect();
            }
        };
        let overlays = self.overlays.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // (request key) → (plan, claim indexes, class, catalog)
        let mut groups: BTreeMap<String, (FleetPlan, Vec<usize>, EC2NodeClass, Arc<Catalog>)> = BTreeMap::new();
        let catalogs = self.catalogs(now);
        for (i, claim) in claims.iter().enumerate() {
            let class_name = claim.spec.node_class_ref.name.clone();
            if !is_ec2_claim(claim) {
                let r = &claim.spec.node_class_ref;
                results[i] = Some(Err(LaunchError::Other(format!(
                    "NodeClaim {} references {} {class_name} ({}), not an EC2NodeClass: this cloud launches only \
                     EC2NodeClass claims",
                    claim.name(),
                    r.kind,
                    r.group
                ))));
                continue;
            }
            let Some(nc) = self.nodeclass(&class_name) else {
                results[i] = Some(Err(LaunchError::NodeClassNotReady(format!(
                    "EC2NodeClass {class_name} has not been resolved yet"
                ))));
                continue;
            };
            // The planner's cached catalog of the class; built here only when it has none (to say why).
            let catalog = match catalogs.get(&class_name) {
                Some(c) => c.clone(),
                None => match self.catalog_for(Some(&nc), now) {
                    None => {
                        results[i] =
                            Some(Err(LaunchError::Other("instance types have not been discovered yet".into())));
                        continue;
                    }
                    Some(Err(e)) => {
                        results[i] = Some(Err(LaunchError::NodeClassNotReady(e.to_string())));
                        continue;
                    }
                    Some(Ok(c)) => Arc::new(c),
                },
            };
            if let Some(inst) = adopted.get(claim.name()) {
                tracing::info!(nodeclaim = claim.name(), instance = %inst.id, "adopting the instance an earlier launch made");
                results[i] = Some(Ok(self.result(&nc, &catalog, inst, None)));
                continue;
            }
            match plan_with(
                claim,
                &self.by_free_addresses(&nc),
                &catalog,
                &self.cluster,
                &overlays,
                self.kubelet_expressions,
            ) {
                Err(e) => results[i] = Some(Err(e)),
                Ok(fleet) => {
                    let key = request_key(&fleet);
                    groups.entry(key).or_insert_with(|| (fleet, Vec::new(), nc, catalog)).1.push(i);
                }
            }
        }
        for (_, (fleet, members, nc, catalog)) in groups {
            let batch: Vec<&NodeClaim> = members.iter().map(|&i| &claims[i]).collect();
            let outcome = self.fleet(&fleet, &batch, &nc, &catalog, now).await;
            for (i, r) in members.into_iter().zip(outcome) {
                results[i] = Some(r);
            }
        }
        results
            .into_iter()
            .zip(claims)
            .map(|(r, c)| {
                r.unwrap_or_else(|| Err(LaunchError::Other(format!("NodeClaim {} was not launched", c.name()))))
            })
            .collect()
    }

    /// The class with its subnets ordered by free addresses less those launches since the last refresh will take
    /// (ties keep the status order), so each zone's emptiest subnet is chosen.
    fn by_free_addresses(&self, nc: &EC2NodeClass) -> EC2NodeClass {
        let k = self.known();
        let mut out = nc.clone();
        if let Some(st) = out.status.as_mut() {
            let free =
                |id: &str| k.free_ips.get(id).copied().unwrap_or(0) - k.in_flight_ips.get(id).copied().unwrap_or(0);
            if st.subnets.iter().any(|s| k.free_ips.contains_key(&s.id)) {
                st.subnets.sort_by_key(|s| std::cmp::Reverse(free(&s.id)));
            }
        }
        out
    }

    /// One CreateFleet for claims with the same request.
    async fn fleet(
        &self,
        fleet: &FleetPlan,
        claims: &[&NodeClaim],
        nc: &EC2NodeClass,
        catalog: &Catalog,
        now: Millis,
    ) -> Vec<Result<LaunchResult, LaunchError>> {
        let fail = |e: LaunchError| claims.iter().map(|_| Err(e.clone())).collect::<Vec<_>>();
        let uids: Vec<&str> = claims.iter().map(|c| c.metadata.uid.as_deref().unwrap_or(c.name())).collect();
        let token = ec2::client_token(&uids, fleet);
        // A single claim's instance carries its name from the start; a batch's get theirs right after.
        let mut tags = fleet.tags.clone();
        if claims.len() > 1 {
            tags.remove(TAG_NODECLAIM);
        }
        let mut retried = false;
        let answer = loop {
            {
                let mut templates = self.templates.lock().await;
                for (t, _) in &fleet.configs {
                    if let Err(e) = templates.ensure(&self.ec2, t, &self.cluster.name, now / 1000).await {
                        return fail(LaunchError::Other(e.to_string()));
                    }
                }
            }
            match ec2::create_fleet(&self.ec2, fleet, &tags, claims.len(), &token).await {
                Err(AwsError::Call { message, .. })
                    if !retried && message.contains("InvalidLaunchTemplateName.NotFound") =>
                {
                    // A template deleted behind our back: forget it, create it again, once.
                    let mut templates = self.templates.lock().await;
                    for (t, _) in &fleet.configs {
                        templates.forget(&t.name());
                    }
                    retried = true;
                }
                Err(e) => return fail(LaunchError::Other(e.to_string())),
                Ok(a) => break a,
            }
        };
        {
            let mut k = self.known();
            if !answer.errors.is_empty() {
                k.generation += 1;
            }
            for (code, _, t, z) in &answer.errors {
                if let (true, Some(t), Some(z)) = (is_capacity_error(code), t, z) {
                    match reservation_at(fleet, t, z) {
                        // A reservation out of capacity takes nothing more until EC2 says otherwise.
                        Some(r) => {
                            k.reservation_left.insert(r.id.clone(), 0);
                        }
                        None => k.unavailable.mark(&fleet.capacity_type, t, z, now),
                    }
                }
                if code == "AuthFailure.ServiceLinkedRoleCreationNotPermitted" {
                    k.unavailable.mark_capacity_type(labels::CAPACITY_SPOT, now);
                }
            }
        }
        let summary = answer.errors.iter().map(|(c, m, ..)| format!("{c}: {m}")).collect::<Vec<_>>().join("; ");
        let mut out = Vec::new();
        let mut launched = answer.launched.iter();
        for claim in claims {
            let Some(l) = launched.next() else {
                out.push(Err(if answer.all_capacity_errors() {
                    LaunchError::InsufficientCapacity(format!("CreateFleet: {summary}"))
                } else if summary.is_empty() {
                    LaunchError::Other("CreateFleet returned too few instances".into())
                } else {
                    LaunchError::Other(format!("CreateFleet launched nothing for this claim: {summary}"))
                }));
                continue;
            };
            if claims.len() > 1
                && let Err(e) = ec2::tag(&self.ec2, &l.instance_id, TAG_NODECLAIM, claim.name()).await
            {
                // The instance is there and the claim will record it; the tag only helps adoption after a crash.
                tracing::warn!(nodeclaim = claim.name(), "tagging instance {}: {e}", l.instance_id);
            }
            let reservation = reservation_at(fleet, &l.instance_type, &l.zone);
            if let Some(r) = reservation {
                let mut k = self.known();
                let left = k.reservation_left.entry(r.id.clone()).or_insert(0);
                *left = (*left - 1).max(0);
                k.generation += 1;
            }
            let i = Ec2Instance {
                id: l.instance_id.clone(),
                instance_type: l.instance_type.clone(),
                zone: l.zone.clone(),
                state: "pending".into(),
                launched_at: Some(now / 1000),
                spot: fleet.capacity_type == labels::CAPACITY_SPOT,
                image_id: l.image_id.clone(),
                subnet_id: None,
                security_groups: Vec::new(),
                tags: tags.clone(),
                instance_profile_arn: None,
                capacity_reservation_id: reservation.map(|r| r.id.clone()),
                reservations_only: reservation.is_some(),
            };
            let result = self.result(nc, catalog, &i, reservation);
            // The subnet this zone's overrides named takes the instance's pods (upstream's in-flight prediction).
            if let Some(o) = fleet.configs.iter().flat_map(|(_, o)| o).find(|o| o.zone == l.zone) {
                *self.known().in_flight_ips.entry(o.subnet_id.clone()).or_insert(0) += result.capacity.pods.max(1);
            }
            out.push(Ok(result));
        }
        out
    }

    /// The annotations a launch for `claim` stamps (the NodeClass spec hash, for drift).
    pub fn launch_annotations(&self, claim: &NodeClaim) -> BTreeMap<String, String> {
        self.nodeclass(&claim.spec.node_class_ref.name)
            .map(|nc| super::drift::launch_annotations(&nc))
            .unwrap_or_default()
    }

    /// Per NodeClaim of this cloud, why it no longer matches its EC2NodeClass (empty before anything is known).
    pub fn class_drift<'c>(
        &self,
        claims: impl IntoIterator<Item = &'c NodeClaim>,
        now: Millis,
    ) -> BTreeMap<String, String> {
        let catalogs = self.catalogs(now);
        let k = self.known();
        let instances: BTreeMap<String, &Ec2Instance> =
            k.instances.iter().flatten().map(|i| (i.provider_id(), i)).collect();
        let hashes: BTreeMap<&String, String> =
            k.nodeclasses.iter().map(|(n, nc)| (n, super::drift::spec_hash(nc))).collect();
        let mut out = BTreeMap::new();
        for c in claims {
            let Some(pid) = c.provider_id().filter(|p| p.starts_with(PROVIDER_PREFIX)) else { continue };
            if !is_ec2_claim(c) {
                continue;
            }
            let class_name = &c.spec.node_class_ref.name;
            let Some(nc) = k.nodeclasses.get(class_name) else { continue };
            let t = c
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::INSTANCE_TYPE))
                .and_then(|t| catalogs.get(class_name).and_then(|cat| cat.get(t)).cloned());
            let hash = hashes.get(class_name).map(String::as_str).unwrap_or_default();
            let instance = instances.get(pid).copied();
            let why = super::drift::drifted(c, nc, hash, instance, t.as_deref()).or_else(|| {
                instance
                    .filter(|_| self.reserved_capacity && reservations_ready(nc))
                    .and_then(|i| super::drift::reservation_drift(nc, i))
            });
            if let Some(why) = why {
                out.insert(c.name().to_string(), why);
            }
        }
        out
    }

    /// Terminates the instance behind a provider id; `Ok(false)` when it is already gone.
    pub async fn terminate(&self, provider_id: &str) -> Result<bool, AwsError> {
        let Some(id) = ec2::instance_id(provider_id) else { return Ok(false) };
        let done = ec2::terminate(&self.ec2, id).await?;
        // An instance leaving its reservation gives the reservation its place back.
        let mut k = self.known();
        // Once per instance: a repeated terminate of one already shutting down gives nothing back.
        let reservation = k
            .instances
            .iter_mut()
            .flatten()
            .find(|i| i.id == id && i.state != "shutting-down" && i.capacity_type() == labels::CAPACITY_RESERVED)
            .and_then(|i| {
                i.state = "shutting-down".into();
                i.capacity_reservation_id.clone()
            });
        if done && let Some(r) = reservation.filter(|r| k.reservation_left.contains_key(r)) {
            *k.reservation_left.entry(r).or_insert(0) += 1;
            k.generation += 1;
        }
        Ok(done)
    }

    /// Deletes this cluster's instance profiles whose EC2NodeClass (by uid) is gone and that no live instance uses.
    pub async fn collect_instance_profiles(
        &self,
        class_uids: &BTreeSet<String>,
        now_secs: i64,
    ) -> Result<Vec<String>, AwsError> {
        let in_use: BTreeSet<String> =
            self.known().instances.iter().flatten().filter_map(|i| i.instance_profile_arn.clone()).collect();
        super::instanceprofile::collect(&self.iam, &self.cluster.name, &self.region, class_uids, &in_use, now_secs)
            .await
    }

    /// Deletes launch templates unused for a minute.
    pub async fn delete_unused_templates(&self) -> Result<Vec<String>, AwsError> {
        self.templates.lock().await.delete_unused(&self.ec2, now_ms() / 1000).await
    }

    /// Picks up this cluster's launch templates after a start.
    pub async fn hydrate_templates(&self) -> Result<usize, AwsError> {
        self.templates.lock().await.hydrate(&self.ec2, &self.cluster.name, now_ms() / 1000).await
    }

    pub async fn template_names(&self) -> Vec<String> {
        self.templates.lock().await.names()
    }
}

/// The AWS cloud as the controller sees it through its cloud port: EC2 instances that register their own Nodes
/// (user data), and the interruption notices the SQS poller hands over. The cloud is shared (`Arc`) with the
/// periodic AWS work, which refreshes what the launches read.
pub struct AwsProvider {
    pub cloud: Arc<AwsCloud>,
    /// Notices from the interruption queue (`None` without `--interruption-queue`).
    pub notices: Option<tokio::sync::mpsc::UnboundedReceiver<crate::aws::upkeep::Notice>>,
}

impl AwsProvider {
    pub fn new(
        cloud: Arc<AwsCloud>,
        notices: Option<tokio::sync::mpsc::UnboundedReceiver<crate::aws::upkeep::Notice>>,
    ) -> AwsProvider {
        AwsProvider { cloud, notices }
    }
}

impl std::ops::Deref for AwsProvider {
    type Target = AwsCloud;
    fn deref(&self) -> &AwsCloud {
        &self.cloud
    }
}

impl crate::controller::cloud::CloudProvider for AwsProvider {
    fn name(&self) -> &'static str {
        "aws"
    }

    fn create<'a>(
        &'a mut self,
        claims: &'a [NodeClaim],
        _now: Millis,
    ) -> crate::controller::cloud::BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        Box::pin(async move {
            let results = self.launch_batch(claims).await;
            claims
                .iter()
                .zip(results)
                .map(|(claim, r)| match r {
                    Ok(result) => Ok(Launched { result, annotations: self.launch_annotations(claim) }),
                    Err(e) => Err(LaunchFailure::Cloud(e)),
                })
                .collect()
        })
    }

    fn delete<'a>(
        &'a mut self,
        provider_id: &'a str,
        _now: Millis,
    ) -> crate::controller::cloud::BoxFuture<'a, Result<Option<String>, crate::controller::cloud::Retry>> {
        Box::pin(async move {
            Ok(match self.terminate(provider_id).await {
                Ok(true) => Some(format!("terminating instance {provider_id}")),
                Ok(false) => None,
                // Asked again once the instance list still shows it (see the controller's `TERMINATE_AGAIN`).
                Err(e) => Some(format!("terminating instance {provider_id} failed, retried: {e}")),
            })
        })
    }

    /// EC2's RebootInstances, for repair's reboot (upstream's AWS provider behind `RebootForRepair`).
    fn reboot<'a>(
        &'a mut self,
        provider_id: &'a str,
        _op_id: &'a str,
        _now: Millis,
    ) -> crate::controller::cloud::BoxFuture<'a, Result<(), crate::controller::cloud::Retry>> {
        Box::pin(async move {
            let refused = |message: String| crate::controller::cloud::Retry { message, conflict: false };
            let id = ec2::instance_id(provider_id)
                .ok_or_else(|| refused(format!("{provider_id} is not an EC2 instance")))?;
            ec2::reboot(&self.ec2, id).await.map_err(|e| refused(e.to_string()))
        })
    }

    fn list<'a>(
        &'a mut self,
        _now: Millis,
    ) -> crate::controller::cloud::BoxFuture<'a, Result<Option<Vec<CloudInstance>>, crate::controller::cloud::Retry>>
    {
        Box::pin(async move {
            // The list is kept too: the node-class drift check and the dashboard read it.
            let list = self
                .refresh_instances()
                .await
                .map_err(|e| crate::controller::cloud::Retry { message: e.to_string(), conflict: false })?;
            Ok(Some(
                list.iter()
                    .map(|i| CloudInstance {
                        provider_id: i.provider_id(),
                        launched_at: i.launched_at.map(|t| t * 1000),
                        terminating: i.state == "shutting-down",
                        capacity_type: Some(self.reported_capacity_type(i).into()),
                    })
                    .collect(),
            ))
        })
    }

    fn instance_types(&mut self, now: Millis) -> Option<crate::controller::cloud::InstanceTypes> {
        Some(crate::controller::cloud::InstanceTypes::PerClass(self.catalogs(now)))
    }

    fn drifted(
        &mut self,
        claims: &mut dyn Iterator<Item = &NodeClaim>,
        now: Millis,
    ) -> Option<BTreeMap<String, String>> {
        Some(self.class_drift(claims, now))
    }

    fn interruptions(
        &mut self,
        claims: &mut dyn Iterator<Item = &NodeClaim>,
        _now: Millis,
    ) -> Vec<crate::controller::cloud::Notice> {
        let Some(rx) = self.notices.as_mut() else { return Vec::new() };
        let mut taken = Vec::new();
        while let Ok(n) = rx.try_recv() {
            taken.push(n);
        }
        if taken.is_empty() {
            return Vec::new();
        }
        // The instance's type, zone and reservation as its NodeClaim records them.
        let claims: Vec<&NodeClaim> = claims.collect();
        taken
            .into_iter()
            .map(|(message, answer)| {
                use crate::controller::interruption::Kind;
                // The cloud's own part: a spot interruption keeps the offering out for a while; a reservation
                // interruption (its owner taking it back) leaves the reservation nothing to give.
                if matches!(message.kind, Kind::SpotInterruption | Kind::CapacityReservationInterruption) {
                    for id in &message.instance_ids {
                        let labels_of = claims
                            .iter()
                            .find(|c| c.provider_id().is_some_and(|p| super::ec2::instance_id(p) == Some(id.as_str())))
                            .and_then(|c| c.metadata.labels.as_ref());
                        let Some(l) = labels_of else { continue };
                        if message.kind == Kind::SpotInterruption {
                            if let (Some(t), Some(z)) = (l.get(labels::INSTANCE_TYPE), l.get(labels::ZONE)) {
                                self.cloud.spot_interrupted(t, z);
                            }
                        } else if let Some(r) = l.get(crate::engine::catalog::aws::CAPACITY_RESERVATION_ID) {
                            self.cloud.reservation_unavailable(r);
                        }
                    }
                }
                crate::controller::cloud::Notice {
                    message,
                    answer: Box::new(move |r| {
                        let _ = answer.send(r);
                    }),
                }
            })
            .collect()
    }

    fn repair_policies(&self) -> Vec<crate::controller::cloud::RepairPolicy> {
        crate::controller::cloud::aws_repair_policies()
    }

    fn set_overlays(&mut self, store: Arc<crate::controller::cloud::OverlayStore>) {
        self.cloud.set_overlays(store);
    }

    fn set_type_price_overlays(&mut self, prices: &BTreeMap<String, f64>) {
        self.cloud.set_type_price_overlays(prices);
    }

    fn expiring_claims(&mut self, claims: &mut dyn Iterator<Item = &NodeClaim>, _now: Millis) -> Vec<String> {
        // The classes' statuses as last resolved (every minute, as upstream's controller runs).
        let classes: Vec<EC2NodeClass> = self.cloud.known().nodeclasses.values().cloned().collect();
        let statuses: Vec<_> =
            classes.iter().filter_map(|c| c.status.as_ref()).flat_map(|s| s.capacity_reservations.iter()).collect();
        super::capacityreservation::expiring_claims(claims, &statuses)
    }

    fn live_catalog(&self, now: Millis) -> Option<Catalog> {
        self.cloud.live_catalog(now)
    }
}
