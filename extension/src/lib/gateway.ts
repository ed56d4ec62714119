// The connection to the paired gateway: WSS with the `bsk-auth.<token>` subprotocol,
// the handshake (protocol 1.0), heartbeats, reconnect with full-jitter backoff
// honouring the gateway's close codes, and the session teardown on every disconnect
// (docs/protocol.md, "Handshake", "Liveness").

import { browser } from 'wxt/browser';
import type { Frame } from '@protocol/Frame';
import type { HandshakeParams } from '@protocol/HandshakeParams';
import {
  AUTH_SUBPROTOCOL_PREFIX,
  EVENT_HEARTBEAT,
  EVENT_WINDOW_CLOSED,
  FEATURE_AGENT_INFO,
  FEATURE_CONSENT,
  FEATURE_SET_CHECKED,
  FEATURE_SITE_RULES,
  HANDSHAKE_CLIENT_NAME,
  MIN_COMPATIBLE_PROTOCOL,
  PROTOCOL_VERSION,
  SYSTEM_HANDSHAKE,
} from '@protocol/constants';
import { backoffDelay } from './backoff';
import { decideOnClose } from './close';
import { type Credential, loadCredential, saveCredential } from './credential';
import { Dispatcher, type Observer } from './dispatcher';
import type { Sessions } from './sessions';
import { endHere } from './tools/session';

export type Status =
  | 'unpaired'
  | 'connecting'
  | 'connected'
  | 'offline'
  | 'renewing'
  | 'rejected'
  | 'expired'
  | 'revoked'
  | 'replaced'
  | 'disconnected';

export const HEARTBEAT_MS = 20_000;
export const HANDSHAKE_REPLY_MS = 10_000;
const PAUSED_KEY = 'latchkey.paused';
const STATUS_KEY = 'latchkey.status';
const INSTANCE_KEY = 'latchkey.instance_id';

/** Parse a frame the way the extension classifies it (docs/protocol.md, "Frames"); junk →
/** undefined. */
export function parseFrame(text: string): Frame | undefined {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
    const o = v as Record<string, unknown>;
    if (typeof o.method === 'string' && typeof o.id === 'string') return o as unknown as Frame;
    if (typeof o.id === 'string' && ('result' in o || 'error' in o)) return o as unknown as Frame;
    if (typeof o.event === 'string') return o as unknown as Frame;
  } catch {
    // Non-JSON text is dropped silently.
  }
  return undefined;
}

async function instanceId(): Promise<string> {
  const got = await browser.storage.local.get(INSTANCE_KEY);
  const existing = got[INSTANCE_KEY];
  if (typeof existing === 'string' && /^[0-9a-f]{8}$/.test(existing)) return existing;
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  const id = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
  await browser.storage.local.set({ [INSTANCE_KEY]: id });
  return id;
}

function browserInfo(): { name: string; version: string } {
  const match = /Chrome\/([\d.]+)/.exec(navigator.userAgent);
  return { name: 'chromium', version: match?.[1] ?? 'unknown' };
}

export class Gateway {
  status: Status = 'unpaired';
  private ws: WebSocket | undefined;
  private attempt = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  private readonly dispatcher: Dispatcher;
  /** What the gateway reads beyond the contract (its handshake answer's `latchkey_features`). */
  private gatewayFeatures: string[] = [];
  /** The name the team knows this browser by (its handshake answer's `latchkey_device`). */
  deviceLabel: string | undefined;
  /** The name of the team this browser serves (`latchkey_device.team`), kept while offline. */
  teamName: string | undefined;
  /** When the connection was last up (ms since the epoch): now, while connected. */
  lastContactAt: number | undefined;
  /** When the next attempt to connect is due, while offline. */
  nextRetryAt: number | undefined;

  constructor(
    private readonly sessions: Sessions,
    handlers: ConstructorParameters<typeof Dispatcher>[0],
    observer?: Observer,
    /** Told whenever the status changes (the toolbar icon). */
    private readonly changed: () => void = () => undefined,
  ) {
    this.dispatcher = new Dispatcher(handlers, (f) => this.send(f), observer);
  }

  private send(frame: Frame): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  /** Whether the connected gateway reads `feature` (docs/protocol.md, "Latchkey's additions"). */
  supports(feature: string): boolean {
    return this.status === 'connected' && this.gatewayFeatures.includes(feature);
  }

  /** Whether the gateway, when last connected, listed `feature`. */
  listed(feature: string): boolean {
    return this.gatewayFeatures.includes(feature);
  }

  /** Send an event (window closed, user interrupt). */
  event(name: string, payload: Record<string, unknown>): void {
    this.send({ event: name, payload });
  }

  private async setStatus(s: Status): Promise<void> {
    this.status = s;
    if (s !== 'offline') this.nextRetryAt = undefined;
    this.changed();
    await browser.storage.session?.set({ [STATUS_KEY]: s }).catch(() => undefined);
  }

  /** Connect if paired, allowed and not connected: called at start-up and by the keepalive alarm. */
  async ensure(): Promise<void> {
    if (this.ws || this.reconnectTimer) return;
    const paused = (await browser.storage.local.get(PAUSED_KEY))[PAUSED_KEY] === true;
    const c = await loadCredential();
    if (!c) return this.setStatus('unpaired');
    if (c.stopped) return this.setStatus(c.stopped);
    if (c.rejected) return this.setStatus('rejected');
    if (paused) return this.setStatus('disconnected');
    if (Date.now() >= c.expiresAt) return this.setStatus('expired');
    if (this.status === 'revoked' || this.status === 'replaced') return;
    await this.open(c);
  }

  private async open(c: Credential): Promise<void> {
    await this.setStatus('connecting');
    let ws: WebSocket;
    try {
      ws = new WebSocket(c.wsUrl, [`${AUTH_SUBPROTOCOL_PREFIX}${c.token}`]);
    } catch {
      return this.scheduleReconnect();
    }
    this.ws = ws;
    let handshakeId = '';
    let handshakeTimer: ReturnType<typeof setTimeout> | undefined;
    ws.onopen = async () => {
      handshakeId = `hs-${Math.random().toString(36).slice(2, 10)}`;
      const params: HandshakeParams = {
        client: HANDSHAKE_CLIENT_NAME,
        version: browser.runtime.getManifest().version,
        protocol_version: PROTOCOL_VERSION,
        instance_id: await instanceId(),
        browser: browserInfo(),
        label: c.label,
        min_compatible_peer: '0.0.0',
        min_compatible_protocol: MIN_COMPATIBLE_PROTOCOL,
        // What this build does beyond the contract (docs/protocol.md, "Latchkey's additions").
        latchkey_features: [FEATURE_SITE_RULES, FEATURE_CONSENT, FEATURE_AGENT_INFO, FEATURE_SET_CHECKED],
      };
      ws.send(JSON.stringify({ id: handshakeId, method: SYSTEM_HANDSHAKE, params }));
      handshakeTimer = setTimeout(() => ws.close(), HANDSHAKE_REPLY_MS);
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data !== 'string') return;
      const frame = parseFrame(ev.data);
      if (!frame) return;
      if ('method' in frame) {
        if (this.status === 'connected') this.dispatcher.handle(frame);
        return;
      }
      if ('id' in frame && frame.id === handshakeId && this.status === 'connecting') {
        clearTimeout(handshakeTimer);
        if ('result' in frame) {
          const answer = frame.result as { latchkey_features?: unknown; latchkey_device?: { label?: unknown; team?: unknown } } | null;
          const listed = answer?.latchkey_features;
          this.gatewayFeatures = Array.isArray(listed) ? listed.filter((f): f is string => typeof f === 'string').slice(0, 16) : [];
          const label = answer?.latchkey_device?.label;
          this.deviceLabel = typeof label === 'string' && label.trim() ? label.trim().slice(0, 100) : undefined;
          const team = answer?.latchkey_device?.team;
          this.teamName = typeof team === 'string' && team.trim() ? team.trim().slice(0, 100) : undefined;
          this.lastContactAt = Date.now();
          this.attempt = 0;
          void this.setStatus('connected');
          this.heartbeatTimer = setInterval(() => this.send({ event: EVENT_HEARTBEAT, payload: {} }), HEARTBEAT_MS);
        } else {
          ws.close();
        }
      }
    };
    ws.onclose = (ev: CloseEvent) => {
      clearTimeout(handshakeTimer);
      void this.closed(ws, ev.code);
    };
  }

  private async closed(ws: WebSocket, code: number): Promise<void> {
    if (this.ws !== ws) return;
    this.ws = undefined;
    if (this.status === 'connected') this.lastContactAt = Date.now();
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    this.dispatcher.abortAll();
    await this.teardownSessions();
    const decision = decideOnClose(code);
    if (decision.kind === 'stop') {
      // Remembered across service-worker restarts: never reconnect or renew again.
      const c = await loadCredential();
      if (c) await saveCredential({ ...c, stopped: decision.state });
      return this.setStatus(decision.state);
    }
    if (decision.kind === 'replaced') return this.setStatus('replaced');
    if (this.status === 'disconnected') return;
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    void this.setStatus('offline');
    const delay = backoffDelay(this.attempt++);
    this.nextRetryAt = Date.now() + delay;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.ensure();
    }, delay);
  }

  /** Nothing survives a disconnect: return borrowed tabs, close Agent Windows. */
  private async teardownSessions(): Promise<void> {
    for (const s of this.sessions.all()) await endHere(s, this.sessions).catch(() => undefined);
  }

  /** The person closed an Agent Window: the session is gone; tell the gateway. */
  onWindowRemoved(windowId: number): void {
    const s = this.sessions.byWindow(windowId);
    if (!s) return;
    this.sessions.remove(s.id);
    this.event(EVENT_WINDOW_CLOSED, { session_id: s.id, reason: 'user_closed_window' });
  }

  /** Stay paired but stop connecting (until `resume`). */
  async pause(): Promise<void> {
    await browser.storage.local.set({ [PAUSED_KEY]: true });
    await this.setStatus('disconnected');
    this.stop();
  }

  async resume(): Promise<void> {
    await browser.storage.local.remove(PAUSED_KEY);
    this.status = 'offline';
    this.attempt = 0;
    await this.ensure();
  }

  /** Close the socket and cancel any scheduled reconnect. */
  stop(): void {
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const ws = this.ws;
    this.ws = undefined;
    clearInterval(this.heartbeatTimer);
    this.dispatcher.abortAll();
    void this.teardownSessions();
    ws?.close(1000);
  }

  /** After (re)pairing: forget stop states and what the last gateway said, and connect. */
  async restart(): Promise<void> {
    this.stop();
    this.gatewayFeatures = [];
    this.deviceLabel = undefined;
    this.teamName = undefined;
    this.lastContactAt = undefined;
    this.status = 'offline';
    this.attempt = 0;
    await browser.storage.local.remove(PAUSED_KEY);
    await this.ensure();
  }
}
