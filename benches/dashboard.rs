//! The dashboard at scale (issue: 1,000 nodes and 20,000 pods; at most 10 ms per frame, under 200 MB resident).
//!
//! - `picture/build`: the simulated backend turning the world into a `ClusterView` (done at most a few times a
//!   second, off the UI thread).
//! - `reduce/new-picture`: the reducer taking a new picture (re-filtering every pane).
//! - `frame/grid-200x60`, `frame/nodes-120x40`, `frame/nodes-filtered`: a full redraw into ratatui's TestBackend
//!   (layout, every visible pane, buffer diff), the cost of one frame.
//!
//! Peak resident memory of the whole process is printed at the end. `cargo bench --bench dashboard`.

#[path = "common/big_cluster.rs"]
mod big_cluster;
#[path = "common/heap.rs"]
mod heap;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use karpenter_tui::memory;
use karpenter_tui::protocol::view::Source;
use karpenter_tui::shell::sim_picture as dashboard;
use karpenter_tui::ui::action::KeyMap;
use karpenter_tui::ui::app::{AppState, Msg, update};
use karpenter_tui::ui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use big_cluster::{PODS_PER_NODE, POOLS, nodes_per_pool, world};

#[global_allocator]
static GLOBAL: heap::Counting = heap::Counting;

fn press(s: &mut AppState, c: char) {
    update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
}

fn dashboard_bench(c: &mut Criterion) {
    let nodes = POOLS * nodes_per_pool();
    let mut w = world(nodes_per_pool());
    let world_live = heap::live_mib();
    let built_peak = heap::status_mib("VmHWM:");
    let built_rss = heap::status_mib("VmRSS:");
    // What the demo does once its world is built: hand what building it freed back to the system.
    memory::release_free_memory();
    let world_rss = heap::status_mib("VmRSS:");
    // ...and every 10 s after that, on the simulation thread: what that costs once the heap is this large.
    let trim = std::time::Instant::now();
    memory::release_free_memory();
    eprintln!("handing freed memory back with the world built takes {:.1} ms", trim.elapsed().as_secs_f64() * 1e3);
    let source = Source { context: "bench".into(), cluster: "bench".into(), clock: "simulated".into() };
    let view = Arc::new(dashboard::view(&mut w, source.clone(), 1));
    assert_eq!(view.nodes.len(), nodes);
    assert_eq!(view.nodes.iter().map(|n| n.pods).sum::<usize>(), nodes * PODS_PER_NODE);
    let (km, _) = KeyMap::new(&BTreeMap::new(), false);
    let mut state = AppState::new(km, Theme::default(), true, 10.0);
    update(&mut state, Msg::View(view.clone()));
    let mut first = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    first.draw(|f| f.render_widget(&state, f.area())).expect("draw");
    let dashboard_live = heap::live_mib() - world_live;
    memory::release_free_memory();
    let with_dashboard = heap::status_mib("VmRSS:");
    eprintln!(
        "live heap for {nodes} nodes: {world_live:.0} MiB held by the simulated world; {dashboard_live:.1} MiB more for \
         the picture, the dashboard state and a drawn frame"
    );
    eprintln!(
        "resident memory for {nodes} nodes: {built_rss:.0} MiB once the world is built (peak {built_peak:.0} MiB while \
         the scenario was parsed and the world built), {world_rss:.0} MiB after freed memory is handed back (as the \
         demo does); {with_dashboard:.0} MiB with a picture, the dashboard state and a drawn frame on top"
    );

    let mut group = c.benchmark_group("dashboard");
    group.sample_size(20);
    group.bench_function("picture/build", |b| b.iter(|| black_box(dashboard::view(&mut w, source.clone(), 2))));
    group.bench_function("reduce/new-picture", |b| b.iter(|| update(&mut state, Msg::View(view.clone()))));
    let mut grid = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    group.bench_function("frame/grid-200x60", |b| {
        b.iter(|| grid.draw(|f| f.render_widget(&state, f.area())).map(|_| ()).expect("draw"))
    });
    press(&mut state, '3');
    press(&mut state, 'G');
    let mut tabs = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    group.bench_function("frame/nodes-120x40", |b| {
        b.iter(|| tabs.draw(|f| f.render_widget(&state, f.area())).map(|_| ()).expect("draw"))
    });
    press(&mut state, '/');
    for ch in "p07".chars() {
        press(&mut state, ch);
    }
    group.bench_function("frame/nodes-filtered", |b| {
        b.iter(|| tabs.draw(|f| f.render_widget(&state, f.area())).map(|_| ()).expect("draw"))
    });
    group.finish();
    eprintln!("peak resident memory of the whole benchmark: {:.0} MiB", heap::status_mib("VmHWM:"));
}

criterion_group!(benches, dashboard_bench);
criterion_main!(benches);
