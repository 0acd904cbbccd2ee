//! The binary's logs where a pod's log collector or `2>file` reads them: no colour escapes, and with
//! `--log-format json` one JSON object per line. And `plan --cloud aws`, which logs while it discovers, planning
//! with what the AWS API (moto) says instead of the embedded table. And a dashboard whose `--metrics-addr` is taken.

use crate::moto;

use std::process::{Command, Output, Stdio};

/// A kubeconfig whose API server refuses connections: the controller logs its start, connects, and fails fast.
fn refused_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    path
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ktui-cli-logs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

fn controller(format: &str) -> (Output, String) {
    let dir = temp_dir(format);
    let kubeconfig = refused_kubeconfig(&dir);
    let out = run(
        &["controller", "--cloud", "kwok", "--kubeconfig", kubeconfig.to_str().unwrap(), "--log-format", format],
        &[],
    );
    let stderr = String::from_utf8(out.stderr.clone()).expect("utf-8 logs");
    (out, stderr)
}

#[test]
fn controller_logs_to_a_pipe_carry_no_colour() {
    let (out, stderr) = controller("plain");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("INFO") && stderr.contains("controller starting"), "{stderr}");
    assert!(stderr.contains("ERROR") && stderr.contains("127.0.0.1:1"), "the failure is logged: {stderr}");
    assert!(!stderr.contains("\x1b["), "ANSI escapes in piped logs: {stderr:?}");
}

#[test]
fn controller_json_logs_are_one_object_per_line_failure_included() {
    let (out, stderr) = controller("json");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<serde_json::Value> =
        stderr.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    assert!(lines.len() >= 3, "start, progress, failure: {stderr}");
    assert_eq!(lines[0]["fields"]["message"], "controller starting");
    assert!(lines.iter().any(|l| l["fields"]["message"].as_str().is_some_and(|m| m.starts_with("connecting to"))));
    let last = lines.last().unwrap();
    assert_eq!(last["level"], "ERROR");
    assert_eq!(last["fields"]["message"], "controller stopped");
    assert!(last["fields"]["error"].as_str().is_some_and(|e| e.contains("127.0.0.1:1")), "{last}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

#[test]
fn plan_with_the_aws_cloud_uses_what_the_aws_api_says() {
    let moto = moto::Moto::start();
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/inflate.yaml");
    let env = [
        ("AWS_ENDPOINT_URL", moto.url.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ];
    let cheapest = |out: &Output| -> Vec<f64> {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("\x1b["), "{stderr:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON plan");
        let claims = v["newNodeClaims"].as_array().expect("newNodeClaims").clone();
        assert!(!claims.is_empty(), "{v}");
        claims.iter().map(|c| c["cheapestPricePerHour"].as_f64().expect("a price")).collect()
    };
    let live = run(&["plan", "--file", manifests, "--cloud", "aws", "-o", "json"], &env);
    let embedded = run(&["plan", "--file", manifests, "-o", "json"], &env);
    // moto has no Pricing API: the warning says the embedded on-demand table stood in, on stderr, and the spot
    // prices are moto's own, not the embedded table's simulated ones.
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert!(stderr.contains("WARN") && stderr.contains("prices:"), "{stderr}");
    assert_ne!(cheapest(&live), cheapest(&embedded), "--cloud aws priced from the AWS API");
}

/// `--metrics-addr` on an address someone else holds: the dashboard says so and stops before connecting or taking
/// the terminal.
#[test]
fn a_taken_metrics_address_ends_the_dashboard_before_it_starts() {
    let dir = temp_dir("metrics-addr");
    let kubeconfig = refused_kubeconfig(&dir);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let state = dir.join("state");
    let out = run(
        &["--cloud", "kwok", "--kubeconfig", kubeconfig.to_str().unwrap(), "--metrics-addr", &addr],
        &[("KARPENTER_TUI_CONFIG_DIR", dir.to_str().unwrap()), ("KARPENTER_TUI_STATE_DIR", state.to_str().unwrap())],
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("listening for metrics on {addr} (--metrics-addr)")), "{stderr}");
    assert!(!stderr.contains("connecting to"), "nothing else was tried first: {stderr}");
}
