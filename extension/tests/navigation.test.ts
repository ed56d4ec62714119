import { beforeEach, describe, expect, it } from 'vitest';
import { fakeBrowser } from 'wxt/testing';
import { ToolError } from '../src/lib/errors';
import { waitForPhase } from '../src/lib/tools/navigation';

const TAB = 7;
/**
 * Event details as the browser sends them, with the fields `waitForPhase` reads;
 * the rest of each event's details type does not matter here.
 */
const nav = (over: Record<string, unknown>): any => ({ tabId: TAB, frameId: 0, documentId: 'd1', timeStamp: Date.now() + 1, ...over });

/** A navigation to `target` whose trigger fires `events` in order. */
function navigateWith(target: string, events: () => Promise<unknown>) {
  return waitForPhase(TAB, 'load', 5_000, new AbortController().signal, events, true, undefined, target);
}

describe('waitForPhase', () => {
  beforeEach(() => fakeBrowser.reset());

  it('ignores the abort of the load ours replaced, and finishes on ours', async () => {
    const done = navigateWith('http://127.0.0.1:4000/login', async () => {
      const page = 'chrome-extension://abc/agent-window.html?session=s1';
      await fakeBrowser.webNavigation.onErrorOccurred.trigger(nav({ url: page, error: 'net::ERR_ABORTED' }));
      await fakeBrowser.webNavigation.onCommitted.trigger(nav({ url: 'http://127.0.0.1:4000/login' }));
      await fakeBrowser.webNavigation.onCompleted.trigger(nav({ url: 'http://127.0.0.1:4000/login' }));
    });
    await expect(done).resolves.toEqual({ reached: 'load' });
  });

  it('reports our own navigation failing, the URL written either way', async () => {
    const done = navigateWith('https://shop.test', async () => {
      await fakeBrowser.webNavigation.onErrorOccurred.trigger(nav({ url: 'https://shop.test/', error: 'net::ERR_ABORTED' }));
    });
    await expect(done).rejects.toThrow(ToolError);
    const refused = navigateWith('https://shop.test/', async () => {
      await fakeBrowser.webNavigation.onErrorOccurred.trigger(nav({ url: 'https://elsewhere.test/', error: 'net::ERR_NAME_NOT_RESOLVED' }));
    });
    await expect(refused).rejects.toThrow(/ERR_NAME_NOT_RESOLVED/);
  });
});
