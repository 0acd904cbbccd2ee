//! Which existing nodes a pod's own requirements admit, remembered per distinct requirement set.
//!
//! Existing nodes' requirements (their labels) never change during a solve, and the pods of one workload share
//! one requirement set, so the label check of "pod on node" is the same question asked thousands of times — per
//! pod per node, and again in every consolidation simulation that shares a [`super::Prepared`]. The answer is
//! computed once over all nodes of the preparation and kept as a bitset indexed by the node's position there.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::bitset::Bitset;
use crate::engine::requirements::Requirements;

/// More distinct requirement sets than this and the cache starts over (memory stays bounded).
const MAX_ENTRIES: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct NodeCompat {
    nodes: Vec<Arc<Requirements>>,
    cache: Mutex<FxHashMap<Requirements, Arc<Bitset>>>,
}

impl NodeCompat {
    pub(super) fn new(nodes: Vec<Arc<Requirements>>) -> Self {
        NodeCompat { nodes, cache: Mutex::new(FxHashMap::default()) }
    }

    /// Bit `i` set: node `i` of the preparation satisfies `reqs` (as `Requirements::compatible` without policy).
    pub(super) fn admitted(&self, reqs: &Requirements) -> Arc<Bitset> {
        // A poisoned lock only means another solve panicked mid-insert; the map itself is still consistent.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = cache.get(reqs) {
            return b.clone();
        }
        let mut bits = Bitset::empty(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            if n.admits(reqs, None) {
                bits.set(i);
            }
        }
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        let bits = Arc::new(bits);
        cache.insert(reqs.clone(), bits.clone());
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Arc<Requirements> {
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Arc::new(Requirements::from_labels(owned.iter().map(|(k, v)| (k, v))))
    }

    #[test]
    fn answers_like_compatible_and_remembers() {
        let nodes = vec![labels(&[("team", "a"), ("zone", "z1")]), labels(&[("team", "b"), ("zone", "z1")])];
        let compat = NodeCompat::new(nodes.clone());
        let want_a = (*labels(&[("team", "a")])).clone();
        let bits = compat.admitted(&want_a);
        for (i, n) in nodes.iter().enumerate() {
            assert_eq!(bits.get(i), n.compatible(&want_a, None).is_ok(), "node {i}");
        }
        assert!(bits.get(0) && !bits.get(1));
        assert!(Arc::ptr_eq(&bits, &compat.admitted(&want_a)), "second lookup is the cached answer");
        let none = compat.admitted(&Requirements::new());
        assert!(none.get(0) && none.get(1), "no requirements admit every node");
    }
}
