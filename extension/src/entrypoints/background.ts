// The service worker: owns the credential, the gateway connection, the sessions
// and the tools. The popup talks to it through runtime messages.

import { browser } from 'wxt/browser';
import { defineBackground } from 'wxt/utils/define-background';
import { pair, type RenewOutcome, renewIfDue } from '../lib/authorize';
import { forgetCredential, loadCredential } from '../lib/credential';
import type { Params } from '../lib/dispatcher';
import { Gateway } from '../lib/gateway';
import { parseLink } from '../lib/link';
import type { Reply, Request, StatusView } from '../lib/messages';
import { Sessions } from '../lib/sessions';
import { getHtml, screenshot } from '../lib/tools/content';
import { navigate, navigateBack, navigateForward, reload, waitForNavigation } from '../lib/tools/navigation';
import { Confirmations, tabBorrow } from '../lib/tools/borrow';
import { sessionStart, sessionStop } from '../lib/tools/session';
import { tabClose, tabCreate, tabList, tabReturn, tabSelect } from '../lib/tools/tabs';

const KEEPALIVE = 'latchkey.keepalive';

const RENEWAL_TEXT: Record<Exclude<RenewOutcome, 'none' | 'not_due'>, string> = {
  renewed: 'renewed',
  waiting: 'no answer yet; retrying within a minute',
  unavailable: 'server busy, retrying',
  rejected: 'access rejected, pair again',
  expired: 'expired, pair again',
  device_changed: 'the server changed the device; pair again',
};
const DEVICE_LABEL = 'Chrome · Latchkey';

export default defineBackground(() => {
  const sessions = new Sessions();
  const confirmations = new Confirmations();
  const on = (f: (p: Params, s: Sessions, signal: AbortSignal) => Promise<unknown>) => (p: Params, signal: AbortSignal) =>
    f(p, sessions, signal);
  const gateway = new Gateway(sessions, {
    'tool.session_start': on(sessionStart),
    'tool.session_stop': on(sessionStop),
    'tool.tab_list': on(tabList),
    'tool.tab_create': on(tabCreate),
    'tool.tab_close': on(tabClose),
    'tool.tab_select': on(tabSelect),
    'tool.tab_return': on(tabReturn),
    'tool.tab_borrow': (p: Params, signal: AbortSignal) => tabBorrow(p, sessions, signal, confirmations),
    'tool.navigate': on(navigate),
    'tool.navigate_back': on(navigateBack),
    'tool.navigate_forward': on(navigateForward),
    'tool.reload': on(reload),
    'tool.wait_for_navigation': on(waitForNavigation),
    'tool.get_html': on(getHtml),
    'tool.screenshot': on(screenshot),
  });

  // The credential lives in storage.local: keep it out of content scripts' reach.
  void browser.storage.local.setAccessLevel?.({ accessLevel: 'TRUSTED_CONTEXTS' }).catch(() => undefined);

  let renewal = 'not due';
  let renewTimer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    const outcome = await renewIfDue(Date.now());
    if (outcome !== 'none' && outcome !== 'not_due') renewal = RENEWAL_TEXT[outcome];
    if (outcome === 'rejected' && gateway.status !== 'revoked') gateway.stop();
    await gateway.ensure();
    await scheduleRenewal();
  };
  // Renew on time while the worker is awake; the 30 s alarm covers the rest.
  const scheduleRenewal = async () => {
    clearTimeout(renewTimer);
    const c = await loadCredential();
    if (!c || c.rejected) return;
    const due = c.pending ? c.pending.lastAttemptAt + 60_000 : c.renewAfter;
    const delay = Math.min(Math.max(due - Date.now(), 0) + 100, 2_147_483_647);
    renewTimer = setTimeout(() => void tick(), delay);
  };

  browser.windows.onRemoved.addListener((windowId) => gateway.onWindowRemoved(windowId));
  browser.alarms.create(KEEPALIVE, { periodInMinutes: 0.5 });
  browser.alarms.onAlarm.addListener((alarm) => {
    if (alarm.name === KEEPALIVE) void tick();
  });

  async function status(): Promise<StatusView> {
    const c = await loadCredential();
    return {
      status: gateway.status,
      ...(c
        ? {
            host: c.host,
            deviceId: c.deviceId,
            label: c.label,
            expiresAt: new Date(c.expiresAt).toISOString(),
            renewAfter: new Date(c.renewAfter).toISOString(),
            renewal: c.pending ? 'renewal pending' : renewal,
          }
        : {}),
      sessions: sessions.size,
    };
  }

  async function handle(req: Request): Promise<Reply> {
    switch (req.type) {
      case 'status':
        return status();
      case 'pair': {
        const parsed = parseLink(req.link);
        if (!parsed.ok) return { ok: false, message: parsed.message };
        gateway.stop();
        const outcome = await pair(parsed.link, DEVICE_LABEL);
        if (!outcome.ok) return { ok: false, message: outcome.message };
        await gateway.restart();
        await scheduleRenewal();
        return { ok: true, message: `Paired with ${parsed.link.host}` };
      }
      case 'disconnect':
        await gateway.pause();
        return { ok: true, message: 'Disconnected' };
      case 'connect':
        await gateway.resume();
        return { ok: true, message: 'Connecting' };
      case 'borrow-details':
        return confirmations.details(req.request) ?? null;
      case 'borrow-answer':
        confirmations.answer(req.request, req.allow);
        return { ok: true, message: '' };
      case 'forget':
        gateway.stop();
        await forgetCredential();
        await gateway.restart();
        return { ok: true, message: 'Forgotten' };
    }
  }

  browser.runtime.onMessage.addListener((message: unknown, sender, sendResponse: (r: Reply) => void) => {
    // Only our own pages (the popup) may talk to the service worker: never a
    // content script or a web page.
    const ownPage = browser.runtime.getURL('/');
    if (sender.id !== browser.runtime.id || !sender.url?.startsWith(ownPage)) return false;
    void handle(message as Request).then(sendResponse);
    return true;
  });

  void tick();
});
