//! [`FakeBrowser`]: an online extension socket that answers the gateway's requests
//! from a script, over the real socket. It records every request it receives, answers
//! `cancel` as the extension does (ack, then `cancelled` for the aborted request), and
//! can send events or drop the connection on command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::{ErrorBody, ErrorCode, ErrorFrame, Frame, RequestFrame, SuccessFrame};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::extension::{Ended, ExtensionSocket};

/// What the fake extension does with one request.
#[derive(Debug, Clone)]
pub enum Action {
    Reply(Value),
    Error(ErrorBody),
    /// Wait, then act (a `cancel` meanwhile answers `cancelled` instead).
    Delay(Duration, Box<Action>),
    /// Never answer (only a `cancel` ends it).
    Never,
    /// Drop the connection without a Close frame.
    Disconnect,
    /// Like `Delay`, but a `cancel` does not stop it (the ack says `false`): the late
    /// answer still arrives, as when the work had already finished.
    Stubborn(Duration, Box<Action>),
    /// Never answer, and stop reading the socket altogether (a peer whose receive
    /// buffer fills up): the connection stays open until the gateway gives up on it.
    StopReading,
    /// Wait until the test says so (`notify_one`), then act, as a person who
    /// answers a prompt when the test has looked at the waiting state; a
    /// `cancel` meanwhile answers `cancelled`.
    WaitFor(Arc<tokio::sync::Notify>, Box<Action>),
}

/// Decides the action for a request; `None` falls back to the defaults
/// (`session_start` → a new window id, `session_stop` → `{}`, anything else → `{"ok": true}`).
pub type Script = Arc<dyn Fn(&RequestFrame) -> Option<Action> + Send + Sync>;

enum Command {
    Send(String),
    Drop,
}

/// A scripted extension connected to a real gateway.
pub struct FakeBrowser {
    received: Arc<Mutex<Vec<RequestFrame>>>,
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<Ended>,
}

impl std::fmt::Debug for FakeBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBrowser").finish_non_exhaustive()
    }
}

fn success(id: &str, result: Value) -> String {
    Frame::Success(SuccessFrame {
        id: id.to_string(),
        result,
    })
    .to_text()
}

fn failure(id: &str, error: ErrorBody) -> String {
    Frame::Error(ErrorFrame {
        id: id.to_string(),
        error,
    })
    .to_text()
}

/// A script where `method` never answers (only a `cancel` ends it) and everything
/// else gets the default answer.
pub fn never_answers(method: &'static str) -> Script {
    Arc::new(move |r| (r.method == method).then_some(Action::Never))
}

static NEXT_WINDOW: AtomicI64 = AtomicI64::new(1000);

fn default_action(request: &RequestFrame) -> Action {
    match request.method.as_str() {
        "tool.session_start" => {
            Action::Reply(json!({ "agent_window_id": NEXT_WINDOW.fetch_add(1, Ordering::Relaxed) }))
        }
        "tool.session_stop" => Action::Reply(json!({})),
        _ => Action::Reply(json!({ "ok": true, "method": request.method, "echo": request.params })),
    }
}

impl FakeBrowser {
    /// Serve `socket` (already handshaken) with `script`.
    pub fn serve(socket: ExtensionSocket, script: Script) -> FakeBrowser {
        let received = Arc::new(Mutex::new(Vec::new()));
        let (commands, command_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(
            socket,
            script,
            received.clone(),
            command_rx,
            commands.clone(),
        ));
        FakeBrowser {
            received,
            commands,
            task,
        }
    }

    /// Serve with the default answers only.
    pub fn serve_default(socket: ExtensionSocket) -> FakeBrowser {
        Self::serve(socket, Arc::new(|_| None))
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<RequestFrame> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The first request received with this method.
    pub fn first(&self, method: &str) -> Option<RequestFrame> {
        self.received().into_iter().find(|r| r.method == method)
    }

    /// How many requests with this method were received.
    pub fn count(&self, method: &str) -> usize {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|r| r.method == method)
            .count()
    }

    pub fn received_methods(&self) -> Vec<String> {
        self.received().into_iter().map(|r| r.method).collect()
    }

    /// Send an event frame (e.g. `session.user_interrupt`).
    pub fn event(&self, name: &str, payload: Value) {
        let frame = json!({ "event": name, "payload": payload }).to_string();
        let _ = self.commands.send(Command::Send(frame));
    }

    /// Drop the connection without a Close frame.
    pub fn drop_connection(&self) {
        let _ = self.commands.send(Command::Drop);
    }

    /// Wait for the connection to end; how it ended.
    pub async fn ended(&mut self, deadline: Duration) -> anyhow::Result<Ended> {
        Ok(tokio::time::timeout(deadline, &mut self.task).await??)
    }
}

async fn run(
    socket: ExtensionSocket,
    script: Script,
    received: Arc<Mutex<Vec<RequestFrame>>>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    outbound: mpsc::UnboundedSender<Command>,
) -> Ended {
    let (mut sink, mut stream) = socket.ws.split();
    // Requests whose answer is delayed or never comes, by id: cancellable.
    let mut pending: HashMap<String, JoinHandle<()>> = HashMap::new();
    let mut reading = true;
    loop {
        tokio::select! {
            cmd = commands.recv() => match cmd {
                Some(Command::Send(text)) => {
                    if sink.send(Message::text(text)).await.is_err() {
                        return Ended::Dropped;
                    }
                }
                Some(Command::Drop) | None => return Ended::Dropped,
            },
            msg = stream.next(), if reading => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(frame))) => {
                        return frame.map(|f| Ended::Closed(f.code.into())).unwrap_or(Ended::Dropped);
                    }
                    Some(Ok(_)) => continue,
                    None | Some(Err(_)) => return Ended::Dropped,
                };
                let Ok(Frame::Request(request)) = Frame::parse(text.as_str()) else {
                    continue;
                };
                received.lock().unwrap_or_else(|p| p.into_inner()).push(request.clone());
                pending.retain(|_, task| !task.is_finished());
                if request.method == "cancel" {
                    let target = request
                        .params
                        .as_ref()
                        .and_then(|p| p.get("rpc_id"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let running = pending.remove(&target);
                    let was_running = running.is_some();
                    let ack = success(&request.id, json!({ "cancelled": was_running }));
                    if sink.send(Message::text(ack)).await.is_err() {
                        return Ended::Dropped;
                    }
                    if let Some(task) = running {
                        task.abort();
                        let error = ErrorBody::new(ErrorCode::Cancelled, "rpc aborted by daemon cancel");
                        if sink.send(Message::text(failure(&target, error))).await.is_err() {
                            return Ended::Dropped;
                        }
                    }
                    continue;
                }
                let action = script(&request).unwrap_or_else(|| default_action(&request));
                let stubborn = matches!(action, Action::Stubborn(..));
                let id = request.id.clone();
                match action {
                    Action::Disconnect => return Ended::Dropped,
                    Action::StopReading => reading = false,
                    Action::Never => {
                        pending.insert(id, tokio::spawn(std::future::pending()));
                    }
                    Action::Delay(..) | Action::Stubborn(..) | Action::WaitFor(..) => {
                        let out = outbound.clone();
                        let task_id = id.clone();
                        let (wait, then): (std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>, _) = match action {
                            Action::Delay(after, then) | Action::Stubborn(after, then) => {
                                (Box::pin(tokio::time::sleep(after)), then)
                            }
                            Action::WaitFor(gate, then) => {
                                (Box::pin(async move { gate.notified().await }), then)
                            }
                            _ => unreachable!("matched above"),
                        };
                        let task = tokio::spawn(async move {
                            wait.await;
                            let text = match *then {
                                Action::Reply(v) => success(&task_id, v),
                                Action::Error(e) => failure(&task_id, e),
                                Action::Disconnect => {
                                    let _ = out.send(Command::Drop);
                                    return;
                                }
                                Action::Delay(..)
                                | Action::Stubborn(..)
                                | Action::WaitFor(..)
                                | Action::Never
                                | Action::StopReading => return,
                            };
                            let _ = out.send(Command::Send(text));
                        });
                        if !stubborn {
                            pending.insert(id, task);
                        }
                    }
                    Action::Reply(v) => {
                        if sink.send(Message::text(success(&id, v))).await.is_err() {
                            return Ended::Dropped;
                        }
                    }
                    Action::Error(e) => {
                        if sink.send(Message::text(failure(&id, e))).await.is_err() {
                            return Ended::Dropped;
                        }
                    }
                }
            }
        }
    }
}
