// Console and network logs of Agent Window tabs (docs/protocol.md, "Tools"): bounded buffers
// fed by debugger events, read with a cursor. 200 entries per tab and kind, 4,096 characters
// per field, 20 stack frames; the oldest entries go first.

import type { Cdp } from './cdp';

export const BUFFER_ENTRIES = 200;
export const FIELD_CHARS = 4_096;
export const STACK_FRAMES = 20;

export interface StackFrame {
  function_name?: string;
  url?: string;
  line?: number;
  column?: number;
}

export interface ConsoleEntry {
  sequence: number;
  kind: 'console' | 'exception' | 'log';
  level: string;
  text: string;
  url?: string;
  line?: number;
  column?: number;
  timestamp?: number;
  stack_trace?: StackFrame[];
  truncated: boolean;
}

export interface NetworkEntry {
  sequence: number;
  kind: 'response' | 'failure';
  method?: string;
  url?: string;
  status?: number;
  status_text?: string;
  mime_type?: string;
  resource_type?: string;
  error_text?: string;
  timestamp?: number;
  truncated: boolean;
}

interface Ring<T> {
  entries: T[];
  next: number;
}

type P = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Cut `text` to `max` characters; says whether it did. */
export function cut(text: string, max: number): [string, boolean] {
  return text.length > max ? [text.slice(0, max), true] : [text, false];
}

/** One console argument as text, the way DevTools prints it in one line. */
function argText(a: P): string {
  if ('value' in a) return typeof a.value === 'string' ? a.value : JSON.stringify(a.value);
  return str(a.unserializableValue) ?? str(a.description) ?? str(a.type) ?? '';
}

function stackOf(trace: unknown): StackFrame[] | undefined {
  const frames = (trace as { callFrames?: P[] } | undefined)?.callFrames;
  if (!Array.isArray(frames) || frames.length === 0) return undefined;
  return frames.slice(0, STACK_FRAMES).map((f) => ({
    ...(str(f.functionName) ? { function_name: str(f.functionName) } : {}),
    ...(str(f.url) ? { url: str(f.url) } : {}),
    ...(num(f.lineNumber) !== undefined ? { line: num(f.lineNumber) } : {}),
    ...(num(f.columnNumber) !== undefined ? { column: num(f.columnNumber) } : {}),
  }));
}

export class LogBuffers {
  private readonly console = new Map<number, Ring<ConsoleEntry>>();
  private readonly network = new Map<number, Ring<NetworkEntry>>();
  /** Methods of requests in flight, for their response or failure. Bounded per tab. */
  private readonly methods = new Map<number, Map<string, { method: string; url: string }>>();

  constructor(cdp: Pick<Cdp, 'onEvent' | 'onDetach'>) {
    cdp.onEvent((tabId, method, params) => this.onEvent(tabId, method, params));
    cdp.onDetach((tabId) => this.forget(tabId));
  }

  forget(tabId: number): void {
    this.console.delete(tabId);
    this.network.delete(tabId);
    this.methods.delete(tabId);
  }

  private push<T extends { sequence: number }>(map: Map<number, Ring<T>>, tabId: number, entry: Omit<T, 'sequence'>): void {
    let ring = map.get(tabId);
    if (!ring) {
      ring = { entries: [], next: 1 };
      map.set(tabId, ring);
    }
    ring.entries.push({ ...entry, sequence: ring.next++ } as T);
    if (ring.entries.length > BUFFER_ENTRIES) ring.entries.shift();
  }

  /** Feed one debugger event (public for the unit tests). */
  onEvent(tabId: number, method: string, p: P): void {
    switch (method) {
      case 'Runtime.consoleAPICalled': {
        const args = Array.isArray(p.args) ? (p.args as P[]) : [];
        const stack = stackOf(p.stackTrace);
        const [text, truncated] = cut(args.map(argText).join(' '), FIELD_CHARS);
        const top = stack?.[0];
        this.push<ConsoleEntry>(this.console, tabId, {
          kind: 'console',
          level: str(p.type) ?? 'log',
          text,
          ...(top?.url ? { url: top.url } : {}),
          ...(top?.line !== undefined ? { line: top.line, column: top.column } : {}),
          ...(num(p.timestamp) !== undefined ? { timestamp: num(p.timestamp) } : {}),
          ...(stack ? { stack_trace: stack } : {}),
          truncated,
        });
        break;
      }
      case 'Runtime.exceptionThrown': {
        const d = (p.exceptionDetails ?? {}) as P;
        const exception = (d.exception ?? {}) as P;
        const [text, truncated] = cut(str(exception.description) ?? str(d.text) ?? 'exception', FIELD_CHARS);
        const stack = stackOf(d.stackTrace);
        this.push<ConsoleEntry>(this.console, tabId, {
          kind: 'exception',
          level: 'error',
          text,
          ...(str(d.url) ? { url: str(d.url) } : {}),
          ...(num(d.lineNumber) !== undefined ? { line: num(d.lineNumber), column: num(d.columnNumber) } : {}),
          ...(num(p.timestamp) !== undefined ? { timestamp: num(p.timestamp) } : {}),
          ...(stack ? { stack_trace: stack } : {}),
          truncated,
        });
        break;
      }
      case 'Log.entryAdded': {
        const e = (p.entry ?? {}) as P;
        const [text, truncated] = cut(str(e.text) ?? '', FIELD_CHARS);
        this.push<ConsoleEntry>(this.console, tabId, {
          kind: 'log',
          level: str(e.level) ?? 'info',
          text,
          ...(str(e.url) ? { url: str(e.url) } : {}),
          ...(num(e.lineNumber) !== undefined ? { line: num(e.lineNumber) } : {}),
          ...(num(e.timestamp) !== undefined ? { timestamp: num(e.timestamp) } : {}),
          truncated,
        });
        break;
      }
      case 'Network.requestWillBeSent': {
        const id = str(p.requestId);
        const request = (p.request ?? {}) as P;
        if (!id) break;
        let pending = this.methods.get(tabId);
        if (!pending) {
          pending = new Map();
          this.methods.set(tabId, pending);
        }
        pending.set(id, { method: str(request.method) ?? 'GET', url: str(request.url) ?? '' });
        // Requests that never finish must not grow the map without bound.
        if (pending.size > BUFFER_ENTRIES * 5) pending.delete(pending.keys().next().value as string);
        break;
      }
      case 'Network.responseReceived': {
        const r = (p.response ?? {}) as P;
        const request = this.take(tabId, p.requestId);
        const [url, truncated] = cut(str(r.url) ?? request?.url ?? '', FIELD_CHARS);
        this.push<NetworkEntry>(this.network, tabId, {
          kind: 'response',
          ...(request ? { method: request.method } : {}),
          url,
          ...(num(r.status) !== undefined ? { status: num(r.status) } : {}),
          ...(str(r.statusText) ? { status_text: str(r.statusText) } : {}),
          ...(str(r.mimeType) ? { mime_type: str(r.mimeType) } : {}),
          ...(str(p.type) ? { resource_type: str(p.type) } : {}),
          timestamp: Date.now(),
          truncated,
        });
        break;
      }
      case 'Network.loadingFailed': {
        const request = this.take(tabId, p.requestId, true);
        const [url, urlCut] = cut(request?.url ?? '', FIELD_CHARS);
        const [error, errorCut] = cut(str(p.errorText) ?? 'failed', FIELD_CHARS);
        this.push<NetworkEntry>(this.network, tabId, {
          kind: 'failure',
          ...(request ? { method: request.method } : {}),
          ...(url ? { url } : {}),
          ...(str(p.type) ? { resource_type: str(p.type) } : {}),
          error_text: error,
          timestamp: Date.now(),
          truncated: urlCut || errorCut,
        });
        break;
      }
      case 'Network.loadingFinished':
        this.take(tabId, p.requestId, true);
        break;
    }
  }

  /** The request behind an event; `done` drops it (its loading finished or failed). */
  private take(tabId: number, requestId: unknown, done = false): { method: string; url: string } | undefined {
    const id = str(requestId);
    const pending = this.methods.get(tabId);
    if (!id || !pending) return undefined;
    const found = pending.get(id);
    if (done) pending.delete(id);
    return found;
  }

  consoleSince(tabId: number, since: number): { entries: ConsoleEntry[]; last: number } {
    const ring = this.console.get(tabId);
    return { entries: (ring?.entries ?? []).filter((e) => e.sequence > since), last: (ring?.next ?? 1) - 1 };
  }

  networkSince(tabId: number, since: number): { entries: NetworkEntry[]; last: number } {
    const ring = this.network.get(tabId);
    return { entries: (ring?.entries ?? []).filter((e) => e.sequence > since), last: (ring?.next ?? 1) - 1 };
  }
}
