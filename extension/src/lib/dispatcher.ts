// Request dispatch (contract §5): requests run concurrently, each with its own
// AbortController; `cancel` is acknowledged at once; every request gets exactly one
// final answer.

import type { Frame } from '@protocol/Frame';
import type { RequestFrame } from '@protocol/RequestFrame';
import { CANCEL } from '@protocol/constants';
import { ToolError } from './errors';

export type Params = Record<string, unknown>;
export type Handler = (params: Params, signal: AbortSignal) => Promise<unknown>;

export class Dispatcher {
  private readonly running = new Map<string, AbortController>();

  constructor(
    private readonly handlers: Record<string, Handler>,
    private readonly send: (frame: Frame) => void,
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
    const handler = this.handlers[request.method];
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
    void this.run(request.id, handler, params, controller);
  }

  /** Abort everything (disconnect): each request still gets its one answer, if the socket is open. */
  abortAll(): void {
    for (const c of this.running.values()) c.abort();
  }

  private async run(id: string, handler: Handler, params: Params, controller: AbortController): Promise<void> {
    let frame: Frame;
    try {
      const result = await handler(params, controller.signal);
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
  }
}

/** Throw `cancelled` if the request was aborted (call at checkpoints). */
export function checkpoint(signal: AbortSignal): void {
  if (signal.aborted) throw new ToolError('cancelled', 'rpc aborted by daemon cancel');
}
