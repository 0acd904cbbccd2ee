//! The dashboard against a live cluster at the scale (1,000 nodes, 20,000 pods): what the process holds
//! when the cluster lives in an API server rather than in the process, as it does with `--kubeconfig`.
//!
//! The objects of the shared large cluster (benches/common/big_cluster.rs) are turned into their wire form by a
//! child process (this benchmark run again with `KTUI_BENCH_WIRE_OUT` set), so nothing of the simulated world that
//! made them is ever resident here, then fed to the real watch cache one object at a time, as a watcher's initial
//! lists would be. From that cache the benchmark reads what the
//! live backend reads for every picture (`Cache::manifests`), builds the live picture (which runs the provisioning
//! pass and the disruption pass over every node), hands it to the dashboard and draws a frame, printing live heap
//! and resident memory at each step. Timed: reading the cache, and building the picture.
//!
//! `cargo bench --bench live_dashboard`.

#[path = "common/big_cluster.rs"]
mod big_cluster;
#[path = "common/heap.rs"]
mod heap;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use karpenter_tui::engine::catalog::Catalog;
use karpenter_tui::engine::provisioning::Millis;
use karpenter_tui::kube::cache::Cache;
use karpenter_tui::kube::kinds::Kind;
use karpenter_tui::runtime::live_view::{LiveInfo, picture};
use karpenter_tui::runtime::memory;
use karpenter_tui::sim::run::build_catalog;
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::ui::action::KeyMap;
use karpenter_tui::ui::app::{AppState, Msg, update};
use karpenter_tui::ui::model::Leadership;
use karpenter_tui::ui::theme::Theme;
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use big_cluster::{PODS_PER_NODE, POOLS, nodes_per_pool, world};

#[global_allocator]
static GLOBAL: heap::Counting = heap::Counting;

/// Where the child process writes the wire form.
const WIRE_OUT: &str = "KTUI_BENCH_WIRE_OUT";

/// The cluster's objects as the API server would list them: one line per object, `Kind<TAB>JSON`, after a first
/// line with the clock. Runs in the child process.
fn write_wire_form(path: &str) {
    use std::io::Write;
    let w = world(nodes_per_pool());
    let c = &w.cluster;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("creating the wire form"));
    writeln!(out, "now\t{}", w.now).expect("writing");
    let mut line = |kind: Kind, o: &dyn erased::Json| writeln!(out, "{kind:?}\t{}", o.json()).expect("writing");
    c.pods.values().for_each(|o| line(Kind::Pod, &**o));
    c.nodes.values().for_each(|o| line(Kind::Node, &**o));
    c.nodepools.values().for_each(|o| line(Kind::NodePool, &**o));
    c.nodeclaims.values().for_each(|o| line(Kind::NodeClaim, &**o));
    c.nodeclasses.values().for_each(|o| line(Kind::NodeClass, &**o));
    c.daemonsets.values().for_each(|o| line(Kind::DaemonSet, &**o));
    c.pdbs.values().for_each(|o| line(Kind::Pdb, &**o));
    c.pvcs.values().for_each(|o| line(Kind::Pvc, &**o));
    c.pvs.values().for_each(|o| line(Kind::Pv, &**o));
    c.storage_classes.values().for_each(|o| line(Kind::StorageClass, &**o));
    c.namespaces.values().for_each(|o| line(Kind::Namespace, &**o));
}

mod erased {
    /// Any serialisable object as JSON text (the store's kinds differ in type).
    pub trait Json {
        fn json(&self) -> String;
    }

    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).expect("objects serialise")
        }
    }
}

/// A watch cache that has listed every kind from the wire form written by a child process (this benchmark run
/// again with [`WIRE_OUT`] set), reading one object at a time as a watcher's list pages arrive; the catalog the
/// world used (same source, region and seed), built here; the clock.
fn listed_cache() -> (Cache, Catalog, Millis) {
    use std::io::BufRead;
    let path = std::env::temp_dir().join(format!("ktui-live-bench-{}.jsonl", std::process::id()));
    let exe = std::env::current_exe().expect("this benchmark's path");
    let status = std::process::Command::new(exe)
        .args(std::env::args().skip(1))
        .env(WIRE_OUT, &path)
        .status()
        .expect("running the child");
    assert!(status.success(), "the child failed");
    let s = parse_scenario("name: catalog\nuntil: 1m\ncatalog: {source: aws}\n", "catalog.yaml").expect("scenario");
    let catalog = build_catalog(&s).expect("catalog");
    let mut cache = Cache::default();
    for kind in Kind::ALL {
        cache.apply(kind, Event::Init);
    }
    let mut now = 0;
    let file = std::io::BufReader::new(std::fs::File::open(&path).expect("the wire form"));
    for line in file.lines() {
        let line = line.expect("reading the wire form");
        let (kind, json) = line.split_once('\t').expect("Kind<TAB>JSON");
        if kind == "now" {
            now = json.parse().expect("the clock");
            continue;
        }
        let kind = Kind::ALL.into_iter().find(|k| format!("{k:?}") == kind).expect("a known kind");
        let object: DynamicObject = serde_json::from_str(json).expect("an object");
        if let Some(p) = cache.apply(kind, Event::InitApply(object)) {
            panic!("{p}");
        }
    }
    let _ = std::fs::remove_file(&path);
    for kind in Kind::ALL {
        cache.apply(kind, Event::InitDone);
    }
    assert!(cache.synced());
    (cache, catalog, now)
}

fn live_dashboard_bench(c: &mut Criterion) {
    let nodes = POOLS * nodes_per_pool();
    let (base_live, base_rss) = (heap::live_mib(), heap::rss_mib());
    let (cache, catalog, now) = listed_cache();
    memory::release_free_memory();
    let (cache_live, cache_rss) = (heap::live_mib(), heap::rss_mib());
    assert_eq!(cache.pods.items.len(), nodes * PODS_PER_NODE);

    let info = LiveInfo {
        context: "bench".into(),
        cluster: "bench".into(),
        leadership: Leadership::Observing("bench".into()),
        clock: "live".into(),
    };
    let m = Arc::new(cache.manifests());
    let view = Arc::new(picture(&m, &catalog, now, &info, &[], 1, None));
    assert_eq!(view.nodes.len(), nodes);
    let (km, _) = KeyMap::new(&BTreeMap::new(), false);
    let mut state = AppState::new(km, Theme::default(), false, 1.0);
    update(&mut state, Msg::View(view.clone()));
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    term.draw(|f| f.render_widget(&state, f.area())).expect("draw");
    let peak_rss = heap::rss_mib();
    memory::release_free_memory();
    let (all_live, all_rss) = (heap::live_mib(), heap::rss_mib());
    eprintln!(
        "live dashboard, {nodes} nodes and {} pods: the catalog and the watch cache hold {:.0} MiB of live heap; the read of the \
         cache, the picture, the dashboard state and a drawn frame {:.1} MiB more",
        nodes * PODS_PER_NODE,
        cache_live - base_live,
        all_live - cache_live
    );
    eprintln!(
        "resident memory: {base_rss:.0} MiB at start, {cache_rss:.0} MiB with the catalog and the cache listed, {all_rss:.0} MiB with a picture on screen (freed memory handed back; {peak_rss:.0} MiB just after \
         building the picture)"
    );

    let mut group = c.benchmark_group("live_dashboard");
    group.sample_size(10);
    group.bench_function("read-cache", |b| b.iter(|| black_box(cache.manifests())));
    group.bench_function("picture/build", |b| b.iter(|| black_box(picture(&m, &catalog, now, &info, &[], 2, None))));
    group.finish();
}

criterion_group!(benches, live_dashboard_bench);

fn main() {
    if let Some(path) = std::env::var_os(WIRE_OUT) {
        write_wire_form(&path.to_string_lossy());
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
