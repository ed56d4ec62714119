import { describe, expect, it } from 'vitest';
import type { Frame } from '@protocol/Frame';
import { checkpoint, Dispatcher, type Handler, type Handlers } from '../src/lib/dispatcher';
import { ToolError } from '../src/lib/errors';

function setup(handlers: Handlers) {
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
      { 'tool.tab_list': async () => ({ tab_id: 3 }), 'tool.tab_close': async () => Promise.reject(new ToolError('not_found', 'x')) },
      () => undefined,
      (method, _params, answer) => seen.push([method, answer]),
    );
    d.handle({ id: '1', method: 'tool.tab_list', params: {} });
    d.handle({ id: '2', method: 'tool.tab_close', params: {} });
    await until(() => seen.length === 2);
    expect(seen).toContainEqual(['tool.tab_list', { result: { tab_id: 3 } }]);
    expect(seen).toContainEqual(['tool.tab_close', { error: { code: 'not_found', message: 'x' } }]);
  });

  it('answers unknown methods with unknown_method', () => {
    const { d, sent } = setup({});
    d.handle({ id: 'a', method: 'tool.nope' });
    expect(sent).toEqual([{ id: 'a', error: { code: 'unknown_method', message: 'tool.nope not implemented in extension' } }]);
  });

  it('answers unknown_method for a catalogue method without a handler and for names an object inherits', () => {
    const { d, sent } = setup({ 'tool.tab_list': async () => ({}) });
    d.handle({ id: 'b', method: 'tool.evaluate' });
    d.handle({ id: 'c', method: 'constructor' });
    d.handle({ id: 'd', method: '__proto__' });
    expect(sent.map((f) => ('error' in f ? f.error.code : 'answered'))).toEqual([
      'unknown_method',
      'unknown_method',
      'unknown_method',
    ]);
  });

  it('acks a cancel at once, then sends exactly one cancelled answer', async () => {
    const slow: Handler = (_p, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    const { d, sent } = setup({ 'tool.navigate': slow });
    d.handle({ id: 'r1', method: 'tool.navigate', params: {} });
    d.handle({ id: 'c1', method: 'cancel', params: { rpc_id: 'r1' } });
    expect(sent[0]).toEqual({ id: 'c1', result: { cancelled: true } });
    await until(() => sent.length === 2);
    expect(sent[1]).toEqual({ id: 'r1', error: { code: 'cancelled', message: 'rpc aborted by daemon cancel' } });
    d.handle({ id: 'c2', method: 'cancel', params: { rpc_id: 'r1' } });
    expect(sent[2]).toEqual({ id: 'c2', result: { cancelled: false } });
    expect(d.inFlight).toBe(0);
  });

  it('keeps a success that finished before the cancel', async () => {
    const { d, sent } = setup({ 'tool.reload': async () => ({ ok: 1 }) });
    d.handle({ id: 'r', method: 'tool.reload' });
    await until(() => sent.length === 1);
    d.handle({ id: 'c', method: 'cancel', params: { rpc_id: 'r' } });
    expect(sent).toEqual([{ id: 'r', result: { ok: 1 } }, { id: 'c', result: { cancelled: false } }]);
  });

  it('passes tool errors through and maps crashes to protocol_error', async () => {
    const { d, sent } = setup({
      'tool.tab_close': async () => {
        throw ToolError.reason('permission_denied', 'nope', 'agent_window_scope');
      },
      'tool.click': async () => {
        throw new Error('boom');
      },
      'tool.hover': async (_p, signal) => {
        checkpoint(signal);
        return null;
      },
    });
    d.handle({ id: '1', method: 'tool.tab_close' });
    d.handle({ id: '2', method: 'tool.click' });
    d.handle({ id: '3', method: 'tool.hover' });
    await until(() => sent.length === 3);
    const byId = Object.fromEntries(sent.map((f) => ['id' in f ? f.id : '', f]));
    expect(byId['1']).toEqual({ id: '1', error: { code: 'permission_denied', message: 'nope', data: { reason: 'agent_window_scope' } } });
    expect(byId['2']).toEqual({ id: '2', error: { code: 'protocol_error', message: 'boom' } });
    expect(byId['3']).toEqual({ id: '3', result: null });
  });

  it('refuses a duplicate id while the first runs', async () => {
    const { d, sent } = setup({ 'tool.snapshot': () => new Promise(() => undefined) });
    d.handle({ id: 'x', method: 'tool.snapshot' });
    d.handle({ id: 'x', method: 'tool.snapshot' });
    expect(sent).toEqual([{ id: 'x', error: { code: 'protocol_error', message: 'duplicate request id' } }]);
  });
});
