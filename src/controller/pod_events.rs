//! `status.lastPodEventTime` (upstream's pod-events controller), written once for every backend: a node whose
//! bound pods changed since the last look gets the time on its NodeClaim, at most once per
//! [`POD_EVENT_DEDUPE`] per node. consolidateAfter counts from it.

use std::collections::BTreeMap;

use crate::engine::provisioning::Millis;

use super::timing::POD_EVENT_DEDUPE;

#[derive(Debug, Default)]
pub struct PodEventTracker {
    /// Bound pods per node at the last look; `None` before the first (a controller that starts on a running
    /// cluster does not take the pods it finds for events).
    seen: Option<BTreeMap<String, usize>>,
    /// When each node's claim last had the time written.
    last: BTreeMap<String, Millis>,
}

impl PodEventTracker {
    /// A tracker for a cluster known to have had no pods bound before its first look (a simulation starting from
    /// its initial objects): the pods found then are events.
    pub fn from_empty() -> PodEventTracker {
        PodEventTracker { seen: Some(BTreeMap::new()), last: BTreeMap::new() }
    }

    /// Takes in the bound pods per node (`counts`, nodes without pods left out) and returns, in `nodes` order, the
    /// nodes whose claim should get `lastPodEventTime = now`; the caller says which it wrote ([`Self::written`]).
    /// `nodes` are the cluster's nodes; what is remembered of others is dropped.
    pub fn observe<'n>(
        &mut self,
        counts: &BTreeMap<&str, usize>,
        nodes: impl Iterator<Item = &'n str>,
        now: Millis,
    ) -> Vec<&'n str> {
        let mut due = Vec::new();
        let nodes: Vec<&'n str> = nodes.collect();
        if let Some(seen) = &self.seen {
            for n in &nodes {
                let (before, after) = (seen.get(*n).copied().unwrap_or(0), counts.get(n).copied().unwrap_or(0));
                if before != after && self.last.get(*n).is_none_or(|t| now - t >= POD_EVENT_DEDUPE) {
                    due.push(*n);
                }
            }
        }
        let changed = self
            .seen
            .as_ref()
            .is_none_or(|seen| seen.len() != counts.len() || counts.iter().any(|(n, c)| seen.get(*n) != Some(c)));
        if changed {
            self.seen = Some(counts.iter().map(|(n, c)| (n.to_string(), *c)).collect());
        }
        if self.last.len() > nodes.len() {
            let present: std::collections::BTreeSet<&str> = nodes.iter().copied().collect();
            self.last.retain(|n, _| present.contains(n.as_str()));
        }
        due
    }

    /// The time was written on `node`'s claim.
    pub fn written(&mut self, node: &str, now: Millis) {
        self.last.insert(node.to_string(), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_events_at_most_once_per_dedupe_period_and_a_first_look_on_a_running_cluster_is_not() {
        let mut t = PodEventTracker::default();
        let nodes = ["a", "b"];
        let counts = |a: usize, b: usize| {
            let mut m = BTreeMap::new();
            if a > 0 {
                m.insert("a", a);
            }
            if b > 0 {
                m.insert("b", b);
            }
            m
        };
        assert!(t.observe(&counts(3, 1), nodes.into_iter(), 0).is_empty(), "the first look only counts");
        assert_eq!(t.observe(&counts(4, 1), nodes.into_iter(), 1_000), ["a"]);
        t.written("a", 1_000);
        assert!(t.observe(&counts(5, 1), nodes.into_iter(), 5_000).is_empty(), "within 10 s of the last");
        assert_eq!(t.observe(&counts(4, 0), nodes.into_iter(), 12_000), ["a", "b"], "a again after 10 s; b emptied");
        let mut fresh = PodEventTracker::from_empty();
        assert_eq!(fresh.observe(&counts(1, 0), nodes.into_iter(), 0), ["a"], "a simulation's first pods are events");
    }
}
