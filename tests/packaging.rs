//! How operators install the controller stays true to the binary: the Helm chart (charts/karpenter-tui), the
//! container image (Dockerfile) and the krew plugin manifest (plugins/karpenter-tui.yaml).
//!
//! The chart is rendered here without a helm binary: its templates are Go templates, run by the `gtmpl` crate with
//! the few Helm/sprig functions they use implemented below (a template calling any other function fails to parse,
//! so the chart cannot quietly grow past what this renderer checks). The rendered manifests are parsed and checked
//! against deploy/ (RBAC rules, CRDs, the Deployment's probes and security context) and against the binary's own
//! command line (every flag the Deployment passes parses as `karpenter-tui controller` arguments). Nothing here uses
//! the network.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::{Parser, ValueEnum};
use gtmpl::{Context, Func, FuncError, Template, Value as G};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karpenter_tui::cli::args::{Cli, CloudArg, Command, ModeArg, PackingArg};
use karpenter_tui::cli::logging::LogFormat;
use karpenter_tui::engine::disruption::gate::Mode;
use serde::Deserialize;
use serde_yaml::{Mapping, Value};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("not YAML ({e}):\n{text}")))
        .filter(|v| !v.is_null())
        .collect()
}

const CHART: &str = "charts/karpenter-tui";

// ---------------------------------------------------------------------------------------------------------------
// A Helm-like renderer: Go templates (gtmpl) and the functions the chart's templates use.

thread_local! {
    /// The chart's helper files (`_*.tpl`), for `include`, which renders a named template into a string.
    static HELPERS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

fn err(msg: impl Into<String>) -> FuncError {
    FuncError::Generic(msg.into())
}

fn args<const N: usize>(name: &str, a: &[G]) -> Result<[G; N], FuncError> {
    <[G; N]>::try_from(a.to_vec()).map_err(|_| FuncError::ExactlyXArgs(name.into(), N))
}

/// Go's `%v` of a scalar, as sprig's functions turn their arguments into strings.
fn strval(v: &G) -> String {
    match v {
        G::NoValue | G::Nil => String::new(),
        other => other.to_string(),
    }
}

fn int(v: &G) -> Result<usize, FuncError> {
    match v {
        G::Number(n) => n.as_u64().map(|n| n as usize).ok_or_else(|| err("expected a non-negative integer")),
        _ => Err(err(format!("expected an integer, got {v}"))),
    }
}

/// sprig's `empty`: what `default` replaces and `required` refuses.
fn empty(v: &G) -> bool {
    match v {
        G::NoValue | G::Nil => true,
        G::Bool(b) => !b,
        G::String(s) => s.is_empty(),
        G::Array(a) => a.is_empty(),
        G::Map(m) | G::Object(m) => m.is_empty(),
        G::Number(n) => n.as_f64() == Some(0.0),
        G::Function(_) => false,
    }
}

fn to_yaml_value(v: &G) -> Value {
    match v {
        G::NoValue | G::Nil | G::Function(_) => Value::Null,
        G::Bool(b) => Value::Bool(*b),
        G::String(s) => Value::String(s.clone()),
        G::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                Value::from(n.as_f64().unwrap_or_default())
            }
        }
        G::Array(a) => Value::Sequence(a.iter().map(to_yaml_value).collect()),
        // Helm's toYaml goes through JSON: keys come out sorted.
        G::Map(m) | G::Object(m) => {
            let sorted: BTreeMap<&String, &G> = m.iter().collect();
            Value::Mapping(sorted.into_iter().map(|(k, v)| (Value::String(k.clone()), to_yaml_value(v))).collect())
        }
    }
}

fn from_yaml_value(v: &Value) -> G {
    match v {
        Value::Null => G::Nil,
        Value::Bool(b) => G::Bool(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                G::from(u)
            } else if let Some(i) = n.as_i64() {
                G::from(i)
            } else {
                G::from(n.as_f64().unwrap_or_default())
            }
        }
        Value::String(s) => G::String(s.clone()),
        Value::Sequence(s) => G::Array(s.iter().map(from_yaml_value).collect()),
        Value::Mapping(m) => G::Map(
            m.iter()
                .map(|(k, v)| (k.as_str().map(String::from).unwrap_or_else(|| yaml_scalar(k)), from_yaml_value(v)))
                .collect(),
        ),
        Value::Tagged(t) => from_yaml_value(&t.value),
    }
}

fn yaml_scalar(v: &Value) -> String {
    serde_yaml::to_string(v).unwrap_or_default().trim_end().to_string()
}

fn f_to_yaml(a: &[G]) -> Result<G, FuncError> {
    let [v] = args("toYaml", a)?;
    let text = serde_yaml::to_string(&to_yaml_value(&v)).map_err(|e| err(e.to_string()))?;
    Ok(G::String(text.trim_end_matches('\n').to_string()))
}

fn indent_by(n: usize, s: &str) -> String {
    let pad = " ".repeat(n);
    format!("{pad}{}", s.replace('\n', &format!("\n{pad}")))
}

fn f_indent(a: &[G]) -> Result<G, FuncError> {
    let [n, s] = args("indent", a)?;
    Ok(G::String(indent_by(int(&n)?, &strval(&s))))
}

fn f_nindent(a: &[G]) -> Result<G, FuncError> {
    let [n, s] = args("nindent", a)?;
    Ok(G::String(format!("\n{}", indent_by(int(&n)?, &strval(&s)))))
}

fn f_quote(a: &[G]) -> Result<G, FuncError> {
    // Go's %q; JSON's escaping agrees with it on everything a chart value holds here.
    let quoted: Vec<String> = a
        .iter()
        .filter(|v| !matches!(v, G::Nil | G::NoValue))
        .map(|v| serde_json::to_string(&strval(v)).expect("a string serialises"))
        .collect();
    Ok(G::String(quoted.join(" ")))
}

fn f_default(a: &[G]) -> Result<G, FuncError> {
    match a {
        [d] => Ok(d.clone()),
        [d, given] => Ok(if empty(given) { d.clone() } else { given.clone() }),
        _ => Err(FuncError::AtLeastXArgs("default".into(), 1)),
    }
}

fn f_required(a: &[G]) -> Result<G, FuncError> {
    let [msg, v] = args("required", a)?;
    if matches!(v, G::Nil | G::NoValue) || matches!(&v, G::String(s) if s.is_empty()) {
        return Err(err(strval(&msg)));
    }
    Ok(v)
}

fn f_trunc(a: &[G]) -> Result<G, FuncError> {
    let [n, s] = args("trunc", a)?;
    Ok(G::String(strval(&s).chars().take(int(&n)?).collect()))
}

fn f_trim_suffix(a: &[G]) -> Result<G, FuncError> {
    let [suffix, s] = args("trimSuffix", a)?;
    let (suffix, s) = (strval(&suffix), strval(&s));
    Ok(G::String(s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string()))
}

fn f_contains(a: &[G]) -> Result<G, FuncError> {
    let [sub, s] = args("contains", a)?;
    Ok(G::Bool(strval(&s).contains(&strval(&sub))))
}

fn f_include(a: &[G]) -> Result<G, FuncError> {
    let [name, dot] = args("include", a)?;
    let mut t = template_set();
    t.name = "include".into();
    t.parse(format!("{{{{ template {:?} . }}}}", strval(&name))).map_err(|e| err(e.to_string()))?;
    t.render(&Context::from(dot)).map(G::String).map_err(|e| err(e.to_string()))
}

const FUNCS: [(&str, Func); 10] = [
    ("toYaml", f_to_yaml),
    ("indent", f_indent),
    ("nindent", f_nindent),
    ("quote", f_quote),
    ("default", f_default),
    ("required", f_required),
    ("trunc", f_trunc),
    ("trimSuffix", f_trim_suffix),
    ("contains", f_contains),
    ("include", f_include),
];

/// A template with the functions and every helper's `define`s.
fn template_set() -> Template {
    let mut t = Template::default();
    t.add_funcs(&FUNCS);
    HELPERS.with(|h| {
        for (name, text) in h.borrow().iter() {
            t.add_template(name.clone(), text.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    });
    t
}

/// Deep-merges `over` into `base`, as `helm install -f` does.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) if existing.is_mapping() && v.is_mapping() => merge(existing, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

struct Release<'a> {
    name: &'a str,
    namespace: &'a str,
}

const RELEASE: Release = Release { name: "karpenter-tui", namespace: "karpenter-tui" };

/// Each template file's output, by file name (`deployment.yaml`, `NOTES.txt`), rendered with values.yaml merged
/// with `overrides` (YAML), or the first error.
fn render_files(release: &Release, overrides: &str) -> Result<BTreeMap<String, String>, String> {
    let dir = repo(&format!("{CHART}/templates"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let name_of = |p: &Path| p.file_name().unwrap().to_string_lossy().to_string();
    let helpers: Vec<(String, String)> = files
        .iter()
        .filter(|p| name_of(p).starts_with('_'))
        .map(|p| (name_of(p), std::fs::read_to_string(p).unwrap()))
        .collect();
    HELPERS.with(|h| *h.borrow_mut() = helpers);

    let mut values: Value = serde_yaml::from_str(&read(&format!("{CHART}/values.yaml"))).unwrap();
    let over: Value = serde_yaml::from_str(overrides).unwrap();
    if !over.is_null() {
        merge(&mut values, &over);
    }
    let chart: Value = serde_yaml::from_str(&read(&format!("{CHART}/Chart.yaml"))).unwrap();
    let mut root = Mapping::new();
    root.insert("Values".into(), values);
    root.insert(
        "Release".into(),
        serde_yaml::from_str(&format!(
            "{{Name: {}, Namespace: {}, Service: Helm, IsInstall: true, IsUpgrade: false}}",
            release.name, release.namespace
        ))
        .unwrap(),
    );
    let mut c = Mapping::new();
    for (helm, file) in [("Name", "name"), ("Version", "version"), ("AppVersion", "appVersion")] {
        c.insert(helm.into(), chart[file].clone());
    }
    root.insert("Chart".into(), Value::Mapping(c));
    let root = from_yaml_value(&Value::Mapping(root));

    let mut out = BTreeMap::new();
    for p in files.iter().filter(|p| !name_of(p).starts_with('_')) {
        let name = name_of(p);
        let mut t = template_set();
        t.name = name.clone();
        t.parse(std::fs::read_to_string(p).unwrap()).map_err(|e| format!("{name}: {e}"))?;
        let text = t.render(&Context::from(root.clone())).map_err(|e| format!("{name}: {e}"))?;
        out.insert(name, text);
    }
    Ok(out)
}

/// The rendered manifests (NOTES.txt aside), as `helm template` prints them.
struct Rendered {
    docs: Vec<Value>,
    notes: String,
}

impl Rendered {
    fn kinds(&self, kind: &str) -> Vec<&Value> {
        self.docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect()
    }

    fn one<T: serde::de::DeserializeOwned>(&self, kind: &str) -> T {
        let found = self.kinds(kind);
        assert_eq!(found.len(), 1, "one {kind} in the chart's output");
        serde_yaml::from_value(found[0].clone()).unwrap_or_else(|e| panic!("{kind}: {e}"))
    }

    fn deployment(&self) -> Deployment {
        self.one("Deployment")
    }

    fn container(&self) -> Container {
        self.deployment().spec.template.spec.unwrap().containers[0].clone()
    }

    fn args(&self) -> Vec<String> {
        self.container().args.unwrap()
    }
}

fn render_as(release: &Release, overrides: &str) -> Rendered {
    let files = render_files(release, overrides).unwrap_or_else(|e| panic!("rendering the chart: {e}"));
    let mut docs = Vec::new();
    for (name, text) in &files {
        if name.ends_with(".yaml") {
            docs.extend(yaml_docs(text));
        }
    }
    Rendered { docs, notes: files.get("NOTES.txt").cloned().unwrap_or_default() }
}

fn render(overrides: &str) -> Rendered {
    render_as(&RELEASE, overrides)
}

// ---------------------------------------------------------------------------------------------------------------
// The binary's side.

/// The Deployment's arguments as the binary parses them: every flag must be one `controller` takes, and the
/// combination must pass the checks it makes before starting (AWS-only flags without `--cloud aws`...).
fn parse_controller(args: &[String]) -> Command {
    let cli = Cli::try_parse_from(std::iter::once("karpenter-tui").chain(args.iter().map(String::as_str)))
        .unwrap_or_else(|e| panic!("the chart's controller arguments {args:?} do not parse:\n{e}"));
    let command = cli.command.expect("a subcommand");
    if let Command::Controller { in_cluster, cloud, live, .. } = &command {
        live.options(Some(*cloud), *in_cluster, Mode::Auto, None)
            .unwrap_or_else(|e| panic!("the controller refuses {args:?}: {e}"));
    } else {
        panic!("not the controller: {command:?}");
    }
    command
}

fn possible_values<T: ValueEnum>() -> BTreeSet<String> {
    T::value_variants().iter().filter_map(|v| v.to_possible_value()).map(|p| p.get_name().to_string()).collect()
}

fn cargo_version() -> String {
    let cargo: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    cargo["package"]["version"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------------------------------
// The chart.

#[test]
fn chart_metadata_follows_the_crate() {
    let chart: Value = serde_yaml::from_str(&read(&format!("{CHART}/Chart.yaml"))).unwrap();
    assert_eq!(chart["apiVersion"].as_str(), Some("v2"));
    assert_eq!(chart["name"].as_str(), Some("karpenter-tui"));
    assert_eq!(chart["type"].as_str(), Some("application"));
    assert_eq!(chart["appVersion"].as_str(), Some(cargo_version().as_str()), "Chart.yaml appVersion = Cargo.toml");
    let version = chart["version"].as_str().expect("a chart version");
    assert_eq!(version.split('.').filter(|p| p.parse::<u64>().is_ok()).count(), 3, "semver: {version}");
}

#[test]
fn default_install_runs_the_controller_as_deploy_controller_yaml_does() {
    let r = render("");
    let kinds: BTreeSet<&str> = r.docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"]),
        "the chart's objects (the namespace is Helm's: --create-namespace)"
    );
    for d in &r.docs {
        let ns = d["metadata"]["namespace"].as_str();
        let cluster_scoped = matches!(d["kind"].as_str(), Some("ClusterRole" | "ClusterRoleBinding"));
        assert_eq!(ns.is_none(), cluster_scoped, "{:?} namespace {ns:?}", d["kind"]);
        if let Some(ns) = ns {
            assert_eq!(ns, RELEASE.namespace);
        }
    }

    let d = r.deployment();
    let want: Deployment = serde_yaml::from_str(&read("deploy/controller.yaml")).unwrap();
    assert_eq!(d.spec.replicas, want.spec.replicas);
    let pod = d.spec.clone().template.spec.unwrap();
    let want_pod = want.spec.template.spec.unwrap();
    assert_eq!(pod.termination_grace_period_seconds, want_pod.termination_grace_period_seconds);
    let c = r.container();
    let w = &want_pod.containers[0];
    assert_eq!(c.liveness_probe, w.liveness_probe, "liveness probe as deploy/controller.yaml");
    assert_eq!(c.readiness_probe, w.readiness_probe, "readiness probe as deploy/controller.yaml");
    assert_eq!(c.security_context, w.security_context, "security context as deploy/controller.yaml");
    assert_eq!(c.resources, w.resources, "resources as deploy/controller.yaml");
    assert_eq!(c.ports, w.ports, "the health port as deploy/controller.yaml");
    assert_eq!(c.image.as_deref(), Some(format!("ghcr.io/OWNER/karpenter-tui:{}", cargo_version()).as_str()));

    // The defaults: kwok, auto, upstream packing, JSON logs, the Lease in the release namespace.
    match parse_controller(&r.args()) {
        Command::Controller { in_cluster, health_addr, cloud, live, log } => {
            assert!(in_cluster);
            assert_eq!(cloud, CloudArg::Kwok);
            assert_eq!(live.election.mode, Some(ModeArg::Auto));
            assert_eq!(live.packing, Some(PackingArg::Upstream));
            assert_eq!(log.log_format, LogFormat::Json);
            assert_eq!(live.election.feature_gates, None, "no gates by default");
            assert_eq!(live.election.lease_namespace, RELEASE.namespace);
            assert_eq!(health_addr.to_string(), "0.0.0.0:8081");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_pod_runs_non_root_with_probes_on_the_health_address() {
    let r = render("");
    let pod = r.deployment().spec.template.spec.unwrap();
    let psc = pod.security_context.expect("a pod security context");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert!(psc.run_as_user.is_some_and(|u| u != 0), "a non-root uid: {:?}", psc.run_as_user);
    let c = r.container();
    let sc = c.security_context.clone().expect("a container security context");
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_string()]));

    let health = match parse_controller(&r.args()) {
        Command::Controller { health_addr, .. } => health_addr.port(),
        other => panic!("{other:?}"),
    };
    let ports = c.ports.clone().unwrap_or_default();
    for (probe, path) in [(&c.liveness_probe, "/healthz"), (&c.readiness_probe, "/readyz")] {
        let get = probe.as_ref().and_then(|p| p.http_get.clone()).expect("an httpGet probe");
        assert_eq!(get.path.as_deref(), Some(path));
        let port = match get.port {
            IntOrString::Int(n) => n,
            IntOrString::String(name) => {
                ports.iter().find(|p| p.name.as_deref() == Some(&name)).expect("the probe's named port").container_port
            }
        };
        assert_eq!(port, i32::from(health), "{path} probes the port --health-addr listens on");
    }
}

#[test]
fn cluster_role_has_exactly_the_rules_of_deploy_rbac_yaml() {
    let rbac = yaml_docs(&read("deploy/rbac.yaml"));
    for overrides in ["", "{serviceAccount: {create: false, name: existing}}"] {
        let r = render(overrides);
        for kind in ["ClusterRole", "Role"] {
            let want: Vec<&Value> =
                rbac.iter().filter(|d| d["kind"].as_str() == Some(kind)).map(|d| &d["rules"]).collect();
            let have: Vec<&Value> = r.kinds(kind).into_iter().map(|d| &d["rules"]).collect();
            assert_eq!(have, want, "{kind} rules: the chart against deploy/rbac.yaml");
        }
        let binding: ClusterRoleBinding = r.one("ClusterRoleBinding");
        let role: ClusterRole = r.one("ClusterRole");
        assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
        let subject = &binding.subjects.unwrap()[0];
        let pod = r.deployment().spec.template.spec.unwrap();
        assert_eq!(subject.kind, "ServiceAccount");
        assert_eq!(Some(&subject.name), pod.service_account_name.as_ref(), "the binding names the pods' account");
        assert_eq!(subject.namespace.as_deref(), Some(RELEASE.namespace));
    }
    // rbac.create=false leaves the rights to the operator.
    let r = render("{rbac: {create: false}}");
    assert!(r.kinds("ClusterRole").is_empty() && r.kinds("ClusterRoleBinding").is_empty());
}

#[test]
fn values_reach_the_controller_flags() {
    let r = render(
        r#"
cloud: aws
mode: dry-run
packing: cost
logFormat: plain
featureGates: {NodeRepair: true, StaticCapacity: false}
aws:
  clusterName: prod
  region: us-west-2
  interruptionQueue: prod-interruptions
  clusterEndpoint: https://ABC.gr7.us-west-2.eks.amazonaws.com
  clusterCABundle: LS0tLS1CRUdJTg==
  serviceCIDR: 172.20.0.0/16
health: {port: 9440}
extraArgs: ["--sync-timeout-secs=60", "--takeover"]
replicas: 3
"#,
    );
    let args = r.args();
    match parse_controller(&args) {
        Command::Controller { in_cluster, health_addr, cloud, live, log } => {
            assert!(in_cluster);
            assert_eq!(cloud, CloudArg::Aws);
            assert_eq!(live.election.mode, Some(ModeArg::DryRun));
            assert_eq!(live.packing, Some(PackingArg::Cost));
            assert_eq!(log.log_format, LogFormat::Plain);
            let gates: BTreeSet<&str> = live.election.feature_gates.as_deref().expect("gates").split(',').collect();
            assert_eq!(gates, BTreeSet::from(["NodeRepair=true", "StaticCapacity=false"]));
            assert_eq!(live.kube.cluster_name.as_deref(), Some("prod"));
            assert_eq!(live.region.as_deref(), Some("us-west-2"));
            assert_eq!(live.aws.interruption_queue.as_deref(), Some("prod-interruptions"));
            assert_eq!(live.aws.cluster_endpoint.as_deref(), Some("https://ABC.gr7.us-west-2.eks.amazonaws.com"));
            assert_eq!(live.aws.cluster_ca_bundle.as_deref(), Some("LS0tLS1CRUdJTg=="));
            assert_eq!(live.aws.service_cidr.as_deref(), Some("172.20.0.0/16"));
            assert_eq!(live.kube.sync_timeout_secs, 60);
            assert!(live.election.takeover);
            assert_eq!(health_addr.port(), 9440);
        }
        other => panic!("{other:?}"),
    }
    let d = r.deployment();
    assert_eq!(d.spec.replicas, Some(3));
    let env = r.container().env.unwrap_or_default();
    assert!(env.iter().any(|e| e.name == "AWS_REGION" && e.value.as_deref() == Some("us-west-2")), "{env:?}");
    let c = r.container();
    assert_eq!(c.ports.unwrap()[0].container_port, 9440);
}

#[test]
fn every_value_the_binary_accepts_renders_and_parses() {
    let schema: serde_json::Value = serde_json::from_str(&read(&format!("{CHART}/values.schema.json"))).unwrap();
    let enum_of = |key: &str| -> BTreeSet<String> {
        schema["properties"][key]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("values.schema.json: {key} has an enum"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    // The schema Helm validates values against names exactly what the binary takes.
    for (key, accepted) in [
        ("cloud", possible_values::<CloudArg>()),
        ("mode", possible_values::<ModeArg>()),
        ("packing", possible_values::<PackingArg>()),
        ("logFormat", possible_values::<LogFormat>()),
    ] {
        assert_eq!(enum_of(key), accepted, "values.schema.json {key} against the controller's flag");
        for value in accepted {
            let r = render(&format!("{{{key}: {value}, aws: {{clusterName: c}}}}"));
            match parse_controller(&r.args()) {
                Command::Controller { cloud, live, log, .. } => {
                    let got = match key {
                        "cloud" => cloud.to_possible_value(),
                        "mode" => live.election.mode.and_then(|m| m.to_possible_value()),
                        "packing" => live.packing.and_then(|p| p.to_possible_value()),
                        _ => log.log_format.to_possible_value(),
                    };
                    assert_eq!(got.map(|p| p.get_name().to_string()), Some(value.clone()), "{key}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

#[test]
fn aws_needs_a_cluster_name_and_kwok_gets_no_aws_flags() {
    let e = render_files(&RELEASE, "{cloud: aws}").expect_err("cloud: aws without a cluster name is refused");
    assert!(e.contains("aws.clusterName is required"), "{e}");
    // AWS settings left in values do not reach a kwok controller (which would refuse them).
    let r = render("{cloud: kwok, aws: {clusterName: c, region: us-west-2, interruptionQueue: q}}");
    assert!(r.args().iter().all(|a| !a.starts_with("--cluster-name") && !a.starts_with("--interruption-queue")));
    assert!(r.container().env.is_none());
    parse_controller(&r.args());
}

#[test]
fn service_account_carries_the_irsa_annotation_or_an_existing_one_is_used() {
    let arn = "arn:aws:iam::123456789012:role/karpenter-tui";
    let r = render(&format!(
        "{{cloud: aws, aws: {{clusterName: prod}}, serviceAccount: {{annotations: {{eks.amazonaws.com/role-arn: \"{arn}\"}}}}}}"
    ));
    let sa: ServiceAccount = r.one("ServiceAccount");
    let annotations = sa.metadata.annotations.expect("annotations");
    assert_eq!(annotations.get("eks.amazonaws.com/role-arn").map(String::as_str), Some(arn));
    let pod = r.deployment().spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name, sa.metadata.name);
    assert!(!r.notes.contains("no ServiceAccount annotation"), "{}", r.notes);

    // Without an annotation on AWS the notes say how to give credentials.
    assert!(render("{cloud: aws, aws: {clusterName: prod}}").notes.contains("eks.amazonaws.com/role-arn"));

    let r = render("{serviceAccount: {create: false, name: existing}}");
    assert!(r.kinds("ServiceAccount").is_empty());
    let pod = r.deployment().spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("existing"));
    let e = render_files(&RELEASE, "{serviceAccount: {create: false}}").expect_err("an existing account needs a name");
    assert!(e.contains("serviceAccount.name is required"), "{e}");
}

#[test]
fn scheduling_values_reach_the_pod_spec() {
    let r = render(
        r#"
nodeSelector: {karpenter.sh/nodepool: system}
tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: karpenter.sh/nodepool, operator: DoesNotExist}]}]}}}
priorityClassName: system-cluster-critical
resources: {requests: {cpu: 250m, memory: 256Mi}}
image: {repository: registry.example.com/karpenter-tui, tag: abc123, pullPolicy: Always}
env: [{name: RUST_BACKTRACE, value: "1"}]
podAnnotations: {team: platform}
"#,
    );
    let pod = r.deployment().spec.template;
    let spec = pod.spec.unwrap();
    assert_eq!(spec.node_selector.unwrap().get("karpenter.sh/nodepool").map(String::as_str), Some("system"));
    assert_eq!(spec.tolerations.unwrap()[0].key.as_deref(), Some("CriticalAddonsOnly"));
    assert!(spec.affinity.and_then(|a| a.node_affinity).is_some());
    assert_eq!(spec.priority_class_name.as_deref(), Some("system-cluster-critical"));
    let c = &spec.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.example.com/karpenter-tui:abc123"));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    let requests = c.resources.clone().unwrap().requests.unwrap();
    assert_eq!(requests["cpu"].0, "250m");
    assert_eq!(c.env.clone().unwrap()[0].name, "RUST_BACKTRACE");
    let annotations = pod.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations.get("team").map(String::as_str), Some("platform"));
    assert_eq!(annotations.get("prometheus.io/scrape").map(String::as_str), Some("true"));
}

#[test]
fn the_service_and_scrape_annotations_point_at_metrics_on_the_health_address() {
    for overrides in ["", "{health: {port: 9440}}"] {
        let r = render(overrides);
        let svc: Service = r.one("Service");
        let spec = svc.spec.clone().unwrap();
        let port = &spec.ports.unwrap()[0];
        let c = r.container();
        let target = match port.target_port.clone().expect("a target port") {
            IntOrString::String(name) => c
                .ports
                .clone()
                .unwrap()
                .into_iter()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("the Service's target port {name} is a container port")),
            other => panic!("a named target port: {other:?}"),
        };
        assert_eq!(target.container_port, port.port, "the Service's port is the container's");
        // /metrics is served on the health address.
        let health = match parse_controller(&r.args()) {
            Command::Controller { health_addr, .. } => health_addr.port(),
            other => panic!("{other:?}"),
        };
        assert_eq!(port.port, i32::from(health), "the Service points at --health-addr's port");
        // The Service selects the controller's pods.
        let template = r.deployment().spec.template.metadata.unwrap();
        let labels = template.labels.unwrap();
        for (k, v) in spec.selector.unwrap() {
            assert_eq!(labels.get(&k), Some(&v), "selector {k}");
        }
        for annotations in [svc.metadata.annotations.clone().unwrap(), template.annotations.unwrap()] {
            assert_eq!(annotations.get("prometheus.io/scrape").map(String::as_str), Some("true"));
            assert_eq!(annotations.get("prometheus.io/path").map(String::as_str), Some("/metrics"));
            assert_eq!(annotations.get("prometheus.io/port"), Some(&health.to_string()));
        }
    }
    let r = render("{metrics: {scrapeAnnotations: false}}");
    let svc: Service = r.one("Service");
    assert!(svc.metadata.annotations.is_none());
    assert!(r.deployment().spec.template.metadata.unwrap().annotations.is_none());
}

#[test]
fn names_follow_the_release() {
    let r = render_as(&Release { name: "ops", namespace: "platform" }, "");
    let d = r.deployment();
    assert_eq!(d.metadata.name.as_deref(), Some("ops-karpenter-tui"));
    assert_eq!(d.metadata.namespace.as_deref(), Some("platform"));
    match parse_controller(&r.args()) {
        Command::Controller { live, .. } => assert_eq!(live.election.lease_namespace, "platform"),
        other => panic!("{other:?}"),
    }
    let binding: ClusterRoleBinding = r.one("ClusterRoleBinding");
    assert_eq!(binding.subjects.unwrap()[0].namespace.as_deref(), Some("platform"));
    assert!(r.notes.contains("-n platform"), "{}", r.notes);
    let r = render("{fullnameOverride: kt}");
    assert_eq!(r.deployment().metadata.name.as_deref(), Some("kt"));
}

#[test]
fn chart_crds_are_deploy_crds() {
    let names = |dir: &str| -> BTreeSet<String> {
        std::fs::read_dir(repo(dir)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect()
    };
    let deploy = names("deploy/crds");
    assert_eq!(names(&format!("{CHART}/crds")), deploy, "the chart's crds/ holds the files of deploy/crds/");
    for f in &deploy {
        let (a, b) =
            (std::fs::read(repo(&format!("deploy/crds/{f}"))), std::fs::read(repo(&format!("{CHART}/crds/{f}"))));
        assert!(
            a.unwrap() == b.unwrap(),
            "{CHART}/crds/{f} differs from deploy/crds/{f} (UPDATE_CRDS=1 cargo test --test integration deploy_manifests rewrites both)"
        );
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The image.

/// The Dockerfile's instructions by stage: (the FROM line, [(INSTRUCTION, rest)]).
fn dockerfile_stages() -> Vec<(String, Vec<(String, String)>)> {
    let text = read("Dockerfile").replace("\\\n", " ");
    let mut stages: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut global = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (op, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let (op, rest) = (op.to_ascii_uppercase(), rest.split_whitespace().collect::<Vec<_>>().join(" "));
        if op == "FROM" {
            stages.push((rest, Vec::new()));
        } else if let Some((_, body)) = stages.last_mut() {
            body.push((op, rest));
        } else {
            global.push((op, rest));
        }
    }
    assert!(global.iter().all(|(op, _)| op == "ARG"), "only ARGs before the first FROM: {global:?}");
    stages
}

#[test]
fn the_image_is_built_locked_and_ships_only_the_binary_as_non_root() {
    let stages = dockerfile_stages();
    assert!(stages.len() >= 2, "a multi-stage build: {stages:?}");
    let (builder_from, builder) = &stages[0];
    let rust_version = {
        let cargo: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
        cargo["package"]["rust-version"].as_str().unwrap().to_string()
    };
    assert!(
        builder_from.starts_with(&format!("rust:{rust_version}")),
        "the builder is the crate's rust-version ({rust_version}): {builder_from}"
    );
    let builder_name = builder_from.split_whitespace().last().unwrap();
    assert!(builder_from.to_ascii_uppercase().contains(" AS "), "the build stage is named: {builder_from}");
    let build = builder.iter().find(|(op, rest)| op == "RUN" && rest.contains("cargo build")).expect("a cargo build");
    for flag in ["--release", "--locked", "--bin karpenter-tui"] {
        assert!(build.1.contains(flag), "cargo build {flag}: {}", build.1);
    }
    // The commit for --version reaches build.rs.
    assert!(builder.iter().any(|(op, rest)| op == "ARG" && rest.starts_with("GIT_COMMIT")));
    assert!(
        builder.iter().any(|(op, rest)| op == "ENV" && rest.replace(' ', "") == "KARPENTER_TUI_GIT_COMMIT=$GIT_COMMIT"),
        "ENV KARPENTER_TUI_GIT_COMMIT=$GIT_COMMIT in the build stage"
    );

    let (final_from, last) = stages.last().unwrap();
    assert!(
        final_from.starts_with("gcr.io/distroless/") || final_from == "scratch",
        "the final image is distroless or static: {final_from}"
    );
    let copies: Vec<&String> = last.iter().filter(|(op, _)| op == "COPY" || op == "ADD").map(|(_, r)| r).collect();
    assert_eq!(copies.len(), 1, "the final stage copies one thing: {copies:?}");
    let parts: Vec<&str> = copies[0].split_whitespace().collect();
    assert_eq!(parts.len(), 3, "COPY --from=STAGE SRC DEST: {:?}", copies[0]);
    assert_eq!(parts[0], format!("--from={builder_name}"));
    assert!(parts[1].ends_with("/karpenter-tui"), "the binary only: {}", parts[1]);
    let binary = parts[2];
    let user = last.iter().rev().find(|(op, _)| op == "USER").map(|(_, r)| r.as_str()).expect("a USER");
    let uid = user.split(':').next().unwrap();
    assert!(uid == "nonroot" || uid.parse::<u32>().is_ok_and(|u| u != 0), "a non-root USER: {user}");
    assert!(uid.parse::<u32>().is_ok(), "a numeric USER, so runAsNonRoot can check it: {user}");
    let exec_form = |op: &str| -> Vec<String> {
        let (_, rest) = last.iter().rev().find(|(o, _)| o == op).unwrap_or_else(|| panic!("an {op}"));
        serde_json::from_str(rest).unwrap_or_else(|e| panic!("{op} in exec form ({e}): {rest}"))
    };
    assert_eq!(exec_form("ENTRYPOINT"), vec![binary.to_string()], "ENTRYPOINT is the binary");
    let cmd = exec_form("CMD");
    assert_eq!(cmd, ["controller", "--in-cluster"]);
    // The default command with a cloud chosen is a controller command line the binary takes.
    let mut line: Vec<String> = cmd.clone();
    line.push("--cloud=kwok".into());
    parse_controller(&line);

    let ignore: BTreeSet<String> = read(".dockerignore")
        .lines()
        .map(|l| l.trim().trim_start_matches('/').trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for dir in ["target", ".venv", ".git"] {
        assert!(ignore.contains(dir), ".dockerignore keeps {dir}/ out of the build context");
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The kubectl plugin.

#[test]
fn the_krew_manifest_installs_the_binary_for_each_platform() {
    let m: Value = serde_yaml::from_str(&read("plugins/karpenter-tui.yaml")).expect("the krew manifest is YAML");
    assert_eq!(m["apiVersion"].as_str(), Some("krew.googlecontainertools.github.com/v1alpha2"));
    assert_eq!(m["kind"].as_str(), Some("Plugin"));
    let name = m["metadata"]["name"].as_str().unwrap();
    assert_eq!(name, "karpenter-tui");
    // krew links the plugin as kubectl-<name, dashes as underscores>: `kubectl karpenter-tui` finds it.
    assert!(read("docs/live-clusters.md").contains(&format!("kubectl-{}", name.replace('-', "_"))));
    let version = format!("v{}", cargo_version());
    assert_eq!(m["spec"]["version"].as_str(), Some(version.as_str()));
    for key in ["shortDescription", "description", "homepage"] {
        assert!(m["spec"][key].as_str().is_some_and(|s| !s.is_empty()), "spec.{key}");
    }
    let mut platforms = BTreeSet::new();
    for p in m["spec"]["platforms"].as_sequence().expect("platforms") {
        let labels = &p["selector"]["matchLabels"];
        let (os, arch) = (labels["os"].as_str().unwrap(), labels["arch"].as_str().unwrap());
        assert!(platforms.insert((os.to_string(), arch.to_string())), "{os}/{arch} once");
        assert_eq!(p["bin"].as_str(), Some("karpenter-tui"), "{os}/{arch} bin");
        let uri = p["uri"].as_str().unwrap();
        assert!(uri.starts_with("https://") && uri.ends_with(".tar.gz"), "{uri}");
        assert!(uri.contains(&format!("/{version}/")) && uri.contains(&format!("-{os}-{arch}.")), "{uri}");
        let sha = p["sha256"].as_str().expect("a sha256");
        assert!(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{sha}");
        let files = p["files"].as_sequence().expect("files");
        assert!(files.iter().any(|f| f["from"].as_str() == Some("karpenter-tui")), "{os}/{arch} unpacks the binary");
    }
    let want: BTreeSet<(String, String)> = ["linux", "darwin"]
        .iter()
        .flat_map(|os| ["amd64", "arm64"].map(|arch| (os.to_string(), arch.to_string())))
        .collect();
    assert_eq!(platforms, want);
}

#[test]
fn the_values_schema_describes_every_value() {
    let schema: serde_json::Value = serde_json::from_str(&read(&format!("{CHART}/values.schema.json"))).unwrap();
    let values: Value = serde_yaml::from_str(&read(&format!("{CHART}/values.yaml"))).unwrap();
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_string()).collect()
    };
    let props = |s: &serde_json::Value| -> BTreeSet<String> {
        s["properties"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
    };
    let top = props(&schema);
    let missing: Vec<String> = keys(&values).difference(&top).cloned().collect();
    assert!(missing.is_empty(), "values.yaml keys the schema does not describe: {missing:?}");
    // Where the schema refuses unknown keys, it names exactly the chart's.
    for key in ["aws", "metrics"] {
        assert_eq!(schema["properties"][key]["additionalProperties"], serde_json::json!(false), "{key}");
        assert_eq!(props(&schema["properties"][key]), keys(&values[key]), "values.schema.json {key}");
    }
}
