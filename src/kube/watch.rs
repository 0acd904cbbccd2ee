//! One kube-runtime watcher per kind feeding the shared [`Cache`]. The watcher lists, then watches from the list's
//! resourceVersion, and relists by itself after a `410 Gone` or a dropped stream; failures are retried with backoff
//! and shown as the kind's state meanwhile. No polling anywhere.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cache::{Cache, WatchState};
use super::kinds::Kind;

/// The running watchers. Dropping it stops them.
pub struct Watches {
    pub cache: Arc<Mutex<Cache>>,
    /// Bumped after every change to the cache that the engine or the dashboard could care about (see
    /// [`Applied::changed`](super::cache::Applied::changed)): not after a node's heartbeat, nor after an update
    /// that moved nothing but a resourceVersion.
    pub changed: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The HTTP status behind a watcher error, if the API server answered.
fn status_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// Starts a watch per kind the engine reads. With default topology spread `constraints` (v1.15's
/// `--scheduler-config`) the cache applies them to every read, and Services, ReplicaSets and ReplicationControllers
/// are watched for their selectors; without, those are not watched (and count as absent).
pub fn spawn(client: kube::Client, constraints: &[TopologySpreadConstraint]) -> Watches {
    let mut cache = Cache::default();
    cache.set_default_constraints(constraints);
    let spread = !constraints.is_empty();
    for kind in Kind::ALL.into_iter().filter(|k| !spread && k.for_default_spread()) {
        cache.watch_failed(kind, Some(404), "not watched: no default topology spread is configured".into());
    }
    let cache = Arc::new(Mutex::new(cache));
    let (tx, rx) = watch::channel(0u64);
    let tx = Arc::new(tx);
    let tasks = Kind::ALL
        .into_iter()
        .filter(|k| spread || !k.for_default_spread())
        .map(|kind| tokio::spawn(run_one(client.clone(), kind, cache.clone(), tx.clone())))
        .collect();
    Watches { cache, changed: rx, tasks }
}

/// Objects per page of a watch's initial list. Each page is parsed whole (a JSON tree per object, then the typed
/// object) before the cache keeps what it reads, and the objects kept land among that page's garbage: the heap's
/// free space after a list is about one page's worth, spread over pages that stay resident. At 20,000 wire-shaped
/// pods (the `live_dashboard` benchmark) pages of 500 — client-go's and kube-runtime's default — left 71 MiB free
/// among the cache's objects and the dashboard at 191 MiB resident; pages of 250 leave 36 MiB and 159 MiB, for
/// twice as many list requests.
pub const LIST_PAGE: u32 = 250;

/// First wait after a failed watch before listing again; doubled up to [`MAX_RESTART`] while failures repeat.
const FIRST_RESTART: Duration = Duration::from_millis(500);
const MAX_RESTART: Duration = Duration::from_secs(30);

async fn run_one(client: kube::Client, kind: Kind, cache: Arc<Mutex<Cache>>, tx: Arc<watch::Sender<u64>>) {
    let ar = kind.api_resource();
    let api: Api<super::raw::RawObject> = Api::all_with(client, &ar);
    let mut wait = FIRST_RESTART;
    loop {
        // A failed list or watch starts over with a fresh list: only a completed list says the kind is in sync
        // again (kube-runtime alone would resume the watch quietly, and a quiet kind would look failing forever).
        let config = watcher::Config::default().page_size(LIST_PAGE);
        let mut stream = watcher(api.clone(), config).default_backoff().boxed();
        while let Some(item) = stream.next().await {
            let listed = matches!(item, Ok(watcher::Event::InitDone));
            let (notify, failed) = {
                let Ok(mut c) = cache.lock() else { return };
                match item {
                    Ok(event) => {
                        let applied = c.apply(kind, event);
                        if let Some(p) = applied.problem {
                            tracing::warn!(kind = %kind.resource_name(), key = %p.key, "object skipped: {}", p.message);
                        }
                        if listed {
                            wait = FIRST_RESTART;
                        }
                        (applied.changed, false)
                    }
                    Err(e) => {
                        let code = status_code(&e);
                        let absent =
                            (code == Some(404) && kind.optional()) || (code == Some(403) && kind.forbidden_is_absent());
                        if absent {
                            // A CRD not installed (NodeOverlay before upstream v1.7, EC2NodeClass off AWS) is a
                            // normal setup, not a fault: said once, and again only after it was served meanwhile.
                            // The list is still retried (backing off to every 30 s), so a CRD installed later is seen.
                            let news = c.state(kind) != WatchState::Absent;
                            if news && code == Some(403) && kind.for_default_spread() {
                                tracing::warn!(kind = %kind.resource_name(), "not allowed to list (RBAC); default topology spread deduces no selectors from it");
                            } else if news && code == Some(403) {
                                tracing::warn!(kind = %kind.resource_name(), "not allowed to list (RBAC); CapacityBuffers that need it do not resolve");
                            } else if news {
                                tracing::info!(kind = %kind.resource_name(), "not served by the API server (CRD not installed); treated as having no objects");
                            }
                            c.watch_failed(kind, Some(404), e.to_string());
                            (news, true)
                        } else if code != Some(410) {
                            // 410 is routine: the watcher relists by itself.
                            tracing::warn!(kind = %kind.resource_name(), "watch failed: {e}");
                            c.watch_failed(kind, code, e.to_string());
                            (true, true)
                        } else {
                            (false, false)
                        }
                    }
                }
            };
            if notify {
                tx.send_modify(|g| *g += 1);
            }
            if listed {
                // A list leaves its pages' garbage (megabytes of JSON per 500 objects) spread over the allocator's
                // arenas, among the objects kept: hand what is free back rather than keep it resident.
                crate::memory::release_free_memory();
            }
            if failed {
                break;
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_RESTART);
    }
}

impl Watches {
    /// Waits until some kind has listed (the API server answers and lets us read), or `timeout` passes, or every
    /// kind still missing has failed; otherwise says what is missing. The dashboard shows the rest as it arrives.
    pub async fn wait_first_list(&mut self, timeout: Duration) -> Result<(), Vec<String>> {
        self.wait_until(timeout, |c| c.synced() || c.any_listed()).await
    }

    /// Waits until every kind has listed, or `timeout` passes, or every kind still missing has failed (the API
    /// server is unreachable or refuses us: no point waiting); otherwise says what is missing.
    pub async fn wait_synced(&mut self, timeout: Duration) -> Result<(), Vec<String>> {
        self.wait_until(timeout, Cache::synced).await
    }

    /// Waits until `enough` holds of the cache, as the waits above say.
    async fn wait_until(&mut self, timeout: Duration, enough: impl Fn(&Cache) -> bool) -> Result<(), Vec<String>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let missing = match self.cache.lock() {
                Ok(c) if enough(&c) => return Ok(()),
                Ok(c) if c.all_missing_failed() => return Err(c.not_synced()),
                Ok(c) => c.not_synced(),
                Err(_) => vec!["the watch cache is poisoned".to_string()],
            };
            match tokio::time::timeout_at(deadline, self.changed.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Err(missing),
            }
        }
    }
}
