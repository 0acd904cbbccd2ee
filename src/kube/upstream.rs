//! Is an upstream Karpenter controller running in this cluster? If so this tool observes (dry-run) by default so
//! the two never fight over the same NodeClaims. Upstream holds a Lease named `karpenter-leader-election` in the
//! namespace it runs in (the Helm chart's usual choices are `kube-system` and `karpenter`); its Deployment carries
//! `app.kubernetes.io/name=karpenter`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

pub const UPSTREAM_LEASE: &str = "karpenter-leader-election";
const NAMESPACES: [&str; 2] = ["kube-system", "karpenter"];

/// Why we think upstream Karpenter is active, or `None`.
pub fn lease_says_active(lease: &Lease, now: Timestamp) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0.as_second();
    // Twice the duration: a leader between renewals with a little clock skew is still a leader.
    let fresh = renewed + 2 * i64::from(spec.lease_duration_seconds.unwrap_or(15)) >= now.as_second();
    fresh.then(|| {
        format!(
            "upstream Karpenter holds lease {}/{} ({holder})",
            lease.metadata.namespace.as_deref().unwrap_or("?"),
            UPSTREAM_LEASE
        )
    })
}

/// Looks for an active upstream controller. Lookups we aren't allowed to make count as "no evidence".
pub async fn detect(client: &kube::Client) -> Option<String> {
    let now = Timestamp::now();
    for ns in NAMESPACES {
        let api: Api<Lease> = Api::namespaced(client.clone(), ns);
        if let Ok(Some(lease)) = api.get_opt(UPSTREAM_LEASE).await
            && let Some(why) = lease_says_active(&lease, now)
        {
            return Some(why);
        }
    }
    let api: Api<Deployment> = Api::all(client.clone());
    if let Ok(list) = api.list(&ListParams::default().labels("app.kubernetes.io/name=karpenter")).await {
        for d in list.items {
            let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
            if ready > 0 {
                return Some(format!(
                    "upstream Karpenter Deployment {}/{} has {ready} ready replica(s)",
                    d.metadata.namespace.as_deref().unwrap_or("?"),
                    d.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    #[test]
    fn only_a_held_and_recently_renewed_lease_counts() {
        let now = Timestamp::from_second(1_700_000_100).unwrap();
        let lease = |holder: Option<&str>, renewed: i64| Lease {
            metadata: ObjectMeta { namespace: Some("kube-system".into()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
                ..Default::default()
            }),
        };
        let why = lease_says_active(&lease(Some("karpenter-abc"), 1_700_000_090), now).unwrap();
        assert!(why.contains("kube-system/karpenter-leader-election") && why.contains("karpenter-abc"), "{why}");
        assert_eq!(lease_says_active(&lease(Some("karpenter-abc"), 1_700_000_000), now), None, "stale");
        assert_eq!(lease_says_active(&lease(None, 1_700_000_090), now), None, "released");
    }
}
