//! What the scheduler needs to know about a pod, extracted once from the Kubernetes object: requests, node
//! constraints as requirements, tolerations, topology terms, host ports and volumes. Preference relaxation works on
//! this form.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, NodeSelectorTerm, PodAffinityTerm, ResourceRequirements, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

use super::default_spread::DefaultSpread;
use super::selector::Selector;
use crate::engine::labels;
use crate::engine::requirements::{Operator, Requirement, Requirements};
use crate::engine::resources::{PODS, Resources, parse_quantity};
use crate::engine::stored_pod::StoredPod;

/// Why a pod can't even be considered (upstream: rejected by `Provisioner.Validate`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PodError {
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> PodError {
    PodError::Invalid { field: field.into(), message: message.into() }
}

/// Namespaces a pod (anti-)affinity term applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespaces {
    All,
    /// Sorted.
    Some(Vec<String>),
}

impl Namespaces {
    pub fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Some(v) => v.binary_search_by(|x| x.as_str().cmp(ns)).is_ok(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub key: String,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    /// `DoNotSchedule` (required) vs `ScheduleAnyway` (a preference, relaxed like one).
    pub required: bool,
    pub selector: Selector,
    /// nodeAffinityPolicy: Honor (default) counts only nodes matching the pod's node selector/affinity.
    pub honor_node_affinity: bool,
    /// nodeTaintsPolicy: Honor counts only nodes whose taints the pod tolerates (default Ignore).
    pub honor_taints: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    pub key: String,
    pub selector: Selector,
    pub namespaces: Namespaces,
    pub weight: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub port: i32,
    pub protocol: String,
}

impl HostPort {
    /// `0.0.0.0` and `::` bind every address, so they conflict with any IP on the same port and protocol.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || wildcard(&self.ip) || wildcard(&other.ip))
    }
}

/// The scheduler's view of a pod. Cloned and relaxed during a solve.
#[derive(Debug, Clone, PartialEq)]
pub struct PodData {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Shared: a digest is cloned for every solve that moves the pod, and the pods of one workload carry the same
    /// labels (a cache of digests keeps one map per distinct set, see `provisioning::Digests`).
    pub labels: Arc<BTreeMap<String, String>>,
    /// Seconds since the epoch, for queue order.
    pub created: i64,
    pub requests: Resources,
    /// Shared like `labels`: most pods carry the same few (the two admission adds to every pod).
    pub tolerations: Arc<[Toleration]>,
    /// `nodeSelector` as `In` requirements.
    pub node_selector: Requirements,
    /// Required node-affinity terms (ORed). Only the first is in force; relaxation drops it to try the next.
    pub required_terms: Vec<Requirements>,
    /// Preferred node-affinity terms, heaviest first; the first is treated as required until relaxed.
    pub preferred_terms: Vec<(i32, Requirements)>,
    pub spreads: Vec<SpreadConstraint>,
    pub affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<AffinityTerm>,
    pub host_ports: Vec<HostPort>,
    pub pvcs: Vec<String>,
    /// Set by the last relaxation step when some NodePool has a PreferNoSchedule taint.
    pub tolerate_prefer_no_schedule: bool,
    pub priority: i32,
    /// Name of the owning DaemonSet, if any.
    pub daemonset: Option<String>,
    /// The pod references a ResourceClaim (Dynamic Resource Allocation), which upstream v1.14.1 does not place by
    /// default (`--ignore-dra-requests=true`).
    pub dra: bool,
    /// For a CapacityBuffer's virtual pod, its buffer (`namespace/name`): placed like a pending pod, but never
    /// nominated, evented or reported as pending.
    pub buffer: Option<Arc<str>>,
}

impl PodData {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Node selector ∧ the first required node-affinity term: what the pod strictly needs.
    pub fn strict_requirements(&self) -> Requirements {
        let mut r = self.node_selector.clone();
        if let Some(t) = self.required_terms.first() {
            r.add_all(t);
        }
        r
    }

    /// Strict requirements ∧ the heaviest preferred term (treated as required until relaxed).
    pub fn requirements(&self) -> Requirements {
        let mut r = self.strict_requirements();
        if let Some((_, t)) = self.preferred_terms.first() {
            r.add_all(t);
        }
        r
    }

    /// The topology keys of the pod's spread constraints and pod (anti-)affinity terms, required or preferred.
    pub fn topology_keys(&self) -> impl Iterator<Item = &String> {
        let terms = self
            .affinity
            .iter()
            .chain(&self.preferred_affinity)
            .chain(&self.anti_affinity)
            .chain(&self.preferred_anti_affinity);
        self.spreads.iter().map(|s| &s.key).chain(terms.map(|t| &t.key))
    }

    pub fn has_preferences(&self) -> bool {
        self.required_terms.len() > 1
            || !self.preferred_terms.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
            || self.spreads.iter().any(|s| !s.required)
    }

    /// One relaxation step in upstream order. Returns a description of what was relaxed, or `None` when nothing is
    /// left to relax.
    pub fn relax(&mut self, prefer_no_schedule_step: bool) -> Option<String> {
        if self.required_terms.len() > 1 {
            self.required_terms.remove(0);
            return Some("dropped the first required node affinity term".into());
        }
        if let Some(i) = heaviest(&self.preferred_affinity) {
            self.preferred_affinity.remove(i);
            return Some("dropped a preferred pod affinity term".into());
        }
        if let Some(i) = heaviest(&self.preferred_anti_affinity) {
            self.preferred_anti_affinity.remove(i);
            return Some("dropped a preferred pod anti-affinity term".into());
        }
        if !self.preferred_terms.is_empty() {
            self.preferred_terms.remove(0);
            return Some("dropped the heaviest preferred node affinity term".into());
        }
        if let Some(i) = self.spreads.iter().position(|s| !s.required) {
            self.spreads.remove(i);
            return Some("dropped a ScheduleAnyway topology spread constraint".into());
        }
        if prefer_no_schedule_step && !self.tolerate_prefer_no_schedule {
            self.tolerate_prefer_no_schedule = true;
            return Some("tolerated PreferNoSchedule taints".into());
        }
        None
    }
}

fn heaviest(terms: &[AffinityTerm]) -> Option<usize> {
    // First of the maximum weight, so ties keep declaration order.
    let mut best: Option<usize> = None;
    for (i, t) in terms.iter().enumerate() {
        if best.is_none_or(|b| t.weight > terms[b].weight) {
            best = Some(i);
        }
    }
    best
}

fn container_requests(c_res: Option<&ResourceRequirements>, field: &str) -> Result<Resources, PodError> {
    let mut r = Resources::default();
    let Some(res) = c_res else { return Ok(r) };
    // The API server defaults requests to limits; pods pasted into a scenario may not have been defaulted.
    if let Some(limits) = &res.limits {
        r = quantities(limits, &format!("{field}.limits"))?;
    }
    if let Some(requests) = &res.requests {
        for (k, q) in requests {
            let v = parse_quantity(&q.0).map_err(|e| invalid(format!("{field}.requests.{k}"), e.to_string()))?;
            r.set(k, v);
        }
    }
    Ok(r)
}

fn quantities(list: &BTreeMap<String, Quantity>, field: &str) -> Result<Resources, PodError> {
    let mut r = Resources::default();
    for (k, q) in list {
        let v = parse_quantity(&q.0).map_err(|e| invalid(format!("{field}.{k}"), e.to_string()))?;
        r.set(k, v);
    }
    Ok(r)
}

/// Whether the kubelet has put a resize of this pod off (`PodResizePending` with reason `Deferred` or
/// `Infeasible`): the spec then asks for what the pod may never get, so only what it has counts.
fn resize_pending(pod: &StoredPod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "PodResizePending" && matches!(c.reason.as_deref(), Some("Deferred" | "Infeasible")))
}

/// A container's requests with an in-place resize taken into account (component-helpers' `PodRequests` with
/// `UseStatusResources`, which upstream v1.14 uses): once the kubelet reports the container's resources, the
/// larger of the spec, the reported requests and the allocation, so a pod resizing down keeps its old size until
/// done and one resizing up is placed at its new size. An allocation without reported resources is ignored.
fn container_with_status(
    c: &Container,
    statuses: Option<&Vec<ContainerStatus>>,
    field: &str,
    status_field: &str,
    pending: bool,
) -> Result<Resources, PodError> {
    let spec = container_requests(c.resources.as_ref(), field)?;
    let Some((i, status)) = statuses.into_iter().flatten().enumerate().find(|(_, s)| s.name == c.name) else {
        return Ok(spec);
    };
    let Some(reported) = &status.resources else { return Ok(spec) };
    let mut r = if pending { Resources::default() } else { spec };
    if let Some(requests) = &reported.requests {
        r.max_with(&quantities(requests, &format!("{status_field}[{i}].resources.requests"))?);
    }
    if let Some(allocated) = &status.allocated_resources {
        r.max_with(&quantities(allocated, &format!("{status_field}[{i}].allocatedResources"))?);
    }
    Ok(r)
}

/// The resources pod-level `spec.resources` may set (KEP-2837): these replace the containers' sum.
fn pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// Effective pod requests (upstream's `resources.Ceiling`): max(init containers with sidecar semantics,
/// Σ containers), each container at least what an in-place resize has allocated it; pod-level requests override
/// CPU, memory and huge pages; then overhead, and `pods: 1`.
pub fn pod_requests(pod: &StoredPod) -> Result<Resources, PodError> {
    let spec = pod.spec();
    let status = pod.status.as_ref();
    let pending = resize_pending(pod);
    let mut total = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        total.add(&container_with_status(
            c,
            status.and_then(|s| s.container_statuses.as_ref()),
            &format!("spec.containers[{i}].resources"),
            "status.containerStatuses",
            pending,
        )?);
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let field = format!("spec.initContainers[{i}].resources");
        if is_sidecar(c) {
            let r = container_with_status(
                c,
                status.and_then(|s| s.init_container_statuses.as_ref()),
                &field,
                "status.initContainerStatuses",
                pending,
            )?;
            sidecars.add(&r);
            total.add(&r);
        } else {
            // Plain init containers have run to completion before any resize: their spec is what counts.
            let r = container_requests(c.resources.as_ref(), &field)?;
            init_max.max_with(&r.plus(&sidecars));
        }
    }
    total.max_with(&init_max);
    if let Some(pod_level) = &spec.resources
        && (pod_level.requests.as_ref().is_some_and(|r| !r.is_empty())
            || pod_level.limits.as_ref().is_some_and(|l| !l.is_empty()))
    {
        let level = container_requests(Some(pod_level), "spec.resources")?;
        for (name, v) in level.entries() {
            if pod_level_resource(name) {
                total.set_value(name, v);
            }
        }
    }
    if let Some(overhead) = &spec.overhead {
        for (k, q) in overhead {
            let v = parse_quantity(&q.0).map_err(|e| invalid(format!("spec.overhead.{k}"), e.to_string()))?;
            let cur = total.get(k);
            let add = if k == "cpu" { v.milli() } else { v.value() };
            total.set_value(k, cur + add);
        }
    }
    total.set_value(PODS, 1);
    Ok(total)
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Converts a node selector term; `matchFields` is not supported by Karpenter and makes the pod invalid.
pub fn term_requirements(term: &NodeSelectorTerm, field: &str) -> Result<Requirements, PodError> {
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(invalid(format!("{field}.matchFields"), "matchFields is not supported"));
    }
    let mut r = Requirements::new();
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        let op = Operator::parse(&e.operator).ok_or_else(|| {
            invalid(format!("{field}.matchExpressions[{i}].operator"), format!("unknown operator {:?}", e.operator))
        })?;
        let values = e.values.clone().unwrap_or_default();
        if op == Operator::In && values.is_empty() {
            return Err(invalid(format!("{field}.matchExpressions[{i}].values"), "In needs at least one value"));
        }
        let req = Requirement::new(op, &values)
            .map_err(|err| invalid(format!("{field}.matchExpressions[{i}]"), err.to_string()))?;
        r.add(&e.key, req);
    }
    Ok(r)
}

fn affinity_term(
    t: &PodAffinityTerm,
    weight: i32,
    pod: &StoredPod,
    namespaces: &[(String, BTreeMap<String, String>)],
) -> AffinityTerm {
    let own_ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    // A term without a label selector selects nothing.
    let mut selector = match &t.label_selector {
        Some(s) => Selector::from_label_selector(s),
        None => Selector::from_label_selector(&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_expressions: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "__never__".into(),
                operator: "Unknown".into(),
                values: None,
            }]),
            match_labels: None,
        }),
    };
    for k in t.match_label_keys.iter().flatten() {
        if let Some(v) = labels.get(k) {
            selector = selector.with_label(k, v);
        }
    }
    for k in t.mismatch_label_keys.iter().flatten() {
        if let Some(v) = labels.get(k) {
            selector = selector.without_label(k, v);
        }
    }
    let mut ns: Vec<String> = t.namespaces.clone().unwrap_or_default();
    let ns_set = match &t.namespace_selector {
        Some(sel)
            if sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty()) =>
        {
            Namespaces::All
        }
        Some(sel) => {
            let s = Selector::from_label_selector(sel);
            ns.extend(namespaces.iter().filter(|(_, l)| s.matches(l)).map(|(n, _)| n.clone()));
            ns.sort();
            ns.dedup();
            Namespaces::Some(ns)
        }
        None => {
            if ns.is_empty() {
                ns.push(own_ns);
            }
            ns.sort();
            ns.dedup();
            Namespaces::Some(ns)
        }
    };
    AffinityTerm { key: t.topology_key.clone(), selector, namespaces: ns_set, weight }
}

/// Creation time in seconds since the epoch (0 when absent or unparsable: such pods sort first, deterministically).
pub fn created_seconds(pod: &StoredPod) -> i64 {
    pod.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second())
}

/// The scheduler's form of topology spread constraints (the pod's own, or the defaults given to it); `field` names
/// where they were written, for errors.
fn spread_constraints<'a>(
    constraints: impl Iterator<Item = &'a TopologySpreadConstraint>,
    labels: &BTreeMap<String, String>,
    field: &str,
) -> Result<Vec<SpreadConstraint>, PodError> {
    let mut spreads = Vec::new();
    for (i, c) in constraints.enumerate() {
        if c.max_skew < 1 {
            return Err(invalid(format!("{field}[{i}].maxSkew"), "must be at least 1"));
        }
        let mut selector = match &c.label_selector {
            Some(s) => Selector::from_label_selector(s),
            // No selector: the constraint counts no pods.
            None => Selector::default().with_label("__karpenter_tui_no_selector__", "x"),
        };
        for k in c.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(k) {
                selector = selector.with_label(k, v);
            }
        }
        spreads.push(SpreadConstraint {
            key: c.topology_key.clone(),
            max_skew: c.max_skew,
            min_domains: c.min_domains,
            required: c.when_unsatisfiable != "ScheduleAnyway",
            selector,
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(spreads)
}

/// The scheduler's view of `pod`, without default topology spread.
pub fn pod_data(pod: &StoredPod, namespaces: &[(String, BTreeMap<String, String>)]) -> Result<PodData, PodError> {
    pod_data_with(pod, namespaces, None)
}

/// The scheduler's view of `pod`, extracted once. `namespaces` (name, labels) resolves affinity namespace selectors;
/// `defaults` gives the pod the configured default topology spread when it declares none.
pub fn pod_data_with(
    pod: &StoredPod,
    namespaces: &[(String, BTreeMap<String, String>)],
    defaults: Option<&DefaultSpread>,
) -> Result<PodData, PodError> {
    let meta = &pod.metadata;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let uid = meta.uid.clone().unwrap_or_else(|| format!("{namespace}/{name}"));
    let labels = meta.labels.clone().unwrap_or_default();
    let requests = pod_requests(pod)?;
    // Borrowed, not copied: this runs for every pod of every snapshot.
    let spec = pod.spec();

    let mut node_selector = Requirements::new();
    for (k, v) in spec.node_selector.iter().flatten() {
        node_selector.add(k, Requirement::in_values([v.clone()]));
    }
    let mut required_terms = Vec::new();
    let mut preferred_terms = Vec::new();
    let mut affinity = Vec::new();
    let mut preferred_affinity = Vec::new();
    let mut anti_affinity = Vec::new();
    let mut preferred_anti_affinity = Vec::new();
    if let Some(aff) = &spec.affinity {
        if let Some(na) = &aff.node_affinity {
            if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                for (i, t) in req.node_selector_terms.iter().enumerate() {
                    required_terms.push(term_requirements(
                        t,
                        &format!("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"),
                    )?);
                }
            }
            for (i, p) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
                let r = term_requirements(
                    &p.preference,
                    &format!(
                        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
                    ),
                )?;
                preferred_terms.push((p.weight, r));
            }
            // Heaviest first; stable so equal weights keep their order.
            preferred_terms.sort_by_key(|t| std::cmp::Reverse(t.0));
        }
        if let Some(pa) = &aff.pod_affinity {
            for t in pa.required_during_scheduling_ignored_during_execution.iter().flatten() {
                affinity.push(affinity_term(t, 0, pod, namespaces));
            }
            for t in pa.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                preferred_affinity.push(affinity_term(&t.pod_affinity_term, t.weight, pod, namespaces));
            }
        }
        if let Some(pa) = &aff.pod_anti_affinity {
            for t in pa.required_during_scheduling_ignored_during_execution.iter().flatten() {
                anti_affinity.push(affinity_term(t, 0, pod, namespaces));
            }
            for t in pa.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                preferred_anti_affinity.push(affinity_term(&t.pod_affinity_term, t.weight, pod, namespaces));
            }
        }
    }

    let injected = defaults.map(|d| d.for_pod(pod)).unwrap_or_default();
    let spreads = if injected.is_empty() {
        spread_constraints(
            spec.topology_spread_constraints.iter().flatten(),
            &labels,
            "spec.topologySpreadConstraints",
        )?
    } else {
        spread_constraints(injected.iter(), &labels, "podTopologySpread.defaultConstraints")?
    };

    let mut host_ports = Vec::new();
    for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
        for p in c.ports.iter().flatten() {
            if let Some(hp) = p.host_port
                && hp > 0
            {
                let ip = p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "0.0.0.0".into());
                host_ports.push(HostPort {
                    ip,
                    port: hp,
                    protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                });
            }
        }
    }
    host_ports.sort();
    host_ports.dedup();

    let pvcs = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
        .collect();
    let daemonset = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "DaemonSet" && o.controller != Some(false))
        .map(|o| o.name.clone());

    node_selector.shrink_to_fit();
    Ok(PodData {
        uid,
        namespace,
        name,
        labels: Arc::new(labels),
        created: created_seconds(pod),
        requests,
        tolerations: spec.tolerations.as_deref().unwrap_or_default().into(),
        node_selector,
        required_terms,
        preferred_terms,
        spreads,
        affinity,
        preferred_affinity,
        anti_affinity,
        preferred_anti_affinity,
        host_ports,
        pvcs,
        tolerate_prefer_no_schedule: false,
        priority: spec.priority.unwrap_or(0),
        daemonset,
        dra: has_dra_requirements(spec),
        buffer: crate::engine::capacitybuffer::buffer_of(pod).map(Arc::from),
    })
}

/// Whether a pod references a ResourceClaim, pod-level or from a container or init container (upstream's
/// `HasDRARequirements`).
pub fn has_dra_requirements(spec: &k8s_openapi::api::core::v1::PodSpec) -> bool {
    spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
        || spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| c.resources.as_ref().and_then(|r| r.claims.as_ref()).is_some_and(|c| !c.is_empty()))
}

/// Upstream's provisioner validation of a pod's node constraints: restricted labels are rejected. Returns the
/// offending key.
pub fn restricted_key(p: &PodData, policy: &labels::LabelPolicy) -> Option<(String, String)> {
    let mut keys: Vec<&str> = p.node_selector.keys().collect();
    for t in &p.required_terms {
        keys.extend(t.keys());
    }
    for (_, t) in &p.preferred_terms {
        keys.extend(t.keys());
    }
    keys.into_iter().find_map(|k| policy.restricted(k).map(|why| (k.to_string(), why)))
}

/// A pod requiring `karpenter.sh/nodepool DoesNotExist` in every required term opts out of Karpenter.
pub fn opts_out_of_karpenter(p: &PodData) -> bool {
    let is_dne = |r: &Requirements| r.get_ref(labels::NODEPOOL).is_some_and(|q| q.operator() == Operator::DoesNotExist);
    is_dne(&p.node_selector) || (!p.required_terms.is_empty() && p.required_terms.iter().all(is_dne))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(json: serde_json::Value) -> StoredPod {
        StoredPod::from(serde_json::from_value::<Pod>(json).unwrap())
    }

    fn cpu_mem(r: &Resources) -> (i64, i64) {
        (r.cpu, r.memory)
    }

    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;

    /// One container `app` with these spec requests, and (when given) its status entry.
    fn resizing(spec: serde_json::Value, status: Option<serde_json::Value>, pending: Option<&str>) -> StoredPod {
        let mut p = serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "resources": {"requests": spec}}]},
            "status": {"phase": "Running"}
        });
        if let Some(s) = status {
            p["status"]["containerStatuses"] = serde_json::json!([s]);
        }
        if let Some(reason) = pending {
            p["status"]["conditions"] =
                serde_json::json!([{"type": "PodResizePending", "status": "True", "reason": reason}]);
        }
        pod(p)
    }

    #[test]
    fn a_resize_down_in_progress_counts_what_is_allocated() {
        // › "should use allocatedResources when higher than spec requests (resize-down in progress)"
        let p = resizing(
            serde_json::json!({"cpu": "2", "memory": "512Mi"}),
            Some(serde_json::json!({
                "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "6", "memory": "2Gi"},
                "resources": {"requests": {"cpu": "6", "memory": "2Gi"}}
            })),
            None,
        );
        assert_eq!(cpu_mem(&pod_requests(&p).unwrap()), (6000, 2 * GI));
    }

    #[test]
    fn a_resize_up_in_progress_counts_the_spec() {
        // › "should use spec requests when higher than allocatedResources (resize-up in progress)"
        let p = resizing(
            serde_json::json!({"cpu": "8", "memory": "4Gi"}),
            Some(serde_json::json!({
                "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "2", "memory": "1Gi"},
                "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}
            })),
            None,
        );
        assert_eq!(cpu_mem(&pod_requests(&p).unwrap()), (8000, 4 * GI));
    }

    #[test]
    fn status_resources_count_only_when_reported_and_a_deferred_resize_drops_the_spec() {
        // An allocation without reported resources is ignored.
        let alloc_only = serde_json::json!({
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "6", "memory": "2Gi"}
        });
        let p = resizing(serde_json::json!({"cpu": "2", "memory": "512Mi"}), Some(alloc_only), None);
        assert_eq!(cpu_mem(&pod_requests(&p).unwrap()), (2000, 512 * MI));
        // A status entry for another container changes nothing.
        let other = serde_json::json!({
            "name": "other", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "resources": {"requests": {"cpu": "6"}}
        });
        let p = resizing(serde_json::json!({"cpu": "2", "memory": "512Mi"}), Some(other), None);
        assert_eq!(cpu_mem(&pod_requests(&p).unwrap()), (2000, 512 * MI));
        // A resize up the kubelet can't do: the pod keeps what it has, the spec's 8 CPU is not counted.
        let running = serde_json::json!({
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "2", "memory": "1Gi"},
            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}
        });
        for reason in ["Infeasible", "Deferred"] {
            let p = resizing(serde_json::json!({"cpu": "8", "memory": "4Gi"}), Some(running.clone()), Some(reason));
            assert_eq!(cpu_mem(&pod_requests(&p).unwrap()), (2000, GI), "{reason}");
        }
    }

    #[test]
    fn sidecars_use_their_status_and_plain_init_containers_their_spec() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [
                    {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}
                ],
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]
            },
            "status": {"initContainerStatuses": [
                {"name": "setup", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "resources": {"requests": {"cpu": "9"}}},
                {"name": "proxy", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                 "resources": {"requests": {"cpu": "1500m"}}}
            ]}
        }));
        // Containers 1 + sidecar 1.5 = 2.5, against the plain init container's spec 3 (not its status's 9).
        assert_eq!(pod_requests(&p).unwrap().cpu, 3000);
    }

    #[test]
    fn pod_level_requests_replace_cpu_memory_and_hugepages_only() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "resources": {"requests": {"cpu": "9900m", "memory": "3900Mi"}},
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "8", "memory": "4Gi", "fake.com/gpu": "1"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "4", "memory": "4Gi"}}}
                ]
            }
        }));
        let r = pod_requests(&p).unwrap();
        assert_eq!(cpu_mem(&r), (9900, 3900 * MI));
        assert_eq!(r.get("fake.com/gpu"), 1, "extended resources still come from the containers");
        assert_eq!(r.pods, 1);
    }

    #[test]
    fn a_bad_status_quantity_names_its_field() {
        let p = resizing(
            serde_json::json!({"cpu": "1"}),
            Some(serde_json::json!({
                "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "lots"}, "resources": {}
            })),
            None,
        );
        let e = pod_requests(&p).unwrap_err().to_string();
        assert!(e.starts_with("status.containerStatuses[0].allocatedResources.cpu:"), "{e}");
    }
}
