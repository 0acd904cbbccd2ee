//! The IAM instance profile an EC2NodeClass with `role` launches with (aws.md §4.1): `<cluster>_<hash>` under
//! `/karpenter/<region>/<cluster>/<nodeclass uid>/`, tagged as this cluster's, holding exactly that role (a changed
//! role is swapped in). A NodeClass naming `instanceProfile` uses it as it is. Profiles whose class is gone are
//! collected (aws.md §6), as upstream's instance-profile garbage collection does.

use aws_sdk_iam::Client;
use aws_sdk_iam::types::Tag;
use thiserror::Error;

use crate::engine::api::EC2NodeClass;

use super::config::AwsError;

/// The profile's name and path for a NodeClass.
pub fn name_and_path(cluster: &str, region: &str, nc: &EC2NodeClass) -> (String, String) {
    let uid = nc.metadata.uid.clone().unwrap_or_else(|| nc.metadata.name.clone().unwrap_or_default());
    let h = super::stable_hash(&[region.as_bytes(), cluster.as_bytes(), uid.as_bytes()]);
    (format!("{cluster}_{h}"), format!("/karpenter/{region}/{cluster}/{uid}/"))
}

/// Why a NodeClass's instance profile could not be made ready.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// IAM has no such role; whatever this call had changed was undone.
    #[error("IAM role {role} (spec.role) was not found{}", undo_note(.undo))]
    RoleNotFound { role: String, undo: Option<String> },
    #[error(transparent)]
    Aws(#[from] AwsError),
}

/// What the undo after a failed AddRoleToInstanceProfile left, if it did not go cleanly.
fn undo_note(undo: &Option<String>) -> String {
    match undo {
        None => String::new(),
        Some(left) => format!("; {left}"),
    }
}

impl ProfileError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ProfileError::Aws(e) if e.is_transient())
    }
}

/// Creates the profile if missing and makes `role` its only role; returns the profile's name.
///
/// When `role` cannot be added (IAM has no such role, or adding it is refused), what this call changed is undone:
/// a profile it created is deleted again, roles it removed are put back. That uses only rights the controller
/// already needs (upstream's controller policy has no `iam:GetRole`, so checking the role first would fail for
/// correctly configured users), and leaves neither an empty profile behind nor running nodes without their role.
pub async fn ensure(
    iam: &Client,
    cluster: &str,
    region: &str,
    nc: &EC2NodeClass,
    role: &str,
) -> Result<String, ProfileError> {
    let (name, path) = name_and_path(cluster, region, nc);
    let existing = match iam.get_instance_profile().instance_profile_name(&name).send().await {
        Ok(out) => out.instance_profile,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_entity_exception()) => None,
        Err(e) => return Err(AwsError::call(format!("GetInstanceProfile {name}"), e).into()),
    };
    let created = existing.is_none();
    let roles: Vec<String> = match existing {
        Some(p) => p.roles.iter().map(|r| r.role_name.clone()).collect(),
        None => {
            let tag = |k: String, v: &str| Tag::builder().key(k).value(v).build();
            let tags = [
                (format!("kubernetes.io/cluster/{cluster}"), "owned"),
                ("eks:eks-cluster-name".to_string(), cluster),
                (crate::engine::labels::NODECLASS_EC2.to_string(), nc.metadata.name.as_deref().unwrap_or("")),
                (crate::engine::labels::REGION.to_string(), region),
            ];
            let mut req = iam.create_instance_profile().instance_profile_name(&name).path(&path);
            for (k, v) in tags {
                req = req.tags(tag(k, v).map_err(|e| AwsError::call("CreateInstanceProfile tag", e))?);
            }
            req.send().await.map_err(|e| AwsError::call(format!("CreateInstanceProfile {name}"), e))?;
            Vec::new()
        }
    };
    if roles.iter().any(|r| r == role) && roles.len() == 1 {
        return Ok(name);
    }
    let mut removed = Vec::new();
    for r in roles.iter().filter(|r| *r != role) {
        iam.remove_role_from_instance_profile()
            .instance_profile_name(&name)
            .role_name(r)
            .send()
            .await
            .map_err(|e| AwsError::call(format!("RemoveRoleFromInstanceProfile {name} {r}"), e))?;
        removed.push(r.clone());
    }
    if !roles.iter().any(|r| r == role)
        && let Err(e) = iam.add_role_to_instance_profile().instance_profile_name(&name).role_name(role).send().await
    {
        let not_found = e.as_service_error().is_some_and(|s| s.is_no_such_entity_exception());
        let failure = AwsError::call(format!("AddRoleToInstanceProfile {name} {role}"), e);
        let undo = undo(iam, &name, created, &removed).await;
        if not_found {
            return Err(ProfileError::RoleNotFound { role: role.to_string(), undo });
        }
        return Err(match undo {
            None => failure.into(),
            Some(left) => {
                AwsError::other(format!("AddRoleToInstanceProfile {name} {role}"), format!("{failure}; {left}")).into()
            }
        });
    }
    Ok(name)
}

/// Takes back what a failed [`ensure`] changed: deletes the profile it created, or puts back the roles it removed.
/// `None` when that went cleanly, else what was left and why (logged, and said in the condition).
async fn undo(iam: &Client, name: &str, created: bool, removed: &[String]) -> Option<String> {
    if created {
        return match iam.delete_instance_profile().instance_profile_name(name).send().await {
            Ok(_) => None,
            Err(e) => {
                let e = AwsError::call(format!("DeleteInstanceProfile {name}"), e);
                tracing::warn!(instance_profile = name, "the empty instance profile could not be deleted: {e}");
                Some(format!("the empty instance profile {name} is left behind ({e})"))
            }
        };
    }
    let mut left = Vec::new();
    for r in removed {
        if let Err(e) = iam.add_role_to_instance_profile().instance_profile_name(name).role_name(r).send().await {
            let e = AwsError::call(format!("AddRoleToInstanceProfile {name} {r}"), e);
            tracing::warn!(instance_profile = name, role = %r, "the previous role could not be put back: {e}");
            left.push(format!("role {r} could not be put back into instance profile {name} ({e})"));
        }
    }
    (!left.is_empty()).then(|| left.join("; "))
}

/// New profiles are never collected within this window (a NodeClass being created may not be cached yet).
pub const PROTECTION_SECS: i64 = 60 * 60;

/// Deletes this cluster's instance profiles whose EC2NodeClass is gone (by the uid in their path), unless younger
/// than an hour or used by a live instance (`in_use`: profile ARNs). Returns the names deleted.
pub async fn collect(
    iam: &Client,
    cluster: &str,
    region: &str,
    class_uids: &std::collections::BTreeSet<String>,
    in_use: &std::collections::BTreeSet<String>,
    now_secs: i64,
) -> Result<Vec<String>, AwsError> {
    let prefix = format!("/karpenter/{region}/{cluster}/");
    let mut pages = iam.list_instance_profiles().path_prefix(&prefix).into_paginator().send();
    let mut stale = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::call("ListInstanceProfiles", e))?;
        for p in page.instance_profiles() {
            let uid = p.path().trim_start_matches(&prefix).trim_end_matches('/');
            let young = now_secs - p.create_date().secs() < PROTECTION_SECS;
            if uid.is_empty() || class_uids.contains(uid) || young || in_use.contains(p.arn()) {
                continue;
            }
            stale.push((
                p.instance_profile_name().to_string(),
                p.roles().iter().map(|r| r.role_name.clone()).collect::<Vec<_>>(),
            ));
        }
    }
    let mut deleted = Vec::new();
    for (name, roles) in stale {
        for r in roles {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(&r)
                .send()
                .await
                .map_err(|e| AwsError::call(format!("RemoveRoleFromInstanceProfile {name} {r}"), e))?;
        }
        match iam.delete_instance_profile().instance_profile_name(&name).send().await {
            Ok(_) => deleted.push(name),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_entity_exception()) => {}
            Err(e) => return Err(AwsError::call(format!("DeleteInstanceProfile {name}"), e)),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::EC2NodeClassSpec;

    #[test]
    fn names_are_stable_per_class_and_cluster() {
        let mut nc = EC2NodeClass::new("default", EC2NodeClassSpec::default());
        nc.metadata.uid = Some("u-1".into());
        let (n, p) = name_and_path("demo", "us-east-1", &nc);
        assert!(n.starts_with("demo_"));
        assert_eq!(p, "/karpenter/us-east-1/demo/u-1/");
        assert_eq!(name_and_path("demo", "us-east-1", &nc).0, n);
        nc.metadata.uid = Some("u-2".into());
        assert_ne!(name_and_path("demo", "us-east-1", &nc).0, n);
    }
}
