//! Runs a scenario: builds the catalog and the world, plays the timeline on the virtual clock, and turns what
//! happened into the report of shared/spec/scenario.md.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use thiserror::Error;

use crate::controller::interruption::Kind as InterruptionKind;
use crate::controller::tick;
use crate::engine::api::NodeClaim;
use crate::engine::api::common::NodeSelectorRequirementWithMinValues;
use crate::engine::catalog::{Catalog, CatalogError, aws, inline, kwok};
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason, LaunchResult};
use crate::engine::provisioning::Millis;
use crate::sim::report::Report;
use crate::sim::scenario::{Action, CatalogSource, ObjectKind, Scenario, ScenarioError, Selection};
use crate::sim::world::{self, Decision, World};

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("{file}: catalog: {source}")]
    Catalog { file: String, source: CatalogError },
    #[error("{file}: catalog.instanceTypes: {message}")]
    Inline { file: String, message: String },
    #[error("{file}: events[{index}] at {at}s: {message}")]
    Event { file: String, index: usize, at: f64, message: String },
    #[error("{file}: nodes[{index}]: {message}")]
    Node { file: String, index: usize, message: String },
}

fn ms(d: Duration) -> Millis {
    d.as_millis().min(i64::MAX as u128) as Millis
}

/// The catalog a scenario asks for.
pub fn build_catalog(s: &Scenario) -> Result<Catalog, RunError> {
    let file = s.file().to_string();
    let mut catalog = match s.catalog.source {
        CatalogSource::Aws => aws::aws_catalog(&s.region, s.catalog.zones.as_deref(), None, s.seed)
            .map_err(|source| RunError::Catalog { file: file.clone(), source })?,
        CatalogSource::Kwok => kwok::kwok_catalog(&s.region),
        CatalogSource::Inline => inline::inline_catalog(&s.region, &s.catalog.instance_types)
            .map_err(|e| RunError::Inline { file: file.clone(), message: e.to_string() })?,
    };
    if s.catalog.source != CatalogSource::Inline && !s.catalog.instance_types.is_empty() {
        inline::add_inline_types(&mut catalog, &s.catalog.instance_types)
            .map_err(|e| RunError::Inline { file: file.clone(), message: e.to_string() })?;
    }
    for (i, r) in s.catalog.capacity_reservations.iter().enumerate() {
        add_reservation(&mut catalog, r).map_err(|message| RunError::Inline {
            file: file.clone(),
            message: format!("catalog.capacityReservations[{i}]: {message}"),
        })?;
    }
    let zones: Vec<String> = {
        let mut z: Vec<String> =
            catalog.instance_types.iter().flat_map(|t| t.offerings.iter().map(|o| o.zone.clone())).collect();
        z.sort();
        z.dedup();
        z
    };
    let names: std::collections::BTreeSet<String> = catalog.instance_types.iter().map(|t| t.name.clone()).collect();
    s.check_references(&|n| names.contains(n), &zones)?;
    Ok(catalog)
}

/// Adds a scenario's capacity reservation to its type as a `reserved` offering in its zone, priced as upstream
/// prices reserved offerings: the zone's on-demand price ÷ 10,000,000 (0 without one).
fn add_reservation(catalog: &mut Catalog, r: &crate::sim::scenario::CapacityReservationSpec) -> Result<(), String> {
    let reservation = crate::engine::catalog::Reservation {
        id: r.id.clone(),
        capacity: r.count,
        kind: r.kind.clone().unwrap_or_else(|| crate::engine::catalog::RESERVATION_DEFAULT.into()),
        interruptible: r.interruptible,
        end: r.ends_at.as_deref().and_then(crate::engine::lifecycle::duration_ms),
        usable: true,
    };
    catalog.add_reservation(&r.instance_type, &r.zone, reservation)
}

/// Sets a Node condition as a kubelet or monitoring agent reports it: the transition time moves only when the status
/// changes; the heartbeat is now.
fn set_node_condition(
    node: &mut k8s_openapi::api::core::v1::Node,
    c: &crate::sim::scenario::NodeConditionChange,
    now: Millis,
) {
    use k8s_openapi::api::core::v1::NodeCondition;
    let conditions = node.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    let at = lifecycle::ms_time(now);
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(x) => {
            if x.status != c.status {
                x.last_transition_time = Some(at.clone());
            }
            x.status = c.status.clone();
            x.reason = c.reason.clone();
            x.last_heartbeat_time = Some(at);
        }
        None => conditions.push(NodeCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            last_transition_time: Some(at.clone()),
            last_heartbeat_time: Some(at),
            message: None,
        }),
    }
}

fn patched<T: serde::Serialize + serde::de::DeserializeOwned>(obj: &T, patch: &serde_json::Value) -> Result<T, String> {
    let mut v = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    // RFC 7386: objects merge key by key, null deletes, anything else replaces.
    json_patch::merge(&mut v, patch);
    serde_json::from_value(v).map_err(|e| format!("the patched object is invalid: {e}"))
}

/// Existing capacity from the scenario's `nodes:` shorthand, at t=0.
fn add_nodes(s: &Scenario, w: &mut World, start: Millis) -> Result<(), RunError> {
    for (index, n) in s.nodes.iter().enumerate() {
        let err = |message: String| RunError::Node { file: s.file().to_string(), index, message };
        let Some(t) = w.catalog().instance_types.iter().find(|t| t.name == n.instance_type).cloned() else {
            return Err(err(format!("unknown instance type {:?}", n.instance_type)));
        };
        let name = n.name.clone().unwrap_or_else(|| format!("node-{}", index + 1));
        let created = start - ms(n.age);
        let mut node_labels = t.requirements.single_valued_labels();
        // A real node has one value per label: where the type allows several (an OS list), take the one the
        // NodePool asks for, else linux, else the first.
        let pool_reqs = n.node_pool.as_ref().and_then(|p| w.cluster.nodepools.get(p)).map(|p| {
            p.spec.template.spec.requirements.iter().map(|r| (r.key.clone(), r.values.clone())).collect::<Vec<_>>()
        });
        for (key, r) in t.requirements.iter() {
            if r.complement || r.values.len() < 2 || node_labels.contains_key(key) {
                continue;
            }
            let wanted = pool_reqs.iter().flatten().filter(|(k, _)| k == key).flat_map(|(_, v)| v.iter());
            let pick = wanted
                .into_iter()
                .find(|v| r.values.contains(*v))
                .or_else(|| r.values.iter().find(|v| v.as_str() == "linux"))
                .or_else(|| r.values.first());
            if let Some(v) = pick {
                node_labels.insert(key.to_string(), v.clone());
            }
        }
        node_labels.insert(labels::ZONE.into(), n.zone.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), n.capacity_type.clone());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        let mut provider_id = None;
        let mut claim_name = None;
        if let Some(pool_name) = &n.node_pool {
            let Some(pool) = w.cluster.nodepools.get(pool_name).cloned() else {
                return Err(err(format!("NodePool {pool_name:?} is not among the scenario's objects")));
            };
            let launched = w.cloud.adopt(&t, &n.zone, &n.capacity_type, &name, created);
            // A node in a capacity reservation carries its labels, as the cloud reports them.
            for (k, v) in &launched.labels {
                if k.starts_with("karpenter.k8s.aws/capacity-reservation-") {
                    node_labels.insert(k.clone(), v.clone());
                }
            }
            let tpl = &pool.spec.template;
            let mut claim_labels = tpl.metadata.labels.clone();
            claim_labels.insert(labels::NODEPOOL.into(), pool_name.clone());
            let mut nc = NodeClaim::new(
                &name,
                crate::engine::api::NodeClaimSpec {
                    taints: tpl.spec.taints.clone(),
                    startup_taints: tpl.spec.startup_taints.clone(),
                    requirements: vec![NodeSelectorRequirementWithMinValues {
                        key: labels::INSTANCE_TYPE.into(),
                        operator: "In".into(),
                        values: [t.name.clone()].into(),
                        min_values: None,
                    }],
                    resources: Default::default(),
                    node_class_ref: tpl.spec.node_class_ref.clone(),
                    termination_grace_period: tpl.spec.termination_grace_period.clone(),
                    expire_after: tpl.spec.expire_after.clone(),
                },
            );
            nc.metadata.labels = Some(claim_labels.clone());
            nc.metadata.annotations = (!tpl.metadata.annotations.is_empty()).then(|| tpl.metadata.annotations.clone());
            nc.metadata.finalizers = Some(vec![labels::TERMINATION_FINALIZER.into()]);
            nc.metadata.creation_timestamp = Some(lifecycle::ms_time(created));
            nc.metadata.uid = Some(w.cluster.uid());
            let lr = LaunchResult {
                provider_id: launched.provider_id.clone(),
                instance_type: t.name.clone(),
                zone: n.zone.clone(),
                capacity_type: n.capacity_type.clone(),
                labels: launched.labels.clone(),
                capacity: t.capacity.clone(),
                allocatable: t.allocatable(),
                image_id: None,
            };
            lifecycle::apply_launch(&mut nc, &lr, created);
            node_labels.extend(claim_labels);
            node_labels.insert(labels::REGISTERED.into(), "true".into());
            lifecycle::set_condition(&mut nc, crate::engine::api::nodeclaim::COND_REGISTERED, "True", "", "", created);
            if n.initialized {
                node_labels.insert(labels::INITIALIZED.into(), "true".into());
                lifecycle::set_condition(
                    &mut nc,
                    crate::engine::api::nodeclaim::COND_INITIALIZED,
                    "True",
                    "",
                    "",
                    created,
                );
            }
            w.cluster.nodeclaims.insert(name.clone(), nc);
            provider_id = Some(launched.provider_id);
            claim_name = Some(name.clone());
        }
        node_labels.extend(n.labels.clone());
        let q = |r: &crate::engine::resources::Resources| -> BTreeMap<String, Quantity> {
            r.to_quantity_map().into_iter().map(|(k, v)| (k, Quantity(v))).collect()
        };
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(node_labels.clone()),
                annotations: (!n.annotations.is_empty()).then(|| n.annotations.clone()),
                creation_timestamp: Some(lifecycle::ms_time(created)),
                finalizers: claim_name.as_ref().map(|_| vec![labels::TERMINATION_FINALIZER.to_string()]),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.clone(),
                taints: (!n.taints.is_empty()).then(|| n.taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(q(&t.capacity)),
                allocatable: Some(q(&t.allocatable())),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: if n.initialized { "True" } else { "False" }.into(),
                    last_transition_time: Some(lifecycle::ms_time(created)),
                    last_heartbeat_time: Some(lifecycle::ms_time(start)),
                    ..Default::default()
                }]),
                node_info: Some(k8s_openapi::api::core::v1::NodeSystemInfo {
                    boot_id: world::next_boot_id(None),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        let price = t
            .offerings
            .iter()
            .find(|o| o.zone == n.zone && o.capacity_type == n.capacity_type)
            .map_or(0.0, |o| o.price);
        w.record.nodes.push(world::NodeRecord {
            name: name.clone(),
            provider_id,
            nodepool: n.node_pool.clone(),
            nodeclaim: claim_name,
            instance_type: t.name.clone(),
            zone: n.zone.clone(),
            capacity_type: n.capacity_type.clone(),
            price,
            created_at: created,
            initialized_at: n.initialized.then_some(created),
            deleted_at: None,
            labels: node_labels,
            taints: n.taints.clone(),
        });
        if !t.volume_limits.is_empty() {
            w.cluster.csinodes.insert(name.clone(), world::csinode(&name, &t.volume_limits));
        }
        w.cluster.nodes.insert(name, node);
    }
    Ok(())
}

fn apply_event(w: &mut World, action: &Action) -> Result<(), String> {
    match action {
        Action::Apply(m) => {
            // The CRD refuses turning a pool static or dynamic: nothing of the apply happens then.
            for p in &m.nodepools {
                if let Some(old) = w.cluster.nodepools.get(p.name())
                    && let Some(e) = crate::engine::api::validation::validate_nodepool_transition(old, p)
                {
                    return Err(e.to_string());
                }
            }
            w.cluster.apply(m)
        }
        Action::Scale(sc) => {
            w.cluster
                .deployments
                .update(&(sc.namespace.clone(), sc.name.clone()), |d| d.spec.replicas = Some(sc.replicas))
                .ok_or_else(|| format!("Deployment {}/{} does not exist", sc.namespace, sc.name))?;
        }
        Action::ScaleNodePool { name, replicas } => {
            w.scale_nodepool(name, *replicas)?;
        }
        Action::Delete(refs) => {
            for r in refs {
                let ns = r.namespace.clone().unwrap_or_else(|| "default".into());
                let key = (ns.clone(), r.name.clone());
                let missing = || format!("{:?} {} does not exist", r.kind, r.name);
                match r.kind {
                    ObjectKind::Pod => {
                        if !w.cluster.pods.contains_key(&key) {
                            return Err(missing());
                        }
                        w.delete_pod(&key, None);
                    }
                    ObjectKind::Deployment => {
                        w.cluster.deployments.remove(&key).ok_or_else(missing)?;
                        let owned: Vec<_> = w
                            .cluster
                            .pods
                            .iter()
                            .filter(|((pns, _), p)| {
                                *pns == ns && p.metadata.owner_references.iter().flatten().any(|o| o.name == r.name)
                            })
                            .map(|(k, _)| k.clone())
                            .collect();
                        for k in owned {
                            w.delete_pod(&k, None);
                        }
                    }
                    ObjectKind::DaemonSet => {
                        w.cluster.daemonsets.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::PodDisruptionBudget => {
                        w.cluster.pdbs.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::PersistentVolumeClaim => {
                        w.cluster.pvcs.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::PersistentVolume => {
                        w.cluster.pvs.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::StorageClass => {
                        w.cluster.storage_classes.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::NodeOverlay => {
                        w.cluster.nodeoverlays.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::CapacityBuffer => {
                        w.cluster.capacitybuffers.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::PodTemplate => {
                        w.cluster.pod_templates.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::Service => {
                        w.cluster.services.remove(&key).ok_or_else(missing)?;
                    }
                    ObjectKind::Namespace => {
                        w.cluster.namespaces.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::NodePool => {
                        w.cluster.nodepools.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::Ec2NodeClass => {
                        w.cluster.nodeclasses.remove(&r.name).ok_or_else(missing)?;
                    }
                    ObjectKind::Node => {
                        let node = w.cluster.nodes.get(&r.name).ok_or_else(missing)?;
                        if node.metadata.finalizers.iter().flatten().count() == 0 {
                            // Nothing holds it (a node Karpenter doesn't manage): the API server removes it at
                            // once, and the pod garbage collector its pods.
                            w.remove_node(&r.name);
                            continue;
                        }
                        let node = w.cluster.nodes.get_mut(&r.name).ok_or_else(missing)?;
                        node.metadata.deletion_timestamp.get_or_insert(lifecycle::ms_time(w.now));
                        // Deleting a Node deletes its NodeClaim too (node termination, step 1).
                        let claim = crate::engine::state::claim_of(node, w.cluster.nodeclaims.values().map(|c| &**c));
                        if let Some(name) = claim.map(|c| c.name().to_string()) {
                            w.delete_nodeclaim(&name, DeleteReason::GarbageCollected);
                        }
                    }
                    ObjectKind::NodeClaim => {
                        if !w.cluster.nodeclaims.contains_key(&r.name) {
                            return Err(missing());
                        }
                        w.delete_nodeclaim(&r.name, DeleteReason::GarbageCollected);
                    }
                }
            }
        }
        Action::Patch(p) => {
            let ns = p.target.namespace.clone().unwrap_or_else(|| "default".into());
            let key = (ns, p.target.name.clone());
            let name = &p.target.name;
            let missing = || format!("{:?} {} does not exist", p.target.kind, name);
            macro_rules! patch_in {
                ($map:expr, $k:expr) => {{
                    let obj = $map.get($k).ok_or_else(missing)?;
                    let new = patched(&**obj, &p.patch)?;
                    $map.insert($k.clone(), new);
                }};
            }
            match p.target.kind {
                ObjectKind::Pod => patch_in!(w.cluster.pods, &key),
                ObjectKind::Deployment => patch_in!(w.cluster.deployments, &key),
                ObjectKind::DaemonSet => patch_in!(w.cluster.daemonsets, &key),
                ObjectKind::PodDisruptionBudget => patch_in!(w.cluster.pdbs, &key),
                ObjectKind::PersistentVolumeClaim => patch_in!(w.cluster.pvcs, &key),
                ObjectKind::PersistentVolume => patch_in!(w.cluster.pvs, name),
                ObjectKind::StorageClass => patch_in!(w.cluster.storage_classes, name),
                ObjectKind::Namespace => patch_in!(w.cluster.namespaces, name),
                ObjectKind::NodePool => {
                    let old = w.cluster.nodepools.get(name).ok_or_else(missing)?;
                    let new = patched(&**old, &p.patch)?;
                    // The CRD's transition rule holds for a patch as for an apply.
                    if let Some(e) = crate::engine::api::validation::validate_nodepool_transition(old, &new) {
                        return Err(e.to_string());
                    }
                    w.cluster.nodepools.insert(name.clone(), new);
                }
                ObjectKind::Ec2NodeClass => patch_in!(w.cluster.nodeclasses, name),
                ObjectKind::Node => patch_in!(w.cluster.nodes, name),
                ObjectKind::NodeClaim => patch_in!(w.cluster.nodeclaims, name),
                ObjectKind::NodeOverlay => patch_in!(w.cluster.nodeoverlays, name),
                ObjectKind::CapacityBuffer => patch_in!(w.cluster.capacitybuffers, &key),
                ObjectKind::PodTemplate => patch_in!(w.cluster.pod_templates, &key),
                ObjectKind::Service => patch_in!(w.cluster.services, &key),
            }
        }
        Action::Interrupt(i) => {
            let pid = w
                .cluster
                .nodes
                .get(&i.node)
                .and_then(|n| n.spec.as_ref())
                .and_then(|s| s.provider_id.clone())
                .ok_or_else(|| format!("node {} does not exist or has no instance", i.node))?;
            let kind = i.kind;
            let now = w.now;
            w.cloud.interrupt(&pid, kind, now).map_err(|e| e.to_string())?;
        }
        Action::Condition(c) => {
            let now = w.now;
            let node = w.cluster.nodes.get(&c.node).ok_or_else(|| format!("node {} does not exist", c.node))?;
            let mut node = (**node).clone();
            set_node_condition(&mut node, c, now);
            w.cluster.nodes.insert(c.node.clone(), node);
        }
        Action::Capacity(c) => w.cloud.set_capacity(&c.instance_type, &c.zone, &c.capacity_type, c.available),
        Action::Approve(sel) | Action::Reject(sel) => {
            let approve = matches!(action, Action::Approve(_));
            let ids = match sel {
                Selection::All => w.controller().orchestrator().awaiting_approval(),
                Selection::Ids(ids) => ids.clone(),
            };
            for id in ids {
                if approve {
                    tick::immediate(tick::approve(w, &id))
                        .ok_or_else(|| format!("{id}: the simulated world did not answer at once"))??;
                } else {
                    tick::reject(w, &id)?;
                }
            }
        }
    }
    Ok(())
}

/// Runs the scenario to its end (or `until`) and reports.
pub fn run(s: &Scenario, until: Option<Duration>, seed: Option<u64>) -> Result<Report, RunError> {
    let wall = Instant::now();
    let mut s = s.clone();
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let w = run_world(&s, until)?;
    let start = s.start.timestamp_millis();
    let end = start + ms(until.unwrap_or(s.until));
    Ok(build_report(&s, &w, start, end, wall.elapsed()))
}

/// Runs the scenario and returns the world as it stands at the end (for tests, what-ifs and the dashboard).
pub fn run_world(s: &Scenario, until: Option<Duration>) -> Result<World, RunError> {
    let mut p = Playback::new(s)?;
    let end = p.start + ms(until.unwrap_or(s.until));
    p.advance(end)?;
    let mut w = p.world;
    w.refresh_node_records();
    Ok(w)
}

/// A scenario being played: the world and the timeline events not yet applied. `simulate` plays it to the end in
/// one go; the dashboard's `demo` advances it in small steps of accelerated real time, and keeps going after the
/// last event.
pub struct Playback {
    pub world: World,
    /// t=0 of the scenario, absolute milliseconds.
    pub start: Millis,
    file: String,
    /// (absolute time, index in the file, event), in time order; `next` is the first not yet applied.
    events: Vec<(Millis, usize, crate::sim::scenario::Event)>,
    next: usize,
}

impl Playback {
    /// Builds the catalog and the world at t=0 (objects applied, `nodes:` added).
    pub fn new(s: &Scenario) -> Result<Playback, RunError> {
        let catalog = build_catalog(s)?;
        let settings = s.settings.clone();
        let start = s.start.timestamp_millis();
        let catalog = catalog.with_start(start);
        let catalog =
            if settings.controller.gates.reserved_capacity { catalog } else { catalog.without_reservations() };
        let mut w = World::new(catalog, settings, start, s.seed);
        w.cluster.apply(&s.objects);
        add_nodes(s, &mut w, start)?;
        w.track_new_pods();
        let mut events: Vec<(Millis, usize, crate::sim::scenario::Event)> =
            s.events.iter().enumerate().map(|(i, e)| (start + ms(e.at), i, e.clone())).collect();
        events.sort_by_key(|(at, i, _)| (*at, *i));
        Ok(Playback { world: w, start, file: s.file().to_string(), events, next: 0 })
    }

    /// Plays the timeline up to `until`: every event at or before it is applied at its time, and the world runs
    /// to `until`.
    pub fn advance(&mut self, until: Millis) -> Result<(), RunError> {
        while let Some((at, index, e)) = self.events.get(self.next) {
            if *at > until {
                break;
            }
            let (at, index) = (*at, *index);
            self.world.run_until(at);
            let result = apply_event(&mut self.world, &e.action);
            self.next += 1;
            result.map_err(|message| RunError::Event {
                file: self.file.clone(),
                index,
                at: secs(at, self.start),
                message,
            })?;
            self.world.track_new_pods();
            self.world.reconcile();
        }
        self.world.run_until(until);
        Ok(())
    }

    /// Timeline events not yet applied.
    pub fn remaining_events(&self) -> usize {
        self.events.len() - self.next
    }
}

/// Seconds since t=0.
pub fn secs(t: Millis, start: Millis) -> f64 {
    (t - start) as f64 / 1000.0
}

fn build_report(s: &Scenario, w: &World, start: Millis, end: Millis, wall: Duration) -> Report {
    use crate::controller::disruption::CommandState;
    use crate::engine::disruption::{Method, Reason as EReason};
    use crate::sim::report::{
        ComparisonTiming, Cost, Decision as RDecision, DecisionDetail, DecisionState, DisruptionMethod,
        DisruptionReason, Launched, NodeClaimRecord, NodeRecord, PassTiming, PendingPod, PendingReason, PodRecord,
        PoolCost, Replacement, RequirementRecord, SolveTiming,
    };
    let t = |ms: Millis| secs(ms, start);
    let mut r = Report::new(&s.name, s.seed);
    r.karpenter_version = w.settings().controller.karpenter_version;
    r.simulated_seconds = secs(end, start);
    r.nodes = w
        .record
        .nodes
        .iter()
        .map(|n| NodeRecord {
            name: n.name.clone(),
            node_pool: n.nodepool.clone(),
            node_claim: n.nodeclaim.clone(),
            instance_type: n.instance_type.clone(),
            zone: n.zone.clone(),
            capacity_type: n.capacity_type.clone(),
            price_per_hour: n.price,
            created_at: t(n.created_at),
            initialized_at: n.initialized_at.map(t),
            deleted_at: n.deleted_at.map(t),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
        })
        .collect();
    r.pods = w
        .record
        .pods
        .iter()
        .map(|((ns, name), p)| PodRecord {
            namespace: ns.clone(),
            name: name.clone(),
            node: p.node.clone(),
            created_at: t(p.created_at),
            bound_at: p.bound_at.map(t),
            deleted_at: p.deleted_at.map(t),
        })
        .collect();
    r.pending = w
        .pending_pods()
        .into_iter()
        .map(|(ns, name)| {
            let reasons = w
                .pending_reasons
                .get(&(ns.clone(), name.clone()))
                .map(|rs| {
                    rs.iter()
                        .map(|(pool, reason)| PendingReason { node_pool: pool.clone(), reason: reason.clone() })
                        .collect()
                })
                .unwrap_or_default();
            PendingPod { namespace: ns, name, reasons }
        })
        .collect();
    r.node_claims = w
        .record
        .nodeclaims
        .iter()
        .map(|c| NodeClaimRecord {
            name: c.name.clone(),
            node_pool: c.nodepool.clone(),
            created_at: t(c.created_at),
            deleted_at: c.deleted_at.map(t),
            instance_types: c.instance_types.to_vec(),
            requirements: c
                .requirements
                .iter()
                .map(|(k, op, v)| RequirementRecord { key: k.clone(), operator: op.clone(), values: v.to_vec() })
                .collect(),
            launched: c.launched.as_ref().map(|(it, z, ct)| Launched {
                instance_type: it.clone(),
                zone: z.clone(),
                capacity_type: ct.clone(),
            }),
        })
        .collect();
    let node_of_claim: BTreeMap<&str, &str> =
        w.record.nodes.iter().filter_map(|n| n.nodeclaim.as_deref().map(|c| (c, n.name.as_str()))).collect();
    // Liveness deletions (launch/registration timeouts, insufficient capacity, GC) and rebalance notices are
    // lifecycle events, not decisions of the report's kinds.
    let disruptions: BTreeMap<&str, crate::sim::world::DisruptionRecord> = w
        .record
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Disruption(id) => Some((id.as_str(), w.disruption_record(id)?)),
            _ => None,
        })
        .collect();
    // v1.15's repairs are disruption commands: their deletions are not v1.14's forceful repair decisions.
    let repaired_nodes: BTreeSet<&str> = disruptions
        .values()
        .filter(|d| d.method == Method::Repair && !d.reboot)
        .flat_map(|d| d.candidates.iter().map(String::as_str))
        .collect();
    let repaired: BTreeSet<&str> =
        node_of_claim.iter().filter(|(_, node)| repaired_nodes.contains(*node)).map(|(claim, _)| *claim).collect();
    r.decisions = w
        .record
        .decisions
        .iter()
        .filter(|d| match d {
            Decision::Delete { reason: DeleteReason::Unhealthy, nodeclaim, .. }
                if repaired.contains(nodeclaim.as_str()) =>
            {
                false
            }
            Decision::Delete { reason, .. } => {
                // A capacity block about to end is reported like an interruption: the cloud takes the node back.
                matches!(
                    reason,
                    DeleteReason::Expired
                        | DeleteReason::Unhealthy
                        | DeleteReason::Overprovisioned
                        | DeleteReason::CapacityBlockExpiring
                )
            }
            Decision::Interruption { kind, .. } => *kind != InterruptionKind::RebalanceRecommendation,
            Decision::Provision { .. } => true,
            Decision::Disruption(id) => disruptions.contains_key(id.as_str()),
        })
        .map(|d| match d {
            Decision::Provision { id, at, nodeclaims, pods, is_static } => RDecision {
                id: id.clone(),
                at: t(*at),
                detail: DecisionDetail::Provision {
                    node_claims: nodeclaims.clone(),
                    pods: *pods as u64,
                    is_static: *is_static,
                },
            },
            Decision::Delete { id, at, nodeclaim, reason: DeleteReason::Unhealthy } => {
                let repair = w.controller().repairs().iter().find(|r| &r.nodeclaim == nodeclaim);
                let node = repair.map(|r| r.node.clone()).or_else(|| {
                    w.record
                        .nodes
                        .iter()
                        .find(|n| n.nodeclaim.as_deref() == Some(nodeclaim.as_str()))
                        .map(|n| n.name.clone())
                });
                RDecision {
                    id: id.clone(),
                    at: t(*at),
                    detail: DecisionDetail::Repair {
                        candidates: node.into_iter().collect(),
                        reason: "Unhealthy".into(),
                        condition: repair.map(|r| r.condition.clone()).unwrap_or_default(),
                    },
                }
            }
            Decision::Delete { id, at, nodeclaim, reason } => {
                let (method, why) = match reason {
                    DeleteReason::Expired => (DisruptionMethod::Expiration, DisruptionReason::Expired),
                    DeleteReason::Overprovisioned => {
                        (DisruptionMethod::StaticScaleDown, DisruptionReason::Overprovisioned)
                    }
                    _ => (DisruptionMethod::Interruption, DisruptionReason::Interrupted),
                };
                // What scaling a static pool down saves: the node's price.
                let savings = if *reason == DeleteReason::Overprovisioned {
                    w.record
                        .nodes
                        .iter()
                        .find(|n| n.nodeclaim.as_deref() == Some(nodeclaim.as_str()))
                        .map_or(0.0, |n| n.price)
                } else {
                    0.0
                };
                RDecision {
                    id: id.clone(),
                    at: t(*at),
                    detail: DecisionDetail::Disruption {
                        method,
                        reason: why,
                        candidates: vec![
                            node_of_claim.get(nodeclaim.as_str()).unwrap_or(&nodeclaim.as_str()).to_string(),
                        ],
                        replacements: Vec::new(),
                        savings_per_hour: savings,
                        state: DecisionState::Executed,
                        why: None,
                        terminate_first: false,
                    },
                }
            }
            Decision::Disruption(id) => {
                let d = &disruptions[id.as_str()];
                let (state, why) = match &d.state {
                    CommandState::Executed => (DecisionState::Executed, None),
                    CommandState::AwaitingApproval => (DecisionState::AwaitingApproval, None),
                    CommandState::DryRun => (DecisionState::DryRun, None),
                    CommandState::Rejected => (DecisionState::Rejected, None),
                    CommandState::Validating | CommandState::InProgress => (DecisionState::InProgress, None),
                    CommandState::Invalidated(w) => (DecisionState::Invalidated, Some(w.clone())),
                    CommandState::Failed(w) => (DecisionState::Failed, Some(w.clone())),
                };
                if d.reboot {
                    return RDecision {
                        id: d.id.clone(),
                        at: t(d.at),
                        detail: DecisionDetail::Reboot {
                            candidates: d.candidates.clone(),
                            reason: "Unhealthy".into(),
                            condition: d.condition.clone().unwrap_or_default(),
                            state,
                        },
                    };
                }
                RDecision {
                    id: d.id.clone(),
                    at: t(d.at),
                    detail: DecisionDetail::Disruption {
                        method: match d.method {
                            Method::Repair => DisruptionMethod::Repair,
                            Method::Emptiness => DisruptionMethod::Emptiness,
                            Method::Drift | Method::StaticDrift => DisruptionMethod::Drift,
                            Method::MultiNode => DisruptionMethod::MultiNode,
                            Method::SingleNode => DisruptionMethod::SingleNode,
                            Method::Repack => DisruptionMethod::Repack,
                            Method::Expiration => DisruptionMethod::Expiration,
                            Method::Interruption => DisruptionMethod::Interruption,
                        },
                        reason: match d.method.reason() {
                            EReason::Empty => DisruptionReason::Empty,
                            EReason::Underutilized => DisruptionReason::Underutilized,
                            EReason::Drifted => DisruptionReason::Drifted,
                            EReason::Expired => DisruptionReason::Expired,
                            EReason::Interrupted => DisruptionReason::Interrupted,
                            EReason::Unhealthy => DisruptionReason::Unhealthy,
                        },
                        candidates: d.candidates.clone(),
                        replacements: d
                            .replacements
                            .iter()
                            .map(|r| Replacement { instance_types: r.clone() })
                            .collect(),
                        savings_per_hour: d.savings_per_hour,
                        state,
                        why,
                        terminate_first: d.terminate_first,
                    },
                }
            }
            Decision::Interruption { id, at, node, .. } => RDecision {
                id: id.clone(),
                at: t(*at),
                detail: DecisionDetail::Disruption {
                    method: DisruptionMethod::Interruption,
                    reason: DisruptionReason::Interrupted,
                    candidates: vec![node.clone()],
                    replacements: Vec::new(),
                    savings_per_hour: 0.0,
                    state: DecisionState::Executed,
                    why: None,
                    terminate_first: false,
                },
            },
        })
        .collect();
    r.decisions.sort_by(|a, b| a.at.total_cmp(&b.at));
    // Cost: every instance's price over the time it existed within [start, end].
    let mut cost = Cost::default();
    let pool_of_claim: BTreeMap<&str, &str> =
        w.record.nodeclaims.iter().map(|c| (c.name.as_str(), c.nodepool.as_str())).collect();
    for i in w.cloud.instances() {
        let from = i.launched_at.max(start);
        let to = i.terminated_at.unwrap_or(end).min(end);
        let total = i.cost(from, to);
        let running = i.terminated_at.is_none_or(|x| x > end) && i.launched_at <= end;
        let final_rate = if running { i.price_at(end) } else { 0.0 };
        cost.total += total;
        cost.final_per_hour += final_rate;
        let pool = pool_of_claim.get(i.nodeclaim.as_str()).copied().or_else(|| {
            w.record
                .nodes
                .iter()
                .find(|n| n.nodeclaim.as_deref() == Some(i.nodeclaim.as_str()))
                .and_then(|n| n.nodepool.as_deref())
        });
        if let Some(pool) = pool {
            let e = cost.by_node_pool.entry(pool.to_string()).or_insert_with(PoolCost::default);
            e.total += total;
            e.final_per_hour += final_rate;
        }
    }
    r.cost = cost;
    r.packing = crate::sim::report::PackingSummary::of(
        w.controller().packing(),
        w.record.packing.iter().map(|p| &p.comparison),
    );
    r.timings.wall_millis = wall.as_millis() as u64;
    r.timings.provisioning_solves = w
        .record
        .solves
        .iter()
        .map(|s| SolveTiming { at: t(s.at), pods: s.pods as u64, nodes: s.nodes as u64, millis: s.millis })
        .collect();
    r.timings.packing_comparisons = w
        .record
        .comparisons
        .iter()
        .map(|c| ComparisonTiming { at: t(c.at), pods: c.pods as u64, millis: c.millis })
        .collect();
    r.timings.disruption_passes = w
        .disruption_passes()
        .iter()
        .map(|p| PassTiming { at: t(p.at), candidates: p.candidates as u64, millis: p.millis })
        .collect();
    r
}
