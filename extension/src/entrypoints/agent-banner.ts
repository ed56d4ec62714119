// The mark of an Agent Window page: a red frame around the page and a bar naming
// the agent that controls the window and for how long, with Stop (ends the
// session), Interrupt (cancels its current action) and a button to fold the bar
// away. Injected by the service worker into every page an Agent Window loads
// (isolated world). The bar sits at the bottom left, where pages keep the least.
//
// Pages cannot switch it off: the UI sits in a closed shadow root, its host is
// styled inline with !important, it is put back if removed, and only a person's
// click (a trusted event) counts.

import { defineUnlistedScript } from 'wxt/utils/define-unlisted-script';
import { duration } from '../lib/when';
import type { BannerMark } from '../lib/banner';
import { PAGE_UI_GLOBAL } from '../lib/page/global';
import { OWN_UI_ATTRIBUTE } from '../lib/page/snapshot';

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

// Layout the e2e tests click by (the root is closed): the bar is 6 px from the
// bottom-left corner with 4 px padding; Stop (64 × 26 px) comes first, then
// Interrupt (84 × 26 px) 8 px further.
const CSS = `
  .frame { position: fixed; inset: 0; border: 3px solid #c5221f; pointer-events: none; box-sizing: border-box; }
  .bar { position: fixed; bottom: 6px; left: 6px; display: flex; align-items: center; gap: 8px; pointer-events: auto;
    font: 13px/1.2 system-ui, sans-serif; color: #fff; background: #b3261e; border-radius: 6px; padding: 4px;
    box-shadow: 0 2px 6px rgba(0,0,0,.3); max-width: calc(100vw - 12px); box-sizing: border-box; }
  .text { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; padding: 0 2px; }
  button { font: 600 13px system-ui, sans-serif; height: 26px; border: 0; border-radius: 4px; background: #fff;
    color: #b3261e; cursor: pointer; flex: none; padding: 0; }
  button:focus-visible { outline: 2px solid #fff; outline-offset: 2px; }
  .stop { width: 64px; }
  .interrupt { width: 84px; color: #1a1a1a; }
  .fold { width: 26px; background: transparent; color: #fff; font-size: 16px; }
  .bar.folded .text, .bar.folded .interrupt { display: none; }
  button:disabled { color: #5f6368; cursor: default; }
  .help { position: fixed; top: 48px; right: 6px; width: 340px; box-sizing: border-box; padding: 10px; pointer-events: auto;
    font: 13px/1.35 system-ui, sans-serif; color: #1a1a1a; background: #fff8e1; border: 2px solid #f29900; border-radius: 8px;
    box-shadow: 0 4px 14px rgba(0,0,0,.35); }
  .help .head { display: flex; align-items: center; gap: 8px; height: 28px; }
  .help .title { flex: 1; font-weight: 700; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .help button { width: 72px; height: 28px; color: #fff; background: #1a73e8; }
  .help button.cancel { background: #5f6368; }
  .help .prompt { margin: 8px 0 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 40vh; overflow-y: auto; }
`;

/** A button that acts only on a person's click. */
function button(label: string, className: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = className;
  b.textContent = label;
  b.title = title;
  b.setAttribute('aria-label', title);
  b.addEventListener('click', (e) => {
    if (e.isTrusted) onClick();
  });
  return b;
}

class AgentBanner {
  private readonly host = document.createElement('latchkey-agent-window');
  private readonly bar = document.createElement('div');
  private readonly text = document.createElement('span');
  private readonly stop: HTMLButtonElement;
  private readonly interrupt: HTMLButtonElement;
  private hiddenUntil = 0;
  private readonly root: ShadowRoot;
  private help: HTMLElement | undefined;
  private stopped = false;

  constructor(private mark: BannerMark) {
    this.host.setAttribute(OWN_UI_ATTRIBUTE, '');
    this.host.setAttribute('style', HOST_STYLE);
    const root = this.host.attachShadow({ mode: 'closed' });
    this.root = root;
    const style = document.createElement('style');
    style.textContent = CSS;
    const frame = document.createElement('div');
    frame.className = 'frame';
    this.bar.className = 'bar';
    this.bar.setAttribute('role', 'region');
    this.bar.setAttribute('aria-label', 'Latchkey: an agent controls this window');
    this.text.className = 'text';
    this.text.setAttribute('role', 'status');
    this.stop = button('Stop', 'stop', 'Stop the agent: end its session and close this window', () => {
      this.stopped = true;
      this.render();
      void chrome.runtime.sendMessage({ type: 'agent-stop' });
    });
    this.interrupt = button('Interrupt', 'interrupt', "Interrupt the agent: cancel what it is doing now; it may go on after", () => {
      void chrome.runtime.sendMessage({ type: 'agent-interrupt' }).then(() => this.update({ ...this.mark, interrupted: true }));
    });
    const fold = button('–', 'fold', 'Fold this bar away (Stop stays)', () => {
      const folded = this.bar.classList.toggle('folded');
      fold.textContent = folded ? '+' : '–';
      fold.title = folded ? 'Show who controls this window' : 'Fold this bar away (Stop stays)';
      fold.setAttribute('aria-label', fold.title);
    });
    this.bar.append(this.stop, this.interrupt, this.text, fold);
    root.append(style, frame, this.bar);
    this.render();
    this.mount();
    // Put back if the page removes it.
    new MutationObserver(() => {
      if (!this.host.isConnected) this.mount();
    }).observe(document, { childList: true, subtree: true });
    // How long it has been working, kept current.
    setInterval(() => this.render(), 30_000);
  }

  private mount(): void {
    (document.documentElement ?? document).appendChild(this.host);
  }

  update(mark: BannerMark): void {
    this.mark = mark;
    this.render();
  }

  private render(): void {
    const m = this.mark;
    this.text.textContent = this.stopped
      ? 'Stopping the agent…'
      : m.interrupted
        ? `${m.agent}: its last action was interrupted`
        : `${m.agent} controls this window · ${duration(m.since)}`;
    this.stop.disabled = this.stopped;
    this.interrupt.disabled = this.stopped || m.interrupted === true;
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

  /** Back at once (a screenshot that hid the UI is done). */
  reveal(): void {
    this.hiddenUntil = 0;
    this.host.style.setProperty('visibility', 'visible', 'important');
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
    show(mark: BannerMark) {
      if (banner) banner.update(mark);
      else banner = new AgentBanner(mark);
      return true;
    },
    hideFor(ms: number) {
      banner?.hideFor(ms);
    },
    /**
     * Hidden for a screenshot, answered once a frame without the UI has been
     * painted (two animation frames), or after 100 ms in a tab that paints none.
     * `ms` bounds the hiding if `reveal` never comes.
     */
    hideForCapture(ms: number): Promise<boolean> {
      if (!banner) return Promise.resolve(true);
      banner.hideFor(ms);
      return new Promise((resolve) => {
        const done = () => resolve(true);
        setTimeout(done, 100);
        requestAnimationFrame(() => requestAnimationFrame(done));
      });
    },
    reveal() {
      banner?.reveal();
      return true;
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
