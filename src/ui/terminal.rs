//! The dashboard's event loop: terminal input, backend events and a slow tick in, the reducer in the middle, effects
//! out (commands to the backend, audit records). It redraws only when something changed, so an idle dashboard
//! costs nothing. The terminal is restored on quit, on error and on panic (ratatui's hook).

use std::time::Duration;

use anyhow::Context as _;
use crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use futures_util::StreamExt;
use ratatui::DefaultTerminal;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::protocol::{Command, Event};
use crate::ui::app::{AppState, Effect, Msg, update};
use crate::ui::audit::{AuditLog, AuditRecord};

/// How often the screen refreshes with nothing new (ages, the clock).
const TICK: Duration = Duration::from_secs(1);

/// Where commands go: the simulated driver's thread, or the live backend's task.
pub trait CommandSink {
    fn send(&self, cmd: Command) -> bool;
}

impl CommandSink for std::sync::mpsc::Sender<Command> {
    fn send(&self, cmd: Command) -> bool {
        std::sync::mpsc::Sender::send(self, cmd).is_ok()
    }
}

impl CommandSink for tokio::sync::mpsc::UnboundedSender<Command> {
    fn send(&self, cmd: Command) -> bool {
        tokio::sync::mpsc::UnboundedSender::send(self, cmd).is_ok()
    }
}

pub struct Session<S: CommandSink> {
    pub state: AppState,
    pub commands: S,
    pub events: UnboundedReceiver<Event>,
    pub audit: AuditLog,
    /// The context name written into audit records.
    pub context: String,
}

/// Takes over the terminal, runs until quit, and gives the terminal back whatever happens.
pub async fn run<S: CommandSink>(session: Session<S>) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let result = event_loop(&mut terminal, session).await;
    ratatui::restore();
    result
}

fn backend_msg(e: Event) -> Msg {
    match e {
        Event::View(v) => Msg::View(v),
        Event::Clock(now) => Msg::Clock(now),
        Event::Progress(text) => Msg::Progress(text),
        Event::Done { request, outcome } => Msg::Done { request, outcome },
        Event::Preview { request, result } => Msg::Preview { request, result },
        Event::NodePods { request, node, result } => Msg::NodePods { request, node, result },
        Event::Stopped(err) => Msg::BackendStopped(err),
        Event::Notice(text) => Msg::Warn(text),
    }
}

async fn event_loop<S: CommandSink>(terminal: &mut DefaultTerminal, mut s: Session<S>) -> anyhow::Result<()> {
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    let mut dirty = true;
    let mut backend_open = true;
    loop {
        if dirty {
            terminal.draw(|f| f.render_widget(&s.state, f.area())).context("drawing")?;
            dirty = false;
        }
        let mut msgs = Vec::new();
        tokio::select! {
            ev = input.next() => match ev {
                Some(Ok(TermEvent::Key(k))) if k.kind != KeyEventKind::Release => msgs.push(Msg::Key(k)),
                Some(Ok(TermEvent::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e).context("reading the terminal"),
                None => return Ok(()),
            },
            ev = s.events.recv(), if backend_open => match ev {
                Some(e) => {
                    msgs.push(backend_msg(e));
                    // Coalesce a burst of pictures into one redraw.
                    while let Ok(e) = s.events.try_recv() {
                        msgs.push(backend_msg(e));
                    }
                }
                None => {
                    backend_open = false;
                    msgs.push(Msg::BackendStopped(None));
                }
            },
            _ = tick.tick() => dirty = true,
        }
        let mut queue: std::collections::VecDeque<Msg> = msgs.into();
        while let Some(m) = queue.pop_front() {
            dirty = true;
            for effect in update(&mut s.state, m) {
                match effect {
                    Effect::Quit => {
                        s.commands.send(Command::Shutdown);
                        return Ok(());
                    }
                    Effect::ExternalEdit { name, text } => {
                        // The editor needs the terminal and stdin to itself: leave the alternate screen, stop
                        // reading keys, and take both back afterwards.
                        drop(input);
                        ratatui::restore();
                        let result = crate::ui::editor::edit_externally(&text, &name).map_err(|e| e.to_string());
                        *terminal = ratatui::try_init().context("restoring the terminal after $EDITOR")?;
                        terminal.clear().context("redrawing after $EDITOR")?;
                        input = EventStream::new();
                        queue.push_back(Msg::ExternalEdited(result));
                    }
                    Effect::Send(cmd) => {
                        if !s.commands.send(cmd) {
                            s.state.status = Some(crate::ui::app::Status {
                                text: "the backend is gone; nothing was sent".into(),
                                error: true,
                            });
                        }
                    }
                    Effect::Audit { action, target, outcome, detail } => {
                        let rec = AuditRecord {
                            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                            // The context in use now: `:ctx` may have switched it since the session began.
                            context: if s.state.view.source.context.is_empty() {
                                s.context.clone()
                            } else {
                                s.state.view.source.context.clone()
                            },
                            action,
                            target,
                            outcome,
                            detail,
                        };
                        if let Err(e) = s.audit.append(&rec) {
                            tracing::error!("audit log {}: {e}", s.audit.path().display());
                            s.state.status = Some(crate::ui::app::Status {
                                text: format!("could not write the audit log {}: {e}", s.audit.path().display()),
                                error: true,
                            });
                        }
                    }
                }
            }
        }
    }
}
