import { describe, expect, it } from 'vitest';
import { BUFFER_ENTRIES, FIELD_CHARS, LogBuffers } from '../src/lib/logbuffers';

function buffers() {
  let detach: (tabId: number, byPerson: boolean) => void = () => undefined;
  const logs = new LogBuffers({ onEvent: () => undefined, onDetach: (l) => (detach = l) });
  return { logs, detach: (tabId: number) => detach(tabId, false) };
}

describe('console and network buffers', () => {
  it('records console calls, exceptions and browser log entries with increasing sequences', () => {
    const { logs } = buffers();
    logs.onEvent(1, 'Runtime.consoleAPICalled', {
      type: 'warning',
      args: [{ type: 'string', value: 'low disk' }, { type: 'number', value: 3 }, { type: 'number', unserializableValue: 'NaN' }],
      timestamp: 1700000000000,
      stackTrace: { callFrames: [{ functionName: 'f', url: 'https://x/app.js', lineNumber: 9, columnNumber: 4 }] },
    });
    logs.onEvent(1, 'Runtime.exceptionThrown', { timestamp: 1, exceptionDetails: { text: 'Uncaught', exception: { description: 'Error: boom' } } });
    logs.onEvent(1, 'Log.entryAdded', { entry: { level: 'error', text: 'Failed to load resource', url: 'https://x/y.png' } });
    logs.onEvent(2, 'Runtime.consoleAPICalled', { type: 'log', args: [] });
    const { entries, last } = logs.consoleSince(1, 0);
    expect(last).toBe(3);
    expect(entries.map((e) => [e.sequence, e.kind, e.level, e.text])).toEqual([
      [1, 'console', 'warning', 'low disk 3 NaN'],
      [2, 'exception', 'error', 'Error: boom'],
      [3, 'log', 'error', 'Failed to load resource'],
    ]);
    expect(entries[0]).toMatchObject({ url: 'https://x/app.js', line: 9, column: 4, stack_trace: [{ function_name: 'f' }] });
    expect(logs.consoleSince(1, 2).entries.map((e) => e.sequence)).toEqual([3]);
    expect(logs.consoleSince(2, 0).entries).toHaveLength(1);
  });

  it('keeps the last 200 per tab and cuts long fields', () => {
    const { logs } = buffers();
    for (let i = 0; i < BUFFER_ENTRIES + 20; i++) {
      logs.onEvent(1, 'Runtime.consoleAPICalled', { type: 'log', args: [{ type: 'string', value: `m${i}` }] });
    }
    logs.onEvent(1, 'Runtime.consoleAPICalled', { type: 'log', args: [{ type: 'string', value: 'x'.repeat(FIELD_CHARS + 5) }] });
    const { entries } = logs.consoleSince(1, 0);
    expect(entries).toHaveLength(BUFFER_ENTRIES);
    expect(entries[0]?.sequence).toBe(22);
    const long = entries.at(-1);
    expect(long?.text.length).toBe(FIELD_CHARS);
    expect(long?.truncated).toBe(true);
  });

  it('pairs network responses and failures with their request method', () => {
    const { logs, detach } = buffers();
    logs.onEvent(1, 'Network.requestWillBeSent', { requestId: 'r1', request: { method: 'POST', url: 'https://x/api' } });
    logs.onEvent(1, 'Network.responseReceived', {
      requestId: 'r1',
      type: 'XHR',
      response: { url: 'https://x/api', status: 201, statusText: 'Created', mimeType: 'application/json' },
    });
    logs.onEvent(1, 'Network.loadingFinished', { requestId: 'r1' });
    logs.onEvent(1, 'Network.requestWillBeSent', { requestId: 'r2', request: { method: 'GET', url: 'https://nope/' } });
    logs.onEvent(1, 'Network.loadingFailed', { requestId: 'r2', type: 'Document', errorText: 'net::ERR_NAME_NOT_RESOLVED' });
    const { entries } = logs.networkSince(1, 0);
    expect(entries).toMatchObject([
      { sequence: 1, kind: 'response', method: 'POST', url: 'https://x/api', status: 201, status_text: 'Created', resource_type: 'XHR' },
      { sequence: 2, kind: 'failure', method: 'GET', url: 'https://nope/', error_text: 'net::ERR_NAME_NOT_RESOLVED' },
    ]);
    detach(1);
    expect(logs.networkSince(1, 0).entries).toEqual([]);
  });
});
