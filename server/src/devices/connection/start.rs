//! A device connection's start: the grant re-checked after the upgrade, the handshake read and
//! judged (docs/protocol.md, "Handshake"), and everything the answer implies put in place before it
//! is written.

use latchkey_protocol::EndReason;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::additions::Features;
use latchkey_protocol::handshake::HandshakeParams;
use latchkey_protocol::{CloseCode, ErrorFrame, Frame, SuccessFrame, text};
use tokio::time::timeout;
use tracing::{info, info_span, warn};

use super::Connection;
use crate::audit::{Event, Priority, action};
use crate::devices::ending::{End, close_signal, read_failed};
use crate::devices::grant::Verdict;
use crate::devices::handshake;
use crate::devices::link::DeviceLink;
use crate::devices::registry::AttachError;
use crate::socket::{Inbound, Socket};
use crate::telemetry::metrics as telemetry;

impl<S: Socket> Connection<S> {
    /// Everything up to the handshake's answer and the connect audit event.
    pub(super) async fn start(&mut self) -> Result<(), End> {
        if let Some(code) = self.pending_close() {
            return Err(End::close(code, "closed before start"));
        }
        // Re-check the grant after the upgrade (docs/protocol.md, "The upgrade"). Every revocation
        // on this node is signalled through the registry, where this device is now registered: if
        // none was signalled since the device was authenticated, the record read then is the
        // grant, and a store read per reconnect is saved. One signalled since sends us to the
        // store. (A revocation on another node reaches this socket like any other: by the grant
        // sweep.)
        if self.state.registry.grant_changes() == self.grant_changes {
            let verdict = Verdict::of(Some(&self.device), self.state.clock.now_ms());
            if let Some(code) = verdict.close_code() {
                return Err(End::close(code, verdict.why()));
            }
        } else {
            self.recheck_after_upgrade().await?;
        }
        let handshake_timeout = Duration::from_millis(self.limits().handshake_timeout_ms);
        let mut close_rx = self.registration.close.clone();
        let shutdown = self.state.closing.clone();
        let handshake = tokio::select! {
            r = tracing::Instrument::instrument(timeout(handshake_timeout, self.read_handshake()), info_span!("handshake")) => match r {
                Err(_) => return Err(End::close(CloseCode::PolicyViolation, "handshake timeout")),
                Ok(r) => r,
            },
            code = close_signal(&mut close_rx) => return Err(End::close(code, "closed during handshake")),
            _ = shutdown.cancelled() => return Err(End::close(self.state.shutdown_close(), "shutdown")),
        };
        let (id, params) = handshake?;
        // Everything the device's answer implies is in place before the answer: it is
        // routable, and its browser and the connect are recorded. Calls routed now wait
        // in the outbox, which is written only after the handshake result. A new socket
        // is a new extension control plane: sessions bound to this device from an older
        // socket are gone (docs/protocol.md, "Handshake").
        self.state
            .sessions
            .purge_device(&self.device.id, EndReason::BrowserReconnected);
        let features = Features::of(params.latchkey_features.as_deref());
        // The team's name only for an extension that shows it (a cached read).
        let team = if features.agent_info {
            self.state
                .team_names
                .of(self.state.store.as_ref(), &self.device.tenant_id)
                .await
                .map(|name| {
                    latchkey_protocol::text::clean(&name, latchkey_protocol::text::MAX_LABEL_CHARS)
                })
        } else {
            None
        };
        let result = handshake::result(features, &self.device.label, team);
        let link = DeviceLink::with_features(
            &self.device.id,
            &self.device.tenant_id,
            self.limits().max_calls_in_flight_per_device,
            features,
        );
        match self.state.registry.attach_link(
            &self.device.id,
            self.registration.generation,
            link.clone(),
            self.limits().max_online_devices,
        ) {
            Ok(()) => {}
            Err(AttachError::Replaced) => {
                return Err(End::close(CloseCode::Replaced, "replaced during handshake"));
            }
            Err(AttachError::AtCapacity) => {
                telemetry::refused("connection_capacity_reached");
                return Err(End::close(
                    CloseCode::TryAgainLater,
                    "node at device capacity",
                ));
            }
        }
        self.link = Some(link);
        // A socket of this device on another replica is older: it closes there.
        self.state
            .peers
            .tell(latchkey_protocol::cluster::Notice::DeviceConnected {
                tenant_id: self.device.tenant_id.clone(),
                device_id: self.device.id.clone(),
                connected_at_ms: self.registration.connected_at_ms,
                features: features.names().into_iter().map(str::to_string).collect(),
            });
        self.registration
            .state
            .online
            .store(true, Ordering::Relaxed);
        self.handshaken = true;
        metrics::gauge!(telemetry::DEVICES_CONNECTED).increment(1.0);
        // One queued item, one wait: the browser record and the connect event share
        // the audit writer's next transaction. The writer cleans what the device
        // said (the handshake's judge already bounded it).
        self.state
            .audit
            .record_seen(
                Priority::Urgent,
                &self.device.id,
                self.state.clock.now_ms(),
                Some((&params.browser.name, &params.browser.version)),
                Event::by_device(
                    &self.device.tenant_id,
                    &self.device.id,
                    action::DEVICE_CONNECT,
                    "ok",
                    Some(format!(
                        "from {} extension {} protocol {} browser {}",
                        self.peer, params.version, params.protocol_version, params.browser.name
                    )),
                ),
            )
            .await;
        self.send_frame(Frame::Success(SuccessFrame { id, result }))
            .await?;
        info!(
            extension_version = %text::clean(&params.version, text::MAX_HANDSHAKE_FIELD_CHARS),
            protocol = %text::clean(&params.protocol_version, text::MAX_HANDSHAKE_FIELD_CHARS),
            features = ?features.names(),
            "device online"
        );
        Ok(())
    }

    /// Read the grant again: gone, revoked or expired refuses the device, and so
    /// does a store that cannot answer: this grant has not been confirmed since a
    /// revocation was signalled, so it gets no grace (devices::grant::FailClosed).
    async fn recheck_after_upgrade(&mut self) -> Result<(), End> {
        let read = self
            .state
            .store
            .device(&self.device.tenant_id, &self.device.id)
            .await;
        let verdict = match read {
            Ok(record) => {
                let verdict = Verdict::of(record.as_ref(), self.state.clock.now_ms());
                if let (Verdict::Live, Some(record)) = (verdict, record) {
                    self.device = record;
                }
                verdict
            }
            Err(e) => {
                warn!(error = %e, "grant re-check failed after upgrade");
                // Not confirmed since a revocation was signalled: no grace
                // (devices::grant::FailClosed).
                Verdict::Unconfirmed
            }
        };
        match verdict.close_code() {
            None => Ok(()),
            Some(code) => Err(End::close(code, verdict.why())),
        }
    }

    /// Wait for the first frame (unless it was read already) and judge it
    /// (docs/protocol.md, "Handshake").
    async fn read_handshake(&mut self) -> Result<(String, HandshakeParams), End> {
        loop {
            let msg = match self.first_frame.take() {
                Some(text) => Inbound::Text(text),
                None => match self.socket.next().await {
                    None => return Err(End::gone("closed before handshake")),
                    Some(Err(e)) => return Err(read_failed(e)),
                    Some(Ok(m)) => m,
                },
            };
            let text = match msg {
                Inbound::Text(t) => t,
                Inbound::Ping => {
                    self.flush_queued().await?;
                    continue;
                }
                Inbound::Pong => continue,
                Inbound::Close => return Err(End::peer_closed("closed before handshake")),
                Inbound::Binary => {
                    return Err(End::close(CloseCode::PolicyViolation, "binary first frame"));
                }
            };
            return match handshake::judge(text.as_str()) {
                Ok(accepted) => Ok(accepted),
                Err(refused) => {
                    if let Some((id, error)) = refused.reply {
                        let _ = self
                            .send_frame(Frame::Error(ErrorFrame { id, error }))
                            .await;
                    }
                    Err(End::close(CloseCode::PolicyViolation, refused.why))
                }
            };
        }
    }
}
