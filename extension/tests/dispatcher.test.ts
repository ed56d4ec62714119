import { describe, expect, it } from 'vitest';
import type { Frame } from '@protocol/Frame';
import { checkpoint, Dispatcher, type Handler } from '../src/lib/dispatcher';
import { ToolError } from '../src/lib/errors';

function setup(handlers: Record<string, Handler>) {
  const sent: Frame[] = [];
  const d = new Dispatcher(handlers, (f) => sent.push(f));
  return { d, sent };
}

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(cond()).toBe(true);
};

describe('Dispatcher', () => {
  it('tells the observer each finished request with its outcome', async () => {
    const seen: [string, unknown][] = [];
    const d = new Dispatcher(
      { 'tool.ok': async () => ({ tab_id: 3 }), 'tool.bad': async () => Promise.reject(new ToolError('not_found', 'x')) },
      () => undefined,
      (method, _params, answer) => seen.push([method, answer]),
    );
    d.handle({ id: '1', method: 'tool.ok', params: {} });
    d.handle({ id: '2', method: 'tool.bad', params: {} });
    await until(() => seen.length === 2);
    expect(seen).toContainEqual(['tool.ok', { result: { tab_id: 3 } }]);
    expect(seen).toContainEqual(['tool.bad', { error: { code: 'not_found', message: 'x' } }]);
  });

  it('answers unknown methods with unknown_method', () => {
    const { d, sent } = setup({});
    d.handle({ id: 'a', method: 'tool.nope' });
    expect(sent).toEqual([{ id: 'a', error: { code: 'unknown_method', message: 'tool.nope not implemented in extension' } }]);
  });

  it('acks a cancel at once, then sends exactly one cancelled answer', async () => {
    const slow: Handler = (_p, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    const { d, sent } = setup({ 'tool.slow': slow });
    d.handle({ id: 'r1', method: 'tool.slow', params: {} });
    d.handle({ id: 'c1', method: 'cancel', params: { rpc_id: 'r1' } });
    expect(sent[0]).toEqual({ id: 'c1', result: { cancelled: true } });
    await until(() => sent.length === 2);
    expect(sent[1]).toEqual({ id: 'r1', error: { code: 'cancelled', message: 'rpc aborted by daemon cancel' } });
    d.handle({ id: 'c2', method: 'cancel', params: { rpc_id: 'r1' } });
    expect(sent[2]).toEqual({ id: 'c2', result: { cancelled: false } });
    expect(d.inFlight).toBe(0);
  });

  it('keeps a success that finished before the cancel', async () => {
    const { d, sent } = setup({ 'tool.fast': async () => ({ ok: 1 }) });
    d.handle({ id: 'r', method: 'tool.fast' });
    await until(() => sent.length === 1);
    d.handle({ id: 'c', method: 'cancel', params: { rpc_id: 'r' } });
    expect(sent).toEqual([{ id: 'r', result: { ok: 1 } }, { id: 'c', result: { cancelled: false } }]);
  });

  it('passes tool errors through and maps crashes to protocol_error', async () => {
    const { d, sent } = setup({
      'tool.bad': async () => {
        throw ToolError.reason('permission_denied', 'nope', 'agent_window_scope');
      },
      'tool.crash': async () => {
        throw new Error('boom');
      },
      'tool.checkpoint': async (_p, signal) => {
        checkpoint(signal);
        return null;
      },
    });
    d.handle({ id: '1', method: 'tool.bad' });
    d.handle({ id: '2', method: 'tool.crash' });
    d.handle({ id: '3', method: 'tool.checkpoint' });
    await until(() => sent.length === 3);
    const byId = Object.fromEntries(sent.map((f) => ['id' in f ? f.id : '', f]));
    expect(byId['1']).toEqual({ id: '1', error: { code: 'permission_denied', message: 'nope', data: { reason: 'agent_window_scope' } } });
    expect(byId['2']).toEqual({ id: '2', error: { code: 'protocol_error', message: 'boom' } });
    expect(byId['3']).toEqual({ id: '3', result: null });
  });

  it('refuses a duplicate id while the first runs', async () => {
    const { d, sent } = setup({ 'tool.wait': () => new Promise(() => undefined) });
    d.handle({ id: 'x', method: 'tool.wait' });
    d.handle({ id: 'x', method: 'tool.wait' });
    expect(sent).toEqual([{ id: 'x', error: { code: 'protocol_error', message: 'duplicate request id' } }]);
  });
});
