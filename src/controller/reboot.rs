//! Reboot as a repair action (Karpenter v1.15; spec engine-v115 §1.6): repair commits a reboot on the NodeClaim,
//! and this controller (upstream's `nodeclaim.reboot`) carries it out — taint the node, drain it by eviction for at
//! most the grace period the commit recorded, remember the node's boot id, ask the cloud to reboot the instance,
//! then watch for a new boot id and a Ready node. A reboot that fails or is not seen within its deadline deletes
//! the NodeClaim, which escalates to replacement. Upstream's event reasons for reboots are not known: the ones
//! here are assumed (`Reboot*`, after the condition's reasons).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};

use super::effect::LabelTarget;
use super::out::{Out, has_taint, remove_taint};
use super::timing::{MINUTE, SECOND};
use super::{Controller, Effect};
use crate::engine::api::NodeClaim;
use crate::engine::api::nodeclaim::{COND_DISRUPTION_REASON, COND_INITIALIZED};
use crate::engine::disruption::Command;
use crate::engine::labels;
use crate::engine::lifecycle::{self, DeleteReason, set_condition};
use crate::engine::provisioning::{ClusterSnapshot, Millis};
use crate::engine::state::Nodes;
use crate::engine::termination;

pub use crate::engine::api::nodeclaim::COND_REBOOTING;
pub const REASON_REQUESTED: &str = "RebootRequested";
pub const REASON_ISSUED: &str = "RebootIssued";
pub const REASON_SUCCEEDED: &str = "RebootSucceeded";
pub const REASON_FAILED: &str = "RebootFailed";
/// How long the drain before the reboot may take (a Go duration); absent: unbounded, `0s`: none.
pub const ANNOTATION_GRACE: &str = "karpenter.sh/reboot-termination-grace-period";
/// The node's boot id before the reboot: a different one afterwards means it rebooted.
pub const ANNOTATION_PRE_BOOT_ID: &str = "karpenter.sh/reboot-pre-boot-id";
/// Keeps new pods off the node while it drains and reboots.
pub const TAINT_REBOOTING: &str = "karpenter.sh/rebooting";
/// A third reboot for the same NodeClaim within [`HISTORY_WINDOW`] replaces the node instead.
pub const MAX_REBOOTS_PER_DAY: usize = 2;
pub const HISTORY_WINDOW: Millis = 24 * 60 * MINUTE;
/// The drain runs at least this long, whatever the grace period.
pub const MIN_DRAIN: Millis = 5 * SECOND;
/// A reboot the cloud has not taken this long after the drain ended has failed (`provider_error`).
pub const ISSUE_DEADLINE: Millis = 5 * MINUTE;
/// A reboot not seen (new boot id, Ready) this long after it was issued has failed.
pub const OBSERVATION_DEADLINE: Millis = 20 * MINUTE;
/// How often an issued reboot is looked at.
pub const POLL: Millis = 15 * SECOND;

/// Results, as upstream's metrics name them.
pub const RESULT_INVALID_REQUEST: &str = "invalid_request";
pub const RESULT_PROVIDER_ERROR: &str = "provider_error";
pub const RESULT_RECOVERY_TIMEOUT: &str = "recovery_timeout";

/// Whether a reboot is under way on the claim (`Rebooting=True`).
pub fn in_progress(claim: &NodeClaim) -> bool {
    claim.is_true(COND_REBOOTING)
}

/// When the claim's last reboot succeeded, if it did.
pub fn finished_at(claim: &NodeClaim) -> Option<Millis> {
    let c = claim.condition(COND_REBOOTING)?;
    (c.status == "False" && c.reason.as_deref() == Some(REASON_SUCCEEDED))
        .then(|| c.last_transition_time.as_deref().and_then(lifecycle::parse_rfc3339))
        .flatten()
}

/// Reboots committed per NodeClaim, kept by this process only (as upstream's): a restart forgets them.
#[derive(Debug, Default)]
pub struct History {
    by_claim: BTreeMap<String, Vec<Millis>>,
}

impl History {
    /// When the latest reboot of `claim` was committed.
    pub fn last(&self, claim: &str) -> Option<Millis> {
        self.by_claim.get(claim).and_then(|v| v.last().copied())
    }

    /// How many reboots were committed for `claim` within the last day.
    pub fn recent(&self, claim: &str, now: Millis) -> usize {
        self.by_claim.get(claim).map_or(0, |v| v.iter().filter(|t| now - **t < HISTORY_WINDOW).count())
    }

    fn record(&mut self, claim: &str, now: Millis) {
        let v = self.by_claim.entry(claim.to_string()).or_default();
        v.retain(|t| now - *t < HISTORY_WINDOW);
        v.push(now);
    }
}

fn claim_ref(c: &NodeClaim) -> ObjectReference {
    super::repair::object_ref("NodeClaim", "karpenter.sh/v1", c.name(), c.metadata.uid.clone())
}

fn boot_id(n: &Node) -> Option<&str> {
    n.status.as_ref()?.node_info.as_ref().map(|i| i.boot_id.as_str()).filter(|b| !b.is_empty())
}

fn add_rebooting_taint(n: &mut Node) {
    if !has_taint(n, TAINT_REBOOTING) {
        let taint = Taint { key: TAINT_REBOOTING.into(), effect: "NoSchedule".into(), ..Default::default() };
        n.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new).push(taint);
    }
}

impl Controller {
    /// Repair's reboot command, committed: the drain bound recorded, `DisruptionReason` and `Rebooting` set, the
    /// reboot remembered. Nothing is deleted or replaced; this controller's next pass carries it out.
    pub(super) fn commit_reboot(&mut self, m: &ClusterSnapshot<'_>, cmd: &Command, now: Millis, out: &mut Out) {
        let Some(detail) = cmd.repair.as_ref() else { return };
        for c in &cmd.candidates {
            let Some(claim) = m.nodeclaims.iter().find(|x| x.name() == c.nodeclaim) else { continue };
            if in_progress(claim) || claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let (set, remove) = match detail.drain {
                Some(d) => (BTreeMap::from([(ANNOTATION_GRACE.to_string(), go_duration(d))]), Vec::new()),
                None => (BTreeMap::new(), vec![ANNOTATION_GRACE.to_string()]),
            };
            out.push(Effect::PatchClaimMetadata {
                name: claim.name().to_string(),
                labels: BTreeMap::new(),
                annotations: set,
                remove_annotations: remove,
                finalizers: None,
            });
            let w = out.claim(claim);
            set_condition(w, COND_DISRUPTION_REASON, "True", "Unhealthy", "", now);
            set_condition(
                w,
                COND_REBOOTING,
                "True",
                REASON_REQUESTED,
                &format!("{} is unhealthy", detail.condition),
                now,
            );
            self.reboots.record(claim.name(), now);
            let message = format!("Reboot requested: {} is unhealthy", detail.condition);
            self.event(claim_ref(claim), false, REASON_REQUESTED, message, now, out);
        }
    }

    /// The reboot controller's pass over every NodeClaim with a reboot under way.
    pub(super) fn reboots(&mut self, m: &ClusterSnapshot<'_>, now: Millis, out: &mut Out) {
        let joined = Nodes::of(m);
        let claims: Vec<&NodeClaim> =
            m.nodeclaims.iter().filter(|c| in_progress(c) && c.metadata.deletion_timestamp.is_none()).collect();
        // Answers about claims no longer rebooting are of no use.
        let live = |name: &String| claims.iter().any(|c| c.name() == name);
        self.reboots_sent.retain(|k, _| live(k));
        self.reboots_taken.retain(live);
        for claim in claims {
            let Some(cond) = claim.condition(COND_REBOOTING) else { continue };
            let since = cond.last_transition_time.as_deref().and_then(lifecycle::parse_rfc3339).unwrap_or(now);
            let node = joined.node_of(claim.name());
            if let Some(message) = self.reboot_failures.remove(claim.name()) {
                self.fail_reboot(claim, node, RESULT_PROVIDER_ERROR, &message, now, out);
                continue;
            }
            match cond.reason.as_deref() {
                Some(REASON_REQUESTED) => self.reboot_requested(m, claim, node, since, now, out),
                _ => self.reboot_issued(claim, node, since, now, out),
            }
        }
    }

    fn reboot_requested(
        &mut self,
        m: &ClusterSnapshot<'_>,
        claim: &NodeClaim,
        node: Option<&Node>,
        since: Millis,
        now: Millis,
        out: &mut Out,
    ) {
        let notes = claim.metadata.annotations.as_ref();
        let grace = match notes.and_then(|a| a.get(ANNOTATION_GRACE)) {
            None => None,
            Some(v) => match lifecycle::duration_ms(v).filter(|d| *d >= 0) {
                Some(d) => Some(d),
                None => {
                    let why = format!("{ANNOTATION_GRACE} {v:?} is not a duration of zero or more");
                    self.fail_reboot(claim, node, RESULT_INVALID_REQUEST, &why, now, out);
                    return;
                }
            },
        };
        let Some(node) = node else {
            // Nothing to drain or reboot yet: look again.
            self.requeue(now + POLL);
            return;
        };
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.reboots_taken.remove(claim.name()) {
            self.reboot_taken(claim, name, now, out);
            return;
        }
        if let Some(&asked) = self.reboots_sent.get(claim.name()) {
            // Asked, not answered yet: upstream gives the cloud 5 minutes (a timer of its process, as here).
            if now >= asked.saturating_add(ISSUE_DEADLINE) {
                self.reboots_sent.remove(claim.name());
                let why = "the cloud did not take the reboot within 5m";
                self.fail_reboot(claim, Some(node), RESULT_PROVIDER_ERROR, why, now, out);
                return;
            }
            self.requeue((now + SECOND).min(asked.saturating_add(ISSUE_DEADLINE)));
            return;
        }
        add_rebooting_taint(out.node(node));
        let deadline = grace.map(|g| since.saturating_add(g.max(MIN_DRAIN)));
        // The pods a drain waits for, as termination's, but DaemonSet pods stay (they would come back to the node).
        let draining: Vec<&crate::engine::stored_pod::StoredPod> = m
            .pods
            .iter()
            .filter(|p| p.node_name() == Some(name) && termination::is_waiting_eviction(p, now))
            .filter(|p| !p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet"))
            .collect();
        // Drain by eviction only (PDBs hold it) until the deadline; pods still there then stay through the reboot.
        if !draining.is_empty() && deadline.is_none_or(|d| now < d) {
            for p in draining.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                out.push(Effect::Evict {
                    namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
                    name: p.metadata.name.clone().unwrap_or_default(),
                });
            }
            self.requeue(deadline.map_or(now + SECOND, |d| d.min(now + SECOND)));
            return;
        }
        let pre = boot_id(node).unwrap_or_default().to_string();
        let Some(provider_id) = claim.provider_id() else {
            self.fail_reboot(claim, Some(node), RESULT_PROVIDER_ERROR, "the NodeClaim has no instance", now, out);
            return;
        };
        out.push(Effect::PatchClaimMetadata {
            name: claim.name().to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::from([(ANNOTATION_PRE_BOOT_ID.to_string(), pre.clone())]),
            remove_annotations: Vec::new(),
            finalizers: None,
        });
        out.push(Effect::RebootInstance {
            claim: claim.name().to_string(),
            provider_id: provider_id.to_string(),
            op_id: format!("{}-{since}-{pre}", claim.metadata.uid.as_deref().unwrap_or(claim.name())),
        });
        // The claim says the reboot was issued once the cloud has taken it (see `reboot_answered`).
        self.reboots_sent.insert(claim.name().to_string(), now);
        self.requeue(now + SECOND);
    }

    /// The cloud took the reboot of `claim`'s instance: the claim says so, and the node is uninitialized until it
    /// is back.
    fn reboot_taken(&mut self, claim: &NodeClaim, name: &str, now: Millis, out: &mut Out) {
        out.push(Effect::Relabel {
            target: LabelTarget::Node,
            name: name.to_string(),
            set: BTreeMap::new(),
            remove: vec![labels::INITIALIZED.to_string()],
        });
        let w = out.claim(claim);
        set_condition(w, COND_REBOOTING, "True", REASON_ISSUED, "the instance is rebooting", now);
        set_condition(w, COND_INITIALIZED, lifecycle::STATUS_UNKNOWN, "Rebooting", "the node is rebooting", now);
        self.event(claim_ref(claim), false, REASON_ISSUED, format!("Reboot issued for node {name}"), now, out);
        self.requeue(now + POLL);
    }

    fn reboot_issued(&mut self, claim: &NodeClaim, node: Option<&Node>, since: Millis, now: Millis, out: &mut Out) {
        let pre = claim.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_PRE_BOOT_ID)).cloned();
        if let Some(node) = node {
            let rebooted = boot_id(node).is_some_and(|b| Some(b) != pre.as_deref());
            if rebooted {
                remove_taint(out.node(node), TAINT_REBOOTING);
            }
            if rebooted && lifecycle::node_ready(node) {
                let name = node.metadata.name.clone().unwrap_or_default();
                out.push(Effect::Relabel {
                    target: LabelTarget::Node,
                    name: name.clone(),
                    set: BTreeMap::from([(labels::INITIALIZED.to_string(), "true".to_string())]),
                    remove: Vec::new(),
                });
                let w = out.claim(claim);
                set_condition(w, COND_REBOOTING, "False", REASON_SUCCEEDED, "", now);
                set_condition(w, COND_INITIALIZED, "True", "Initialized", "", now);
                if let Some(status) = w.status.as_mut() {
                    status.conditions.retain(|c| c.type_ != COND_DISRUPTION_REASON);
                }
                self.event(claim_ref(claim), false, REASON_SUCCEEDED, format!("Node {name} rebooted"), now, out);
                return;
            }
        }
        if now >= since.saturating_add(OBSERVATION_DEADLINE) {
            let why = "the node did not come back with a new boot id and Ready within 20m";
            self.fail_reboot(claim, node, RESULT_RECOVERY_TIMEOUT, why, now, out);
            return;
        }
        self.requeue((now + POLL).min(since.saturating_add(OBSERVATION_DEADLINE)));
    }

    /// A failed reboot: `Rebooting=False/RebootFailed`, the taint off, and (unless the request itself was bad)
    /// the NodeClaim deleted, which escalates to replacement.
    fn fail_reboot(
        &mut self,
        claim: &NodeClaim,
        node: Option<&Node>,
        result: &str,
        why: &str,
        now: Millis,
        out: &mut Out,
    ) {
        if let Some(n) = node {
            remove_taint(out.node(n), TAINT_REBOOTING);
        }
        let w = out.claim(claim);
        set_condition(w, COND_REBOOTING, "False", REASON_FAILED, &format!("{result}: {why}"), now);
        if result == RESULT_INVALID_REQUEST
            && let Some(status) = w.status.as_mut()
        {
            // The node stays: nothing marks it for disruption any more.
            status.conditions.retain(|c| c.type_ != COND_DISRUPTION_REASON);
        }
        self.event(claim_ref(claim), true, REASON_FAILED, format!("Reboot failed ({result}): {why}"), now, out);
        if result != RESULT_INVALID_REQUEST {
            out.push(Effect::DeleteNodeClaim { name: claim.name().to_string(), reason: DeleteReason::Unhealthy });
        }
    }

    /// The cloud's answer to the reboot of `claim`'s instance: taken (the next pass records it as issued), or
    /// refused with `Err` (the next pass fails it).
    pub(super) fn reboot_answered(&mut self, claim: String, answer: Result<(), String>) {
        self.reboots_sent.remove(&claim);
        match answer {
            Ok(()) => {
                self.reboots_taken.insert(claim);
            }
            Err(message) => {
                self.reboot_failures.insert(claim, message);
            }
        }
    }
}

/// A duration as Go prints it (`5m0s`, `1h0m0s`, `30s`, `0s`): the form upstream writes in the annotation.
pub fn go_duration(ms: Millis) -> String {
    let s = ms.max(0) / 1000;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{sec}s"),
        (0, m) => format!("{m}m{sec}s"),
        (h, m) => format!("{h}h{m}m{sec}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_go_prints_them() {
        assert_eq!(go_duration(5 * MINUTE), "5m0s");
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(90 * SECOND), "1m30s");
        assert_eq!(go_duration(60 * MINUTE), "1h0m0s");
        assert_eq!(lifecycle::duration_ms(&go_duration(5 * MINUTE)), Some(5 * MINUTE), "and read back");
    }

    use std::sync::Arc;

    use crate::controller::Settings;
    use crate::engine::catalog::fake::fake_catalog;
    use crate::engine::provisioning::Snapshot;

    const T0: Millis = 1_767_225_600_000;

    /// n1, Ready, boot id `boot`; its claim rebooting since T0 at `phase`, with `notes` as annotations.
    fn cluster(phase: &str, boot: &str, notes: serde_json::Value) -> Snapshot {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {labels::NODEPOOL: "default"}},
            "spec": {"providerID": "kwok://n1"},
            "status": {"nodeInfo": {"bootID": boot},
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": lifecycle::rfc3339(T0)}]}
        }))
        .expect("node");
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "n1", "annotations": notes, "labels": {labels::NODEPOOL: "default"},
                         "finalizers": [labels::TERMINATION_FINALIZER]},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                     "requirements": []},
            "status": {"providerID": "kwok://n1", "nodeName": "n1", "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                 "lastTransitionTime": lifecycle::rfc3339(T0 - 60 * MINUTE)},
                {"type": "Registered", "status": "True", "reason": "Registered", "message": "",
                 "lastTransitionTime": lifecycle::rfc3339(T0 - 60 * MINUTE)},
                {"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
                 "lastTransitionTime": lifecycle::rfc3339(T0 - 60 * MINUTE)},
                {"type": COND_REBOOTING, "status": "True", "reason": phase, "message": "",
                 "lastTransitionTime": lifecycle::rfc3339(T0)}]}
        }))
        .expect("claim");
        let mut s = Snapshot::default();
        s.nodes.push(node.into());
        s.nodeclaims.push(claim.into());
        s
    }

    fn rebooting(effects: &[Effect]) -> Option<(String, Option<String>)> {
        effects.iter().find_map(|e| match e {
            Effect::PatchClaimStatus { status, .. } => status
                .conditions
                .iter()
                .find(|c| c.type_ == COND_REBOOTING)
                .map(|c| (c.reason.clone().unwrap_or_default(), c.message.clone())),
            _ => None,
        })
    }

    fn deleted(effects: &[Effect]) -> bool {
        effects.iter().any(|e| matches!(e, Effect::DeleteNodeClaim { reason: DeleteReason::Unhealthy, .. }))
    }

    fn controller() -> Controller {
        Controller::with_settings(Arc::new(fake_catalog()), Settings::default(), T0)
    }

    #[test]
    fn a_reboot_the_cloud_refuses_fails_and_the_node_is_replaced() {
        let pre = serde_json::json!({ANNOTATION_PRE_BOOT_ID: "b1"});
        let s = cluster(REASON_ISSUED, "b1", pre);
        let mut c = controller();
        c.outcome(super::super::Outcome::RebootRefused { claim: "n1".into(), message: "no such instance".into() }, T0);
        let effects = c.lifecycle(&s.view(), T0 + SECOND);
        let (reason, message) = rebooting(&effects).expect("Rebooting written");
        assert_eq!(reason, REASON_FAILED);
        assert!(message.is_some_and(|m| m.starts_with(RESULT_PROVIDER_ERROR)));
        assert!(deleted(&effects), "escalated to replacement: {effects:?}");
    }

    #[test]
    fn a_reboot_the_cloud_never_answers_fails_after_5_minutes() {
        let s = cluster(REASON_REQUESTED, "b1", serde_json::json!({ANNOTATION_GRACE: "0s"}));
        let mut c = controller();
        let asked = c.lifecycle(&s.view(), T0 + 10 * SECOND);
        assert!(asked.iter().any(|e| matches!(e, Effect::RebootInstance { .. })), "{asked:?}");
        let waiting = c.lifecycle(&s.view(), T0 + 10 * SECOND + ISSUE_DEADLINE - SECOND);
        assert!(rebooting(&waiting).is_none() && !deleted(&waiting), "still waiting: {waiting:?}");
        let late = c.lifecycle(&s.view(), T0 + 10 * SECOND + ISSUE_DEADLINE);
        assert!(
            rebooting(&late)
                .is_some_and(|(r, m)| r == REASON_FAILED && m.is_some_and(|m| m.starts_with(RESULT_PROVIDER_ERROR))),
            "{late:?}"
        );
        assert!(deleted(&late), "escalated to replacement");
    }

    #[test]
    fn a_node_not_back_within_20_minutes_fails_the_reboot() {
        let pre = serde_json::json!({ANNOTATION_PRE_BOOT_ID: "b1"});
        let s = cluster(REASON_ISSUED, "b1", pre);
        let mut c = controller();
        let waiting = c.lifecycle(&s.view(), T0 + 19 * MINUTE);
        assert!(rebooting(&waiting).is_none() && !deleted(&waiting), "still waiting: {waiting:?}");
        let late = c.lifecycle(&s.view(), T0 + OBSERVATION_DEADLINE);
        assert!(
            rebooting(&late)
                .is_some_and(|(r, m)| r == REASON_FAILED && m.is_some_and(|m| m.starts_with(RESULT_RECOVERY_TIMEOUT)))
        );
        assert!(deleted(&late));
    }

    #[test]
    fn a_new_boot_id_on_a_ready_node_is_a_reboot_that_succeeded() {
        let s = cluster(REASON_ISSUED, "b2", serde_json::json!({ANNOTATION_PRE_BOOT_ID: "b1"}));
        let effects = controller().lifecycle(&s.view(), T0 + MINUTE);
        assert_eq!(rebooting(&effects).map(|r| r.0), Some(REASON_SUCCEEDED.to_string()));
        assert!(!deleted(&effects));
    }

    #[test]
    fn the_claim_says_issued_only_once_the_cloud_took_the_reboot() {
        let s = cluster(REASON_REQUESTED, "b1", serde_json::json!({ANNOTATION_GRACE: "5m0s"}));
        let mut c = controller();
        let asked = c.lifecycle(&s.view(), T0 + 10 * SECOND);
        assert!(asked.iter().any(|e| matches!(e, Effect::RebootInstance { claim, .. } if claim == "n1")), "{asked:?}");
        assert!(rebooting(&asked).is_none(), "nothing said before the cloud answers: {asked:?}");
        let waiting = c.lifecycle(&s.view(), T0 + 11 * SECOND);
        assert!(!waiting.iter().any(|e| matches!(e, Effect::RebootInstance { .. })), "not asked twice");
        c.outcome(super::super::Outcome::Rebooted { claim: "n1".into() }, T0 + 11 * SECOND);
        let taken = c.lifecycle(&s.view(), T0 + 12 * SECOND);
        assert_eq!(rebooting(&taken).map(|r| r.0), Some(REASON_ISSUED.to_string()));
    }

    #[test]
    fn a_malformed_grace_period_fails_the_reboot_without_deleting_anything() {
        let s = cluster(REASON_REQUESTED, "b1", serde_json::json!({ANNOTATION_GRACE: "soon"}));
        let effects = controller().lifecycle(&s.view(), T0 + SECOND);
        assert!(
            rebooting(&effects)
                .is_some_and(|(r, m)| r == REASON_FAILED && m.is_some_and(|m| m.starts_with(RESULT_INVALID_REQUEST)))
        );
        assert!(!deleted(&effects), "an invalid request leaves the node alone");
        assert!(!effects.iter().any(|e| matches!(e, Effect::RebootInstance { .. })));
    }

    #[test]
    fn the_history_counts_a_day() {
        let mut h = History::default();
        h.record("c", 0);
        h.record("c", HISTORY_WINDOW / 2);
        assert_eq!(h.recent("c", HISTORY_WINDOW / 2), 2);
        assert_eq!(h.recent("c", HISTORY_WINDOW + 1), 1, "the first has aged out");
        assert_eq!(h.recent("other", 0), 0);
    }
}
