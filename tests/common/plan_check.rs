//! An independent check of a solve's new NodeClaims against what every pod on them asks, whatever strategy made them:
//! every node a claim may become (each option × each offering the claim's requirements allow) must hold its pods plus
//! the DaemonSets that would run there, carry labels every pod's node selector and required node affinity accept and
//! its volumes attach to, and carry no taint a pod does not tolerate; no two pods on a claim may want the same host
//! port; a NodePool's claims may not exceed its limits even if each launched its largest option, and keep its
//! minValues; and every pod is either on exactly one claim or reported as failed. It reads only what it is given (the
//! results, pods, DaemonSets, NodePools and volumes), not the scheduler's state.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use karpenter_tui::engine::api::NodePool;
use karpenter_tui::engine::catalog::{InstanceType, Offering};
use karpenter_tui::engine::labels;
use karpenter_tui::engine::requirements::{Operator, Requirements};
use karpenter_tui::engine::resources::{Resources, parse_quantity};
use karpenter_tui::engine::scheduling::pod::PodData;
use karpenter_tui::engine::scheduling::taints::first_untolerated;
use karpenter_tui::engine::scheduling::{NewNodeClaim, Results};

/// The labels a claim gives its node whatever it launches as: its single-valued requirements and template labels.
fn claim_labels(c: &NewNodeClaim) -> BTreeMap<String, String> {
    let mut out = c.requirements.single_valued_labels();
    out.extend(c.labels.clone());
    out
}

/// The labels a node launched as `t` into offering `o` carries, given its claim's (`claim_labels`).
fn node_labels(claim: &BTreeMap<String, String>, t: &InstanceType, o: &Offering) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = t.requirements.single_valued_labels();
    out.extend(claim.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.insert(labels::ZONE.to_string(), o.zone.clone());
    out.insert(labels::CAPACITY_TYPE.to_string(), o.capacity_type.clone());
    out.insert(labels::INSTANCE_TYPE.to_string(), t.name.clone());
    out
}

/// Whether a node with `node` labels satisfies `reqs` (a node selector, or one node-affinity term), by Kubernetes'
/// rules: a label the node lacks satisfies only NotIn and DoesNotExist.
fn satisfied(reqs: &Requirements, node: &BTreeMap<String, String>) -> bool {
    reqs.iter().all(|(key, r)| match node.get(key) {
        Some(v) => r.has(v),
        None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
    })
}

/// Whether `pod` may run on a node with `node` labels: its node selector, and one of its required terms if any.
fn accepts(pod: &PodData, node: &BTreeMap<String, String>) -> bool {
    satisfied(&pod.node_selector, node)
        && (pod.required_terms.is_empty() || pod.required_terms.iter().any(|t| satisfied(t, node)))
}

/// The cluster's volumes, for pods with PersistentVolumeClaims.
#[derive(Default, Clone, Copy)]
pub struct Volumes<'a> {
    pub pvcs: &'a [PersistentVolumeClaim],
    pub pvs: &'a [PersistentVolume],
    pub classes: &'a [StorageClass],
}

/// Whether a node with `node` labels satisfies one node-selector expression (In, NotIn, Exists, DoesNotExist).
fn expression_holds(e: &NodeSelectorRequirement, node: &BTreeMap<String, String>) -> bool {
    let values = e.values.as_deref().unwrap_or_default();
    let v = node.get(&e.key);
    match e.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        other => panic!("the check knows no operator {other}"),
    }
}

/// Whether every volume of `pod` may attach on a node with `node` labels: a bound claim's PersistentVolume node
/// affinity (one of its terms), or an unbound WaitForFirstConsumer claim's StorageClass allowed topologies.
fn volumes_attach(pod: &PodData, volumes: Volumes<'_>, node: &BTreeMap<String, String>) -> bool {
    pod.pvcs.iter().all(|claim| {
        let Some(pvc) = volumes.pvcs.iter().find(|c| {
            c.metadata.name.as_deref() == Some(claim.as_str())
                && c.metadata.namespace.as_deref().unwrap_or("default") == pod.namespace
        }) else {
            return false;
        };
        let spec = pvc.spec.as_ref();
        if let Some(pv) = spec.and_then(|s| s.volume_name.as_deref()) {
            let Some(pv) = volumes.pvs.iter().find(|v| v.metadata.name.as_deref() == Some(pv)) else { return false };
            let terms = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
            return terms.is_none_or(|t| {
                t.node_selector_terms
                    .iter()
                    .any(|term| term.match_expressions.iter().flatten().all(|e| expression_holds(e, node)))
            });
        }
        let class = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .and_then(|n| volumes.classes.iter().find(|c| c.metadata.name.as_deref() == Some(n)));
        let topologies = class.and_then(|c| c.allowed_topologies.as_ref()).filter(|t| !t.is_empty());
        topologies.is_none_or(|terms| {
            terms.iter().any(|term| {
                term.match_label_expressions
                    .iter()
                    .flatten()
                    .all(|e| node.get(&e.key).is_some_and(|v| e.values.contains(v)))
            })
        })
    })
}

/// Every violation found, one line each (empty when the plan holds).
pub fn plan_violations(
    pods: &[PodData],
    daemonsets: &[PodData],
    pools: &[NodePool],
    volumes: Volumes<'_>,
    r: &Results,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<usize, String> = BTreeMap::new();
    let mut worst_case: BTreeMap<&str, Resources> = BTreeMap::new();
    for c in &r.new_claims {
        let name = &c.hostname;
        if c.instance_types.is_empty() {
            out.push(format!("{name}: no instance type options"));
        }
        for &i in &c.pods {
            if let Some(other) = seen.insert(i, name.clone()) {
                out.push(format!("{}: on both {other} and {name}", pods[i].name));
            }
        }
        let mut asked = Resources::default();
        for &i in &c.pods {
            asked.add(&pods[i].requests);
        }
        for (a, &i) in c.pods.iter().enumerate() {
            if let Some(t) = first_untolerated(&c.taints, &pods[i].tolerations, true) {
                out.push(format!("{name}: {} does not tolerate {}", pods[i].name, t.key));
            }
            for &j in &c.pods[a + 1..] {
                if pods[i].host_ports.iter().any(|p| pods[j].host_ports.iter().any(|q| p.conflicts(q))) {
                    out.push(format!("{name}: {} and {} want the same host port", pods[i].name, pods[j].name));
                }
            }
        }
        let labels_of_claim = claim_labels(c);
        let mut largest = Resources::default();
        for t in &c.instance_types {
            largest.max_with(&t.capacity);
            let offerings: Vec<&Offering> =
                t.offerings.iter().filter(|o| o.available && o.compatible(&c.requirements)).collect();
            if offerings.is_empty() {
                out.push(format!("{name}: option {} has no offering the claim allows", t.name));
            }
            for o in offerings {
                let node = node_labels(&labels_of_claim, t, o);
                for &i in &c.pods {
                    if !accepts(&pods[i], &node) {
                        out.push(format!("{name}: {} does not accept {} in {}", pods[i].name, t.name, o.zone));
                    }
                    if !volumes_attach(&pods[i], volumes, &node) {
                        out.push(format!("{name}: {}'s volumes cannot attach in {}", pods[i].name, o.zone));
                    }
                }
                // The DaemonSets that would run on this node take their share of it.
                let mut need = asked.clone();
                for d in daemonsets {
                    if first_untolerated(&c.taints, &d.tolerations, true).is_none() && accepts(d, &node) {
                        need.add(&d.requests);
                    }
                }
                if !need.fits_in(&t.allocatable()) {
                    out.push(format!("{name}: {} in {} cannot hold {need:?}", t.name, o.zone));
                }
            }
        }
        worst_case.entry(c.nodepool.as_str()).or_default().add(&largest);
        // minValues: the options keep that many distinct values of the key, unless the solve relaxed it.
        let pool = pools.iter().find(|p| p.name() == c.nodepool);
        for req in pool.iter().flat_map(|p| &p.spec.template.spec.requirements) {
            let Some(min) = req.min_values else { continue };
            let values: BTreeSet<String> = c
                .instance_types
                .iter()
                .filter_map(|t| match req.key.as_str() {
                    labels::INSTANCE_TYPE => Some(t.name.clone()),
                    key => t.requirements.single_valued().find(|(k, _)| *k == key).map(|(_, v)| v.to_string()),
                })
                .collect();
            if (values.len() as i64) < min && !c.min_values_relaxed {
                out.push(format!("{name}: {} values of {} among its options, minValues {min}", values.len(), req.key));
            }
        }
    }
    for p in pools {
        let Some(limits) = &p.spec.limits else { continue };
        let used = worst_case.get(p.name()).cloned().unwrap_or_default();
        for (k, q) in limits {
            let mut limit = Resources::default();
            limit.set(k, parse_quantity(&q.0).expect("a valid limit"));
            if used.get(k) > limit.get(k) {
                out.push(format!(
                    "NodePool {}: its claims may launch {} of {k}, over its limit",
                    p.name(),
                    used.get(k)
                ));
            }
        }
    }
    let accounted: BTreeSet<usize> = r
        .failures
        .iter()
        .map(|f| f.pod)
        .chain(r.ignored.iter().map(|(i, _)| *i))
        .chain(r.existing.iter().flat_map(|e| e.pods.iter().copied()))
        .collect();
    for (i, p) in pods.iter().enumerate() {
        if !seen.contains_key(&i) && !accounted.contains(&i) {
            out.push(format!("{}: neither placed nor reported as failed", p.name));
        }
    }
    out
}
