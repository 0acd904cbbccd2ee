//! Karpenter v1.15's reason-aware repair policies (spec engine-v115 §1.3): which of a cloud's policies a node's
//! conditions match, when each match becomes eligible, and what the eligible ones add up to: an urgency score, an
//! action (replace or reboot) and a bound on the drain. Pure: the node's conditions and the time in, a
//! [`Resolution`] out. v1.14's node repair reads only the condition type, status and toleration of the same policies
//! (`super::repair`).
//!
//! Assumed where upstream's sources disagree: a fallback policy (no reason pattern) is per condition type and
//! status, at most one for each, so the cloud's v1.14 policies stay a valid v1.15 set (each the fallback of its
//! condition, as the spec's assumption for AWS's defaults needs); upstream's code validates one fallback "in the
//! whole set". [`Policies::new`] is the one place that rule is written.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use regex::Regex;

use super::cloud::{RepairAction, RepairPolicy};
use crate::engine::lifecycle;
use crate::engine::provisioning::Millis;

/// τ: a match gains one point of urgency for every this long it has been eligible.
pub const AGING: Millis = 30 * 60_000;
/// Priorities lie in 0..=100.
pub const MAX_PRIORITY: u8 = 100;

/// Why a set of repair policies is refused (upstream refuses to start with one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("repair policy {index}: the condition type is empty")]
    NoConditionType { index: usize },
    #[error("repair policy {index} ({condition}): status {status:?} is not True, False or Unknown")]
    Status { index: usize, condition: String, status: String },
    #[error("repair policy {index} ({condition}): the toleration is negative")]
    NegativeToleration { index: usize, condition: String },
    #[error("repair policy {index} ({condition}): the termination grace period is negative")]
    NegativeGracePeriod { index: usize, condition: String },
    #[error("repair policy {index} ({condition}): priority {priority} is not within 0..=100")]
    Priority { index: usize, condition: String, priority: u8 },
    #[error("repair policy {index} ({condition}): reason pattern {pattern:?} does not compile: {error}")]
    Pattern { index: usize, condition: String, pattern: String, error: String },
    #[error(
        "repair policies for {condition}={status}: {count} fallbacks (policies without a reason pattern); at most one"
    )]
    Fallbacks { condition: String, status: String, count: usize },
    #[error("repair policy {index} ({condition}): a fallback must replace the node, not reboot it")]
    FallbackReboots { index: usize, condition: String },
}

/// A policy set checked and its reason patterns compiled.
#[derive(Debug, Clone)]
pub struct Policies {
    policies: Vec<RepairPolicy>,
    /// Each policy's compiled pattern, in the same order (`None`: a fallback).
    patterns: Vec<Option<Regex>>,
    /// The distinct priorities, ascending: a policy's rank is its priority's index here.
    priorities: Vec<u8>,
}

/// One policy a node's condition matches, and when it becomes eligible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Index into the policy set.
    pub policy: usize,
    pub condition: String,
    pub reason: String,
    /// max(the condition's lastTransitionTime, the node's creation) + the policy's toleration.
    pub eligible_at: Millis,
}

/// What the eligible matches of one node add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// max over eligible matches of (rank of the policy's priority + time past eligibility / τ).
    pub score: f64,
    /// The most disruptive action among them (replace over reboot).
    pub action: RepairAction,
    /// The condition whose policy chose the action (higher priority, then earlier eligibility, then the smaller
    /// condition type win a tie).
    pub condition: String,
    pub priority: u8,
    /// When that match became eligible.
    pub eligible_since: Millis,
    /// The shortest termination grace period among the eligible policies that set one; `None`: the NodeClaim's.
    pub drain_bound: Option<Millis>,
}

impl Policies {
    /// Checks `policies` as upstream does at startup.
    pub fn new(policies: Vec<RepairPolicy>) -> Result<Policies, PolicyError> {
        let mut patterns = Vec::with_capacity(policies.len());
        for (index, p) in policies.iter().enumerate() {
            let condition = p.condition_type.to_string();
            if p.condition_type.is_empty() {
                return Err(PolicyError::NoConditionType { index });
            }
            if !["True", "False", "Unknown"].contains(&p.condition_status) {
                let status = p.condition_status.to_string();
                return Err(PolicyError::Status { index, condition, status });
            }
            if p.toleration < 0 {
                return Err(PolicyError::NegativeToleration { index, condition });
            }
            if p.termination_grace_period.is_some_and(|t| t < 0) {
                return Err(PolicyError::NegativeGracePeriod { index, condition });
            }
            if p.priority > MAX_PRIORITY {
                return Err(PolicyError::Priority { index, condition, priority: p.priority });
            }
            let pattern = match p.reason_pattern.as_deref().filter(|s| !s.is_empty()) {
                None => {
                    if p.action != RepairAction::Replace {
                        return Err(PolicyError::FallbackReboots { index, condition });
                    }
                    None
                }
                Some(text) => Some(Regex::new(text).map_err(|e| PolicyError::Pattern {
                    index,
                    condition: condition.clone(),
                    pattern: text.to_string(),
                    error: e.to_string(),
                })?),
            };
            patterns.push(pattern);
        }
        let groups: BTreeSet<(&str, &str)> = policies.iter().map(|p| (p.condition_type, p.condition_status)).collect();
        for (condition, status) in groups {
            let count = policies
                .iter()
                .zip(&patterns)
                .filter(|(p, re)| (p.condition_type, p.condition_status) == (condition, status) && re.is_none())
                .count();
            if count > 1 {
                return Err(PolicyError::Fallbacks { condition: condition.into(), status: status.into(), count });
            }
        }
        let priorities: BTreeSet<u8> = policies.iter().map(|p| p.priority).collect();
        Ok(Policies { policies, patterns, priorities: priorities.into_iter().collect() })
    }

    pub fn get(&self, index: usize) -> &RepairPolicy {
        &self.policies[index]
    }

    /// The dense rank of `priority` among the set's distinct priorities (the lowest is 0).
    fn rank(&self, priority: u8) -> usize {
        self.priorities.partition_point(|p| *p < priority)
    }

    /// Every policy `node`'s conditions match. Per condition: the policies of its type and status whose pattern
    /// matches its reason, else that group's fallback. A matching reason-specific policy still waiting for its
    /// toleration keeps the fallback out (a change of reason alone keeps the condition's age).
    pub fn matches(&self, node: &Node) -> Vec<Match> {
        let created = node.metadata.creation_timestamp.as_ref().map_or(Millis::MIN / 2, lifecycle::time_ms);
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
        let mut out = Vec::new();
        for c in conditions {
            let group: Vec<usize> = (0..self.policies.len())
                .filter(|&i| {
                    let p = &self.policies[i];
                    p.condition_type == c.type_ && p.condition_status == c.status
                })
                .collect();
            if group.is_empty() {
                continue;
            }
            let reason = c.reason.clone().unwrap_or_default();
            let specific: Vec<usize> = group
                .iter()
                .copied()
                .filter(|&i| self.patterns[i].as_ref().is_some_and(|re| re.is_match(&reason)))
                .collect();
            let chosen = if specific.is_empty() {
                group.into_iter().filter(|&i| self.patterns[i].is_none()).collect()
            } else {
                specific
            };
            // A condition without a transition time has held since forever, as upstream's zero time.
            let since = c.last_transition_time.as_ref().map_or(Millis::MIN / 2, lifecycle::time_ms).max(created);
            for i in chosen {
                out.push(Match {
                    policy: i,
                    condition: c.type_.clone(),
                    reason: reason.clone(),
                    eligible_at: since.saturating_add(self.policies[i].toleration),
                });
            }
        }
        out
    }

    /// Whether some condition of `node` has a type and status a policy watches, whatever its reason or age (what
    /// the 20 % breaker counts as unhealthy).
    pub fn watches(&self, node: &Node) -> bool {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
        conditions
            .iter()
            .any(|c| self.policies.iter().any(|p| p.condition_type == c.type_ && p.condition_status == c.status))
    }

    /// What `matches` add up to at `now`. `not_before`: when the node's last reboot finished, if it had one;
    /// tolerations then count from it. `None` when no match is eligible yet.
    pub fn resolve(&self, matches: &[Match], not_before: Option<Millis>, now: Millis) -> Option<Resolution> {
        let eligible: Vec<(&Match, &RepairPolicy, Millis)> = matches
            .iter()
            .map(|m| {
                let p = &self.policies[m.policy];
                let at = not_before.map_or(m.eligible_at, |t| m.eligible_at.max(t.saturating_add(p.toleration)));
                (m, p, at)
            })
            .filter(|(_, _, at)| *at <= now)
            .collect();
        if eligible.is_empty() {
            return None;
        }
        let score = eligible
            .iter()
            .map(|(_, p, at)| self.rank(p.priority) as f64 + (now - at) as f64 / AGING as f64)
            .fold(f64::MIN, f64::max);
        let (m, p, at) = eligible
            .iter()
            .min_by(|(ma, pa, ta), (mb, pb, tb)| {
                // More disruptive first, then higher priority, earlier eligibility, the smaller condition type.
                pb.action
                    .cmp(&pa.action)
                    .then(pb.priority.cmp(&pa.priority))
                    .then(ta.cmp(tb))
                    .then(ma.condition.cmp(&mb.condition))
            })
            .copied()?;
        let drain_bound = eligible.iter().filter_map(|(_, p, _)| p.termination_grace_period).min();
        Some(Resolution {
            score,
            action: p.action,
            condition: m.condition.clone(),
            priority: p.priority,
            eligible_since: at,
            drain_bound,
        })
    }

    /// When the earliest match not yet eligible becomes eligible (for a requeue).
    pub fn next_eligible(&self, matches: &[Match], not_before: Option<Millis>, now: Millis) -> Option<Millis> {
        matches
            .iter()
            .map(|m| {
                let t = self.policies[m.policy].toleration;
                not_before.map_or(m.eligible_at, |nb| m.eligible_at.max(nb.saturating_add(t)))
            })
            .filter(|at| *at > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `pkg/controllers/node/health/policy.go` behaviour, in the cases `repair_test.go` names.
    use super::*;
    use crate::controller::cloud::{aws_repair_policies, kwok_repair_policies};

    const T0: Millis = 1_767_225_600_000;
    const MINUTE: Millis = 60_000;

    /// A node created at T0 − 1 h with `conditions` as (type, status, reason, since).
    fn node(conditions: &[(&str, &str, &str, Millis)]) -> Node {
        let conditions: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(t, s, r, since)| {
                serde_json::json!({"type": t, "status": s, "reason": r,
                    "lastTransitionTime": lifecycle::rfc3339(*since), "lastHeartbeatTime": lifecycle::rfc3339(*since)})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "creationTimestamp": lifecycle::rfc3339(T0 - 60 * MINUTE)},
            "status": {"conditions": conditions}
        }))
        .expect("node")
    }

    fn fallback(t: &'static str, s: &'static str, toleration: Millis) -> RepairPolicy {
        RepairPolicy::fallback(t, s, toleration)
    }

    fn specific(
        t: &'static str,
        pattern: &str,
        action: RepairAction,
        toleration: Millis,
        priority: u8,
    ) -> RepairPolicy {
        RepairPolicy { reason_pattern: Some(pattern.into()), action, priority, ..fallback(t, "False", toleration) }
    }

    #[test]
    fn the_clouds_v1_14_policies_are_a_valid_v1_15_set() {
        for set in [aws_repair_policies(), kwok_repair_policies()] {
            Policies::new(set).expect("each is the fallback of its condition");
        }
    }

    #[test]
    fn a_set_is_refused_as_upstream_refuses_it_at_startup() {
        let bad = |set: Vec<RepairPolicy>| Policies::new(set).expect_err("refused").to_string();
        let e = bad(vec![fallback("Ready", "False", MINUTE), fallback("Ready", "False", 2 * MINUTE)]);
        assert!(e.contains("Ready=False: 2 fallbacks"), "{e}");
        let e = bad(vec![RepairPolicy { action: RepairAction::Reboot, ..fallback("Ready", "False", MINUTE) }]);
        assert!(e.contains("a fallback must replace"), "{e}");
        let e = bad(vec![fallback("Ready", "Maybe", MINUTE)]);
        assert!(e.contains("\"Maybe\""), "{e}");
        let e = bad(vec![specific("Ready", "(", RepairAction::Replace, MINUTE, 0)]);
        assert!(e.contains("does not compile"), "{e}");
        let e = bad(vec![specific("Ready", "x", RepairAction::Replace, MINUTE, 101)]);
        assert!(e.contains("priority 101"), "{e}");
        let e = bad(vec![fallback("Ready", "False", -1)]);
        assert!(e.contains("toleration is negative"), "{e}");
        let e = bad(vec![RepairPolicy { termination_grace_period: Some(-1), ..fallback("Ready", "False", 0) }]);
        assert!(e.contains("grace period is negative"), "{e}");
        let e = bad(vec![fallback("", "False", 0)]);
        assert!(e.contains("condition type is empty"), "{e}");
    }

    #[test]
    fn should_use_a_matching_reason_specific_policy_instead_of_the_fallback() {
        let set = Policies::new(vec![
            fallback("Ready", "False", 30 * MINUTE),
            specific("Ready", "RebootMe", RepairAction::Reboot, 10 * MINUTE, 50),
        ])
        .expect("valid");
        let n = node(&[("Ready", "False", "KubeletRebootMe", T0)]);
        let m = set.matches(&n);
        assert_eq!(m.len(), 1, "only the reason-specific policy: {m:?}");
        let r = set.resolve(&m, None, T0 + 10 * MINUTE).expect("eligible after its own toleration");
        assert_eq!((r.action, r.condition.as_str(), r.priority), (RepairAction::Reboot, "Ready", 50));
        // Another reason falls back.
        let m = set.matches(&node(&[("Ready", "False", "KubeletNotReady", T0)]));
        assert_eq!(set.get(m[0].policy).reason_pattern, None);
        assert_eq!(set.resolve(&m, None, T0 + 29 * MINUTE), None);
        assert_eq!(set.resolve(&m, None, T0 + 30 * MINUTE).map(|r| r.action), Some(RepairAction::Replace));
    }

    #[test]
    fn should_suppress_an_eligible_fallback_while_a_matching_reason_specific_policy_is_waiting() {
        let set = Policies::new(vec![
            fallback("Ready", "False", 10 * MINUTE),
            specific("Ready", "^Slow", RepairAction::Replace, 60 * MINUTE, 0),
        ])
        .expect("valid");
        let m = set.matches(&node(&[("Ready", "False", "SlowDisk", T0)]));
        // The fallback would be eligible at T0 + 10m; the specific one holds it off until T0 + 60m.
        assert_eq!(set.resolve(&m, None, T0 + 30 * MINUTE), None);
        assert_eq!(set.next_eligible(&m, None, T0 + 30 * MINUTE), Some(T0 + 60 * MINUTE));
        assert!(set.resolve(&m, None, T0 + 60 * MINUTE).is_some());
        // The pattern is unanchored unless it says otherwise: "NotSlowDisk" does not start with "Slow".
        let m = set.matches(&node(&[("Ready", "False", "NotSlowDisk", T0)]));
        assert_eq!(set.get(m[0].policy).reason_pattern, None, "falls back");
    }

    #[test]
    fn should_order_a_node_by_its_most_urgent_condition_not_just_its_highest_priority_one() {
        let set = Policies::new(vec![
            fallback("Ready", "False", 0),
            fallback("DiskPressure", "True", 0),
            RepairPolicy { priority: 100, ..fallback("KernelReady", "False", 0) },
        ])
        .expect("valid");
        let now = T0 + 10 * AGING;
        // A: a low-priority condition 5τ past eligibility, and a fresh high-priority one.
        let a = node(&[("Ready", "False", "x", now - 5 * AGING), ("KernelReady", "False", "y", now)]);
        // B: a high-priority condition 3τ past.
        let b = node(&[("KernelReady", "False", "y", now - 3 * AGING)]);
        let ra = set.resolve(&set.matches(&a), None, now).expect("eligible");
        let rb = set.resolve(&set.matches(&b), None, now).expect("eligible");
        // Ranks: priority 0 → 0, priority 100 → 1.
        assert_eq!((ra.score, rb.score), (5.0, 4.0));
        assert!(ra.score > rb.score, "A's starving condition outranks B");
        assert_eq!(ra.condition, "KernelReady", "the action's condition: the higher priority wins the tie");
    }

    #[test]
    fn should_repair_the_higher_priority_condition_first() {
        let set = Policies::new(vec![
            fallback("Ready", "False", 0),
            RepairPolicy { priority: 10, ..fallback("KernelReady", "False", 0) },
        ])
        .expect("valid");
        let low = set.resolve(&set.matches(&node(&[("Ready", "False", "x", T0)])), None, T0).expect("eligible");
        let high = set.resolve(&set.matches(&node(&[("KernelReady", "False", "x", T0)])), None, T0).expect("eligible");
        assert!(high.score > low.score);
    }

    #[test]
    fn replace_beats_reboot_and_the_shortest_grace_period_bounds_the_drain() {
        let set = Policies::new(vec![
            RepairPolicy { termination_grace_period: Some(20 * MINUTE), ..fallback("Ready", "False", 0) },
            RepairPolicy {
                termination_grace_period: Some(5 * MINUTE),
                ..specific("KernelReady", "Oops", RepairAction::Reboot, 0, 90)
            },
            fallback("KernelReady", "False", 0),
        ])
        .expect("valid");
        let n = node(&[("Ready", "False", "x", T0), ("KernelReady", "False", "Oops", T0)]);
        let r = set.resolve(&set.matches(&n), None, T0).expect("eligible");
        assert_eq!((r.action, r.condition.as_str()), (RepairAction::Replace, "Ready"), "the more disruptive wins");
        assert_eq!(r.drain_bound, Some(5 * MINUTE));
    }

    #[test]
    fn tolerations_count_from_the_node_creation_and_the_last_reboot() {
        let set = Policies::new(vec![fallback("Ready", "False", 30 * MINUTE)]).expect("valid");
        // A condition older than the node counts from the node's creation (T0 − 1h).
        let m = set.matches(&node(&[("Ready", "False", "x", T0 - 10 * 60 * MINUTE)]));
        assert_eq!(m[0].eligible_at, T0 - 30 * MINUTE);
        // After a reboot that finished at T0, the toleration runs again from there.
        assert_eq!(set.resolve(&m, Some(T0), T0 + 29 * MINUTE), None);
        assert_eq!(set.next_eligible(&m, Some(T0), T0), Some(T0 + 30 * MINUTE));
        assert!(set.resolve(&m, Some(T0), T0 + 30 * MINUTE).is_some());
    }
}
