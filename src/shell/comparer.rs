//! Works out launching solves' packing comparisons (the other strategy's solve and the LP bound, seconds at tens
//! of thousands of pods) on a blocking thread, one at a time, after the solve's NodeClaims are out: neither the pods
//! nor the controller's loop wait for them. A comparison cannot be stopped part-way (the LP solver has no way to
//! be interrupted), so a newer one waits for the running one to finish, replacing any older one still waiting.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::controller::provisioning::{Comparison, PackingPass};

pub struct Comparer {
    running: Option<JoinHandle<()>>,
    waiting: Option<Comparison>,
    /// Where the running comparison puts its answer before it pings `notify`.
    done: Arc<Mutex<Option<PackingPass>>>,
    /// Pinged when a comparison finishes, so that the loop takes it up.
    notify: Arc<Notify>,
}

impl Comparer {
    pub fn new(notify: Arc<Notify>) -> Comparer {
        Comparer { running: None, waiting: None, done: Arc::default(), notify }
    }

    /// What [`Comparer::finished`] should be asked after it is pinged.
    pub fn signal(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// Hands over a new comparison: started at once if none is running, else it waits (in place of one waiting).
    pub fn submit(&mut self, comparison: Comparison) {
        self.waiting = Some(comparison);
        self.start();
    }

    fn start(&mut self) {
        if self.running.is_some() {
            return;
        }
        let Some(c) = self.waiting.take() else { return };
        let (done, notify) = (self.done.clone(), self.notify.clone());
        self.running = Some(tokio::task::spawn_blocking(move || {
            let pass = c.run();
            // The answer is in place before the ping: whoever is woken finds it.
            *done.lock().unwrap_or_else(|e| e.into_inner()) = Some(pass);
            notify.notify_one();
        }));
    }

    /// The comparison that finished, if one did since the last look; starts the one waiting.
    pub fn finished(&mut self) -> Option<PackingPass> {
        let pass = self.done.lock().unwrap_or_else(|e| e.into_inner()).take();
        let failed = pass.is_none() && self.running.as_ref().is_some_and(JoinHandle::is_finished);
        if failed {
            tracing::warn!("a packing comparison failed before it had an answer; the next launch is compared again");
        }
        if pass.is_some() || failed {
            self.running = None;
            self.start();
        }
        pass
    }
}
