//! Is an upstream Karpenter controller running in this cluster? If so this tool observes (dry-run) by default so
//! the two never fight over the same NodeClaims. Upstream holds a Lease named `karpenter-leader-election` in the
//! namespace it runs in (the Helm chart's usual choices are `kube-system` and `karpenter`); its Deployment carries
//! `app.kubernetes.io/name=karpenter`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use crate::engine::version::{KarpenterVersion, release_of_image};

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

/// What the cluster says of upstream Karpenter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upstream {
    /// Why we think it is active, or `None`.
    pub active: Option<String>,
    /// The release its Deployment runs, active or not.
    pub version: Option<DetectedVersion>,
}

/// Looks for upstream Karpenter: whether it is active (a held Lease, else a Deployment with ready replicas) and
/// which release it runs. Lookups we aren't allowed to make count as "no evidence".
pub async fn look(client: &kube::Client) -> Upstream {
    let now = Timestamp::now();
    let mut active = None;
    for ns in NAMESPACES {
        let api: Api<Lease> = Api::namespaced(client.clone(), ns);
        if let Ok(Some(lease)) = api.get_opt(UPSTREAM_LEASE).await
            && let Some(why) = lease_says_active(&lease, now)
        {
            active = Some(why);
            break;
        }
    }
    let deployments = karpenter_deployments(client).await.unwrap_or_default();
    let active = active.or_else(|| {
        deployments.iter().find_map(|d| {
            let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
            (ready > 0).then(|| {
                format!(
                    "upstream Karpenter Deployment {}/{} has {ready} ready replica(s)",
                    d.metadata.namespace.as_deref().unwrap_or("?"),
                    d.metadata.name.as_deref().unwrap_or("?")
                )
            })
        })
    });
    Upstream { active, version: deployments.iter().find_map(version_of) }
}

/// Whether an upstream controller is active, and why (see [`look`]).
pub async fn detect(client: &kube::Client) -> Option<String> {
    look(client).await.active
}

/// Upstream Karpenter's Deployments (by its chart's label), by namespace and name; `None` when the list fails.
async fn karpenter_deployments(client: &kube::Client) -> Option<Vec<Deployment>> {
    let api: Api<Deployment> = Api::all(client.clone());
    let list = api.list(&ListParams::default().labels("app.kubernetes.io/name=karpenter")).await.ok()?;
    let mut items = list.items;
    items.sort_by(|a, b| {
        (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
            .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
    });
    Some(items)
}

/// The Karpenter release a cluster runs, as its Deployment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectedVersion {
    /// The modelled version whose decisions that release makes.
    pub version: KarpenterVersion,
    /// As the image tag (or label) has it: `1.15.1`.
    pub release: String,
    /// `namespace/name` of the Deployment.
    pub deployment: String,
}

/// The release an upstream Karpenter Deployment runs: its controller container's image tag (the Helm chart's
/// container is `controller`), else the chart's `app.kubernetes.io/version` label. `None` when neither names a v1
/// release.
pub fn version_of(d: &Deployment) -> Option<DetectedVersion> {
    let containers = d.spec.template.spec.as_ref().map(|s| &s.containers[..]).unwrap_or(&[]);
    let image_release = || {
        let named = containers.iter().find(|c| c.name == "controller");
        named
            .into_iter()
            .chain(containers.iter().filter(|c| c.image.as_deref().is_some_and(|i| i.contains("karpenter/controller"))))
            .find_map(|c| c.image.as_deref().and_then(release_of_image))
    };
    let label = || {
        let labels = d.metadata.labels.as_ref()?;
        let v = labels.get("app.kubernetes.io/version")?;
        KarpenterVersion::of_release(v).map(|_| v.as_str())
    };
    let release = image_release().or_else(label)?;
    Some(DetectedVersion {
        version: KarpenterVersion::of_release(release)?,
        release: release.trim_start_matches('v').to_string(),
        deployment: format!(
            "{}/{}",
            d.metadata.namespace.as_deref().unwrap_or("?"),
            d.metadata.name.as_deref().unwrap_or("?")
        ),
    })
}

/// The version of the upstream Karpenter installed in the cluster, from its Deployment (running or not: scaled to
/// zero it still says which CRDs and decisions the cluster was set up for). The first by namespace and name when
/// there are several; `None` when there is none, none names a release, or the list is not allowed.
pub async fn detect_version(client: &kube::Client) -> Option<DetectedVersion> {
    karpenter_deployments(client).await?.iter().find_map(version_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    /// The Deployment upstream's Helm chart (v1.15.1) renders, trimmed to what identifies it.
    fn chart_deployment(image: &str) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "karpenter", "namespace": "kube-system", "labels": {
                "helm.sh/chart": "karpenter-1.15.1", "app.kubernetes.io/name": "karpenter",
                "app.kubernetes.io/instance": "karpenter", "app.kubernetes.io/version": "1.15.1",
                "app.kubernetes.io/managed-by": "Helm"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app.kubernetes.io/name": "karpenter"}},
                "template": {"metadata": {"labels": {"app.kubernetes.io/name": "karpenter"}},
                    "spec": {"serviceAccountName": "karpenter", "containers": [{
                        "name": "controller", "image": image,
                        "env": [{"name": "FEATURE_GATES", "value": "NodeRepair=false"}],
                        "ports": [{"name": "http-metrics", "containerPort": 8080}]}]}}}
        }))
        .expect("a Deployment")
    }

    #[test]
    fn the_controller_image_tag_names_the_release() {
        let d = chart_deployment("public.ecr.aws/karpenter/controller:1.14.3@sha256:5d4c0e2a");
        let v = version_of(&d).expect("detected");
        assert_eq!((v.version, v.release.as_str()), (KarpenterVersion::V1_14, "1.14.3"));
        assert_eq!(v.deployment, "kube-system/karpenter");
        // A digest-only image (a mirrored registry): the chart's version label says it.
        let d = chart_deployment("registry.internal/karpenter/controller@sha256:5d4c0e2a");
        assert_eq!(version_of(&d).map(|v| (v.version, v.release)), Some((KarpenterVersion::V1_15, "1.15.1".into())));
        let mut d = chart_deployment("registry.internal/karpenter/controller:latest");
        d.metadata.labels = None;
        assert_eq!(version_of(&d), None, "nothing names a release");
    }

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
