//! CapacityBuffer status writes: the resolution (replicas, template reference, strategy) and the
//! `ReadyForProvisioning` and `Provisioning` conditions.
//!
//! As for NodeOverlays, the conditions are merged by type into the buffer as just read and the merge patch carries
//! that read's resourceVersion (upstream patches with an optimistic lock too): a condition another writer set in
//! between is kept, and a 409 is retried from a fresh read.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::overlay_writes::merge_conditions;
use super::{Result, Writer};
use crate::engine::api::capacitybuffer::{CapacityBuffer, CapacityBufferStatus};

/// Reads and patches per status write before a conflict is given back to the caller.
pub const BUFFER_STATUS_ATTEMPTS: usize = 3;

impl Writer {
    /// Sets `status` on CapacityBuffer `namespace/name` through the status subresource: its fields replace the
    /// buffer's, its conditions are merged by type (see the module docs). Nothing is sent when the buffer already
    /// says all that; a deleted buffer is [`super::WriteError::is_not_found`].
    pub async fn patch_capacitybuffer_status(
        &self,
        namespace: &str,
        name: &str,
        status: &CapacityBufferStatus,
    ) -> Result<()> {
        let what = self.guard(|| format!("update the status of CapacityBuffer {namespace}/{name}"))?;
        let api: Api<CapacityBuffer> = Api::namespaced(self.client.clone(), namespace);
        let mut attempt = 1;
        loop {
            let current = api.get(name).await.map_err(|e| super::from_kube(what.clone(), e))?;
            let had = current.status.clone().unwrap_or_default();
            let mut next = status.clone();
            next.conditions = merge_conditions(&had.conditions, &status.conditions);
            if next == had {
                return Ok(());
            }
            // A merge patch leaves out what is absent: a field the status no longer has is sent as null.
            // Strings, numbers and string-keyed maps: serializing cannot fail.
            let mut body = serde_json::to_value(&next).unwrap_or_else(|_| json!({}));
            if let Some(m) = body.as_object_mut() {
                for k in ["podTemplateRef", "podTemplateGeneration", "replicas", "provisioningStrategy"] {
                    m.entry(k).or_insert(serde_json::Value::Null);
                }
            }
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": body,
            });
            match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < BUFFER_STATUS_ATTEMPTS => {
                    tracing::debug!(capacitybuffer = %format!("{namespace}/{name}"), attempt, "status write conflicted; retrying from a fresh read");
                    attempt += 1;
                }
                Err(e) => return Err(super::from_kube(what, e)),
            }
        }
    }
}
