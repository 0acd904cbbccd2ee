//! Default pod topology spread (Karpenter v1.15, `--scheduler-config`): a pod that declares no topology spread
//! constraints of its own is scheduled as if it declared the configured defaults, each with a label selector
//! deduced from what owns and selects the pod, as kube-scheduler's PodTopologySpread plugin does:
//! 1. the union of the selectors of the Services in the pod's namespace that select it (a Service without a selector
//!    is skipped; on a clash the later one wins);
//! 2. its controller, if a ReplicationController (its selector overwrites equal keys) or a ReplicaSet or StatefulSet
//!    (its selector is ANDed on as expressions); other owners add nothing;
//! 3. an empty result defaults nothing, as it would match every pod.
//!
//! Only the scheduling-time copy changes (the digest the solver reads); nothing is written back. Existing pods are
//! counted through the deduced selector, like any constraint's.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, OwnerReference};

use crate::engine::stored_pod::StoredPod;

/// The workload kinds whose selector a default constraint takes (the pod's controller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum SetKind {
    ReplicaSet,
    StatefulSet,
}

/// What selects or owns pods, indexed for the deduction: built by whoever reads the cluster (a watch cache, the
/// simulated cluster, a manifest file).
#[derive(Debug, Clone, Default)]
pub struct SpreadOwners {
    /// Per namespace, the selectors of its Services that have one, in the order added.
    services: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// ReplicationControllers' selectors by (namespace, name).
    replication_controllers: BTreeMap<(String, String), BTreeMap<String, String>>,
    /// ReplicaSets' and StatefulSets' selectors by (kind, namespace, name).
    sets: BTreeMap<(SetKind, String, String), LabelSelector>,
}

impl SpreadOwners {
    /// A Service in `namespace` with `selector` (`None`: a Service without one, which selects nothing here).
    pub fn add_service(&mut self, namespace: &str, selector: Option<&BTreeMap<String, String>>) {
        if let Some(s) = selector {
            self.services.entry(namespace.to_string()).or_default().push(s.clone());
        }
    }

    pub fn add_replication_controller(
        &mut self,
        namespace: &str,
        name: &str,
        selector: Option<&BTreeMap<String, String>>,
    ) {
        self.replication_controllers
            .insert((namespace.to_string(), name.to_string()), selector.cloned().unwrap_or_default());
    }

    pub fn add_replica_set(&mut self, namespace: &str, name: &str, selector: &LabelSelector) {
        self.sets.insert((SetKind::ReplicaSet, namespace.to_string(), name.to_string()), selector.clone());
    }

    pub fn add_stateful_set(&mut self, namespace: &str, name: &str, selector: &LabelSelector) {
        self.sets.insert((SetKind::StatefulSet, namespace.to_string(), name.to_string()), selector.clone());
    }

    /// The selector the defaults take for a pod with these labels and owners in `namespace`; `None` when nothing
    /// selects or owns it (the pod is then not defaulted).
    pub fn selector_for(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        owners: &[OwnerReference],
    ) -> Option<LabelSelector> {
        let mut match_labels: BTreeMap<String, String> = BTreeMap::new();
        for s in self.services.get(namespace).into_iter().flatten() {
            if s.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                match_labels.extend(s.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut expressions: Vec<LabelSelectorRequirement> = Vec::new();
        if let Some(owner) = owners.iter().find(|o| o.controller == Some(true)) {
            let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
            let key = (namespace.to_string(), owner.name.clone());
            match (group, owner.kind.as_str()) {
                ("", "ReplicationController") => {
                    if let Some(s) = self.replication_controllers.get(&key) {
                        match_labels.extend(s.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                }
                ("apps", kind @ ("ReplicaSet" | "StatefulSet")) => {
                    let kind = if kind == "ReplicaSet" { SetKind::ReplicaSet } else { SetKind::StatefulSet };
                    if let Some(s) = self.sets.get(&(kind, key.0, key.1)) {
                        expressions.extend(as_expressions(s));
                    }
                }
                _ => {}
            }
        }
        if match_labels.is_empty() && expressions.is_empty() {
            return None;
        }
        Some(LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        })
    }

    fn hash_into(&self, h: &mut impl Hasher) {
        self.services.hash(h);
        self.replication_controllers.hash(h);
        for (k, s) in &self.sets {
            k.hash(h);
            s.match_labels.hash(h);
            for e in s.match_expressions.iter().flatten() {
                (&e.key, &e.operator, &e.values).hash(h);
            }
        }
    }
}

/// A selector as requirements: `matchLabels` as `In` expressions, then its own expressions.
fn as_expressions(s: &LabelSelector) -> Vec<LabelSelectorRequirement> {
    let mut out: Vec<LabelSelectorRequirement> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| LabelSelectorRequirement { key: k.clone(), operator: "In".into(), values: Some(vec![v.clone()]) })
        .collect();
    out.extend(s.match_expressions.iter().flatten().cloned());
    out
}

/// The configured defaults and the index to deduce their selectors from: what the scheduler's pod digests read.
#[derive(Debug, Clone)]
pub struct DefaultSpread {
    constraints: Vec<TopologySpreadConstraint>,
    owners: SpreadOwners,
    /// Changes whenever a deduced selector may: digests kept between passes are dropped then.
    key: u64,
}

impl DefaultSpread {
    /// `None` without constraints: nothing is defaulted.
    pub fn new(constraints: &[TopologySpreadConstraint], owners: SpreadOwners) -> Option<DefaultSpread> {
        if constraints.is_empty() {
            return None;
        }
        let mut h = rustc_hash::FxHasher::default();
        serde_json::to_string(constraints).unwrap_or_default().hash(&mut h);
        owners.hash_into(&mut h);
        Some(DefaultSpread { constraints: constraints.to_vec(), owners, key: h.finish() })
    }

    pub fn key(&self) -> u64 {
        self.key
    }

    pub fn constraints(&self) -> &[TopologySpreadConstraint] {
        &self.constraints
    }

    /// The constraints `pod` is scheduled with in place of its own none: the defaults with the deduced selector,
    /// or nothing when the pod declares constraints (all or nothing) or nothing selects or owns it.
    pub fn for_pod(&self, pod: &StoredPod) -> Vec<TopologySpreadConstraint> {
        if pod.spec().topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty()) {
            return Vec::new();
        }
        let meta = &pod.metadata;
        let empty = BTreeMap::new();
        let selector = self.owners.selector_for(
            meta.namespace.as_deref().unwrap_or("default"),
            meta.labels.as_ref().unwrap_or(&empty),
            meta.owner_references.as_deref().unwrap_or_default(),
        );
        let Some(selector) = selector else { return Vec::new() };
        self.constraints
            .iter()
            .map(|c| TopologySpreadConstraint { label_selector: Some(selector.clone()), ..c.clone() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn services_union_then_a_replicaset_is_anded_on() {
        let mut o = SpreadOwners::default();
        o.add_service("shop", Some(&labels(&[("app", "web")])));
        o.add_service("shop", Some(&labels(&[("tier", "front")])));
        o.add_service("shop", Some(&labels(&[("app", "other")])));
        o.add_service("shop", None);
        o.add_replica_set(
            "shop",
            "web-7d9",
            &LabelSelector { match_labels: Some(labels(&[("pod-template-hash", "7d9")])), match_expressions: None },
        );
        let pod = labels(&[("app", "web"), ("tier", "front"), ("pod-template-hash", "7d9")]);
        let s = o.selector_for("shop", &pod, &[owner("apps/v1", "ReplicaSet", "web-7d9")]).expect("selected");
        assert_eq!(s.match_labels, Some(labels(&[("app", "web"), ("tier", "front")])));
        let e = s.match_expressions.expect("the ReplicaSet's selector");
        assert_eq!((e[0].key.as_str(), e[0].operator.as_str()), ("pod-template-hash", "In"));
        // Another namespace's Services don't select it.
        assert!(o.selector_for("other", &pod, &[]).is_none());
    }

    #[test]
    fn a_replication_controller_overwrites_and_other_owners_add_nothing() {
        let mut o = SpreadOwners::default();
        o.add_replication_controller("ns", "rc", Some(&labels(&[("app", "legacy")])));
        let pod = labels(&[("app", "legacy")]);
        let s = o.selector_for("ns", &pod, &[owner("v1", "ReplicationController", "rc")]).expect("selected");
        assert_eq!(s.match_labels, Some(labels(&[("app", "legacy")])));
        assert!(o.selector_for("ns", &pod, &[owner("batch/v1", "Job", "j")]).is_none());
        assert!(o.selector_for("ns", &pod, &[owner("apps/v1", "DaemonSet", "d")]).is_none());
        // A ReplicaSet the index doesn't hold adds nothing either.
        assert!(o.selector_for("ns", &pod, &[owner("apps/v1", "ReplicaSet", "gone")]).is_none());
    }

    #[test]
    fn a_pod_with_its_own_constraints_keeps_them_alone() {
        let mut o = SpreadOwners::default();
        o.add_service("default", Some(&labels(&[("app", "a")])));
        let zone = TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            ..Default::default()
        };
        let d = DefaultSpread::new(std::slice::from_ref(&zone), o).expect("configured");
        let pod = |own: bool| {
            let json = serde_json::json!({
                "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c"}],
                         "topologySpreadConstraints": if own { serde_json::json!([{"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]) } else { serde_json::json!(null) }}
            });
            StoredPod::from(serde_json::from_value::<Pod>(json).unwrap())
        };
        let defaulted = d.for_pod(&pod(false));
        assert_eq!(defaulted.len(), 1);
        assert_eq!(
            defaulted[0].label_selector.as_ref().and_then(|s| s.match_labels.clone()),
            Some(labels(&[("app", "a")]))
        );
        assert!(d.for_pod(&pod(true)).is_empty());
        assert!(DefaultSpread::new(&[], SpreadOwners::default()).is_none());
    }
}
