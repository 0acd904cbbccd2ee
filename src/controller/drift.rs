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
}

#[derive(Debug, Default)]
pub struct DriftTracker {
    /// Per claim: when it was last checked, against which NodePool spec and class verdict (a hash), and when the
    /// instance-type check last ran.
    checked: BTreeMap<String, (Millis, u64, Millis)>,
}

impl DriftTracker {
    /// Checks the claims that are due and returns the conditions to write.
    pub fn check(&mut self, read: &DriftRead<'_, '_>, now: Millis) -> Vec<DriftUpdate> {
        // Claims gone or being deleted are not checked again; forget them so they never look due.
        let live: BTreeMap<&str, &NodeClaim> =
            read.claims.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).map(|c| (c.name(), *c)).collect();
        self.checked.retain(|k, _| live.contains_key(k.as_str()));
        let mut pool_hashes: BTreeMap<&str, u64> = BTreeMap::new();
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
            let found = drift::detect(&input);
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
