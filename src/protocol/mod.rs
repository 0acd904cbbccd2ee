//! What the dashboard asks of a backend and what comes back. A backend owns the world (simulated or live) and the
//! engine; the UI only ever sees [`crate::protocol::view::ClusterView`] pictures and the outcomes of its requests.

pub mod view;

use std::sync::Arc;

use crate::engine::disruption::gate::Mode;
use crate::engine::packing::Packing;
use crate::engine::whatif::EditPreview;
use crate::protocol::view::ClusterView;

/// A request from the operator, already confirmed in the UI. `request` ties the outcome to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Approve {
        request: u64,
        id: String,
    },
    Reject {
        request: u64,
        id: String,
    },
    SetMode {
        request: u64,
        mode: Mode,
    },
    /// Switch the controller's packing strategy: the next provisioning solve sizes NodeClaims this way.
    SetPacking {
        request: u64,
        packing: Packing,
    },
    /// Set a static NodePool's replicas (through the scale subresource on a live cluster).
    ScaleNodePool {
        request: u64,
        name: String,
        replicas: i64,
    },
    /// Pause (`true`) or resume voluntary disruption: held by this tool's controller when it acts, else a
    /// `nodes: "0"` budget on every NodePool with the replaced budgets kept in an annotation.
    PauseDisruption {
        request: u64,
        pause: bool,
        /// Through the NodePools' budgets even where this instance acts (survives a restart); else the acting
        /// controller holds it and anyone else's is paused through the budgets.
        budgets: bool,
    },
    /// Switch the live dashboard to another kubeconfig context in place (`:ctx NAME`); it observes there.
    SwitchContext {
        request: u64,
        context: String,
    },
    /// The pods on one node, for the drill-down (answered with [`Event::NodePods`]).
    DescribeNode {
        request: u64,
        node: String,
    },
    /// Repair an unhealthy node now instead of when its repair policy's toleration runs out.
    RepairNode {
        request: u64,
        node: String,
    },
    /// Validate and apply an edited NodePool (YAML).
    ApplyNodePool {
        request: u64,
        name: String,
        yaml: String,
    },
    /// Validate and apply an edited NodeOverlay (YAML).
    ApplyNodeOverlay {
        request: u64,
        name: String,
        yaml: String,
    },
    /// Compute what an edited NodePool would do, without applying it.
    PreviewNodePool {
        request: u64,
        name: String,
        yaml: String,
    },
    /// Demo only: clock speed (×), and pause.
    SetSpeed {
        speed: f64,
    },
    SetPaused {
        paused: bool,
    },
    Shutdown,
}

impl Command {
    /// The request id an outcome answers, for commands that have one.
    pub fn request(&self) -> Option<u64> {
        match self {
            Command::Approve { request, .. }
            | Command::Reject { request, .. }
            | Command::SetMode { request, .. }
            | Command::SetPacking { request, .. }
            | Command::PauseDisruption { request, .. }
            | Command::DescribeNode { request, .. }
            | Command::SwitchContext { request, .. }
            | Command::RepairNode { request, .. }
            | Command::ScaleNodePool { request, .. }
            | Command::ApplyNodePool { request, .. }
            | Command::ApplyNodeOverlay { request, .. }
            | Command::PreviewNodePool { request, .. } => Some(*request),
            Command::SetSpeed { .. } | Command::SetPaused { .. } | Command::Shutdown => None,
        }
    }

    /// Whether the command changes the cluster; read-only backends refuse these.
    pub fn is_mutating(&self) -> bool {
        matches!(
            self,
            Command::Approve { .. }
                | Command::Reject { .. }
                | Command::SetMode { .. }
                | Command::SetPacking { .. }
                | Command::PauseDisruption { .. }
                | Command::RepairNode { .. }
                | Command::ScaleNodePool { .. }
                | Command::ApplyNodePool { .. }
                | Command::ApplyNodeOverlay { .. }
        )
    }
}

#[derive(Debug, Clone)]
pub enum Event {
    /// A fresh picture of the cluster.
    View(Arc<ClusterView>),
    /// Only time passed: the last picture stands, seen at this time (ages, the header's clock).
    Clock(crate::engine::provisioning::Millis),
    /// The last picture stands; what the backend is still waiting for moved on (see [`ClusterView::progress`]).
    Progress(String),
    /// How a request ended: a sentence for the status line either way.
    Done { request: u64, outcome: Result<String, String> },
    /// The what-if of an edit (or why it could not be computed).
    Preview { request: u64, result: Result<Box<EditPreview>, String> },
    /// The pods on a node, answering [`Command::DescribeNode`].
    NodePods { request: u64, node: String, result: Result<Vec<crate::protocol::view::NodePodRow>, String> },
    /// Something the operator should know that is not an answer to a request (a scenario event that failed).
    Notice(String),
    /// The backend stopped (error text when it failed).
    Stopped(Option<String>),
}
