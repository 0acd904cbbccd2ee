//! What the AWS cloud needs done around the planner's ticks, each on its own clock: EC2NodeClasses resolved and
//! their status written (every minute, at once when one appears or changes), unused launch templates deleted,
//! instance types and prices refreshed (every 12 h), and the interruption queue polled (each message handed to the
//! acting loop, which takes it through the cloud port and answers it). What the controller reads of the cloud
//! (per-class catalogs, node-class drift, the instance list, interruption notices) it takes through the cloud port.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::aws::cloud::AwsCloud;
use crate::aws::interruption::Message;
use crate::engine::manifests::ClusterObjects;
use crate::engine::provisioning::Millis;

use crate::controller::Effect;

const SECOND: Millis = 1_000;
const CLASSES_EVERY: Millis = 60 * SECOND;
const TEMPLATES_EVERY: Millis = 30 * SECOND;
const TYPES_EVERY: Millis = 12 * 60 * 60 * SECOND;
const PROFILES_EVERY: Millis = 30 * 60 * SECOND;

/// An interruption from the queue, with where to say whether it was handled (unhandled ones come back).
pub type Notice = (Message, oneshot::Sender<Result<(), String>>);

pub struct AwsUpkeep {
    pub cloud: Arc<AwsCloud>,
    next_classes: Millis,
    /// (name, generation) of the classes last resolved: a new or edited class is resolved at once.
    seen_classes: BTreeSet<(String, i64)>,
    next_templates: Millis,
    next_types: Millis,
    next_profiles: Millis,
    /// Pinged when a notice arrives, so a loop asleep until its next reconcile wakes for it.
    pub wake: Arc<tokio::sync::Notify>,
}

/// What one round did, for the events pane and logs.
#[derive(Debug, Default)]
pub struct UpkeepReport {
    pub done: Vec<String>,
    pub errors: Vec<String>,
    /// Effects to carry out (EC2NodeClass status).
    pub effects: Vec<Effect>,
}

impl AwsUpkeep {
    /// Discovery and prices are expected to have run once before (at start).
    pub fn new(cloud: Arc<AwsCloud>, now: Millis, wake: Arc<tokio::sync::Notify>) -> AwsUpkeep {
        AwsUpkeep {
            cloud,
            next_classes: now,
            seen_classes: BTreeSet::new(),
            next_templates: now + TEMPLATES_EVERY,
            next_types: now + TYPES_EVERY,
            next_profiles: now + PROFILES_EVERY,
            wake,
        }
    }

    /// When the next periodic piece of work is due.
    pub fn next_due(&self) -> Millis {
        [self.next_classes, self.next_templates, self.next_types, self.next_profiles]
            .into_iter()
            .min()
            .unwrap_or(Millis::MAX)
    }

    /// One round: whatever is due, on the cache as it is. What the cluster must change comes back as effects.
    pub async fn run(&mut self, m: &ClusterObjects, now: Millis) -> UpkeepReport {
        let mut r = UpkeepReport::default();
        if now >= self.next_types {
            self.next_types = now + TYPES_EVERY;
            if let Err(e) = self.cloud.refresh_types().await {
                r.errors.push(format!("refreshing instance types (the last ones stay): {e}"));
            }
            for e in self.cloud.refresh_prices().await {
                tracing::warn!("{e}");
            }
        }
        let classes: BTreeSet<(String, i64)> = m
            .nodeclasses
            .iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c.metadata.generation.unwrap_or(0)))
            .collect();
        if now >= self.next_classes || classes != self.seen_classes {
            self.next_classes = now + CLASSES_EVERY;
            self.seen_classes = classes.clone();
            self.cloud.retain_nodeclasses(&classes.iter().map(|(n, _)| n.clone()).collect());
            for nc in &m.nodeclasses {
                let name = nc.metadata.name.clone().unwrap_or_default();
                match self.cloud.resolve_nodeclass(nc).await {
                    Ok(st) if nc.status.as_ref() != Some(&st) => {
                        r.effects.push(Effect::UpdateNodeClassStatus { name, status: Box::new(st) })
                    }
                    Ok(_) => {}
                    Err(e) => r.errors.push(format!("resolving EC2NodeClass {name}: {e}")),
                }
            }
        }
        if now >= self.next_templates {
            self.next_templates = now + TEMPLATES_EVERY;
            match self.cloud.delete_unused_templates().await {
                Ok(names) => r.done.extend(names.into_iter().map(|n| format!("deleted unused launch template {n}"))),
                Err(e) => r.errors.push(format!("deleting unused launch templates: {e}")),
            }
        }

        // Instance profiles of deleted NodeClasses (after the instance list, so profiles in use are known).
        if now >= self.next_profiles && self.cloud.live_provider_ids().is_some() {
            self.next_profiles = now + PROFILES_EVERY;
            let uids: BTreeSet<String> = m.nodeclasses.iter().filter_map(|c| c.metadata.uid.clone()).collect();
            match self.cloud.collect_instance_profiles(&uids, now / 1000).await {
                Ok(names) => r.done.extend(
                    names.into_iter().map(|n| format!("deleted instance profile {n} (its EC2NodeClass is gone)")),
                ),
                Err(e) => r.errors.push(format!("deleting instance profiles of deleted EC2NodeClasses: {e}")),
            }
        }

        r
    }
}

/// The queue's side: each parsed message is handed to the acting loop, and the poll waits for its answer (a loop
/// that is not acting just now leaves the message to come back later).
pub struct Forward {
    pub tx: mpsc::UnboundedSender<Notice>,
    /// The acting loop's wake-up (see [`AwsUpkeep::wake`]).
    pub wake: Arc<tokio::sync::Notify>,
    pub wait: std::time::Duration,
}

impl crate::aws::sqs::AsyncHandler for Forward {
    async fn handle(&mut self, m: &Message) -> Result<(), String> {
        let (answer, result) = oneshot::channel();
        self.tx.send((m.clone(), answer)).map_err(|_| "the controller stopped".to_string())?;
        self.wake.notify_one();
        match tokio::time::timeout(self.wait, result).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("the controller dropped the notice".into()),
            Err(_) => Err("the controller is not acting now".into()),
        }
    }
}

/// Polls the queue until the process ends; each message goes to the acting loop through `tx`.
pub async fn poll_queue(
    queue: crate::aws::sqs::Queue,
    tx: mpsc::UnboundedSender<Notice>,
    wake: Arc<tokio::sync::Notify>,
) {
    loop {
        let forward = Forward { tx: tx.clone(), wake: wake.clone(), wait: std::time::Duration::from_secs(15) };
        match queue.poll(forward).await {
            Ok(report) if report.received > 0 => {
                tracing::info!(queue = %queue.name, handled = report.handled.len(), malformed = report.malformed.len(), retried = report.retried.len(), "interruption messages");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(queue = %queue.name, "polling the interruption queue: {e}");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
        if tx.is_closed() {
            return;
        }
    }
}
