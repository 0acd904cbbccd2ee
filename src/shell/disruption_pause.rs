//! The operator's pause of voluntary disruption, when upstream Karpenter acts on the cluster. (When this tool's own
//! controller acts, it holds every command itself: `controller::Hold`.) Upstream has no such switch, so the pause is
//! what operators do by hand: a budget of `nodes: "0"` on every NodePool. The budgets it replaced are kept in an
//! annotation on the NodePool, so resuming restores exactly them, whoever resumes and however long after, and
//! anyone reading the cluster sees that and when it was paused.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::api::NodePool;
use crate::engine::provisioning::Millis;

/// On a paused NodePool: when, by whom, and the `spec.disruption.budgets` the pause replaced (JSON).
pub const ANNOTATION: &str = "karpenter-tui.sh/paused-budgets";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    /// RFC 3339.
    pub since: String,
    pub by: String,
    /// The budgets as they were, restored on resume.
    pub budgets: Value,
}

/// The annotation of a paused NodePool; `Err` names the NodePool and what is wrong when it is there but unreadable
/// (someone edited it), so resuming refuses that pool rather than guess its budgets.
pub fn saved(pool: &NodePool) -> Option<Result<Saved, String>> {
    let raw = pool.metadata.annotations.as_ref()?.get(ANNOTATION)?;
    Some(serde_json::from_str(raw).map_err(|e| {
        format!(
            "NodePool {}: annotation {ANNOTATION} is not what a pause wrote ({e}); its budgets were left as they are",
            pool.name()
        )
    }))
}

/// The merge patch that pauses `pool`, or `None` when it is already paused. `resourceVersion` makes it a
/// conditional write: if another writer changed the NodePool since it was read, the API server answers 409 and
/// nothing is changed, rather than saving budgets that are no longer the pool's.
pub fn pause_patch(pool: &NodePool, since: &str, by: &str) -> Option<Value> {
    if saved(pool).is_some() {
        return None;
    }
    let budgets = serde_json::to_value(&pool.spec.disruption.budgets).unwrap_or(Value::Null);
    let saved = Saved { since: since.to_string(), by: by.to_string(), budgets };
    let annotation = serde_json::to_string(&saved).unwrap_or_default();
    Some(json!({
        "metadata": {
            "resourceVersion": pool.metadata.resource_version,
            "annotations": {ANNOTATION: annotation},
        },
        "spec": {"disruption": {"budgets": [{"nodes": "0"}]}},
    }))
}

/// The merge patch that restores `pool`'s budgets and removes the annotation: `Ok(None)` when it is not paused.
pub fn resume_patch(pool: &NodePool) -> Result<Option<Value>, String> {
    let Some(saved) = saved(pool).transpose()? else { return Ok(None) };
    Ok(Some(json!({
        "metadata": {
            "resourceVersion": pool.metadata.resource_version,
            "annotations": {ANNOTATION: null},
        },
        "spec": {"disruption": {"budgets": saved.budgets}},
    })))
}

/// Pauses or resumes every NodePool of `pools` through `writer`, one conditional merge patch each. Pools already in
/// the wanted state are skipped, so after a partial failure (another writer changed a pool: 409) running it again
/// finishes the job without touching what was done. The outcome says how many were changed and why any was not.
pub async fn apply(
    writer: &crate::kube::writer::Writer,
    pools: &[NodePool],
    pause: bool,
    since: &str,
    by: &str,
) -> Result<String, String> {
    let (verb, past) = if pause { ("pause", "paused") } else { ("resume", "resumed") };
    let mut changed = 0;
    let mut failed = Vec::new();
    let mut unchanged = 0;
    for pool in pools {
        let patch = if pause { Ok(pause_patch(pool, since, by)) } else { resume_patch(pool) };
        let patch = match patch {
            Ok(Some(p)) => p,
            Ok(None) => {
                unchanged += 1;
                continue;
            }
            Err(why) => {
                failed.push(why);
                continue;
            }
        };
        match writer
            .patch_nodepool(pool.name(), &patch, &format!("{verb} voluntary disruption of NodePool {}", pool.name()))
            .await
        {
            Ok(()) => {
                tracing::info!(
                    nodepool = pool.name(),
                    by,
                    "voluntary disruption {past} through the NodePool's budgets"
                );
                changed += 1;
            }
            Err(e) => {
                tracing::warn!(nodepool = pool.name(), error = %e, "could not {verb} voluntary disruption");
                failed.push(format!("NodePool {}: {e}", pool.name()));
            }
        }
    }
    let done = format!(
        "voluntary disruption {past} on {changed} NodePool(s) through their budgets{}",
        if unchanged > 0 { format!(" ({unchanged} already {past})") } else { String::new() }
    );
    if failed.is_empty() {
        Ok(done)
    } else {
        Err(format!("{done}; not {past}: {} (run it again to finish)", failed.join("; ")))
    }
}

/// Whether the cluster's NodePools are paused this way: the earliest pause, who made it, and how many of the pools
/// it holds.
pub fn status(pools: &[&NodePool]) -> Option<crate::protocol::view::PauseRow> {
    let paused: Vec<Saved> = pools.iter().filter_map(|p| saved(p)).filter_map(Result::ok).collect();
    let first = paused.iter().min_by(|a, b| a.since.cmp(&b.since))?;
    let since = chrono::DateTime::parse_from_rfc3339(&first.since).map(|t| t.timestamp_millis() as Millis).ok();
    Some(crate::protocol::view::PauseRow {
        since,
        by: first.by.clone(),
        how: format!("budgets nodes: 0 on {} of {} NodePools", paused.len(), pools.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(yaml: &str) -> NodePool {
        serde_yaml::from_str(yaml).expect("a NodePool")
    }

    const WITH_BUDGETS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default, resourceVersion: "41"}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "20%"
        reasons: [Empty, Drifted]
      - nodes: "0"
        schedule: "@daily"
        duration: 10m
"#;

    /// Applies a merge patch as the API server would (RFC 7386), for the round trip.
    fn merged(pool: &NodePool, patch: &Value) -> NodePool {
        let mut doc = serde_json::to_value(pool).unwrap();
        json_patch::merge(&mut doc, patch);
        serde_json::from_value(doc).unwrap()
    }

    #[test]
    fn pausing_then_resuming_restores_exactly_the_budgets_there_were() {
        let before = pool(WITH_BUDGETS);
        let patch = pause_patch(&before, "2026-11-29T06:00:00Z", "alice").expect("not paused yet");
        assert_eq!(patch["metadata"]["resourceVersion"], "41", "a conditional write");
        let paused = merged(&before, &patch);
        assert_eq!(paused.spec.disruption.budgets.len(), 1);
        assert_eq!(paused.spec.disruption.budgets[0].nodes, "0");
        assert!(paused.spec.disruption.budgets[0].reasons.is_none(), "every reason is held");
        assert!(pause_patch(&paused, "2026-11-29T07:00:00Z", "bob").is_none(), "pausing twice keeps the first save");
        let row = status(&[&paused, &before]).expect("paused");
        assert_eq!(row.by, "alice");
        assert_eq!(row.how, "budgets nodes: 0 on 1 of 2 NodePools");
        let resumed = merged(&paused, &resume_patch(&paused).unwrap().expect("paused"));
        assert_eq!(resumed.spec.disruption.budgets, before.spec.disruption.budgets);
        assert!(!resumed.metadata.annotations.unwrap_or_default().contains_key(ANNOTATION));
        assert_eq!(resume_patch(&before), Ok(None), "a pool that was not paused is left alone");
    }

    #[test]
    fn an_unreadable_annotation_is_refused_not_guessed() {
        let mut p = pool(WITH_BUDGETS);
        p.metadata.annotations = Some([(ANNOTATION.to_string(), "{not json".to_string())].into());
        let err = resume_patch(&p).expect_err("refused");
        assert!(err.contains("NodePool default") && err.contains(ANNOTATION), "{err}");
        assert!(status(&[&p]).is_none());
    }
}
