// Request dispatch (docs/protocol.md, "Cancellation"): requests run concurrently, each with its own
// AbortController; `cancel` is acknowledged at once; every request gets exactly one final answer.

import type { Frame } from '@protocol/Frame';
import type { RequestFrame } from '@protocol/RequestFrame';
import { BROWSER_TOOL_METHODS, CANCEL, SESSION_RULES, type BrowserToolMethod } from '@protocol/constants';
import { ToolError } from './errors';

export type Params = Record<string, unknown>;
export type Handler = (params: Params, signal: AbortSignal) => Promise<unknown>;
/**
 * The handler of each tool method this build serves, keyed by the methods of the
 * generated catalogue: a misspelt or unknown method does not compile. A method of
 * the catalogue without a handler is answered `unknown_method`.
 */
export type Handlers = { readonly [M in ServedMethod]?: Handler };

/** The catalogue's methods, and Latchkey's own request (docs/protocol.md, "Latchkey's additions"). */
type ServedMethod = BrowserToolMethod | typeof SESSION_RULES;

const SERVED: ReadonlySet<string> = new Set([...BROWSER_TOOL_METHODS, SESSION_RULES]);

function isBrowserToolMethod(method: string): method is ServedMethod {
  return SERVED.has(method);
}
/** Told of every finished request with its answer (the activity list). */
export type Observer = (method: string, params: Params, answer: { result?: unknown; error?: { code: string } }) => void;

export class Dispatcher {
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly handlers: Handlers,
    private readonly send: (frame: Frame) => void,
    private readonly observe: Observer = () => undefined,
  ) {}

  /** How many requests are running. */
  get inFlight(): number {
    return this.running.size;
  }

  handle(request: RequestFrame): void {
    if (request.method === CANCEL) {
      const target = typeof request.params?.rpc_id === 'string' ? request.params.rpc_id : '';
      const controller = this.running.get(target);
      this.send({ id: request.id, result: { cancelled: controller !== undefined } });
      controller?.abort();
      return;
    }
    const handler = isBrowserToolMethod(request.method) ? this.handlers[request.method] : undefined;
    if (!handler) {
      this.send({
        id: request.id,
        error: { code: 'unknown_method', message: `${request.method} not implemented in extension` },
      });
      return;
    }
    if (this.running.has(request.id)) {
      this.send({ id: request.id, error: { code: 'protocol_error', message: 'duplicate request id' } });
      return;
    }
    const controller = new AbortController();
    this.running.set(request.id, controller);
    const params = (request.params ?? {}) as Params;
    void this.run(request.id, request.method, handler, params, controller);
  }

  /** Abort everything (disconnect): each request still gets its one answer, if the socket is open. */
  abortAll(): void {
    for (const c of this.running.values()) c.abort();
  }

  private async run(id: string, method: string, handler: Handler, params: Params, controller: AbortController): Promise<void> {
    let frame: Frame;
    // A cancelled request is answered at once, even if its handler is stuck (a page
    // that never yields); whatever the handler does later is dropped.
    const cancelled = new Promise<never>((_resolve, reject) => {
      controller.signal.addEventListener('abort', () => reject(new ToolError('cancelled', 'rpc aborted by daemon cancel')), {
        once: true,
      });
    });
    try {
      const work = handler(params, controller.signal);
      work.catch(() => undefined);
      const result = await Promise.race([work, cancelled]);
      frame = { id, result: result === undefined ? null : result };
    } catch (e) {
      if (e instanceof ToolError) {
        frame = { id, error: e.toBody() };
      } else if (controller.signal.aborted) {
        frame = { id, error: { code: 'cancelled', message: 'rpc aborted by daemon cancel' } };
      } else {
        const message = e instanceof Error ? e.message : String(e);
        frame = { id, error: { code: 'protocol_error', message } };
      }
    } finally {
      this.running.delete(id);
    }
    this.send(frame);
    this.observe(method, params, 'error' in frame ? { error: frame.error } : { result: 'result' in frame ? frame.result : undefined });
  }
}

/** Throw `cancelled` if the request was aborted (call at checkpoints). */
export function checkpoint(signal: AbortSignal): void {
  if (signal.aborted) throw new ToolError('cancelled', 'rpc aborted by daemon cancel');
}
