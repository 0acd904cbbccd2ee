//! The one executor of the controller's effects, for every backend: writes go through the cluster port
//! ([`ClusterPort`]: the kube-rs writer, or the simulated cluster) and instances through the cloud port. Effects run in order,
//! one at a time; a failed one is reported and the rest still run (none is unsafe without the ones before it; the
//! next run decides again from what the cluster then says). Conflicts (409) happen when another writer got there first: reported as such, not as errors. What is
//! logged, shown and backed off is the caller's choice (the live loop's `shell::acting`, the simulated world).

use crate::engine::lifecycle::{self, LaunchError, LifecycleAction, apply_launch, launch_failed};
use crate::engine::provisioning::Millis;

use crate::controller::cloud::{CloudProvider, LaunchFailure, Launched, Retry};
use crate::controller::cluster_port::{ClusterPort, Eviction, NodeWrite, WriteError};
use crate::controller::{Effect, Outcome};

/// What one batch of effects did.
#[derive(Debug, Default)]
pub struct Report {
    pub outcomes: Vec<Outcome>,
    /// One line per failure worth an operator's attention (conflicts excluded).
    pub errors: Vec<String>,
    /// One line per effect done, for the events pane.
    pub done: Vec<String>,
    /// Every effect that failed, conflicts included, for the caller to back off.
    pub failed: Vec<Failed>,
    /// The object keys ([`Effect::object_key`]) of the effects that went through.
    pub succeeded: Vec<String>,
}

impl Report {
    /// Adds what `other` did after what this one did.
    pub fn absorb(&mut self, other: Report) {
        self.outcomes.extend(other.outcomes);
        self.errors.extend(other.errors);
        self.done.extend(other.done);
        self.failed.extend(other.failed);
        self.succeeded.extend(other.succeeded);
    }
}

/// An effect that failed.
#[derive(Debug, Clone)]
pub struct Failed {
    pub key: String,
    /// What it was (`update the status of NodePool default`).
    pub effect: String,
    pub message: String,
    /// Another writer changed the object first: planned again from the fresh object, not backed off.
    pub conflict: bool,
    /// Its place in the batch given to [`execute`].
    pub index: usize,
}

/// The launches of a batch, already made, by claim name.
type Launches = std::collections::BTreeMap<String, Result<Launched, LaunchFailure>>;

/// Why one effect was not carried out: a write refused, or the cloud not answering.
#[derive(Debug)]
struct Failure {
    message: String,
    conflict: bool,
}

impl From<WriteError> for Failure {
    fn from(e: WriteError) -> Failure {
        Failure { conflict: e.is_conflict(), message: e.to_string() }
    }
}

impl From<Retry> for Failure {
    fn from(r: Retry) -> Failure {
        Failure { message: r.message, conflict: r.conflict }
    }
}

pub async fn execute(
    effects: Vec<Effect>,
    writer: &mut dyn ClusterPort,
    cloud: &mut dyn CloudProvider,
    now: Millis,
) -> Report {
    let mut report = Report::default();
    // Every launch of this batch first, so the cloud can batch them (AWS: claims with the same request share one
    // CreateFleet).
    let mut launches = Launches::new();
    let claims: Vec<crate::engine::api::NodeClaim> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Launch { claim } => Some((**claim).clone()),
            _ => None,
        })
        .collect();
    if !claims.is_empty() {
        for (c, r) in claims.iter().zip(cloud.create(&claims, now).await) {
            launches.insert(c.name().to_string(), r);
        }
    }
    for (index, e) in effects.into_iter().enumerate() {
        let what = e.describe();
        let key = e.object_key();
        match run_one(e, &mut *writer, cloud, now, &mut report.outcomes, &mut launches).await {
            Ok(note) => {
                report.done.push(note.unwrap_or(what));
                report.succeeded.push(key);
            }
            // A conflict means someone else changed the object since the cache read it: nothing was written, and
            // the next tick plans again from the fresh object (nothing that depends on this write was written in
            // this tick).
            Err(Failure { message, conflict }) => {
                report.failed.push(Failed { key, effect: what, message, conflict, index });
            }
        }
    }
    report
}

async fn run_one(
    e: Effect,
    writer: &mut dyn ClusterPort,
    cloud: &mut dyn CloudProvider,
    now: Millis,
    outcomes: &mut Vec<Outcome>,
    launches: &mut Launches,
) -> Result<Option<String>, Failure> {
    match e {
        Effect::Launch { claim } => {
            let name = claim.name().to_string();
            let launched = launches
                .remove(claim.name())
                .unwrap_or_else(|| Err(LaunchFailure::Cloud(LaunchError::Other("not launched".into()))));
            match launched {
                Ok(Launched { result, annotations }) => {
                    let mut launched = (*claim).clone();
                    apply_launch(&mut launched, &result, now);
                    let labels = launched.metadata.labels.clone().unwrap_or_default();
                    writer.patch_nodeclaim_metadata(&name, &labels, &annotations, &[], None).await?;
                    if let Some(status) = &launched.status {
                        writer.update_nodeclaim_status(&name, status).await?;
                    }
                    outcomes.push(Outcome::Launched { claim: name.clone() });
                    Ok(Some(format!("launched NodeClaim {name} as {} in {}", result.instance_type, result.zone)))
                }
                Err(LaunchFailure::Cloud(err)) => {
                    launch_error(&claim, &err, &mut *writer, now).await?;
                    outcomes.extend(Outcome::of_launch_error(&claim, &err));
                    Ok(Some(format!("launch of NodeClaim {name} failed: {err}")))
                }
                // A write the launch needed failed: nothing is recorded, and the next tick launches again.
                Err(LaunchFailure::Retry(r)) => Err(r.into()),
            }
        }
        Effect::DeleteInstance { provider_id } => Ok(cloud.delete(&provider_id, now).await?),
        Effect::RebootInstance { claim, provider_id, op_id } => match cloud.reboot(&provider_id, &op_id, now).await {
            Ok(()) => {
                let line = format!("rebooting the instance of NodeClaim {claim}");
                outcomes.push(Outcome::Rebooted { claim });
                Ok(Some(line))
            }
            // Not retried: the reboot fails and the node is replaced, as upstream's `provider_error`.
            Err(r) => {
                let line = format!("reboot of NodeClaim {claim} refused by the cloud: {}", r.message);
                outcomes.push(Outcome::RebootRefused { claim, message: r.message });
                Ok(Some(line))
            }
        },
        other => Ok(write_one(other, writer, outcomes).await?),
    }
}

/// An effect that is a write through the cluster port.
async fn write_one(
    e: Effect,
    writer: &mut dyn ClusterPort,
    outcomes: &mut Vec<Outcome>,
) -> Result<Option<String>, WriteError> {
    match e {
        Effect::CreateNodeClaim { claim, purpose } => match writer.create_nodeclaim(&claim).await {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                outcomes.push(Outcome::Created { name: name.clone(), purpose });
                Ok(Some(format!("created NodeClaim {name}")))
            }
            Err(err) => {
                outcomes.push(Outcome::CreateFailed { purpose, error: err.to_string() });
                Err(err)
            }
        },
        Effect::PatchClaimStatus { name, status } => {
            writer.update_nodeclaim_status(&name, &status).await.map(|()| None)
        }
        Effect::PatchClaimMetadata { name, labels, annotations, remove_annotations, finalizers } => writer
            .patch_nodeclaim_metadata(&name, &labels, &annotations, &remove_annotations, finalizers.as_deref())
            .await
            .map(|()| None),
        Effect::SyncNode { name, resource_version, labels, annotations, taints, finalizers } => writer
            .sync_node(NodeWrite {
                name: &name,
                resource_version: resource_version.as_deref(),
                labels: &labels,
                annotations: &annotations,
                taints: taints.as_deref(),
                finalizers: finalizers.as_deref(),
            })
            .await
            .map(|()| None),
        Effect::Relabel { target, name, set, remove } => {
            writer.relabel(target, &name, &set, &remove).await.map(|()| None)
        }
        Effect::Nominate { namespace, name, uid, node } => {
            writer.nominate_pod(&namespace, &name, uid.as_deref(), &node).await.map(|()| None)
        }
        Effect::PatchNodePoolStatus { name, status } => {
            writer.update_nodepool_status(&name, &status).await.map(|()| None)
        }
        Effect::PatchNodeOverlayStatus { name, status } => {
            writer.patch_nodeoverlay_status(&name, &status).await.map(|()| None)
        }
        Effect::PatchCapacityBufferStatus { namespace, name, status } => {
            writer.patch_capacitybuffer_status(&namespace, &name, &status).await.map(|()| None)
        }
        Effect::DeleteNodeClaim { name, .. } => writer.delete_nodeclaim(&name).await.map(|()| None),
        Effect::FinalizeNodeClaim { claim } => writer
            .remove_nodeclaim_finalizer(&claim, crate::engine::labels::TERMINATION_FINALIZER)
            .await
            .map(|()| Some(format!("NodeClaim {} finalized", claim.name()))),
        Effect::DeleteNode { name } => writer.delete_node(&name).await.map(|()| None),
        Effect::Launch { .. } | Effect::DeleteInstance { .. } | Effect::RebootInstance { .. } => Ok(None),
        Effect::Evict { namespace, name } => match writer.evict(&namespace, &name).await? {
            Eviction::Evicted => Ok(Some(format!("evicted pod {namespace}/{name}"))),
            Eviction::Blocked(why) => Ok(Some(format!("eviction of {namespace}/{name} blocked: {why}"))),
            Eviction::Gone => Ok(None),
        },
        Effect::Event { regarding, warning, reason, message } => {
            writer.event(*regarding, warning, &reason, &message).await.map(|()| None)
        }
        Effect::UpdateNodeClassStatus { name, status } => writer
            .update_ec2nodeclass_status(&name, &status)
            .await
            .map(|()| Some(format!("EC2NodeClass {name} resolved"))),
        Effect::DeletePod { namespace, name, grace_seconds } => {
            writer.delete_pod(&namespace, &name, grace_seconds).await.map(|()| None)
        }
    }
}

/// A failed launch: the engine's rule decides (insufficient capacity deletes the claim so the pods are
/// re-provisioned elsewhere; anything else is recorded on the claim and retried).
async fn launch_error(
    claim: &crate::engine::api::NodeClaim,
    err: &LaunchError,
    writer: &mut dyn ClusterPort,
    now: Millis,
) -> Result<(), WriteError> {
    let mut updated = claim.clone();
    let mut status_changed = false;
    for a in launch_failed(err, now) {
        match a {
            LifecycleAction::Delete { .. } => writer.delete_nodeclaim(claim.name()).await?,
            other => status_changed |= lifecycle::apply(&mut updated, &other, now),
        }
    }
    if status_changed && let Some(status) = &updated.status {
        writer.update_nodeclaim_status(claim.name(), status).await?;
    }
    Ok(())
}
