//! NodeOverlay writes: its status conditions (the controller's verdict on each overlay) and an operator's edit.
//!
//! A merge patch replaces the conditions list whole, so unlike the other status writes the conditions are merged
//! into the overlay as the API server has it and the patch is guarded by that copy's resourceVersion: a condition
//! type someone else set in between is kept instead of erased.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{Result, Writer};
use crate::engine::api::Condition;
use crate::engine::api::nodeoverlay::{NodeOverlay, NodeOverlayStatus};

/// How many times a NodeOverlay status write reads and patches before it gives up on conflicts: the first try
/// and a retry per 409, each from a fresh read.
pub const OVERLAY_STATUS_ATTEMPTS: usize = 3;

impl Writer {
    /// Sets the conditions of `status` on NodeOverlay `name` through the status subresource. Each is merged by type
    /// into the overlay as just read (other types stay; one whose status didn't change keeps its
    /// `lastTransitionTime`, as `meta.SetStatusCondition` does), and the merge patch carries that read's
    /// resourceVersion. A 409 (someone wrote in between) is retried from a fresh read, up to
    /// [`OVERLAY_STATUS_ATTEMPTS`] in all; then the conflict is returned ([`super::WriteError::is_conflict`]) for the
    /// caller to log and decide again on its next pass. Nothing is sent when the overlay already says all that. A
    /// deleted overlay is [`super::WriteError::is_not_found`].
    pub async fn patch_nodeoverlay_status(&self, name: &str, status: &NodeOverlayStatus) -> Result<()> {
        let what = self.guard(|| format!("update the status of NodeOverlay {name}"))?;
        let api: Api<NodeOverlay> = Api::all(self.client.clone());
        let mut attempt = 1;
        loop {
            let current = api.get(name).await.map_err(|e| super::from_kube(what.clone(), e))?;
            let had = current.status.map(|s| s.conditions).unwrap_or_default();
            let conditions = merge_conditions(&had, &status.conditions);
            if conditions == had {
                return Ok(());
            }
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": NodeOverlayStatus { conditions },
            });
            match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < OVERLAY_STATUS_ATTEMPTS => {
                    tracing::debug!(nodeoverlay = name, attempt, "status write conflicted; retrying from a fresh read");
                    attempt += 1;
                }
                Err(e) => return Err(super::from_kube(what, e)),
            }
        }
    }

    /// Server-side applies an operator's NodeOverlay edit (spec, labels, annotations) as this tool's field manager;
    /// with `dry_run` the API server only validates and defaults it (CRD schema and CEL rules).
    pub async fn apply_nodeoverlay(&self, overlay: &NodeOverlay, dry_run: bool) -> Result<NodeOverlay> {
        self.apply_intent(overlay, dry_run).await
    }
}

/// `had` with each of `new` set by type: replaced in place (its transition time kept while its status is the
/// same), or appended.
pub(super) fn merge_conditions(had: &[Condition], new: &[Condition]) -> Vec<Condition> {
    let mut out = had.to_vec();
    for c in new {
        match out.iter_mut().find(|o| o.type_ == c.type_) {
            Some(o) => {
                let kept = (o.status == c.status).then(|| o.last_transition_time.clone()).flatten();
                *o = c.clone();
                if kept.is_some() {
                    o.last_transition_time = kept;
                }
            }
            None => out.push(c.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, at: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: Some(at.into()),
            reason: Some(reason.into()),
            ..Default::default()
        }
    }

    #[test]
    fn conditions_merge_by_type_and_keep_their_transition_time_while_unchanged() {
        let had = [cond("Ready", "True", "t0", "Ready"), cond("Other", "True", "t0", "Theirs")];
        let same = merge_conditions(&had, &[cond("Ready", "True", "t1", "Ready")]);
        assert_eq!(same, had, "nothing to write");
        let reworded = merge_conditions(&had, &[cond("Ready", "True", "t1", "StillReady")]);
        assert_eq!(reworded[0], cond("Ready", "True", "t0", "StillReady"));
        let flipped = merge_conditions(&had, &[cond("Ready", "False", "t1", "Conflict")]);
        assert_eq!(flipped[0], cond("Ready", "False", "t1", "Conflict"));
        assert_eq!(flipped[1], had[1], "another writer's type stays");
        let added = merge_conditions(&[], &[cond("ValidationSucceeded", "True", "t1", "Valid")]);
        assert_eq!(added, [cond("ValidationSucceeded", "True", "t1", "Valid")]);
    }
}
