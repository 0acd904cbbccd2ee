//! When each NodeClaim's drift is checked (upstream's `Drifted` status controller), written once for every backend:
//! every 5 minutes, at once when the claim's NodePool spec or the cloud's node-class verdict changes, and the
//! instance-type check at most every 30 minutes. The verdicts come from the engine ([`crate::engine::drift`]); the
//! caller writes the conditions they ask for.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::engine::api::{NodeClaim, NodePool};
use crate::engine::catalog::InstanceType;
use crate::engine::drift::{self, DRIFT_REQUEUE, INSTANCE_TYPE_CHECK_INTERVAL};
use crate::engine::provisioning::Millis;

/// A `Drifted` condition to write: (claim, status, reason, message).
pub type DriftUpdate = (String, &'static str, String, String);

/// The cloud's node-class drift verdicts, by NodeClaim name, as the engine's drift hook.
struct ClassDrift<'a>(&'a BTreeMap<String, String>);

impl drift::NodeClassDrift for ClassDrift<'_> {
    fn drifted(&self, claim: &NodeClaim) -> Option<String> {
        self.0.get(claim.name()).cloned()
    }
}

/// What a drift check reads of the cluster.
pub struct DriftRead<'a, 'c> {
    /// Every NodeClaim (claims being deleted are skipped).
    pub claims: &'c [&'a NodeClaim],
    pub pool: &'c dyn Fn(&str) -> Option<&'a NodePool>,
    /// The registered Node's labels of a claim, if it has a Node.
    pub node_labels: &'c dyn Fn(&NodeClaim) -> Option<&'a BTreeMap<String, String>>,
    /// The instance types of a NodePool.
    pub types: &'c dyn Fn(&str) -> &'a [Arc<InstanceType>],
    /// The cloud's node-class verdicts by claim name (empty for clouds without node classes).
    pub class_drift: &'c BTreeMap<String, String>,
    /// The resourceVersion of a claim's registered Node, if it has one (and the API server gave one).
    pub node_version: &'c dyn Fn(&NodeClaim) -> Option<&'a str>,
}

#[derive(Debug, Default)]
pub struct DriftTracker {
    /// Per claim: when it was last checked, against which NodePool spec and class verdict (a hash), and when the
    /// instance-type check last ran.
    checked: BTreeMap<String, (Millis, u64, Millis)>,
    /// Per claim: the template verdict ([`drift::template_drift`]) and what it was computed from (the
    /// resourceVersions of the claim, its Node and its NodePool, and the NodePool's instance types). Checking every
    /// claim every 5 minutes otherwise recomputes the same answer from the same objects.
    templates: BTreeMap<String, (u64, Option<drift::Drift>)>,
}

/// What a claim's template verdict was computed from, when every object carries a resourceVersion.
fn template_key(claim: &NodeClaim, pool: &NodePool, node: Option<&str>, has_node: bool, types: u64) -> Option<u64> {
    let claim_rv = claim.metadata.resource_version.as_deref()?;
    let pool_rv = pool.metadata.resource_version.as_deref()?;
    // A claim with a Node whose version is unknown is not memoized.
    if has_node && node.is_none() {
        return None;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (claim_rv, pool_rv, node, types).hash(&mut h);
    Some(h.finish())
}

/// Identifies a NodePool's instance types: the same shared types in the same order.
fn types_key(types: &[Arc<InstanceType>]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in types {
        (Arc::as_ptr(t) as usize).hash(&mut h);
    }
    h.finish()
}

impl DriftTracker {
    /// Checks the claims that are due and returns the conditions to write.
    pub fn check(&mut self, read: &DriftRead<'_, '_>, now: Millis) -> Vec<DriftUpdate> {
        // Claims gone or being deleted are not checked again; forget them so they never look due.
        let live: BTreeMap<&str, &NodeClaim> =
            read.claims.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).map(|c| (c.name(), *c)).collect();
        self.checked.retain(|k, _| live.contains_key(k.as_str()));
        self.templates.retain(|k, _| live.contains_key(k.as_str()));
        let mut pool_hashes: BTreeMap<&str, u64> = BTreeMap::new();
        let mut type_keys: BTreeMap<&str, u64> = BTreeMap::new();
        let class = ClassDrift(read.class_drift);
        let mut updates = Vec::new();
        for claim in read.claims.iter().filter(|c| c.metadata.deletion_timestamp.is_none()) {
            let Some(pool) = claim.nodepool().and_then(|p| (read.pool)(p)) else { continue };
            let pool_hash = *pool_hashes.entry(pool.name()).or_insert_with(|| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                serde_json::to_string(&pool.spec).unwrap_or_default().hash(&mut h);
                h.finish()
            });
            // A new node-class verdict is looked at now, not at the next periodic check.
            let hash = match read.class_drift.get(claim.name()) {
                None => pool_hash,
                Some(v) => {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (pool_hash, v).hash(&mut h);
                    h.finish()
                }
            };
            let last = self.checked.get(claim.name()).copied();
            if last.is_some_and(|(at, h, _)| h == hash && now - at < DRIFT_REQUEUE) {
                continue;
            }
            let instance_type_due = last.is_none_or(|(_, _, it)| now - it >= INSTANCE_TYPE_CHECK_INTERVAL);
            let types = (read.types)(pool.name());
            let mut input = drift::DriftInput::new(claim, pool, types, now);
            input.node_labels = (read.node_labels)(claim);
            input.node_class = &class;
            input.check_instance_type = instance_type_due;
            let types_id = *type_keys.entry(pool.name()).or_insert_with(|| types_key(types));
            let key = template_key(claim, pool, (read.node_version)(claim), input.node_labels.is_some(), types_id);
            let template = match (key, self.templates.get(claim.name())) {
                (Some(k), Some((at, verdict))) if *at == k => verdict.clone(),
                _ => {
                    let verdict = drift::template_drift(&input);
                    if let Some(k) = key {
                        self.templates.insert(claim.name().to_string(), (k, verdict.clone()));
                    }
                    verdict
                }
            };
            let found = drift::detect_with(&input, template);
            if let Some((status, reason, message)) = drift::condition_update(claim, found.as_ref()) {
                updates.push((claim.name().to_string(), status, reason, message));
            }
            let instance_type_at = if instance_type_due { now } else { last.map_or(now, |l| l.2) };
            self.checked.insert(claim.name().to_string(), (now, hash, instance_type_at));
        }
        updates
    }

    /// When the next periodic check of some claim is due (after `now`), if any claim is tracked.
    pub fn next_due(&self, now: Millis) -> Option<Millis> {
        self.checked.values().map(|(at, _, _)| (at + DRIFT_REQUEUE).max(now + 1)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::drift::tests::{launched_claim, pool, types};
    use crate::engine::labels;

    const T0: Millis = 1_700_000_000_000;

    /// Checks `claim` (its Node labelled `node_labels`, at resourceVersion `node_rv`) at `now`.
    fn check(
        tracker: &mut DriftTracker,
        claim: &NodeClaim,
        pool: &NodePool,
        node_labels: &BTreeMap<String, String>,
        node_rv: &str,
        now: Millis,
    ) -> Vec<DriftUpdate> {
        let its = types();
        let claims = [claim];
        let read = DriftRead {
            claims: &claims,
            pool: &|_| Some(pool),
            node_labels: &|_| Some(node_labels),
            types: &|_| &its[..],
            class_drift: &BTreeMap::new(),
            node_version: &|_| Some(node_rv),
        };
        tracker.check(&read, now)
    }

    #[test]
    fn a_node_relabelled_since_the_last_check_is_judged_on_its_new_labels() {
        let mut pool = pool();
        pool.metadata.resource_version = Some("10".into());
        let mut claim = launched_claim(&pool, T0);
        claim.metadata.resource_version = Some("11".into());
        let mut node_labels = claim.metadata.labels.clone().unwrap_or_default();
        let mut tracker = DriftTracker::default();
        let now = T0 + drift::INSTANCE_TYPE_CHECK_MIN_AGE;
        assert!(check(&mut tracker, &claim, &pool, &node_labels, "12", now).is_empty(), "on-demand as required");
        // Unchanged objects: the verdict kept is the verdict computed.
        let later = now + DRIFT_REQUEUE;
        assert!(check(&mut tracker, &claim, &pool, &node_labels, "12", later).is_empty());
        // The Node now says spot, which the NodePool does not allow: its new version is judged afresh.
        node_labels.insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_SPOT.into());
        let updates = check(&mut tracker, &claim, &pool, &node_labels, "13", later + DRIFT_REQUEUE);
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert_eq!(updates[0].1, "True");
        assert_eq!(updates[0].2, "RequirementsDrifted");
    }
}
