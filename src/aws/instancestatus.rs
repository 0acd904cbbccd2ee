//! EC2 instance health from `DescribeInstanceStatus` (upstream v1.12's instance status poller, engine-v1x.md §5):
//! every minute, the instances whose instance or system status check is impaired, or that have a scheduled event,
//! each turned into an interruption notice per failed category. It runs whether or not an interruption queue is
//! configured. Reading the answer is pure ([`unhealthy`]); the calls are [`list`]; [`poll_statuses`] is the loop.
//!
//! - A failed instance or system status check counts once it has been impaired for [`UNHEALTHY_AFTER_SECS`];
//!   a scheduled event counts at once (its date is often in the future, and upstream vacates the host anyway).
//! - EBS status checks are ignored, as upstream does: a failing volume may be a pod's, not the node's.
//! - Each (instance, category) is counted once while it stays listed ([`Episodes`], upstream's
//!   `karpenter_interruption_instance_status_unhealthy_total`), and again after it recovers; the notice itself is
//!   repeated every poll, as upstream's is, and the controller ignores a repeat for a NodeClaim already going.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{Filter, InstanceStatus, StatusType};
use tokio::sync::mpsc;

use super::config::AwsError;
use super::interruption::{Kind, Message};

/// How long a status check must have been impaired before the instance is acted on.
pub const UNHEALTHY_AFTER_SECS: i64 = 120;

/// How often the statuses are polled.
pub const POLL_EVERY: Duration = Duration::from_secs(60);

/// The scheduled event codes asked for: reboots, maintenance, retirement and stop.
pub const EVENT_CODES: [&str; 5] =
    ["instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"];

/// The three filter sets, one call each: EC2 ANDs filters with different names, and these must be ORed.
fn filter_sets() -> [Filter; 3] {
    let one = |name: &str, values: &[&str]| {
        Filter::builder().name(name).set_values(Some(values.iter().map(|v| v.to_string()).collect())).build()
    };
    [
        one("instance-status.status", &["impaired"]),
        one("system-status.status", &["impaired"]),
        one("event.code", &EVENT_CODES),
    ]
}

/// An instance to act on: the categories that failed and the earliest impairment among them (seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    pub instance_id: String,
    /// Sorted, without repeats.
    pub kinds: Vec<Kind>,
    pub since: i64,
}

/// Reads statuses as EC2 returns them (first answer per instance wins) into the instances to act on at `now`
/// (seconds since the epoch).
pub fn unhealthy(statuses: &[InstanceStatus], now: i64) -> Vec<Unhealthy> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in statuses {
        let Some(id) = s.instance_id.as_deref() else { continue };
        if !seen.insert(id.to_string()) {
            continue;
        }
        // (kind, impaired since) of every failed detail past its threshold.
        let mut failed: Vec<(Kind, i64)> = Vec::new();
        for (kind, summary) in [(Kind::InstanceStatus, &s.instance_status), (Kind::SystemStatus, &s.system_status)] {
            for d in summary.iter().flat_map(|x| x.details()) {
                if d.status != Some(StatusType::Failed) {
                    continue;
                }
                let since = d.impaired_since.map_or(0, |t| t.secs());
                if now - since >= UNHEALTHY_AFTER_SECS {
                    failed.push((kind, since));
                }
            }
        }
        // Every listed event counts, whatever its code or date.
        failed.extend(s.events().iter().map(|_| (Kind::EventStatus, now)));
        let Some(since) = failed.iter().map(|(_, t)| *t).min() else { continue };
        let mut kinds: Vec<Kind> = failed.into_iter().map(|(k, _)| k).collect();
        kinds.sort();
        kinds.dedup();
        out.push(Unhealthy { instance_id: id.to_string(), kinds, since });
    }
    out
}

/// The notices for some unhealthy instances: one per failed category, dated at the earliest impairment.
pub fn messages(found: &[Unhealthy]) -> Vec<Message> {
    found
        .iter()
        .flat_map(|u| {
            u.kinds.iter().map(move |&kind| Message {
                kind,
                id: format!("{}/{}", category(kind), u.instance_id),
                time: crate::engine::lifecycle::rfc3339(u.since * 1000),
                instance_ids: vec![u.instance_id.clone()],
            })
        })
        .collect()
}

/// Upstream's category name, for ids and logs.
fn category(kind: Kind) -> &'static str {
    match kind {
        Kind::InstanceStatus => "InstanceStatus",
        Kind::SystemStatus => "SystemStatus",
        _ => "EventStatus",
    }
}

/// The three paginated calls, merged by instance, read at `now` (seconds).
pub async fn list(ec2: &Client, now: i64) -> Result<Vec<Unhealthy>, AwsError> {
    let mut statuses = Vec::new();
    for f in filter_sets() {
        let mut pages = ec2.describe_instance_status().filters(f).max_results(1000).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::call("DescribeInstanceStatus", e))?;
            statuses.extend(page.instance_statuses.unwrap_or_default());
        }
    }
    Ok(unhealthy(&statuses, now))
}

/// Unhealthy (instance, category) pairs counted once per episode: counted when first listed, forgotten when no
/// longer listed, so a relapse counts again.
#[derive(Debug, Default)]
pub struct Episodes {
    listed: BTreeSet<(String, Kind)>,
    counts: BTreeMap<Kind, u64>,
}

impl Episodes {
    /// Takes one poll's pairs; returns those that start an episode.
    pub fn observe(&mut self, found: &[Unhealthy]) -> Vec<(String, Kind)> {
        let now: BTreeSet<(String, Kind)> =
            found.iter().flat_map(|u| u.kinds.iter().map(|&k| (u.instance_id.clone(), k))).collect();
        let new: Vec<(String, Kind)> = now.difference(&self.listed).cloned().collect();
        for (_, k) in &new {
            *self.counts.entry(*k).or_default() += 1;
        }
        self.listed = now;
        new
    }

    /// Episodes counted so far for a category.
    pub fn count(&self, kind: Kind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
}

/// Polls every minute until the acting loop goes away. Only this cluster's instances are handed on once the
/// instance list is known (`live`), each notice through `tx` as the queue's are. Without the
/// `ec2:DescribeInstanceStatus` right the poller says so once and stops, as upstream does.
pub async fn poll_statuses(
    ec2: Client,
    live: impl Fn() -> Option<BTreeSet<String>> + Send + 'static,
    tx: mpsc::UnboundedSender<super::upkeep::Notice>,
    wake: Arc<tokio::sync::Notify>,
) {
    let mut episodes = Episodes::default();
    loop {
        let now = chrono::Utc::now().timestamp();
        match list(&ec2, now).await {
            Ok(mut found) => {
                if let Some(ids) = live() {
                    let ours: BTreeSet<&str> = ids.iter().filter_map(|p| super::ec2::instance_id(p)).collect();
                    found.retain(|u| ours.contains(u.instance_id.as_str()));
                }
                for (id, kind) in episodes.observe(&found) {
                    tracing::info!(instance = %id, category = category(kind), "detected unhealthy instance owned by cluster");
                }
                let mut forward =
                    super::upkeep::Forward { tx: tx.clone(), wake: wake.clone(), wait: Duration::from_secs(15) };
                for m in messages(&found) {
                    use crate::aws::sqs::AsyncHandler;
                    if let Err(why) = forward.handle(&m).await {
                        tracing::warn!(instance = ?m.instance_ids, "instance status notice not handled, next poll repeats it: {why}");
                    }
                }
            }
            Err(e) if e.code() == Some("UnauthorizedOperation") => {
                tracing::error!(
                    "ec2:DescribeInstanceStatus is not allowed: instance status health checks are off until the IAM \
                     policy allows it and karpenter-tui restarts ({e})"
                );
                return;
            }
            Err(e) => tracing::warn!("polling EC2 instance statuses: {e}"),
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::{
        EventCode, InstanceStatusDetails, InstanceStatusEvent, InstanceStatusSummary, StatusName, SummaryStatus,
    };

    const NOW: i64 = 1_800_000_000;

    fn summary(failed_since: Option<i64>) -> InstanceStatusSummary {
        let mut d = InstanceStatusDetails::builder().name(StatusName::Reachability);
        d = match failed_since {
            Some(t) => d.status(StatusType::Failed).impaired_since(DateTime::from_secs(t)),
            None => d.status(StatusType::Passed),
        };
        InstanceStatusSummary::builder()
            .status(if failed_since.is_some() { SummaryStatus::Impaired } else { SummaryStatus::Ok })
            .details(d.build())
            .build()
    }

    fn status(id: &str, instance: Option<i64>, system: Option<i64>, event: bool) -> InstanceStatus {
        let mut s =
            InstanceStatus::builder().instance_id(id).instance_status(summary(instance)).system_status(summary(system));
        if event {
            s = s.events(InstanceStatusEvent::builder().code(EventCode::SystemMaintenance).build());
        }
        s.build()
    }

    #[test]
    fn failed_checks_count_after_two_minutes_and_events_at_once() {
        let found = unhealthy(
            &[
                status("i-young", Some(NOW - 119), None, false),
                status("i-old", Some(NOW - 120), Some(NOW - 3600), false),
                status("i-event", None, None, true),
                status("i-ok", None, None, false),
                // The same instance from the next call: the first answer stands.
                status("i-young", None, None, true),
            ],
            NOW,
        );
        assert_eq!(
            found,
            vec![
                Unhealthy {
                    instance_id: "i-old".into(),
                    kinds: vec![Kind::InstanceStatus, Kind::SystemStatus],
                    since: NOW - 3600
                },
                Unhealthy { instance_id: "i-event".into(), kinds: vec![Kind::EventStatus], since: NOW },
            ]
        );
        let m = messages(&found);
        assert_eq!(m.len(), 3, "one notice per failed category");
        assert_eq!(m[1].kind, Kind::SystemStatus);
        assert_eq!(m[1].instance_ids, ["i-old"]);
        assert_eq!(m[1].time, crate::engine::lifecycle::rfc3339((NOW - 3600) * 1000), "dated at the first impairment");
    }

    #[test]
    fn an_episode_counts_once_while_listed_and_again_after_recovery() {
        let mut e = Episodes::default();
        let sick = unhealthy(&[status("i-1", None, Some(NOW - 3600), false)], NOW);
        assert_eq!(e.observe(&sick), vec![("i-1".to_string(), Kind::SystemStatus)]);
        assert!(e.observe(&sick).is_empty(), "still listed: not counted again");
        assert_eq!(e.count(Kind::SystemStatus), 1);
        assert!(e.observe(&[]).is_empty());
        assert_eq!(e.observe(&sick).len(), 1, "impaired again after recovering");
        assert_eq!((e.count(Kind::SystemStatus), e.count(Kind::InstanceStatus)), (2, 0));
    }
}
