//! What the engine may do, asked of the API server at start (SelfSubjectAccessReview per verb and resource), so
//! missing rights give a clear list and a read-only start instead of failures halfway through a disruption.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use super::kinds::Kind;

/// One right the engine uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: Option<&'static str>,
    /// Whether the engine can't even watch without it (as opposed to acting).
    pub read: bool,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let res = match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.clone(),
        };
        if self.group.is_empty() {
            write!(f, "{} {res}", self.verb)
        } else {
            write!(f, "{} {res}.{}", self.verb, self.group)
        }
    }
}

fn need(verb: &'static str, group: &str, resource: &str, subresource: Option<&'static str>, read: bool) -> Need {
    Need { verb, group: group.into(), resource: resource.into(), subresource, read }
}

/// Every right the engine uses, reads first: what the install's ClusterRole grants.
pub fn needs() -> Vec<Need> {
    needs_for(true)
}

/// The rights the engine uses with default topology spread configured or not (without it, the kinds only it reads
/// are not watched, so a user without rights on Services is not thereby read-only).
pub fn needs_for(default_spread: bool) -> Vec<Need> {
    let mut out = Vec::new();
    for k in Kind::ALL.into_iter().filter(|k| default_spread || !k.for_default_spread()) {
        let ar = k.api_resource();
        for verb in ["list", "watch"] {
            out.push(need(verb, &ar.group, &ar.plural, None, !k.optional()));
        }
    }
    let k = "karpenter.sh";
    out.extend([
        need("create", k, "nodeclaims", None, false),
        need("patch", k, "nodeclaims", None, false),
        need("delete", k, "nodeclaims", None, false),
        need("patch", k, "nodeclaims", Some("status"), false),
        need("patch", k, "nodepools", None, false),
        need("patch", k, "nodepools", Some("status"), false),
        // NodeOverlay status conditions are merged into a fresh read; edits are server-side applied.
        need("get", k, "nodeoverlays", None, false),
        need("patch", k, "nodeoverlays", None, false),
        need("patch", k, "nodeoverlays", Some("status"), false),
        // CapacityBuffer status (resolution and the Provisioning condition), merged into a fresh read.
        need("get", "autoscaling.x-k8s.io", "capacitybuffers", None, false),
        need("patch", "autoscaling.x-k8s.io", "capacitybuffers", Some("status"), false),
        need("patch", "", "nodes", None, false),
        need("delete", "", "nodes", None, false),
        need("create", "", "pods", Some("eviction"), false),
        need("delete", "", "pods", None, false),
        // Cost packing nominates pending pods to the Nodes of the claims sized for them.
        need("patch", "", "pods", Some("status"), false),
        need("create", "", "events", None, false),
        need("get", "coordination.k8s.io", "leases", None, false),
        need("create", "coordination.k8s.io", "leases", None, false),
        need("update", "coordination.k8s.io", "leases", None, false),
    ]);
    out
}

/// The answer for every need.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub denied: Vec<(Need, String)>,
}

impl Access {
    /// Watching is possible.
    pub fn can_read(&self) -> bool {
        !self.denied.iter().any(|(n, _)| n.read)
    }

    /// Every write is allowed: the engine may act.
    pub fn can_write(&self) -> bool {
        self.denied.iter().all(|(n, _)| n.read)
    }

    /// "missing rights: create nodeclaims.karpenter.sh, create pods/eviction" for the header and logs.
    pub fn summary(&self) -> Option<String> {
        if self.denied.is_empty() {
            return None;
        }
        let list: Vec<String> = self.denied.iter().map(|(n, _)| n.to_string()).collect();
        Some(format!("missing rights: {}", list.join(", ")))
    }
}

/// Asks about every need ([`needs_for`]). A failing review (the API itself unreachable) is an error; a denial is an
/// answer.
pub async fn check(client: &kube::Client, default_spread: bool) -> Result<Access, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut access = Access::default();
    for n in needs_for(default_spread) {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(n.verb.into()),
                    group: Some(n.group.clone()),
                    resource: Some(n.resource.clone()),
                    subresource: n.subresource.map(Into::into),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = api.create(&PostParams::default(), &review).await?;
        let status = answer.status.unwrap_or_default();
        if !status.allowed {
            let why = status.reason.filter(|r| !r.is_empty()).unwrap_or_else(|| "denied".into());
            access.denied.push((n, why));
        }
    }
    Ok(access)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_cover_watching_every_kind_and_each_write() {
        let all: Vec<String> = needs().iter().map(|n| n.to_string()).collect();
        assert!(all.contains(&"watch pods".to_string()));
        assert!(all.contains(&"list ec2nodeclasses.karpenter.k8s.aws".to_string()));
        assert!(all.contains(&"create pods/eviction".to_string()));
        assert!(all.contains(&"patch pods/status".to_string()));
        assert!(all.contains(&"patch nodeclaims/status.karpenter.sh".to_string()));
        assert!(all.contains(&"watch nodeoverlays.karpenter.sh".to_string()));
        assert!(all.contains(&"patch nodeoverlays/status.karpenter.sh".to_string()));
        let access = Access { denied: vec![(need("create", "", "pods", Some("eviction"), false), "no".into())] };
        assert!(access.can_read() && !access.can_write());
        assert_eq!(access.summary().unwrap(), "missing rights: create pods/eviction");
        let access = Access { denied: vec![(need("list", "", "pods", None, true), "no".into())] };
        assert!(!access.can_read());
    }
}
