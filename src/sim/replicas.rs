//! Live pods per ReplicaSet owner, kept from the pods' watch events: what the Deployment controller checks before
//! doing anything ([`Replicas::balanced`]).
//!
//! Pods change at nearly every step of a busy simulation (bindings, status) while replica counts rarely do, and
//! counting them meant walking every pod after every change. Like an informer's index, this keeps each pod's
//! contribution and, on each sync, replaces the contributions of the pods written since the last one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;

use crate::engine::stored_pod::StoredPod;
use crate::sim::cluster::Key;
use crate::sim::watch::{EventType, Watched};

/// What a pod counts for: the distinct ReplicaSet owners of a live pod, in its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owners {
    One(Key),
    /// Two or more: which of them are Deployments is decided when checking (Deployments come and go).
    Many(Vec<Key>),
}

/// The ReplicaSets (by name, sorted, once each) owning a pod that is not being deleted: the Deployment controller
/// counts such a pod as a replica of each.
pub fn replicaset_owners(p: &StoredPod) -> Vec<&str> {
    if p.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let mut names: Vec<&str> = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "ReplicaSet")
        .map(|o| o.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Whether `old` is what a pod in namespace `ns` owned by `names` counts for (most pod events, bindings and
/// status, change nothing here).
fn same(old: Option<&Owners>, ns: &str, names: &[&str]) -> bool {
    match (old, names) {
        (None, []) => true,
        (Some(Owners::One(k)), [n]) => k.0 == ns && k.1 == *n,
        (Some(Owners::Many(ks)), _) => {
            ks.len() == names.len() && ks.iter().zip(names).all(|(k, n)| k.0 == ns && k.1 == *n)
        }
        _ => false,
    }
}

fn owners(key: &Key, names: Vec<&str>) -> Option<Owners> {
    let mut keys = names.into_iter().map(|n| (key.0.clone(), n.to_string()));
    match (keys.next(), keys.next()) {
        (None, _) => None,
        (Some(one), None) => Some(Owners::One(one)),
        (Some(a), Some(b)) => Some(Owners::Many([a, b].into_iter().chain(keys).collect())),
    }
}

#[derive(Debug, Default)]
pub struct Replicas {
    /// The pods' resourceVersion the index is current to (None: never listed).
    seen: Option<u64>,
    by_pod: BTreeMap<Key, Owners>,
    /// Live pods with exactly one ReplicaSet owner, per owner.
    single: BTreeMap<Key, BTreeSet<Key>>,
    /// Live pods with several owners (rare): checked one by one.
    many: BTreeMap<Key, Vec<Key>>,
}

impl Replicas {
    fn set(&mut self, key: &Key, new: Option<Owners>) {
        match self.by_pod.remove(key) {
            Some(Owners::One(o)) => {
                if let Some(pods) = self.single.get_mut(&o) {
                    pods.remove(key);
                    if pods.is_empty() {
                        self.single.remove(&o);
                    }
                }
            }
            Some(Owners::Many(_)) => {
                self.many.remove(key);
            }
            None => {}
        }
        match new {
            Some(Owners::One(o)) => {
                self.single.entry(o.clone()).or_default().insert(key.clone());
                self.by_pod.insert(key.clone(), Owners::One(o));
            }
            Some(Owners::Many(os)) => {
                self.many.insert(key.clone(), os.clone());
                self.by_pod.insert(key.clone(), Owners::Many(os));
            }
            None => {}
        }
    }

    /// Brings the index up to date with the pods: their events since the last sync, or a relist.
    pub fn sync(&mut self, pods: &Watched<Key, StoredPod>) {
        let current = pods.resource_version();
        if self.seen == Some(current) {
            return;
        }
        match self.seen.map(|seen| pods.events_since(seen)) {
            Some(Ok(events)) => {
                for e in events {
                    let names = if e.type_ == EventType::Deleted { Vec::new() } else { replicaset_owners(e.object) };
                    if !same(self.by_pod.get(e.key), &e.key.0, &names) {
                        self.set(e.key, owners(e.key, names));
                    }
                }
            }
            _ => self.relist(pods),
        }
        self.seen = Some(current);
    }

    /// Brings the index to the listed pods, writing only what differs: after a busy step (thousands of pod
    /// events) most of 100,000 pods still count for what they did.
    fn relist(&mut self, pods: &Watched<Key, StoredPod>) {
        let mut changes: Vec<(Key, Option<Owners>)> = Vec::new();
        let mut old = self.by_pod.iter().peekable();
        for (k, p) in pods.iter() {
            while let Some((gone, _)) = old.next_if(|(o, _)| *o < k) {
                changes.push((gone.clone(), None));
            }
            let current = old.next_if(|(o, _)| *o == k).map(|(_, o)| o);
            let names = replicaset_owners(p);
            if !same(current, &k.0, &names) {
                changes.push((k.clone(), owners(k, names)));
            }
        }
        changes.extend(old.map(|(k, _)| (k.clone(), None)));
        for (k, new) in changes {
            self.set(&k, new);
        }
    }

    /// Whether every Deployment has exactly its replicas live and no live pod is owned by two of them (as the
    /// last [`Replicas::sync`] saw the pods).
    pub fn balanced(&self, deployments: &BTreeMap<Key, Arc<Deployment>>) -> bool {
        let mut extra: BTreeMap<&Key, usize> = BTreeMap::new();
        for os in self.many.values() {
            let mut mine = os.iter().filter(|o| deployments.contains_key(*o));
            match (mine.next(), mine.next()) {
                (Some(_), Some(_)) => return false,
                (Some(d), None) => *extra.entry(d).or_insert(0) += 1,
                _ => {}
            }
        }
        deployments.iter().all(|(k, d)| {
            let live = self.single.get(k).map_or(0, BTreeSet::len) + extra.get(k).copied().unwrap_or(0);
            live == wanted(d)
        })
    }

    /// The Deployments (in key order) whose live pods are not their replicas, when no live pod has two
    /// ReplicaSet owners (else `None`: the caller looks at every pod).
    pub fn unbalanced<'d>(&self, deployments: &'d BTreeMap<Key, Arc<Deployment>>) -> Option<Vec<&'d Key>> {
        if !self.many.is_empty() {
            return None;
        }
        Some(deployments.iter().filter(|(k, d)| self.members(k).len() != wanted(d)).map(|(k, _)| k).collect())
    }

    /// The live pods whose only ReplicaSet owner is `owner`.
    pub fn members(&self, owner: &Key) -> &BTreeSet<Key> {
        static NONE: BTreeSet<Key> = BTreeSet::new();
        self.single.get(owner).unwrap_or(&NONE)
    }
}

/// The replicas a Deployment asks for.
pub fn wanted(d: &Deployment) -> usize {
    d.spec.replicas.unwrap_or(1).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lifecycle::ms_time;
    use crate::engine::manifests::ClusterObjects;
    use crate::sim::cluster::Cluster;

    const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n";

    #[test]
    fn counts_follow_the_pods_events_and_agree_with_a_relist() {
        let mut c = Cluster::default();
        c.apply(&ClusterObjects::parse(WEB, "m.yaml").unwrap());
        let mut r = Replicas::default();
        r.sync(&c.pods);
        assert!(!r.balanced(&c.deployments), "no pods yet");
        c.reconcile_deployments();
        r.sync(&c.pods);
        assert!(r.balanced(&c.deployments));
        // A pod being deleted is no longer live; the controller replaces it.
        let first = c.pods.keys().next().cloned().unwrap();
        c.pods.get_mut(&first).unwrap().metadata.deletion_timestamp = Some(ms_time(0));
        r.sync(&c.pods);
        assert!(!r.balanced(&c.deployments));
        assert_eq!(c.reconcile_deployments().0.len(), 1);
        c.pods.remove(&first);
        r.sync(&c.pods);
        assert!(r.balanced(&c.deployments));
        // A live pod owned by a second Deployment too unbalances both.
        let second = c.pods.keys().next().cloned().unwrap();
        let mut other = Deployment::clone(&c.deployments[&("default".to_string(), "web".to_string())]);
        other.metadata.name = Some("api".into());
        other.spec.replicas = Some(1);
        c.deployments.insert(("default".into(), "api".into()), other);
        let p = c.pods.get_mut(&second).unwrap();
        let mut owner = p.metadata.owner_references.as_ref().unwrap()[0].clone();
        owner.name = "api".into();
        p.metadata.owner_references.as_mut().unwrap().push(owner);
        r.sync(&c.pods);
        assert!(!r.balanced(&c.deployments));
        let mut fresh = Replicas::default();
        fresh.sync(&c.pods);
        assert_eq!((&fresh.by_pod, &fresh.single, &fresh.many), (&r.by_pod, &r.single, &r.many));
        // Further behind than the log reaches, the index relists over what it has: a pod gone, one added and
        // one given a second owner among many writes that change nothing it counts.
        let seen = r.seen;
        let keys: Vec<Key> = c.pods.keys().cloned().collect();
        c.pods.remove(&keys[1]);
        let mut added = StoredPod::clone(&c.pods[&keys[2]]);
        added.metadata.name = Some("web-added".into());
        c.pods.insert(("default".into(), "web-added".into()), added);
        for _ in 0..=crate::sim::watch::LOG_CAPACITY {
            c.pods.get_mut(&keys[2]).unwrap().metadata.labels = None;
        }
        assert!(c.pods.events_since(seen.unwrap()).is_err(), "the log no longer reaches back");
        r.sync(&c.pods);
        let mut fresh = Replicas::default();
        fresh.sync(&c.pods);
        assert_eq!((&fresh.by_pod, &fresh.single, &fresh.many), (&r.by_pod, &r.single, &r.many));
        assert!(r.members(&("default".into(), "web".into())).contains(&("default".into(), "web-added".into())));
        assert!(!r.by_pod.contains_key(&keys[1]), "the removed pod");
    }
}
