//! User data that joins an instance to the cluster, per AMI family (aws.md §3.4): nodeadm's NodeConfig for AL2023,
//! `bootstrap.sh` for AL2, TOML settings for Bottlerocket, a PowerShell bootstrap for Windows, and the NodeClass's
//! own user data unchanged for Custom. The node registers with the NodeClaim's labels and taints (plus
//! `karpenter.sh/unregistered`, which registration removes) and the max pods the engine planned with.

use std::collections::BTreeMap;

use crate::engine::api::NodeClaim;
use crate::engine::api::ec2nodeclass::KubeletConfiguration;
use crate::engine::catalog::aws::AmiFamily;
use crate::engine::labels;

use super::launch::ClusterInfo;

const BOUNDARY: &str = "//";

pub struct Bootstrap<'a> {
    pub family: AmiFamily,
    pub cluster: &'a ClusterInfo,
    pub claim: &'a NodeClaim,
    pub max_pods: i64,
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// The NodeClass's `userData`.
    pub user: Option<&'a str>,
}

/// Labels the kubelet may set on itself: outside the kubernetes.io and k8s.io domains, or one of the few inside
/// them that the NodeRestriction admission plugin allows. Registration adds the rest from the NodeClaim.
fn kubelet_may_set(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    let restricted =
        |d: &str| d == "kubernetes.io" || d.ends_with(".kubernetes.io") || d == "k8s.io" || d.ends_with(".k8s.io");
    if !restricted(domain) {
        return true;
    }
    domain.ends_with("kubelet.kubernetes.io")
        || domain.ends_with("node.kubernetes.io")
        || [labels::ARCH, labels::OS, labels::INSTANCE_TYPE, labels::ZONE, labels::REGION, labels::HOSTNAME]
            .contains(&key)
}

fn node_labels(claim: &NodeClaim) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = claim
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| kubelet_may_set(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // The taints are registered by the kubelet; the registration sync must not add them again.
    l.insert("karpenter.sh/do-not-sync-taints".into(), "true".into());
    l
}

fn taints(claim: &NodeClaim) -> Vec<String> {
    let mut out: Vec<String> = claim
        .spec
        .taints
        .iter()
        .chain(&claim.spec.startup_taints)
        .map(|t| match &t.value {
            Some(v) if !v.is_empty() => format!("{}={}:{}", t.key, v, t.effect),
            _ => format!("{}:{}", t.key, t.effect),
        })
        .collect();
    out.push(format!("{}:NoExecute", labels::TAINT_UNREGISTERED));
    out
}

fn join(m: &BTreeMap<String, String>) -> String {
    m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn mime(parts: &[(&str, String)]) -> String {
    let mut out = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (content_type, body) in parts {
        out.push_str(&format!("--{BOUNDARY}\nContent-Type: {content_type}\n\n{body}\n"));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

/// The user's own part: a MIME document is merged part by part elsewhere; here it travels as one part of its
/// detected type (a NodeConfig, or a shell script).
fn user_part(user: &str) -> (&'static str, String) {
    if user.contains("kind: NodeConfig") {
        ("application/node.eks.aws", user.to_string())
    } else {
        ("text/x-shellscript; charset=\"us-ascii\"", user.to_string())
    }
}

fn al2023(b: &Bootstrap) -> String {
    let c = b.cluster;
    let mut cfg = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: {}\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: {}\n  kubelet:\n    config:\n      maxPods: {}\n",
        yaml_str(&c.name),
        yaml_str(c.endpoint.as_deref().unwrap_or("")),
        yaml_str(c.ca_bundle.as_deref().unwrap_or("")),
        yaml_str(c.service_cidr.as_deref().unwrap_or("")),
        b.max_pods
    );
    if let Some(k) = b.kubelet {
        if !k.cluster_dns.is_empty() {
            cfg.push_str(&format!(
                "      clusterDNS: [{}]\n",
                k.cluster_dns.iter().map(|d| yaml_str(d)).collect::<Vec<_>>().join(", ")
            ));
        }
        for (field, map) in [
            ("systemReserved", &k.system_reserved),
            ("kubeReserved", &k.kube_reserved),
            ("evictionHard", &k.eviction_hard),
            ("evictionSoft", &k.eviction_soft),
            ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
        ] {
            if !map.is_empty() {
                cfg.push_str(&format!("      {field}:\n"));
                for (key, v) in map {
                    cfg.push_str(&format!("        {}: {}\n", yaml_str(key), yaml_str(v)));
                }
            }
        }
        if let Some(p) = k.pods_per_core {
            cfg.push_str(&format!("      podsPerCore: {p}\n"));
        }
        // v1.15's open kubelet configuration: any other field, as written (JSON is YAML's flow style).
        for (field, v) in &k.other {
            let key = if field.bytes().all(|b| b.is_ascii_alphanumeric()) { field.clone() } else { yaml_str(field) };
            cfg.push_str(&format!("      {key}: {}\n", serde_json::to_string(v).unwrap_or_default()));
        }
    }
    cfg.push_str(&format!(
        "    flags:\n    - {}\n    - {}\n",
        yaml_str(&format!("--node-labels={}", join(&node_labels(b.claim)))),
        yaml_str(&format!("--register-with-taints={}", taints(b.claim).join(",")))
    ));
    let mut parts = Vec::new();
    if let Some(u) = b.user.filter(|u| !u.trim().is_empty()) {
        parts.push(user_part(u));
    }
    parts.push(("application/node.eks.aws", cfg));
    mime(&parts)
}

fn al2(b: &Bootstrap) -> String {
    let c = b.cluster;
    let mut args = format!(
        "--apiserver-endpoint '{}' --b64-cluster-ca '{}' --use-max-pods false",
        c.endpoint.as_deref().unwrap_or(""),
        c.ca_bundle.as_deref().unwrap_or("")
    );
    let mut kubelet = format!(
        "--node-labels={} --register-with-taints={} --max-pods={}",
        join(&node_labels(b.claim)),
        taints(b.claim).join(","),
        b.max_pods
    );
    if let Some(dns) = b.kubelet.and_then(|k| k.cluster_dns.first()) {
        args.push_str(&format!(" --dns-cluster-ip '{dns}'"));
    }
    if let Some(k) = b.kubelet {
        for (flag, map) in [
            ("--system-reserved", &k.system_reserved),
            ("--kube-reserved", &k.kube_reserved),
            ("--eviction-hard", &k.eviction_hard),
        ] {
            if !map.is_empty() {
                let sep = if flag == "--eviction-hard" { "<" } else { "=" };
                let v: Vec<String> = map.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect();
                kubelet.push_str(&format!(" {flag}={}", v.join(",")));
            }
        }
    }
    let script = format!(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n/etc/eks/bootstrap.sh '{}' {args} --kubelet-extra-args '{kubelet}'",
        c.name
    );
    let mut parts = Vec::new();
    if let Some(u) = b.user.filter(|u| !u.trim().is_empty()) {
        parts.push(user_part(u));
    }
    parts.push(("text/x-shellscript; charset=\"us-ascii\"", script));
    mime(&parts)
}

fn bottlerocket(b: &Bootstrap) -> String {
    let c = b.cluster;
    let mut out = String::new();
    if let Some(u) = b.user.filter(|u| !u.trim().is_empty()) {
        out.push_str(u.trim_end());
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "[settings.kubernetes]\ncluster-name = {}\napi-server = {}\ncluster-certificate = {}\nmax-pods = {}\n",
        yaml_str(&c.name),
        yaml_str(c.endpoint.as_deref().unwrap_or("")),
        yaml_str(c.ca_bundle.as_deref().unwrap_or("")),
        b.max_pods
    ));
    if let Some(dns) = b.kubelet.and_then(|k| k.cluster_dns.first()) {
        out.push_str(&format!("cluster-dns-ip = {}\n", yaml_str(dns)));
    }
    out.push_str("\n[settings.kubernetes.node-labels]\n");
    for (k, v) in node_labels(b.claim) {
        out.push_str(&format!("{} = {}\n", yaml_str(&k), yaml_str(&v)));
    }
    out.push_str("\n[settings.kubernetes.node-taints]\n");
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in taints(b.claim) {
        let (key, rest) = t.split_once(':').map_or((t.clone(), String::new()), |(k, e)| (k.to_string(), e.to_string()));
        let (key, value) =
            key.split_once('=').map_or((key.clone(), String::new()), |(k, v)| (k.to_string(), v.to_string()));
        by_key.entry(key).or_default().push(format!("{value}:{rest}"));
    }
    for (k, vs) in by_key {
        out.push_str(&format!(
            "{} = [{}]\n",
            yaml_str(&k),
            vs.iter().map(|v| yaml_str(v)).collect::<Vec<_>>().join(", ")
        ));
    }
    out
}

fn windows(b: &Bootstrap) -> String {
    let c = b.cluster;
    let kubelet = format!(
        "--node-labels=\"{}\" --register-with-taints=\"{}\" --max-pods={}",
        join(&node_labels(b.claim)),
        taints(b.claim).join(","),
        b.max_pods
    );
    let mut out = String::from("<powershell>\n");
    if let Some(u) = b.user.filter(|u| !u.trim().is_empty()) {
        out.push_str(u.trim().trim_start_matches("<powershell>").trim_end_matches("</powershell>").trim());
        out.push('\n');
    }
    out.push_str(&format!(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}' -Base64ClusterCA '{}' -KubeletExtraArgs '{kubelet}'\n</powershell>\n",
        c.name,
        c.endpoint.as_deref().unwrap_or(""),
        c.ca_bundle.as_deref().unwrap_or("")
    ));
    out
}

/// The user data, unencoded.
pub fn render(b: &Bootstrap) -> String {
    match b.family {
        AmiFamily::AL2023 => al2023(b),
        AmiFamily::AL2 => al2(b),
        AmiFamily::Bottlerocket => bottlerocket(b),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => windows(b),
        AmiFamily::Custom => b.user.unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::api::nodeclaim::NodeClaimSpec;
    use k8s_openapi::api::core::v1::Taint;

    fn claim() -> NodeClaim {
        let mut c = NodeClaim::new("default-x", NodeClaimSpec::default());
        c.metadata.labels = Some(
            [
                (labels::NODEPOOL.to_string(), "default".to_string()),
                ("team".to_string(), "web".to_string()),
                ("pool.node.kubernetes.io/kind".to_string(), "web".to_string()),
                ("node-role.kubernetes.io/worker".to_string(), "".to_string()),
                ("kubernetes.io/secret-label".to_string(), "x".to_string()),
            ]
            .into(),
        );
        c.spec.taints = vec![Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }];
        c
    }

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "demo".into(),
            endpoint: Some("https://api.example".into()),
            ca_bundle: Some("Q0E=".into()),
            service_cidr: Some("10.100.0.0/16".into()),
        }
    }

    #[test]
    fn al2023_is_a_nodeconfig_with_labels_taints_and_max_pods() {
        let (c, cl) = (claim(), cluster());
        let k = KubeletConfiguration { cluster_dns: vec!["10.100.0.10".into()], ..Default::default() };
        let b = Bootstrap {
            family: AmiFamily::AL2023,
            cluster: &cl,
            claim: &c,
            max_pods: 29,
            kubelet: Some(&k),
            user: Some("#!/bin/bash\necho hi"),
        };
        let u = render(&b);
        assert!(u.starts_with("MIME-Version: 1.0"));
        assert!(u.contains("kind: NodeConfig") && u.contains("apiServerEndpoint: \"https://api.example\""));
        assert!(
            u.contains("cidr: \"10.100.0.0/16\"")
                && u.contains("maxPods: 29")
                && u.contains("clusterDNS: [\"10.100.0.10\"]")
        );
        assert!(u.contains("karpenter.sh/nodepool=default") && u.contains("team=web"));
        assert!(u.contains("pool.node.kubernetes.io/kind=web"), "node.kubernetes.io subdomains are allowed");
        assert!(!u.contains("node-role"), "node-role labels are not the kubelet's to set");
        assert!(!u.contains("secret-label"), "the kubelet may not set kubernetes.io labels");
        assert!(u.contains("--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute"));
        let user_at = u.find("echo hi").unwrap();
        assert!(user_at < u.find("kind: NodeConfig").unwrap(), "the user's part comes first");
    }

    #[test]
    fn al2023_passes_v115s_other_kubelet_fields_through_as_written() {
        let (c, cl) = (claim(), cluster());
        let k: KubeletConfiguration = serde_json::from_value(serde_json::json!({
            "maxPods": 50,
            "imageMaximumGCAge": "168h",
            "shutdownGracePeriod": "30s",
            "containerLogMaxFiles": 3
        }))
        .unwrap();
        let b = Bootstrap {
            family: AmiFamily::AL2023,
            cluster: &cl,
            claim: &c,
            max_pods: 50,
            kubelet: Some(&k),
            user: None,
        };
        let u = render(&b);
        let config = &u[u.find("    config:").unwrap()..u.find("    flags:").unwrap()];
        for line in
            ["maxPods: 50", "imageMaximumGCAge: \"168h\"", "shutdownGracePeriod: \"30s\"", "containerLogMaxFiles: 3"]
        {
            assert!(config.contains(line), "{line} in\n{config}");
        }
    }

    #[test]
    fn other_families() {
        let (c, cl) = (claim(), cluster());
        let b = |family| Bootstrap {
            family,
            cluster: &cl,
            claim: &c,
            max_pods: 58,
            kubelet: None,
            user: Some("custom data"),
        };
        let al2 = render(&b(AmiFamily::AL2));
        assert!(al2.contains("/etc/eks/bootstrap.sh 'demo'") && al2.contains("--max-pods=58"));
        let br = render(&b(AmiFamily::Bottlerocket));
        assert!(br.contains("[settings.kubernetes]") && br.contains("max-pods = 58"));
        assert!(br.contains("\"dedicated\" = [\"gpu:NoSchedule\"]"));
        assert!(render(&b(AmiFamily::Windows2022)).contains("Start-EKSBootstrap.ps1"));
        assert_eq!(render(&b(AmiFamily::Custom)), "custom data");
    }
}
