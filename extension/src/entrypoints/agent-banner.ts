// The mark of an Agent Window page: a red frame around the page and a bar naming
// the server whose agent controls the window, with a Stop button. Injected by the
// service worker into every page an Agent Window loads (isolated world).
//
// Pages cannot switch it off: the UI sits in a closed shadow root, its host is
// styled inline with !important, it is put back if removed, and only a person's
// click (a trusted event) counts as Stop.

import { defineUnlistedScript } from 'wxt/utils/define-unlisted-script';
import { PAGE_UI_GLOBAL } from '../lib/page/global';
import { OWN_UI_ATTRIBUTE } from '../lib/page/snapshot';

interface BannerOptions {
  server: string;
  interrupted: boolean;
}

/** request_help's panel: the agent's title and prompt, Done and Cancel. */
export interface HelpOptions {
  request: string;
  title: string;
  prompt: string;
}

const HOST_STYLE = [
  'all: initial',
  'position: fixed',
  'inset: 0',
  'z-index: 2147483647',
  'pointer-events: none',
  'display: block',
  'visibility: visible',
  'opacity: 1',
]
  .map((d) => `${d} !important`)
  .join(';');

const CSS = `
  .frame { position: fixed; inset: 0; border: 3px solid #c5221f; pointer-events: none; box-sizing: border-box; }
  .bar { position: fixed; top: 6px; right: 6px; display: flex; align-items: center; gap: 8px; pointer-events: auto;
    font: 13px/1.2 system-ui, sans-serif; color: #fff; background: #c5221f; border-radius: 6px; padding: 4px 4px 4px 10px;
    box-shadow: 0 2px 6px rgba(0,0,0,.3); max-width: 70vw; }
  .text { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  button { font: 600 13px system-ui, sans-serif; width: 64px; height: 26px; border: 0; border-radius: 4px; background: #fff;
    color: #c5221f; cursor: pointer; flex: none; }
  button:disabled { color: #777; cursor: default; }
  .help { position: fixed; top: 48px; right: 6px; width: 340px; box-sizing: border-box; padding: 10px; pointer-events: auto;
    font: 13px/1.35 system-ui, sans-serif; color: #1a1a1a; background: #fff8e1; border: 2px solid #f29900; border-radius: 8px;
    box-shadow: 0 4px 14px rgba(0,0,0,.35); }
  .help .head { display: flex; align-items: center; gap: 8px; height: 28px; }
  .help .title { flex: 1; font-weight: 700; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .help button { width: 72px; height: 28px; color: #fff; background: #1a73e8; }
  .help button.cancel { background: #5f6368; }
  .help .prompt { margin: 8px 0 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 40vh; overflow-y: auto; }
`;

class AgentBanner {
  private readonly host = document.createElement('latchkey-agent-window');
  private readonly text = document.createElement('span');
  private readonly stop = document.createElement('button');
  private hiddenUntil = 0;
  private readonly root: ShadowRoot;
  private help: HTMLElement | undefined;

  constructor(private options: BannerOptions) {
    this.host.setAttribute(OWN_UI_ATTRIBUTE, '');
    this.host.setAttribute('style', HOST_STYLE);
    const root = this.host.attachShadow({ mode: 'closed' });
    this.root = root;
    const style = document.createElement('style');
    style.textContent = CSS;
    const frame = document.createElement('div');
    frame.className = 'frame';
    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.setAttribute('role', 'status');
    this.text.className = 'text';
    this.stop.type = 'button';
    this.stop.textContent = 'Stop';
    this.stop.title = 'Stop the agent: its next action in this window is refused';
    this.stop.addEventListener('click', (e) => {
      if (!e.isTrusted) return;
      void chrome.runtime.sendMessage({ type: 'agent-stop' }).then(() => this.update({ ...this.options, interrupted: true }));
    });
    bar.append(this.text, this.stop);
    root.append(style, frame, bar);
    this.update(options);
    this.mount();
    // Put back if the page removes it.
    new MutationObserver(() => {
      if (!this.host.isConnected) this.mount();
    }).observe(document, { childList: true, subtree: true });
  }

  private mount(): void {
    (document.documentElement ?? document).appendChild(this.host);
  }

  update(options: BannerOptions): void {
    this.options = options;
    this.text.textContent = options.interrupted
      ? `Stopped: the agent's next action here will be refused`
      : `An agent from ${options.server} controls this window`;
    this.stop.disabled = options.interrupted;
  }

  /** Show request_help's panel (the agent waits for Done or Cancel). */
  showHelp(options: HelpOptions): void {
    this.endHelp();
    const panel = document.createElement('section');
    panel.className = 'help';
    panel.setAttribute('role', 'alertdialog');
    panel.setAttribute('aria-label', options.title);
    const head = document.createElement('div');
    head.className = 'head';
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = options.title;
    const answer = (outcome: 'continued' | 'cancelled') => (e: MouseEvent) => {
      if (!e.isTrusted) return;
      void chrome.runtime.sendMessage({ type: 'help-answer', request: options.request, outcome });
    };
    const done = document.createElement('button');
    done.type = 'button';
    done.textContent = 'Done';
    done.title = 'I did what the agent asked: let it continue';
    done.addEventListener('click', answer('continued'));
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.className = 'cancel';
    cancel.textContent = 'Cancel';
    cancel.title = 'Decline: the agent is told you did not help';
    cancel.addEventListener('click', answer('cancelled'));
    head.append(title, done, cancel);
    const prompt = document.createElement('p');
    prompt.className = 'prompt';
    // Text only: the agent's words are never markup.
    prompt.textContent = options.prompt;
    panel.append(head, prompt);
    this.root.append(panel);
    this.help = panel;
  }

  endHelp(): void {
    this.help?.remove();
    this.help = undefined;
  }

  /** Step aside for an agent's click at a point the bar covers, then come back. */
  hideFor(ms: number): void {
    this.hiddenUntil = Date.now() + ms;
    this.host.style.setProperty('visibility', 'hidden', 'important');
    setTimeout(() => {
      if (Date.now() >= this.hiddenUntil) this.host.style.setProperty('visibility', 'visible', 'important');
    }, ms);
  }
}

export default defineUnlistedScript(() => {
  const g = globalThis as unknown as Record<string, unknown>;
  if (g[PAGE_UI_GLOBAL]) return;
  let banner: AgentBanner | undefined;
  // The service worker calls `show` right after injecting.
  g[PAGE_UI_GLOBAL] = {
    show(options: BannerOptions) {
      if (banner) banner.update(options);
      else banner = new AgentBanner(options);
      return true;
    },
    hideFor(ms: number) {
      banner?.hideFor(ms);
    },
    help(options: HelpOptions) {
      banner?.showHelp(options);
      return banner !== undefined;
    },
    endHelp() {
      banner?.endHelp();
      return true;
    },
  };
});
