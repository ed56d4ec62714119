// The service worker: owns the credential, the gateway connection, the sessions
// and the tools. The popup talks to it through runtime messages.

import { browser } from 'wxt/browser';
import { defineBackground } from 'wxt/utils/define-background';
import { pair, type RenewOutcome, renewIfDue, unpair } from '../lib/authorize';
import { showBadge } from '../lib/badge';
import { forgetCredential, loadCredential } from '../lib/credential';
import type { Params } from '../lib/dispatcher';
import { Gateway } from '../lib/gateway';
import { parseLink } from '../lib/link';
import type { PageMessage, Reply, Request, SessionSummary, StatusView } from '../lib/messages';
import { type AgentSession, Sessions } from '../lib/sessions';
import { getHtml, screenshot } from '../lib/tools/content';
import { emulate, windowResize } from '../lib/tools/window';
import { navigate, navigateBack, navigateForward, reload, waitForNavigation } from '../lib/tools/navigation';
import { Confirmations, tabBorrow } from '../lib/tools/borrow';
import { endHere, sessionRules, sessionStart, sessionStop } from '../lib/tools/session';
import { Consents } from '../lib/consent';
import { SiteGuard } from '../lib/siteguard';
import { tabClose, tabCreate, tabList, tabReturn, tabSelect } from '../lib/tools/tabs';
import { ActivityLog } from '../lib/activity';
import { type BannerMark, showBanner } from '../lib/banner';
import { agentLabel } from '../lib/agentinfo';
import { claimOrEvict } from '../lib/tabowner';
import { Cdp, reportingDialogs } from '../lib/cdp';
import { loadSettings, saveSettings } from '../lib/settings';
import {
  EVENT_KILL_SWITCH,
  EVENT_USER_INTERRUPT,
  EVENT_USER_STOP,
  EVENT_WINDOW_CLOSED,
  GATEWAY_FEATURE_KILL_SWITCH,
  GATEWAY_FEATURE_UNPAIR,
  GATEWAY_FEATURE_USER_STOP,
} from '@protocol/constants';
import { evaluate } from '../lib/tools/evaluate';
import { click, fill, hover, press, select } from '../lib/tools/input';
import { observe, snapshot, voidRefsOnNavigation } from '../lib/tools/snapshot';
import { LogBuffers } from '../lib/logbuffers';
import { consoleLog, type LogContext, networkLog } from '../lib/tools/logs';
import { HelpRequests, requestHelp } from '../lib/tools/help';

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
  // The toolbar icon follows the status, the sessions and the help requests.
  let live: { gateway: Gateway; help: HelpRequests } | undefined;
  const refreshBadge = () => {
    if (live) void showBadge({ status: live.gateway.status, sessions: sessions.size, helpWaiting: live.help.size });
  };
  const sessions = new Sessions(refreshBadge);
  const confirmations = new Confirmations();
  const cdp = new Cdp();
  const logs = new LogBuffers(cdp);
  const activity = new ActivityLog();
  const serverName = async () => (await loadCredential())?.host ?? 'your team';
  const agentOf = async (session: AgentSession) => agentLabel(session.agent, await serverName());
  /** What the mark on a page of `session`'s window says. */
  const markOf = async (session: AgentSession | undefined): Promise<BannerMark> =>
    session ? { agent: await agentOf(session), since: session.startedAt } : { agent: `An agent from ${await serverName()}`, since: Date.now() };
  const markOfTab = async (tabId: number) => {
    const tab = await browser.tabs.get(tabId).catch(() => undefined);
    return markOf(tab ? sessions.byWindow(tab.windowId) : undefined);
  };
  const help = new HelpRequests(markOfTab, refreshBadge);
  const consents = new Consents(serverName);
  const page: LogContext = { sessions, cdp, logs };
  // Agent Window tabs are attached from the start, so that their console, network
  // and dialogs are recorded before the agent's first look.
  const attach = (tabId: number) => void cdp.ensure(tabId).catch(() => undefined);
  const attachWindow = async (windowId: number) => {
    for (const t of await browser.tabs.query({ windowId })) if (t.id !== undefined) attach(t.id);
  };
  const on = (f: (p: Params, s: Sessions, signal: AbortSignal) => Promise<unknown>) => (p: Params, signal: AbortSignal) =>
    f(p, sessions, signal);
  const onPage = (f: (p: Params, c: LogContext, signal: AbortSignal) => Promise<unknown>) => (p: Params, signal: AbortSignal) =>
    f(p, page, signal);
  const gateway = new Gateway(sessions, {
    'tool.session_start': async (p: Params, signal: AbortSignal) => {
      const started = (await sessionStart(p, sessions, consents, signal)) as { agent_window_id: number };
      void attachWindow(started.agent_window_id);
      return started;
    },
    'tool.session_stop': (p: Params) => sessionStop(p, sessions, (s) => cdp.detachWindow(s.windowId)),
    'latchkey.session_rules': (p: Params) => sessionRules(p, sessions),
    'tool.tab_list': on(tabList),
    'tool.tab_create': on(tabCreate),
    'tool.tab_close': on(tabClose),
    'tool.tab_select': on(tabSelect),
    'tool.tab_return': on(tabReturn),
    'tool.tab_borrow': (p: Params, signal: AbortSignal) =>
      tabBorrow(p, sessions, signal, {
        confirmations,
        agentOf,
        waitMs: async () => (await loadSettings()).borrowWaitSeconds * 1000,
      }),
    'tool.window_resize': onPage(windowResize),
    'tool.emulate': onPage(emulate),
    'tool.navigate': on(reportingDialogs(cdp, navigate)),
    'tool.navigate_back': on(reportingDialogs(cdp, navigateBack)),
    'tool.navigate_forward': on(reportingDialogs(cdp, navigateForward)),
    'tool.reload': on(reportingDialogs(cdp, reload)),
    'tool.wait_for_navigation': on(reportingDialogs(cdp, waitForNavigation)),
    'tool.get_html': onPage(reportingDialogs(cdp, getHtml)),
    'tool.screenshot': onPage(reportingDialogs(cdp, screenshot)),
    'tool.snapshot': onPage(snapshot),
    'tool.observe': onPage(observe),
    'tool.click': onPage(click),
    'tool.hover': onPage(hover),
    'tool.fill': onPage(fill),
    'tool.press': onPage(press),
    'tool.select': onPage(select),
    'tool.evaluate': onPage(evaluate),
    'tool.request_help': (p: Params, signal: AbortSignal) => requestHelp(p, { ...page, help }, signal),
    'tool.console': onPage(consoleLog),
    'tool.network': onPage(networkLog),
  }, (method, params, answer) => {
    activity.record(method, params, answer);
    const session = typeof params.session_id === 'string' ? sessions.get(params.session_id) : undefined;
    if (session && method.startsWith('tool.') && method !== 'tool.session_start') session.lastAction = { method, at: Date.now() };
  }, refreshBadge);
  live = { gateway, help };

  // Site rules hold in every agent tab, for navigations the gateway cannot see too.
  new SiteGuard(sessions, (event, payload) => gateway.event(event, payload)).install();

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
  browser.webNavigation.onCommitted.addListener((d) => {
    if (d.frameId === 0) voidRefsOnNavigation(sessions, d.tabId);
  });
  // Every page an Agent Window loads shows who controls it, with Stop.
  const markAgentTab = async (tabId: number) => {
    const tab = await browser.tabs.get(tabId).catch(() => undefined);
    const session = tab && sessions.byWindow(tab.windowId);
    if (!session) return;
    await showBanner(tabId, await markOf(session));
    await help.reshow(tabId);
  };
  /**
   * The person ends `session` (Stop on its page, End in the popup). From this moment
   * no call acts in it. A gateway that reads `latchkey.user_stop` hears it first, so
   * a call already on its way is answered `session_ended` there, not with this side's
   * `not_found`; then the session ends here (tabs back, window closed). A gateway
   * that does not read it gets the contract's `session.window_closed` after the
   * teardown, which lists the tabs that could not go back.
   */
  const endByPerson = async (session: AgentSession) => {
    session.ending = true;
    const told = gateway.supports(GATEWAY_FEATURE_USER_STOP);
    if (told) gateway.event(EVENT_USER_STOP, { session_id: session.id });
    const { failures } = await endHere(session, sessions, (s) => cdp.detachWindow(s.windowId));
    if (!told) {
      gateway.event(EVENT_WINDOW_CLOSED, {
        session_id: session.id,
        reason: 'user_closed_window',
        ...(failures.length ? { return_failures: failures } : {}),
      });
    }
  };
  const summary = async (s: AgentSession): Promise<SessionSummary> => ({
    id: s.id,
    agent: await agentOf(s),
    ...(s.agent?.purpose ? { purpose: s.agent.purpose } : {}),
    server: await serverName(),
    startedAt: s.startedAt,
    ...(s.lastAction ? { lastAction: s.lastAction } : {}),
    helpWaiting: help.waitingIn(
      await browser.tabs.query({ windowId: s.windowId }).then((tabs) => tabs.map((t) => t.id ?? -1), () => []),
    ),
  });
  browser.tabs.onRemoved.addListener((tabId) => help.tabClosed(tabId));
  browser.webNavigation.onDOMContentLoaded.addListener((d) => {
    if (d.frameId === 0) void markAgentTab(d.tabId);
  });
  // Only the agent's tabs stay in an Agent Window; the person's own move out.
  browser.tabs.onAttached.addListener((tabId, info) => {
    if (!sessions.isAgentWindow(info.newWindowId)) return;
    void claimOrEvict(sessions, { id: tabId, windowId: info.newWindowId }).then((stays) => {
      if (!stays) return;
      attach(tabId);
      void markAgentTab(tabId);
    });
  });
  browser.tabs.onCreated.addListener((tab) => {
    if (tab.id === undefined || !sessions.isAgentWindow(tab.windowId)) return;
    const id = tab.id;
    void claimOrEvict(sessions, tab).then((stays) => stays && attach(id));
  });
  // A tab leaving an Agent Window (a returned borrow) is the person's again.
  // Cancel on Chrome's debugging bar is the person saying stop, like the page's Stop.
  cdp.onDetach((tabId, byPerson) => {
    if (!byPerson) return;
    void browser.tabs.get(tabId).then(
      (tab) => {
        const session = sessions.byWindow(tab.windowId);
        if (session) gateway.event(EVENT_USER_INTERRUPT, { session_id: session.id });
      },
      () => undefined,
    );
  });
  browser.tabs.onDetached.addListener((tabId, info) => {
    if (sessions.isAgentWindow(info.oldWindowId)) void cdp.detach(tabId);
  });
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
            label: gateway.deviceLabel ?? c.label,
            ...(gateway.teamName ? { team: gateway.teamName } : {}),
            expiresAt: c.expiresAt,
            renewal: c.pending ? 'renewal pending' : renewal,
          }
        : {}),
      ...(gateway.lastContactAt ? { lastContactAt: gateway.lastContactAt } : {}),
      ...(gateway.nextRetryAt ? { nextRetryAt: gateway.nextRetryAt } : {}),
      sessions: sessions.size,
      helpWaiting: help.size,
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
        return { ok: true, message: 'Paused' };
      case 'connect':
        await gateway.resume();
        return { ok: true, message: 'Connecting' };
      case 'borrow-details':
        return confirmations.details(req.request) ?? null;
      case 'borrow-answer':
        confirmations.answer(req.request, req.answer);
        return { ok: true, message: '' };
      case 'session-list':
        return Promise.all(sessions.all().filter((s) => !s.ending).map(summary));
      case 'session-details': {
        const s = sessions.get(req.session);
        return s && !s.ending ? summary(s) : null;
      }
      case 'end-session': {
        const s = sessions.get(req.session);
        const open = s !== undefined && !s.ending;
        if (open) await endByPerson(s);
        return { ok: open, message: open ? 'Session ended' : 'That session has already ended' };
      }
      case 'stop-all': {
        // The kill switch: end every session (borrowed tabs go back), disconnect,
        // and stay disconnected until the person connects again.
        const ended = sessions.size;
        // Tell a gateway that reads it why the connection is about to close.
        if (gateway.supports(GATEWAY_FEATURE_KILL_SWITCH)) gateway.event(EVENT_KILL_SWITCH, {});
        await gateway.pause();
        return { ok: true, message: `Stopped ${ended} agent session${ended === 1 ? '' : 's'}; disconnected until you connect again` };
      }
      case 'settings':
        return loadSettings();
      case 'set-settings':
        return saveSettings(req.settings);
      case 'help-list':
        return help.list();
      case 'consent-list':
        return consents.list();
      case 'consent-answer':
        return { ok: consents.answer(req.request, req.allow ? { allow: true, hours: req.hours } : { allow: false }), message: '' };
      case 'allowance-list':
        return consents.allowances();
      case 'allowance-withdraw':
        await consents.withdraw(req.agentId);
        return { ok: true, message: 'Withdrawn' };
      case 'help-answer':
        return { ok: help.answer(req.request, req.outcome), message: '' };
      case 'activity':
        return activity.list();
      case 'clear-activity':
        await activity.clear();
        return { ok: true, message: 'Cleared' };
      case 'forget': {
        // Our socket closes first, so that the server's revocation close (4001) finds no
        // socket here to mark the credential revoked; then the server is told, while the
        // credential still works (a gateway that reads it).
        const c = await loadCredential();
        const tell = c !== undefined && gateway.listed(GATEWAY_FEATURE_UNPAIR);
        gateway.stop();
        const told = tell && (await unpair(c));
        await forgetCredential();
        await gateway.restart();
        return {
          ok: true,
          message: told
            ? 'Forgotten: this browser is removed from your team too'
            : 'Forgotten here. Your team still lists this browser until an admin removes it',
        };
      }
    }
  }

  browser.runtime.onMessage.addListener((message: unknown, sender, sendResponse: (r: Reply) => void) => {
    // Stop and Interrupt on an Agent Window page: what an injected script may ask, and only
    // from a tab of an Agent Window (docs/protocol.md, "Events from the extension"). Our scripts
    // in web pages (not our own pages, which may be open in tabs too).
    const ownPage = browser.runtime.getURL('/');
    const fromPage =
      sender.id === browser.runtime.id &&
      sender.tab?.windowId !== undefined &&
      sender.tab.id !== undefined &&
      !sender.url?.startsWith(ownPage);
    const pageMessage = message as PageMessage | undefined;
    if (fromPage && (pageMessage?.type === 'agent-stop' || pageMessage?.type === 'agent-interrupt')) {
      const session = sessions.byWindow(sender.tab?.windowId as number);
      if (session && pageMessage.type === 'agent-stop') void endByPerson(session);
      else if (session) gateway.event(EVENT_USER_INTERRUPT, { session_id: session.id });
      sendResponse({ ok: session !== undefined, message: '' });
      return false;
    }
    // request_help's panel: Done or Cancel, for a request of that very tab.
    if (fromPage && pageMessage?.type === 'help-answer') {
      const ok = help.answer(pageMessage.request, pageMessage.outcome === 'continued' ? 'continued' : 'cancelled', sender.tab?.id);
      sendResponse({ ok, message: '' });
      return false;
    }
    // Only our own pages (the popup) may ask anything else: never a content script
    // or a web page.
    if (sender.id !== browser.runtime.id || !sender.url?.startsWith(ownPage)) return false;
    void handle(message as Request).then(sendResponse);
    return true;
  });

  void tick();
});
