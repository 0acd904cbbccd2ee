//! The dashboard against a live cluster at the scale (1,000 nodes, 20,000 pods): what the process holds
//! when the cluster lives in an API server rather than in the process, as it does with `--kubeconfig`.
//!
//! A child process (this benchmark run again with `KTUI_BENCH_SERVE` set) builds the objects of the shared large
//! cluster (benches/common/big_cluster.rs), gives them the shape a real API server sends (benches/common/wire.rs:
//! managedFields, full container specs, statuses, node images and heartbeats...) and serves them from the fake API
//! server of the tests (tests/fake_apiserver), in list pages of the size the watchers ask for, as a real one does.
//! Nothing of the simulated world is ever resident here. This process runs the real watchers (`kube::watch::spawn`)
//! against it, as the live backend does, and waits for the cache to sync; then reads what the live backend reads for
//! every picture (`Cache::manifests`), builds the live picture (observing: the provisioning pass and the disruption
//! pass over every node; acting: the controller's latest decisions, no pass of its own), hands it to the dashboard and
//! draws a frame; then does what an acting instance adds (a second read for the controller's tick and its planning
//! pass). Live heap and resident memory are printed at each step; then the CPU the process spends idle, and while every
//! node posts a heartbeat (kubelet's every 10 seconds), with how many of those heartbeats counted as changes (each
//! would make the dashboard rebuild its picture). Timed: reading the cache, and building the picture. Last, how
//! soon the dashboard's first pictures arrive, against a bare LIST of the same objects from the same server.
//!
//! `cargo bench --bench live_dashboard`.

#[path = "common/big_cluster.rs"]
mod big_cluster;
#[path = "../tests/fake_apiserver/mod.rs"]
mod fake_apiserver;
#[path = "common/heap.rs"]
mod heap;
#[path = "common/wire.rs"]
mod wire;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use karpenter_tui::controller::Controller;
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::kube::cache::Cache;
use karpenter_tui::kube::kinds::Kind;
use karpenter_tui::kube::leader::Role;
use karpenter_tui::kube::watch;
use karpenter_tui::kube::writer::Writer;
use karpenter_tui::kube::{access, upstream};
use karpenter_tui::memory;
use karpenter_tui::protocol::Event;
use karpenter_tui::protocol::view::Leadership;
use karpenter_tui::shell::live_driver::LiveDriver;
use karpenter_tui::shell::live_picture::{LiveInfo, picture};
use karpenter_tui::sim::run::build_catalog;
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::ui::action::KeyMap;
use karpenter_tui::ui::app::{AppState, Msg, update};
use karpenter_tui::ui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

use big_cluster::{PODS_PER_NODE, POOLS, nodes_per_pool, world};

#[global_allocator]
static GLOBAL: heap::Counting = heap::Counting;

/// Set in the child process, which serves the cluster.
const SERVE: &str = "KTUI_BENCH_SERVE";
/// Seconds over which every node posts one heartbeat, as kubelet does every 10 s.
const HEARTBEAT_PERIOD: u64 = 10;

/// The collection path of a kind on the API server: `api/v1/pods`, `apis/karpenter.sh/v1/nodeclaims`.
fn collection(kind: Kind) -> String {
    let ar = kind.api_resource();
    if ar.group.is_empty() {
        format!("api/{}/{}", ar.version, ar.plural)
    } else {
        format!("apis/{}/{}/{}", ar.group, ar.version, ar.plural)
    }
}

/// The child: serves the cluster's objects, shaped as a real API server sends them, until its stdin closes;
/// `beat` on stdin makes every node post a heartbeat, spread over [`HEARTBEAT_PERIOD`], then answers `done`.
fn serve() {
    fn values<T: serde::Serialize>(kind: Kind, objs: impl Iterator<Item = T>) -> Vec<(Kind, Value)> {
        objs.map(|o| {
            let mut v = serde_json::to_value(o).expect("objects serialise");
            wire::enrich(&format!("{kind:?}"), &mut v);
            (kind, v)
        })
        .collect()
    }
    let w = world(nodes_per_pool());
    let now = w.now;
    let c = &w.cluster;
    let mut objects = Vec::new();
    objects.extend(values(Kind::Pod, c.pods.values().map(|o| &**o)));
    objects.extend(values(Kind::Node, c.nodes.values().map(|o| &**o)));
    objects.extend(values(Kind::NodePool, c.nodepools.values().map(|o| &**o)));
    objects.extend(values(Kind::NodeClaim, c.nodeclaims.values().map(|o| &**o)));
    objects.extend(values(Kind::NodeClass, c.nodeclasses.values().map(|o| &**o)));
    objects.extend(values(Kind::DaemonSet, c.daemonsets.values().map(|o| &**o)));
    objects.extend(values(Kind::Pdb, c.pdbs.values().map(|o| &**o)));
    objects.extend(values(Kind::Pvc, c.pvcs.values().map(|o| &**o)));
    objects.extend(values(Kind::Pv, c.pvs.values().map(|o| &**o)));
    objects.extend(values(Kind::StorageClass, c.storage_classes.values().map(|o| &**o)));
    objects.extend(values(Kind::Namespace, c.namespaces.values().map(|o| &**o)));
    drop(w);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    rt.block_on(async {
        let api = fake_apiserver::FakeApi::start().await;
        let mut nodes = Vec::new();
        for (kind, o) in objects {
            let stored = api.put(&collection(kind), o);
            if kind == Kind::Node {
                nodes.push(stored);
            }
        }
        println!("{} {now}", api.addr);
        std::io::stdout().flush().expect("stdout");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut beat = 0;
        while let Some(line) = rx.recv().await {
            if line != "beat" {
                continue;
            }
            beat += 1;
            let at = format!("2026-05-01T10:{:02}:{:02}Z", beat / 6 % 60, beat % 6 * 10);
            // In batches every 100 ms, as a thousand kubelets spread over their period would post.
            let batches = HEARTBEAT_PERIOD as usize * 10;
            let per_batch = nodes.len().div_ceil(batches).max(1);
            for chunk in nodes.chunks_mut(per_batch) {
                for n in chunk {
                    wire::heartbeat(n, &at);
                    *n = api.put(&collection(Kind::Node), n.clone());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            println!("done");
            std::io::stdout().flush().expect("stdout");
        }
    });
}

/// A client of the child's API server.
fn client_of(addr: &str) -> kube::Client {
    let config = kube::Config::new(format!("http://{addr}").parse().expect("a URL"));
    kube::Client::try_from(karpenter_tui::kube::connect::client_config(config)).expect("a client")
}

/// A bare LIST of what the first picture needs most of: pods, nodes and NodeClaims, in pages of 500 (client-go's
/// default), the three at once, each page parsed into plain JSON values (as `kubectl get -o json` reads a list) and
/// dropped.
async fn bare_list(addr: &str) -> Duration {
    let client = client_of(addr);
    let started = Instant::now();
    let list = |kind: Kind| {
        let client = client.clone();
        async move {
            let path = format!("/{}", collection(kind));
            let mut token = String::new();
            let mut count = 0;
            loop {
                let mut uri = format!("{path}?limit=500");
                if !token.is_empty() {
                    uri.push_str(&format!("&continue={token}"));
                }
                let request = hyper::Request::get(uri).body(Vec::new()).expect("a request");
                let page: Value = client.request(request).await.expect("a page");
                count += page["items"].as_array().map_or(0, Vec::len);
                match page["metadata"]["continue"].as_str() {
                    Some(t) if !t.is_empty() => token = t.to_string(),
                    _ => return count,
                }
            }
        }
    };
    let (pods, nodes, claims) = tokio::join!(list(Kind::Pod), list(Kind::Node), list(Kind::NodeClaim));
    assert!(pods > 0 && nodes > 0 && claims > 0, "the LIST read the cluster");
    started.elapsed()
}

/// The dashboard's start against the child's API server, as `karpenter-tui --kubeconfig` starts (rights checked,
/// the watchers listing while upstream Karpenter is looked for, the live backend building pictures as the lists
/// complete): when its pictures first show the nodes, and when the first one with the engine's decisions arrives.
async fn first_pictures(addr: &str, catalog: Arc<Catalog>, info: LiveInfo) -> Firsts {
    let started = Instant::now();
    let client = client_of(addr);
    access::check(&client, false).await.expect("the rights check");
    let watches = watch::spawn(client.clone(), &[]);
    let _ = upstream::detect(&client).await;
    let (_role_tx, role) = tokio::sync::watch::channel(Role::Unknown);
    let driver = LiveDriver {
        cache: watches.cache.clone(),
        changed: watches.changed.clone(),
        writer: Writer::new(client, true),
        catalog,
        info,
        acting: None,
        role,
        wakes: Default::default(),
    };
    let (commands, from_ui) = tokio::sync::mpsc::unbounded_channel();
    let (to_ui, mut events) = tokio::sync::mpsc::unbounded_channel();
    let backend = tokio::spawn(driver.run(from_ui, to_ui));
    let (mut nodes_at, mut read_at) = (None, None);
    let whole_at = loop {
        match events.recv().await.expect("the backend runs") {
            Event::View(v) if v.progress.is_none() => break started.elapsed(),
            Event::View(v) => {
                if nodes_at.is_none() && !v.nodes.is_empty() {
                    nodes_at = Some(started.elapsed());
                }
                // Every kind listed: the picture of every object while the engine's first pass runs.
                if v.source.clock == "live" {
                    read_at = Some(started.elapsed());
                }
            }
            _ => {}
        }
    };
    drop(commands);
    backend.abort();
    Firsts { nodes: nodes_at.unwrap_or(whole_at), read: read_at.unwrap_or(whole_at), whole: whole_at }
}

/// When the dashboard's first pictures arrived, from its start.
struct Firsts {
    /// The first one showing nodes.
    nodes: Duration,
    /// The first one of every object (all lists done), while the engine's first pass runs.
    read: Duration,
    /// The first one with the engine's decisions.
    whole: Duration,
}

/// CPU time this process has used, user and system, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct we pass and reads nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Live heap of a copy, in MiB: what the copied objects hold.
fn heap_of<T>(make: impl FnOnce() -> T) -> f64 {
    let before = heap::live_mib();
    let copy = make();
    let after = heap::live_mib();
    drop(copy);
    after - before
}

/// What each kind of the cache holds (measured by copying it), pods apart from their shared specs.
fn per_kind(cache: &mut Cache) -> String {
    cache.pods.settle();
    cache.nodes.settle();
    cache.nodeclaims.settle();
    cache.nodepools.settle();
    fn copy<T: Clone>(t: &karpenter_tui::kube::cache::Typed<T>) -> Vec<T> {
        t.values().iter().map(|v| T::clone(v)).collect()
    }
    let mut specs: BTreeMap<usize, &k8s_openapi::api::core::v1::PodSpec> = BTreeMap::new();
    for p in cache.pods.values() {
        specs.insert(std::ptr::from_ref(p.spec()) as usize, p.spec());
    }
    let spec_mib = heap_of(|| specs.values().map(|s| (*s).clone()).collect::<Vec<_>>());
    format!(
        "per kind (live heap of a copy): pods {:.1} MiB and their {} distinct specs {:.1} MiB, nodes {:.1} MiB, \
         nodeclaims {:.1} MiB, nodepools {:.2} MiB",
        heap_of(|| copy(&cache.pods)),
        specs.len(),
        spec_mib,
        heap_of(|| copy(&cache.nodes)),
        heap_of(|| copy(&cache.nodeclaims)),
        heap_of(|| copy(&cache.nodepools)),
    )
}

fn live_dashboard_bench(c: &mut Criterion) {
    // As the binary does first thing (src/main.rs), unless measuring the allocator's defaults.
    if std::env::var_os("KTUI_BENCH_DEFAULT_ARENAS").is_none() {
        memory::limit_arenas();
    }
    let nodes = POOLS * nodes_per_pool();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (base_live, base_rss) = (heap::live_mib(), heap::rss_mib());
    let exe = std::env::current_exe().expect("this benchmark's path");
    let mut child = std::process::Command::new(exe)
        .args(std::env::args().skip(1))
        .env(SERVE, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("running the child");
    let mut to_child = child.stdin.take().expect("the child's stdin");
    let mut from_child = std::io::BufReader::new(child.stdout.take().expect("the child's stdout")).lines();
    let first = from_child.next().expect("the child's address").expect("reading the child");
    let (addr, now) = first.split_once(' ').expect("address and clock");
    let now: i64 = now.parse().expect("the clock");
    let s = parse_scenario("name: catalog\nuntil: 1m\ncatalog: {source: aws}\n", "catalog.yaml").expect("scenario");
    let catalog = Arc::new(build_catalog(&s).expect("catalog"));

    let started = Instant::now();
    let mut watches = rt.block_on(async {
        let config = kube::Config::new(format!("http://{addr}").parse().expect("a URL"));
        let client = kube::Client::try_from(karpenter_tui::kube::connect::client_config(config)).expect("a client");
        let mut w = watch::spawn(client, &[]);
        w.wait_synced(Duration::from_secs(1800)).await.unwrap_or_else(|m| panic!("not synced: {m:?}"));
        w
    });
    let sync_time = started.elapsed();
    let sync_peak = heap::status_mib("VmHWM:");
    // Let the watchers settle into their watches.
    std::thread::sleep(Duration::from_millis(500));
    let (cache_live, cache_rss) = (heap::live_mib(), heap::rss_mib());
    let cache = watches.cache.clone();
    assert_eq!(cache.lock().unwrap().pods.len(), nodes * PODS_PER_NODE);

    eprintln!("{}", per_kind(&mut cache.lock().unwrap()));

    let info = LiveInfo {
        context: "bench".into(),
        cluster: "bench".into(),
        leadership: Leadership::Observing("bench".into()),
        clock: "live".into(),
        gates: Default::default(),
        packing: Default::default(),
        version: Default::default(),
        version_source: String::new(),
    };
    let m = Arc::new(cache.lock().unwrap().manifests());
    let view = Arc::new(picture(&m, &catalog, now, &info, &[], 1, None));
    // As the live backend does after every picture.
    memory::release_free_memory();
    assert_eq!(view.nodes.len(), nodes);
    let (km, _) = KeyMap::new(&BTreeMap::new(), false);
    let mut state = AppState::new(km, Theme::default(), false, 1.0);
    update(&mut state, Msg::View(view.clone()));
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    term.draw(|f| f.render_widget(&state, f.area())).expect("draw");
    let (all_live, all_rss) = (heap::live_mib(), heap::rss_mib());

    // Acting: the controller's tick reads the cache afresh while the last picture's read is still held, plans,
    // and the picture is built with the controller's state.
    let mut controller = Controller::new(catalog.clone(), Mode::DryRun, now);
    let tick_read = Arc::new(cache.lock().unwrap().manifests());
    let effects = controller.plan(&tick_read, now);
    let acting_info = LiveInfo { leadership: Leadership::Acting, ..info.clone() };
    let acting_view = Arc::new(picture(&tick_read, &catalog, now, &acting_info, &[], 2, Some(&controller)));
    memory::release_free_memory();
    update(&mut state, Msg::View(acting_view.clone()));
    term.draw(|f| f.render_widget(&state, f.area())).expect("draw");
    let (acting_live, acting_rss) = (heap::live_mib(), heap::rss_mib());
    let peak_rss = heap::status_mib("VmHWM:");
    let (anon_rss, file_rss) = (heap::status_mib("RssAnon:"), heap::status_mib("RssFile:"));
    eprintln!(
        "live dashboard, {nodes} nodes and {} pods from the fake API server, listed in pages of {} (synced in \
         {:.1} s): live heap {:.0} MiB with the watch cache synced, {:.0} MiB with a picture on screen, {:.0} MiB \
         acting ({} effects planned)",
        nodes * PODS_PER_NODE,
        watch::LIST_PAGE,
        sync_time.as_secs_f64(),
        cache_live - base_live,
        all_live - base_live,
        acting_live - base_live,
        effects.len(),
    );
    eprintln!(
        "resident memory: {base_rss:.0} MiB at start, {cache_rss:.0} MiB with the cache synced (peak while \
         listing {sync_peak:.0} MiB), {all_rss:.0} MiB observing with a picture on screen, {acting_rss:.0} MiB \
         acting (peak {peak_rss:.0} MiB; acting, {anon_rss:.0} MiB anonymous and {file_rss:.0} MiB file-backed)"
    );

    // Idle: nothing changes in the cluster.
    let idle = Duration::from_secs(5);
    let (cpu0, changed0) = (cpu_seconds(), *watches.changed.borrow_and_update());
    std::thread::sleep(idle);
    let (cpu1, changed1) = (cpu_seconds(), *watches.changed.borrow_and_update());
    // Every node posts one heartbeat.
    writeln!(to_child, "beat").expect("asking for heartbeats");
    let beat_started = Instant::now();
    assert_eq!(from_child.next().expect("the child's answer").expect("reading the child"), "done");
    std::thread::sleep(Duration::from_millis(500));
    let beat_time = beat_started.elapsed();
    let (cpu2, changed2) = (cpu_seconds(), *watches.changed.borrow_and_update());
    let beat_rss = heap::rss_mib();
    eprintln!(
        "CPU: {:.1}% of a core idle ({} changes in {} s); {:.1}% while {nodes} nodes post a heartbeat over {:.1} s, \
         of which {} counted as changes (each would make the dashboard rebuild its picture, at most once a second); \
         resident memory after the heartbeats {beat_rss:.0} MiB",
        (cpu1 - cpu0) / idle.as_secs_f64() * 100.0,
        changed1 - changed0,
        idle.as_secs(),
        (cpu2 - cpu1) / beat_time.as_secs_f64() * 100.0,
        beat_time.as_secs_f64(),
        changed2 - changed1,
    );

    let mut group = c.benchmark_group("live_dashboard");
    group.sample_size(10);
    group.bench_function("read-cache", |b| b.iter(|| black_box(cache.lock().unwrap().manifests())));
    group.bench_function("picture/build", |b| b.iter(|| black_box(picture(&m, &catalog, now, &info, &[], 2, None))));
    // Acting, the picture reads the controller's latest solve and verdicts instead of solving again.
    group.bench_function("picture/acting", |b| {
        b.iter(|| black_box(picture(&tick_read, &catalog, now, &acting_info, &[], 2, Some(&controller))))
    });
    group.finish();
    drop(watches);
    memory::release_free_memory();

    // How soon the dashboard shows the cluster, against how long a bare LIST of what it must read takes, measured
    // alternately over the same API server.
    let info = LiveInfo { leadership: Leadership::Observing("bench".into()), ..info };
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let list = rt.block_on(bare_list(addr));
        let firsts = rt.block_on(first_pictures(addr, catalog.clone(), info.clone()));
        memory::release_free_memory();
        rounds.push((list, firsts));
    }
    rounds.sort_by_key(|r| r.1.whole);
    for (list, f) in &rounds {
        let list = list.as_secs_f64();
        let (nodes, read, whole) = (f.nodes.as_secs_f64(), f.read.as_secs_f64(), f.whole.as_secs_f64());
        eprintln!(
            "first picture: a bare LIST of pods, nodes and NodeClaims (pages of 500) takes {list:.2} s; the \
             dashboard shows nodes and pools after {nodes:.2} s ({:.2}× the LIST), every object after {read:.2} s \
             ({:.2}×) and the engine's decisions after {whole:.2} s ({:.2}×)",
            nodes / list,
            read / list,
            whole / list,
        );
    }
    drop(to_child);
    let _ = child.wait();
}

criterion_group!(benches, live_dashboard_bench);

fn main() {
    if std::env::var_os(SERVE).is_some() {
        serve();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
