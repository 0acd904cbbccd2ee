//! Connecting like kubectl does: `--kubeconfig`, else `KUBECONFIG` (a list of files, merged), else
//! `~/.kube/config`; `--context`, else the current context; in-cluster config for `controller` mode. The context and
//! the cluster name travel with the client because the header shows them and EC2 tags carry the cluster name.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};
use thiserror::Error;

#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Overrides the name derived from the context's cluster.
    pub cluster_name: Option<String>,
    /// Use the pod's service account (the `controller` running in the cluster).
    pub in_cluster: bool,
}

/// A client and what it points at.
#[derive(Clone)]
pub struct Connection {
    pub client: Client,
    /// The kubeconfig context (or `in-cluster`).
    pub context: String,
    pub cluster_name: String,
    pub server: String,
    /// The cluster's CA bundle as base64 of its PEM (what node bootstrap wants), when the config names one.
    pub ca_bundle: Option<String>,
}

/// The client settings every connection uses. kube-rs's default retry repeats 429, 503 and 504 for minutes; the
/// engine is level-triggered (a failed write is decided again on the next tick, watches back off on their own),
/// and a 429 from the Eviction API is an answer (a PodDisruptionBudget says not now), not a hiccup.
pub fn client_config(mut config: Config) -> Config {
    config.default_retry = false;
    config
}

/// DER certificates as base64 of a PEM bundle.
pub fn ca_bundle_of(certs: &[Vec<u8>]) -> Option<String> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    if certs.is_empty() {
        return None;
    }
    let mut pem = String::new();
    for der in certs {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = b64.encode(der);
        for chunk in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(chunk));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Some(b64.encode(pem))
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("context", &self.context)
            .field("cluster_name", &self.cluster_name)
            .field("server", &self.server)
            .finish()
    }
}

#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("reading kubeconfig: {0}")]
    Kubeconfig(#[source] KubeconfigError),
    #[error("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config")]
    NoKubeconfig,
    #[error("context {context:?} is not in the kubeconfig (it has: {})", available.join(", "))]
    UnknownContext { context: String, available: Vec<String> },
    #[error("the kubeconfig has no current context; pass --context (it has: {})", available.join(", "))]
    NoContext { available: Vec<String> },
    #[error("in-cluster configuration: {0}")]
    InCluster(#[source] kube::config::InClusterError),
    #[error("building the client for {server}: {source}")]
    Client {
        server: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads the kubeconfig the way kubectl would.
pub fn read_kubeconfig(path: Option<&PathBuf>) -> Result<Kubeconfig, ConnectError> {
    match path {
        Some(p) => Kubeconfig::read_from(p).map_err(ConnectError::Kubeconfig),
        None => match Kubeconfig::from_env().map_err(ConnectError::Kubeconfig)? {
            Some(k) => Ok(k),
            None => {
                let home = std::env::var_os("HOME").map(PathBuf::from).ok_or(ConnectError::NoKubeconfig)?;
                let p = home.join(".kube").join("config");
                if !p.exists() {
                    return Err(ConnectError::NoKubeconfig);
                }
                Kubeconfig::read_from(p).map_err(ConnectError::Kubeconfig)
            }
        },
    }
}

/// The context to use and the name of its cluster entry.
pub fn pick_context(kc: &Kubeconfig, wanted: Option<&str>) -> Result<(String, String), ConnectError> {
    let available: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    let name = match wanted.or(kc.current_context.as_deref()) {
        Some(n) => n.to_string(),
        None => return Err(ConnectError::NoContext { available }),
    };
    let ctx = kc.contexts.iter().find(|c| c.name == name);
    match ctx {
        Some(c) => Ok((name, c.context.as_ref().map(|c| c.cluster.clone()).unwrap_or_default())),
        None => Err(ConnectError::UnknownContext { context: name, available }),
    }
}

/// The cluster's short name from a kubeconfig cluster entry: EKS writes ARNs
/// (`arn:aws:eks:us-east-1:111122223333:cluster/prod`), eksctl writes `prod.us-east-1.eksctl.io`.
pub fn cluster_name_from(entry: &str) -> String {
    if entry.starts_with("arn:")
        && let Some((_, name)) = entry.rsplit_once(":cluster/")
    {
        return name.to_string();
    }
    if let Some((name, _region)) = entry.strip_suffix(".eksctl.io").and_then(|rest| rest.split_once('.')) {
        return name.to_string();
    }
    entry.to_string()
}

pub async fn connect(opts: &ConnectOptions) -> Result<Connection, ConnectError> {
    let (config, context, entry) = if opts.in_cluster {
        let config = Config::incluster().map_err(ConnectError::InCluster)?;
        (config, "in-cluster".to_string(), String::new())
    } else {
        let kc = read_kubeconfig(opts.kubeconfig.as_ref())?;
        let (context, entry) = pick_context(&kc, opts.context.as_deref())?;
        let options = KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
        let config = Config::from_custom_kubeconfig(kc, &options).await.map_err(ConnectError::Kubeconfig)?;
        (config, context, entry)
    };
    let server = config.cluster_url.to_string();
    let ca_bundle = config.root_cert.as_deref().and_then(ca_bundle_of);
    let config = client_config(config);
    let cluster_name = opts.cluster_name.clone().unwrap_or_else(|| {
        let n = cluster_name_from(&entry);
        if n.is_empty() { context.clone() } else { n }
    });
    let client = Client::try_from(config).map_err(|source| ConnectError::Client { server: server.clone(), source })?;
    Ok(Connection { client, context, cluster_name, server, ca_bundle })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_come_out_of_eks_and_eksctl_entries() {
        assert_eq!(cluster_name_from("arn:aws:eks:us-east-1:111122223333:cluster/prod"), "prod");
        assert_eq!(cluster_name_from("prod-blue.eu-west-1.eksctl.io"), "prod-blue");
        assert_eq!(cluster_name_from("kind-dev"), "kind-dev");
    }

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: b
clusters:
- name: arn:aws:eks:us-east-1:111122223333:cluster/prod
  cluster: {server: "https://prod.example:443"}
- name: dev
  cluster: {server: "http://127.0.0.1:6443"}
contexts:
- name: a
  context: {cluster: "arn:aws:eks:us-east-1:111122223333:cluster/prod", user: u}
- name: b
  context: {cluster: dev, user: u}
users:
- name: u
  user: {token: t}
"#;

    #[test]
    fn the_context_is_the_flag_else_the_current_one_and_unknown_ones_are_named() {
        let kc: Kubeconfig = serde_yaml::from_str(KUBECONFIG).unwrap();
        assert_eq!(pick_context(&kc, None).unwrap(), ("b".to_string(), "dev".to_string()));
        assert_eq!(pick_context(&kc, Some("a")).unwrap().1, "arn:aws:eks:us-east-1:111122223333:cluster/prod");
        let e = pick_context(&kc, Some("c")).unwrap_err().to_string();
        assert!(e.contains("\"c\"") && e.contains("a, b"), "{e}");
    }

    #[tokio::test]
    async fn connecting_names_the_context_cluster_and_server() {
        let dir = std::env::temp_dir().join(format!("ktui-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let c = connect(&ConnectOptions {
            kubeconfig: Some(path.clone()),
            context: Some("a".into()),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!((c.context.as_str(), c.cluster_name.as_str()), ("a", "prod"));
        assert!(c.server.starts_with("https://prod.example"), "{}", c.server);
        let c = connect(&ConnectOptions {
            kubeconfig: Some(path),
            cluster_name: Some("override".into()),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!((c.context.as_str(), c.cluster_name.as_str()), ("b", "override"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
