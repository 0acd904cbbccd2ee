//! A small in-process fake Kubernetes API server for the kube adapter's tests (hyper 1, HTTP/1.1 on 127.0.0.1).
//!
//! It records every request and answers from an object store with enough API-server semantics for the adapter:
//! create (generateName, 409 on an existing name, `dryRun=All`), get, replace (resourceVersion checked), merge,
//! JSON and apply patches (a merge patch carrying a stale `metadata.resourceVersion` is a 409, a failing JSON patch
//! `test` a 422), the status subresource (only `status` changes), delete (finalizers → `deletionTimestamp`),
//! `pods/eviction`, SelfSubjectAccessReviews answered from a deny list, list (paged with `limit` and `continue`),
//! and watch from a resourceVersion with the events since then replayed. Watches are ended with a `410 Gone` ERROR
//! event by [`FakeApi::expire_watches`], as an API server does after compaction. Any request can be answered by a scripted status instead
//! ([`FakeApi::script`]); a collection can be made unknown (404, a CRD not installed) with [`FakeApi::missing`].
//!
//! It is as strict as a real API server about what it stores: every create, update, patch and status write of a
//! Karpenter kind (and CapacityBuffers) is pruned, defaulted and validated against upstream's CRDs as published
//! ([`strict`]: the structural schema, list-map keys and the `x-kubernetes-validations` CEL rules), and refused with
//! 422 `Invalid` and the field path a real server names; objects seeded with [`FakeApi::put`] must pass too. Events
//! keep the limits a real server enforces on what the tool writes (a message of at most 1,024 bytes when
//! `eventTime` is set). The CRDs are read at test time from `../shared/data/crds` beside the repository (or
//! `KARPENTER_TUI_CRDS`); without them the tests fail, naming where they looked.

#![allow(dead_code)]

pub mod strict;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    /// The body parsed as JSON (YAML for apply patches); `Null` when empty.
    pub body: Value,
}

impl Recorded {
    pub fn q(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    pub fn is_watch(&self) -> bool {
        self.q("watch") == Some("true")
    }
}

/// A canned answer for requests matching a method and a path.
struct Script {
    method: String,
    path: String,
    watch: bool,
    code: u16,
    body: Value,
    times: Option<usize>,
}

/// Where a request points: `/api/v1/namespaces/ns/pods/name/eviction` → collection `api/v1/pods`, ...
#[derive(Debug, Clone)]
struct Target {
    collection: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (format!("api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [r] => (r, None, None),
        [r, n] => (r, Some(n.to_string()), None),
        [r, n, s] => (r, Some(n.to_string()), Some(s.to_string())),
        _ => return None,
    };
    Some(Target { collection: format!("{prefix}/{resource}"), namespace, name, sub })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(q: Option<&str>) -> BTreeMap<String, String> {
    q.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A watch event as it went out, kept so a watch from an older resourceVersion can be replayed.
struct Logged {
    rv: u64,
    collection: String,
    namespace: Option<String>,
    line: Bytes,
}

struct Watcher {
    collection: String,
    namespace: Option<String>,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// (collection, namespace or "", name).
type Key = (String, String, String);

fn key(collection: &str, namespace: Option<&str>, name: &str) -> Key {
    (collection.to_string(), namespace.unwrap_or_default().to_string(), name.to_string())
}

#[derive(Default)]
struct State {
    requests: Vec<Recorded>,
    objects: BTreeMap<Key, Value>,
    rv: u64,
    log: Vec<Logged>,
    /// Watches from a resourceVersion at or below this get 410 Gone.
    compacted: u64,
    watchers: Vec<Watcher>,
    scripts: Vec<Script>,
    missing: BTreeSet<String>,
    /// SelfSubjectAccessReviews denied: (verb, resource, subresource).
    denied: Vec<(String, String, Option<String>)>,
    generated: u64,
    /// Collections where another writer (a kubelet's heartbeat) updates an object right after every write of ours.
    interfere: BTreeSet<String>,
    /// How many writes were refused with 409 for a stale resourceVersion.
    conflicts: usize,
    /// Every stored version of every object, in order: (resourceVersion, collection, object).
    history: Vec<(u64, String, Value)>,
    /// Objects as last encoded for a list, with the resourceVersion encoded: a real API server's watch cache keeps
    /// objects serialised too, so a list costs about the bytes it sends.
    encoded: HashMap<Key, (String, Arc<str>)>,
}

/// Where upstream's CRDs are: `KARPENTER_TUI_CRDS`, or `../shared/data/crds` beside the repository. Without them the
/// tests fail, naming where they looked: the strict server is never quietly lax.
pub fn crds_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let candidates: Vec<String> = std::env::var("KARPENTER_TUI_CRDS")
            .ok()
            .into_iter()
            .chain([concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/crds").to_string()])
            .chain(["/work/shared/data/crds".to_string()])
            .collect();
        match candidates.iter().find(|d| std::path::Path::new(d).join("karpenter.sh_nodepools.yaml").is_file()) {
            Some(d) => std::path::PathBuf::from(d),
            None => panic!(
                "upstream's CRDs (karpenter.sh_nodepools.yaml, ...) not found; the strict fake API server validates \
                 against them. Looked in: {}. Set KARPENTER_TUI_CRDS to their directory.",
                candidates.join(", ")
            ),
        }
    })
}

/// Upstream's CRDs, loaded once per test binary.
pub fn crds() -> &'static strict::Crds {
    static CRDS: std::sync::OnceLock<strict::Crds> = std::sync::OnceLock::new();
    CRDS.get_or_init(|| strict::Crds::load_dir(crds_dir()))
}

/// What a real API server does to a write of a custom resource before storing it, for the kinds whose CRD is
/// known: the object to store, or the body of the 422 to answer.
fn admit(collection: &str, obj: Value, write: &strict::Write) -> Result<Value, Value> {
    let parts: Vec<&str> = collection.split('/').collect();
    let ["apis", group, version, plural] = parts.as_slice() else { return Ok(obj) };
    let Some(schema) = crds().schema_for(group, version, plural) else { return Ok(obj) };
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    schema.admit(obj, write).map_err(|errors| strict::invalid_status(&schema.kind, group, &name, &errors))
}

/// An object a test stores as if another client had written it: admitted as a real server would have (spec and
/// metadata as a create, then `status` as a status write). A seed a real server would refuse is a broken test.
fn seed(collection: &str, obj: Value) -> Value {
    let what = format!("{} {}", collection, obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""));
    let refused =
        |body: Value| -> ! { panic!("the fake API server refuses the seeded {what} as a real one would: {body}") };
    let status = obj.get("status").cloned();
    let mut stored = admit(collection, obj, &strict::Write::Create).unwrap_or_else(|r| refused(r));
    if let Some(status) = status.filter(|s| !s.is_null()) {
        let mut with_status = stored.clone();
        with_status["status"] = status;
        stored = admit(collection, with_status, &strict::Write::Status { old: stored }).unwrap_or_else(|r| refused(r));
    }
    stored
}

/// The limits a real API server puts on an Event the tool creates (core/v1 `ValidateEventCreate` with `eventTime`
/// set): a message of at most 1,024 bytes, `reportingController` and `reportingInstance` set, an `action`.
fn admit_event(obj: &Value) -> Result<(), Value> {
    if obj.pointer("/eventTime").is_none_or(Value::is_null) {
        return Ok(());
    }
    let mut causes = Vec::new();
    let len = |p: &str| obj.pointer(p).and_then(Value::as_str).map_or(0, str::len);
    if len("/message") > 1024 {
        causes.push(("message", "Invalid value: \"\": can have at most 1024 characters".to_string()));
    }
    for (field, p) in [("reportingController", "/reportingComponent"), ("reportingInstance", "/reportingInstance")] {
        if len(p) == 0 {
            causes.push((field, "Required value".to_string()));
        }
    }
    if len("/action") == 0 {
        causes.push(("action", "Required value".to_string()));
    } else if len("/action") > 128 {
        causes.push(("action", "Invalid value: \"\": can have at most 128 characters".to_string()));
    }
    if causes.is_empty() {
        return Ok(());
    }
    let message = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join(", ");
    let mut body = status(422, "Invalid", &format!("Event is invalid: {message}"));
    body["details"] = json!({"kind": "Event", "causes": causes.iter().map(|(f, m)| json!({"field": f, "message": m})).collect::<Vec<_>>()});
    Err(body)
}

pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn reply(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed_unsync())
        .unwrap()
}

fn not_found(t: &Target) -> Response<Body> {
    let what = t.name.clone().unwrap_or_else(|| t.collection.clone());
    reply(404, &status(404, "NotFound", &format!("{} \"{what}\" not found", t.collection)))
}

fn matches_selector(obj: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else { return true };
    sel.split(',').all(|term| match term.split_once('=') {
        Some((k, v)) => obj.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v),
        None => obj.pointer("/metadata/labels").and_then(|l| l.get(term)).is_some(),
    })
}

impl State {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Stores an object under a new resourceVersion and tells the watchers.
    fn store(&mut self, collection: &str, mut obj: Value, event: &str) -> Value {
        let rv = self.bump();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from);
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let key = key(collection, ns.as_deref(), &name);
        if event == "DELETED" {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, obj.clone());
        }
        self.history.push((rv, collection.to_string(), obj.clone()));
        let line = Bytes::from(format!("{}\n", json!({"type": event, "object": obj})));
        self.log.push(Logged { rv, collection: collection.into(), namespace: ns.clone(), line: line.clone() });
        self.watchers.retain(|w| {
            if w.collection != collection || (w.namespace.is_some() && w.namespace != ns) {
                return true;
            }
            w.tx.send(line.clone()).is_ok()
        });
        obj
    }

    fn take_script(&mut self, r: &Recorded) -> Option<(u16, Value)> {
        let i =
            self.scripts.iter().position(|s| s.method == r.method && s.path == r.path && s.watch == r.is_watch())?;
        let s = &mut self.scripts[i];
        let answer = (s.code, s.body.clone());
        if let Some(n) = s.times.as_mut() {
            *n -= 1;
            if *n == 0 {
                self.scripts.remove(i);
            }
        }
        Some(answer)
    }
}

/// The fake API server; dropping it stops serving.
pub struct FakeApi {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApi {
    pub async fn start() -> FakeApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, Infallible>(handle(&st, req).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
                });
            }
        });
        FakeApi { addr, state, task }
    }

    /// The live backend over the watches `w` of this server, observing read-only with the fake catalog and counting
    /// its wakes in `wakes`, and the sender of its role (kept open or dropped by the caller).
    pub fn observing_driver(
        &self,
        w: &karpenter_tui::kube::watch::Watches,
        wakes: Arc<std::sync::atomic::AtomicU64>,
    ) -> (tokio::sync::watch::Sender<karpenter_tui::kube::leader::Role>, karpenter_tui::shell::live_driver::LiveDriver)
    {
        use karpenter_tui::protocol::view::Leadership;
        use karpenter_tui::shell::live_picture::LiveInfo;
        let (role_tx, role) = tokio::sync::watch::channel(karpenter_tui::kube::leader::Role::Unknown);
        let driver = karpenter_tui::shell::live_driver::LiveDriver {
            cache: w.cache.clone(),
            changed: w.changed.clone(),
            writer: karpenter_tui::kube::writer::Writer::new(self.client(), true),
            catalog: Arc::new(karpenter_tui::engine::catalog::fake::fake_catalog()),
            info: LiveInfo {
                context: "test".into(),
                cluster: "test".into(),
                leadership: Leadership::Observing("read-only".into()),
                clock: "live".into(),
                gates: Default::default(),
                packing: Default::default(),
                version: Default::default(),
                version_source: String::new(),
            },
            acting: None,
            role,
            wakes,
        };
        (role_tx, driver)
    }

    /// A client for this server, set up as `kube::connect` sets up every connection.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(karpenter_tui::kube::connect::client_config(self.config())).unwrap()
    }

    fn config(&self) -> kube::Config {
        kube::Config::new(format!("http://{}", self.addr).parse().unwrap())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Stores (or replaces) an object as another client would, telling the watchers. `collection` is the path of
    /// its collection without namespace: `api/v1/pods`, `apis/karpenter.sh/v1/nodeclaims`.
    pub fn put(&self, collection: &str, obj: Value) -> Value {
        self.put_unchecked(collection, seed(collection, obj))
    }

    /// Stores an object a real API server would refuse today, as one written under an older or looser CRD version
    /// stays stored: for tests of how a reader copes with it. Everything else goes through [`FakeApi::put`].
    pub fn put_unchecked(&self, collection: &str, obj: Value) -> Value {
        let mut s = self.state();
        let meta = |f: &str| obj["metadata"][f].as_str().map(String::from);
        let key = key(collection, meta("namespace").as_deref(), &meta("name").unwrap_or_default());
        let event = if s.objects.contains_key(&key) { "MODIFIED" } else { "ADDED" };
        s.store(collection, obj, event)
    }

    /// Deletes an object as another client would, telling the watchers.
    pub fn remove(&self, collection: &str, namespace: Option<&str>, name: &str) {
        let mut s = self.state();
        if let Some(obj) = s.objects.get(&key(collection, namespace, name)).cloned() {
            s.store(collection, obj, "DELETED");
        }
    }

    /// Deletes an object without any watch event: only a relist can notice.
    pub fn remove_silently(&self, collection: &str, namespace: Option<&str>, name: &str) {
        let mut s = self.state();
        s.objects.remove(&key(collection, namespace, name));
        s.bump();
    }

    /// Every object of a collection (all namespaces), in key order.
    pub fn list(&self, collection: &str) -> Vec<Value> {
        self.state().objects.iter().filter(|(k, _)| k.0 == collection).map(|(_, v)| v.clone()).collect()
    }

    pub fn get(&self, collection: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.state().objects.get(&key(collection, namespace, name)).cloned()
    }

    /// Compacts history: every open watch gets a `410 Gone` ERROR event and ends, and watches from an older
    /// resourceVersion are refused the same way.
    pub fn expire_watches(&self) {
        let mut s = self.state();
        s.compacted = s.rv;
        let line = Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": gone()})));
        for w in s.watchers.drain(..) {
            let _ = w.tx.send(line.clone());
        }
    }

    /// Ends every open watch stream without an error, as an API server does when a watch times out.
    pub fn end_watches(&self) {
        self.state().watchers.clear();
    }

    /// Answers the next `times` (None: every) matching request with `code` and `body` instead of handling it.
    /// `watch` selects watch requests (`?watch=true`) of a collection rather than its lists.
    pub fn script(&self, method: &str, path: &str, watch: bool, code: u16, body: Value, times: Option<usize>) {
        let (method, path) = (method.to_string(), path.to_string());
        self.state().scripts.push(Script { method, path, watch, code, body, times });
    }

    /// Makes a collection unknown to the server (404 for everything in it), like a CRD that is not installed.
    pub fn missing(&self, collection: &str) {
        self.state().missing.insert(collection.to_string());
    }

    /// Serves a collection made [`FakeApi::missing`] again, like a CRD installed while we run.
    pub fn install(&self, collection: &str) {
        self.state().missing.remove(collection);
    }

    /// SelfSubjectAccessReviews for this verb and resource (and subresource) answer "denied".
    pub fn deny(&self, verb: &str, resource: &str, subresource: Option<&str>) {
        self.state().denied.push((verb.into(), resource.into(), subresource.map(Into::into)));
    }

    /// After every write of ours to an object of `collection`, another writer updates it (a node's heartbeat in
    /// `status.conditions[*].lastHeartbeatTime`, a bumped resourceVersion), as a kubelet or the node controller
    /// does while a node joins: a write guarded by the resourceVersion read before it then conflicts.
    pub fn interfere(&self, collection: &str) {
        self.state().interfere.insert(collection.to_string());
    }

    /// Writes refused with 409 because their resourceVersion was stale.
    pub fn conflicts(&self) -> usize {
        self.state().conflicts
    }

    /// Every version `collection`/`name` was stored at, oldest first: (resourceVersion, object).
    pub fn history(&self, collection: &str, name: &str) -> Vec<(u64, Value)> {
        self.state()
            .history
            .iter()
            .filter(|(_, c, o)| c == collection && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
            .map(|(rv, _, o)| (*rv, o.clone()))
            .collect()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    /// Requests other than lists and watches: what a writer sent.
    pub fn writes(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.method != "GET").collect()
    }

    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    /// The number of open watch streams on a collection.
    pub fn watching(&self, collection: &str) -> usize {
        let mut s = self.state();
        s.watchers.retain(|w| !w.tx.is_closed());
        s.watchers.iter().filter(|w| w.collection == collection).count()
    }
}

fn gone() -> Value {
    status(410, "Expired", "too old resource version")
}

/// Waits for a condition, polling every 10 ms, failing the test after `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn handle(st: &Arc<Mutex<State>>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = parse_query(req.uri().query());
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).map(String::from);
    let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .or_else(|_| serde_yaml::from_slice(&bytes))
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let rec = Recorded { method: method.to_string(), path: path.clone(), query, content_type, body };
    let mut s = st.lock().unwrap();
    s.requests.push(rec.clone());
    if let Some((code, body)) = s.take_script(&rec) {
        return reply(code, &body);
    }
    let Some(t) = parse_path(&path) else { return reply(404, &status(404, "NotFound", "no such path")) };
    if s.missing.contains(&t.collection) {
        return not_found(&t);
    }
    let dry_run = rec.q("dryRun") == Some("All");
    match (&method, &t.name, t.sub.as_deref()) {
        (&Method::GET, None, _) if rec.is_watch() => watch(&mut s, &t, &rec),
        (&Method::GET, None, _) => {
            let ns = t.namespace.clone();
            // Pages as an API server serves them with `limit`: the continue token says how many items came before
            // (a real one is opaque; only the watcher reads it).
            let skip: usize = rec.q("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
            let limit: usize = rec.q("limit").and_then(|l| l.parse().ok()).filter(|&l| l > 0).unwrap_or(usize::MAX);
            // The collection's keys are contiguous: a page costs its own objects, not a walk over every stored
            // one (a real API server serves lists from its watch cache, in about that time).
            let from = (t.collection.clone(), ns.clone().unwrap_or_default(), String::new());
            let st: &mut State = &mut s;
            let mut matching = st
                .objects
                .range(from..)
                .take_while(|((c, n, _), _)| *c == t.collection && ns.as_ref().is_none_or(|ns| ns == n))
                .filter(|(_, o)| matches_selector(o, rec.query.get("labelSelector")))
                .skip(skip);
            let page: Vec<(Key, &Value)> = matching.by_ref().take(limit).map(|(k, o)| (k.clone(), o)).collect();
            let mut metadata = json!({"resourceVersion": st.rv.to_string()});
            if matching.next().is_some() {
                metadata["continue"] = json!((skip + page.len()).to_string());
            }
            let rv =
                |o: &Value| o.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string();
            let mut fresh = Vec::new();
            let items: Vec<Arc<str>> = page
                .iter()
                .map(|(k, o)| match st.encoded.get(k) {
                    Some((at, text)) if *at == rv(o) => text.clone(),
                    _ => {
                        let text: Arc<str> = o.to_string().into();
                        fresh.push((k.clone(), (rv(o), text.clone())));
                        text
                    }
                })
                .collect();
            st.encoded.extend(fresh);
            let mut body = format!(r#"{{"kind":"List","apiVersion":"v1","metadata":{metadata},"items":["#);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    body.push(',');
                }
                body.push_str(item);
            }
            body.push_str("]}");
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)).boxed_unsync())
                .unwrap()
        }
        (&Method::GET, Some(name), None) => match s.objects.get(&key(&t.collection, t.namespace.as_deref(), name)) {
            Some(o) => reply(200, o),
            None => not_found(&t),
        },
        (&Method::POST, None, _) if t.collection.ends_with("/selfsubjectaccessreviews") => {
            let ra = &rec.body["spec"]["resourceAttributes"];
            let field = |k: &str| ra[k].as_str().unwrap_or_default().to_string();
            let sub = ra["subresource"].as_str().filter(|s| !s.is_empty()).map(String::from);
            let denied = s.denied.iter().any(|(v, r, sr)| *v == field("verb") && *r == field("resource") && *sr == sub);
            let mut answer = rec.body.clone();
            answer["status"] = if denied {
                json!({"allowed": false, "reason": "RBAC: not allowed by the test"})
            } else {
                json!({"allowed": true})
            };
            reply(201, &answer)
        }
        (&Method::POST, None, _) => create(&mut s, &t, rec.body.clone(), dry_run),
        (&Method::POST, Some(name), Some("eviction")) => {
            let key = key(&t.collection, t.namespace.as_deref(), name);
            match s.objects.get(&key).cloned() {
                Some(pod) => {
                    s.store(&t.collection, pod, "DELETED");
                    reply(201, &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}))
                }
                None => not_found(&t),
            }
        }
        (&Method::PUT, Some(name), None) => {
            let key = key(&t.collection, t.namespace.as_deref(), name);
            let Some(current) = s.objects.get(&key).cloned() else { return not_found(&t) };
            let sent_rv = rec.body.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            if sent_rv
                .is_some_and(|rv| Some(rv) != current.pointer("/metadata/resourceVersion").and_then(Value::as_str))
            {
                return reply(409, &status(409, "Conflict", "the object has been modified"));
            }
            let mut obj = rec.body.clone();
            if let Some(ns) = &t.namespace {
                obj["metadata"]["namespace"] = json!(ns);
            }
            let obj = match admit(&t.collection, obj, &strict::Write::Update { old: current }) {
                Ok(obj) => obj,
                Err(refused) => return reply(422, &refused),
            };
            let obj = s.store(&t.collection, obj, "MODIFIED");
            reply(200, &obj)
        }
        (&Method::PATCH, Some(name), sub) => patch(&mut s, &t, name, sub, &rec, dry_run),
        (&Method::DELETE, Some(name), None) => {
            let key = key(&t.collection, t.namespace.as_deref(), name);
            let Some(mut obj) = s.objects.get(&key).cloned() else { return not_found(&t) };
            let finalizers =
                obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
            if finalizers {
                if obj.pointer("/metadata/deletionTimestamp").is_none() {
                    obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                    obj = s.store(&t.collection, obj, "MODIFIED");
                }
                reply(200, &obj)
            } else {
                s.store(&t.collection, obj.clone(), "DELETED");
                reply(200, &obj)
            }
        }
        _ => reply(405, &status(405, "MethodNotAllowed", "not supported by the fake API server")),
    }
}

fn create(s: &mut State, t: &Target, mut obj: Value, dry_run: bool) -> Response<Body> {
    if obj.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty) {
        let Some(prefix) = obj.pointer("/metadata/generateName").and_then(Value::as_str).map(String::from) else {
            return reply(422, &status(422, "Invalid", "name or generateName is required"));
        };
        s.generated += 1;
        obj["metadata"]["name"] = json!(format!("{prefix}{:05x}", s.generated));
    }
    if let Some(ns) = &t.namespace {
        obj["metadata"]["namespace"] = json!(ns);
    }
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    if s.objects.contains_key(&key(&t.collection, t.namespace.as_deref(), &name)) {
        return reply(409, &status(409, "AlreadyExists", &format!("\"{name}\" already exists")));
    }
    if t.collection.ends_with("/events")
        && let Err(refused) = admit_event(&obj)
    {
        return reply(422, &refused);
    }
    let mut obj = match admit(&t.collection, obj, &strict::Write::Create) {
        Ok(obj) => obj,
        Err(refused) => return reply(422, &refused),
    };
    obj["metadata"]["uid"] = json!(format!("uid-{name}"));
    obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    if dry_run {
        return reply(201, &obj);
    }
    let obj = s.store(&t.collection, obj, "ADDED");
    reply(201, &obj)
}

fn patch(s: &mut State, t: &Target, name: &str, sub: Option<&str>, rec: &Recorded, dry_run: bool) -> Response<Body> {
    let key = key(&t.collection, t.namespace.as_deref(), name);
    let current = s.objects.get(&key).cloned();
    let ct = rec.content_type.as_deref().unwrap_or_default();
    let conflict = |s: &mut State| {
        s.conflicts += 1;
        reply(409, &status(409, "Conflict", "the object has been modified; please apply your changes"))
    };
    let write = match (&current, sub) {
        (None, _) => strict::Write::Create,
        (Some(old), Some("status")) => strict::Write::Status { old: old.clone() },
        (Some(old), _) => strict::Write::Update { old: old.clone() },
    };
    let obj = match (ct, current) {
        ("application/apply-patch+yaml", None) => {
            let mut obj = rec.body.clone();
            obj["metadata"]["uid"] = json!(format!("uid-{name}"));
            obj
        }
        (_, None) => return not_found(t),
        ("application/merge-patch+json" | "application/apply-patch+yaml", Some(current)) => {
            let sent_rv = rec.body.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            if sent_rv
                .is_some_and(|rv| Some(rv) != current.pointer("/metadata/resourceVersion").and_then(Value::as_str))
            {
                return conflict(s);
            }
            let mut patched = current.clone();
            match sub {
                Some("status") => json_patch::merge(&mut patched["status"], &rec.body["status"]),
                // The scale subresource of a CRD maps `spec.replicas` (specReplicasPath) and nothing else.
                Some("scale") => patched["spec"]["replicas"] = rec.body["spec"]["replicas"].clone(),
                _ => json_patch::merge(&mut patched, &rec.body),
            }
            patched
        }
        ("application/json-patch+json", Some(current)) => {
            let Ok(ops) = serde_json::from_value::<json_patch::Patch>(rec.body.clone()) else {
                return reply(400, &status(400, "BadRequest", "not a JSON patch"));
            };
            let mut patched = current.clone();
            if let Err(e) = json_patch::patch(&mut patched, &ops) {
                return reply(422, &status(422, "Invalid", &e.to_string()));
            }
            if sub == Some("status") {
                let mut only_status = current.clone();
                only_status["status"] = patched["status"].take();
                patched = only_status;
            }
            patched
        }
        _ => return reply(415, &status(415, "UnsupportedMediaType", ct)),
    };
    let mut obj = match admit(&t.collection, obj, &write) {
        Ok(obj) => obj,
        Err(refused) => return reply(422, &refused),
    };
    if dry_run {
        return reply(200, &obj);
    }
    // A finalized object whose last finalizer is removed goes away.
    let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers = obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if deleting && !finalizers {
        let obj = s.store(&t.collection, obj, "DELETED");
        return reply(200, &obj);
    }
    obj["metadata"]["name"] = json!(name);
    let obj = s.store(&t.collection, obj, if s.objects.contains_key(&key) { "MODIFIED" } else { "ADDED" });
    if sub == Some("scale") {
        // An autoscaling/v1 Scale, as the API server answers for a CRD's scale subresource.
        return reply(
            200,
            &json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": name, "resourceVersion": obj["metadata"]["resourceVersion"]},
                    "spec": {"replicas": obj["spec"]["replicas"]},
                    "status": {"replicas": obj["status"]["nodes"].as_i64().unwrap_or(0)}}),
        );
    }
    if s.interfere.contains(&t.collection) {
        let mut other = obj.clone();
        let beat = json!(format!("2026-01-01T00:{:02}:{:02}Z", (s.rv / 60) % 60, s.rv % 60));
        for c in other.pointer_mut("/status/conditions").and_then(Value::as_array_mut).into_iter().flatten() {
            c["lastHeartbeatTime"] = beat.clone();
        }
        s.store(&t.collection, other, "MODIFIED");
    }
    reply(200, &obj)
}

fn watch(s: &mut State, t: &Target, rec: &Recorded) -> Response<Body> {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let from: u64 = rec.q("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(s.rv);
    if from < s.compacted {
        let _ = tx.send(Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": gone()}))));
        drop(tx);
    } else {
        for e in s.log.iter().filter(|e| e.rv > from && e.collection == t.collection) {
            if t.namespace.is_none() || t.namespace == e.namespace {
                let _ = tx.send(e.line.clone());
            }
        }
        s.watchers.push(Watcher { collection: t.collection.clone(), namespace: t.namespace.clone(), tx });
    }
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, Infallible>(Frame::data(line)), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(StreamBody::new(stream).boxed_unsync())
        .unwrap()
}
