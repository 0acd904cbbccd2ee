//! Disruption budgets per NodePool and reason (engine.md §5.3): how many more nodes may be voluntarily disrupted
//! right now, and — when the answer is zero — why and until when, so the dashboard can say "budget for
//! Underutilized is 0 until 17:00 UTC".

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::engine::api::NodePool;
use crate::engine::api::duration::parse_go_duration;
use crate::engine::api::nodepool::Budget;
use crate::engine::api::validation::{budget_active, budget_allowed, parse_schedule};
use crate::engine::provisioning::Millis;

use super::Reason;

/// One NodePool's budget for one reason at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetStatus {
    /// More nodes that may start disruption now: max(limit − disrupting, 0).
    pub allowed: i64,
    /// The minimum over the active budgets that apply to the reason (`i64::MAX` when none is active).
    pub limit: i64,
    /// Managed, initialized nodes of the pool that are not terminating their instance.
    pub nodes: i64,
    /// Nodes of the pool being disrupted or not Ready, which use up the budget.
    pub disrupting: i64,
    /// When the active window that sets `limit` ends (scheduled budgets only).
    pub until: Option<Millis>,
    /// A malformed budget: nothing is allowed (fail closed), and this says which and why.
    pub error: Option<String>,
}

impl BudgetStatus {
    /// A sentence for explanations when nothing is allowed.
    pub fn why_zero(&self, pool: &str, reason: Reason) -> String {
        if let Some(e) = &self.error {
            return format!("NodePool {pool:?} has a malformed disruption budget ({e}); nothing may be disrupted");
        }
        let until = self
            .until
            .and_then(DateTime::<Utc>::from_timestamp_millis)
            .map(|t| format!(" until {} UTC", t.format("%Y-%m-%d %H:%M")))
            .unwrap_or_default();
        if self.limit <= 0 {
            format!("budget for {} on NodePool {pool:?} is 0{until}", reason.as_str())
        } else {
            format!(
                "budget for {} on NodePool {pool:?} allows {} and {} node(s) are already being disrupted{until}",
                reason.as_str(),
                self.limit,
                self.disrupting
            )
        }
    }
}

/// Counts per NodePool that budgets are computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounts {
    pub nodes: i64,
    /// Being deleted, or not Ready.
    pub disrupting: i64,
    /// Of `disrupting`, those only not Ready: they do not use up the `Unhealthy` budget, or unhealthy nodes would
    /// exhaust their own repair's budget (assumed after a review diff of upstream's PR; spec engine-v115 §1.5).
    pub not_ready: i64,
}

/// Whether a budget applies to `reason`: one without reasons applies to all of them.
pub fn applies(budget: &Budget, reason: Reason) -> bool {
    budget.reasons.as_ref().is_none_or(|rs| rs.is_empty() || rs.iter().any(|r| r == reason.as_str()))
}

/// Evaluates a NodePool's budgets for `reason` at `now`.
pub fn status(pool: &NodePool, reason: Reason, mut counts: PoolCounts, now: Millis) -> BudgetStatus {
    if reason == Reason::Unhealthy {
        counts.disrupting -= counts.not_ready;
    }
    let mut out = BudgetStatus {
        allowed: 0,
        limit: i64::MAX,
        nodes: counts.nodes,
        disrupting: counts.disrupting,
        until: None,
        error: None,
    };
    let Some(now_t) = DateTime::<Utc>::from_timestamp_millis(now) else {
        out.limit = 0;
        out.error = Some("the clock is out of range".into());
        return out;
    };
    for (i, b) in pool.spec.disruption.budgets.iter().enumerate() {
        if !applies(b, reason) {
            continue;
        }
        let fail = |out: &mut BudgetStatus, e: String| {
            out.limit = 0;
            out.until = None;
            out.error = Some(format!("spec.disruption.budgets[{i}]: {e}"));
        };
        match budget_active(b, now_t) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => {
                fail(&mut out, e.to_string());
                break;
            }
        }
        let allowed = match budget_allowed(&b.nodes, counts.nodes) {
            Ok(a) => a,
            Err(e) => {
                fail(&mut out, e.to_string());
                break;
            }
        };
        if allowed < out.limit {
            out.limit = allowed;
            out.until = match (&b.schedule, &b.duration) {
                (Some(s), Some(d)) => window_end(s, d, now_t),
                _ => None,
            };
        }
    }
    out.allowed = if out.error.is_some() { 0 } else { out.limit.saturating_sub(counts.disrupting).max(0) };
    out
}

/// The end of the scheduled window containing `now`: the occurrence that opened it plus the duration.
fn window_end(schedule: &str, duration: &str, now: DateTime<Utc>) -> Option<Millis> {
    let cron = parse_schedule(schedule).ok()?;
    let d = chrono::Duration::from_std(parse_go_duration(duration).ok()?).ok()?;
    let opened = cron.find_next_occurrence(&(now - d), false).ok()?;
    Some((opened + d).timestamp_millis())
}

/// Budgets of every NodePool for `reason`.
pub fn mapping(
    pools: &[NodePool],
    reason: Reason,
    counts: &BTreeMap<String, PoolCounts>,
    now: Millis,
) -> BTreeMap<String, BudgetStatus> {
    pools
        .iter()
        .map(|p| (p.name().to_string(), status(p, reason, counts.get(p.name()).copied().unwrap_or_default(), now)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::nodepool::Budget;

    fn pool(budgets: Vec<Budget>) -> NodePool {
        let mut p = NodePool::new("default", Default::default());
        p.spec.disruption.budgets = budgets;
        p
    }

    fn budget(nodes: &str, schedule: Option<&str>, duration: Option<&str>, reasons: Option<&[&str]>) -> Budget {
        Budget {
            nodes: nodes.into(),
            schedule: schedule.map(Into::into),
            duration: duration.map(Into::into),
            reasons: reasons.map(|r| r.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn at(s: &str) -> Millis {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    #[test]
    fn default_ten_percent_rounds_up_and_subtracts_disrupting() {
        let p = pool(vec![budget("10%", None, None, None)]);
        let s = status(&p, Reason::Underutilized, PoolCounts { nodes: 5, disrupting: 0, not_ready: 0 }, 0);
        assert_eq!((s.limit, s.allowed), (1, 1));
        let s = status(&p, Reason::Underutilized, PoolCounts { nodes: 5, disrupting: 1, not_ready: 0 }, 0);
        assert_eq!(s.allowed, 0);
        assert!(s.why_zero("default", Reason::Underutilized).contains("already being disrupted"));
    }

    #[test]
    fn minimum_of_active_budgets_for_the_reason() {
        let p = pool(vec![
            budget("5", None, None, None),
            budget("2", None, None, Some(&["Drifted"])),
            budget("0", Some("0 9 * * mon-fri"), Some("8h"), Some(&["Underutilized"])),
        ]);
        let monday_10 = at("2026-01-05T10:00:00Z");
        let c = PoolCounts { nodes: 10, disrupting: 0, not_ready: 0 };
        assert_eq!(status(&p, Reason::Empty, c, monday_10).allowed, 5);
        assert_eq!(status(&p, Reason::Drifted, c, monday_10).allowed, 2);
        let u = status(&p, Reason::Underutilized, c, monday_10);
        assert_eq!(u.allowed, 0);
        assert_eq!(u.until, Some(at("2026-01-05T17:00:00Z")));
        assert!(u.why_zero("default", Reason::Underutilized).contains("until 2026-01-05 17:00 UTC"), "{u:?}");
        // Outside the window the scheduled budget does not apply.
        assert_eq!(status(&p, Reason::Underutilized, c, at("2026-01-05T18:00:00Z")).allowed, 5);
    }

    #[test]
    fn not_ready_nodes_use_up_every_budget_but_unhealthys() {
        let p = pool(vec![budget("1", None, None, None)]);
        let c = PoolCounts { nodes: 5, disrupting: 1, not_ready: 1 };
        assert_eq!(status(&p, Reason::Drifted, c, 0).allowed, 0);
        assert_eq!(status(&p, Reason::Unhealthy, c, 0).allowed, 1, "its own unhealthiness must not block repair");
        let deleting = PoolCounts { nodes: 5, disrupting: 1, not_ready: 0 };
        assert_eq!(status(&p, Reason::Unhealthy, deleting, 0).allowed, 0, "a node being deleted counts for all");
    }

    #[test]
    fn malformed_budgets_fail_closed_with_a_reason() {
        for b in [budget("lots", None, None, None), budget("1", Some("not a cron"), Some("1h"), None)] {
            let s = status(&pool(vec![b]), Reason::Empty, PoolCounts { nodes: 10, disrupting: 0, not_ready: 0 }, 0);
            assert_eq!(s.allowed, 0);
            assert!(s.error.as_deref().is_some_and(|e| e.contains("budgets[0]")), "{s:?}");
        }
    }

    #[test]
    fn no_active_budget_is_unbounded() {
        let p = pool(vec![budget("0", Some("@daily"), Some("1h"), None)]);
        let s =
            status(&p, Reason::Empty, PoolCounts { nodes: 3, disrupting: 1, not_ready: 0 }, at("2026-01-05T12:00:00Z"));
        assert_eq!(s.limit, i64::MAX);
        assert!(s.allowed > 1000);
    }
}
