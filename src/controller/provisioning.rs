//! When the provisioner solves (upstream's batcher and pod requeue), written once for every backend: a pending pod
//! opens a batch when first seen and again every [`POD_REQUEUE`] while it stays pending, so a pod nothing can take
//! doesn't cost a solve per tick; the batch closes after `batch_idle` without a new pod or `batch_max` in all.
//! Nodes a solve places pods on are nominated: disruption leaves them alone for max(2 × `batch_max`, 10 s).

use std::collections::BTreeMap;

use crate::engine::packing::Packing;
use crate::engine::provisioning::{Batcher, Millis, PackingComparison, PackingJob};

use super::Settings;
use super::timing::{POD_REQUEUE, SECOND};

/// A provisioning solve that created NodeClaims, with what each packing strategy would have launched for the same
/// pods and the LP lower bound (issue #19: operators see the gap before switching).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackingPass {
    pub at: Millis,
    /// The strategy the solve used.
    pub packing: Packing,
    /// Pods the solve placed on new NodeClaims.
    pub pods: usize,
    pub comparison: PackingComparison,
}

/// A launching solve's packing comparison, not worked out yet.
#[derive(Debug)]
pub struct Comparison {
    pub at: Millis,
    /// Pods the solve placed on new NodeClaims.
    pub pods: usize,
    pub job: PackingJob,
}

impl Comparison {
    /// Works it out (the other strategy's solve and the LP bound: seconds at tens of thousands of pods).
    pub fn run(self) -> PackingPass {
        PackingPass { at: self.at, packing: self.job.packing(), pods: self.pods, comparison: self.job.run() }
    }
}

#[derive(Debug)]
pub struct Provisioner {
    batcher: Batcher,
    /// Pods seen pending (by uid), and when each last opened a batch.
    triggered: BTreeMap<String, Millis>,
    /// The earliest of `triggered` at the last look: a pod still pending then opens a batch again.
    oldest_trigger: Option<Millis>,
    nomination_hold: Millis,
}

impl Provisioner {
    pub fn new(settings: &Settings) -> Provisioner {
        Provisioner {
            batcher: Batcher::new(settings.batch_idle, settings.batch_max),
            triggered: BTreeMap::new(),
            oldest_trigger: None,
            nomination_hold: (2 * settings.batch_max).max(10 * SECOND),
        }
    }

    /// Takes in the pods pending now (uids). Returns whether any opened the batch (look again after
    /// [`POD_REQUEUE`]: it will again if it is still pending then).
    pub fn observe<'a>(&mut self, pending: impl Iterator<Item = &'a str> + Clone, now: Millis) -> bool {
        let mut triggered = false;
        let mut count = 0;
        let mut oldest = None::<Millis>;
        for uid in pending.clone() {
            count += 1;
            let at = match self.triggered.get_mut(uid) {
                Some(t) if now - *t < POD_REQUEUE => *t,
                Some(t) => {
                    *t = now;
                    self.batcher.trigger(uid, now);
                    triggered = true;
                    now
                }
                None => {
                    self.triggered.insert(uid.to_string(), now);
                    self.batcher.trigger(uid, now);
                    triggered = true;
                    now
                }
            };
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
        }
        self.oldest_trigger = oldest;
        // Pods no longer pending are forgotten (this runs at every reconcile: only look when some have gone).
        if self.triggered.len() > count {
            let still: std::collections::BTreeSet<&str> = pending.collect();
            self.triggered.retain(|uid, _| still.contains(uid.as_str()));
        }
        triggered
    }

    /// Whether a batch is open and its window has closed: solve now (then [`Self::solved`]).
    pub fn due(&self, now: Millis) -> bool {
        self.batcher.is_open() && self.batcher.ready(now)
    }

    /// A solve ran: the batch is closed.
    pub fn solved(&mut self) {
        self.batcher.reset();
    }

    /// When the open batch's window closes, if one is open.
    pub fn deadline(&self) -> Option<Millis> {
        self.batcher.deadline()
    }

    /// When a pod still pending at the last look opens a batch again, if any is.
    pub fn next_requeue(&self) -> Option<Millis> {
        self.oldest_trigger.map(|t| t + POD_REQUEUE)
    }

    /// Until when a node a solve placed pods on at `now` is left out of disruption.
    pub fn nominated_until(&self, now: Millis) -> Millis {
        now + self.nomination_hold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_opens_a_batch_when_first_seen_and_every_requeue_period_while_pending() {
        let mut p = Provisioner::new(&Settings::default());
        assert!(p.observe(["a"].into_iter(), 0));
        assert!(!p.due(500), "the batch waits for the idle window");
        assert!(p.due(1_000));
        p.solved();
        assert_eq!(p.next_requeue(), Some(10_000));
        assert!(!p.observe(["a"].into_iter(), 5_000), "no new batch within 10 s");
        assert!(!p.due(6_000));
        assert!(p.observe(["a"].into_iter(), 10_000), "still pending after 10 s: again");
        assert_eq!(p.next_requeue(), Some(20_000));
        assert!(!p.observe(std::iter::empty(), 10_500), "bound: forgotten");
        assert_eq!(p.next_requeue(), None, "nothing pending, nothing to look again for");
        assert!(p.observe(["a"].into_iter(), 10_600), "pending again: a new batch at once");
        assert_eq!(p.nominated_until(0), 20_000, "max(2 × batchMax, 10 s)");
    }
}
