// Reading pages: tool.get_html and tool.screenshot (docs/protocol.md, "Observation"),
// each of the whole page or, with a ref, of one element.

import { browser } from 'wxt/browser';
import { withoutOverlays } from '../banner';
import { ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { Rect } from '../page/agent';
import { pageCall } from '../page/bridge';
import { refTarget } from './input';
import { optStr, optUint, refuseRestricted, scopedTab, sessionOf } from './params';
import type { PageContext } from './snapshot';

const DEFAULT_MAX_BYTES = 524_288;

/** Cut UTF-8 text to at most `max` bytes at a character boundary. */
export function truncateUtf8(text: string, max: number): { text: string; truncated: boolean; byteSize: number } {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= max) return { text, truncated: false, byteSize: bytes.length };
  let cut = max;
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return { text: new TextDecoder().decode(bytes.subarray(0, cut)), truncated: true, byteSize: bytes.length };
}

/** A non-empty `ref` param, if given. */
function refParam(p: Params): string | undefined {
  const ref = optStr(p, 'ref');
  return ref === '' ? undefined : ref;
}

/** The document's HTML, or with `ref` that element's (docs/protocol.md, "Observation"). */
export async function getHtml(p: Params, ctx: PageContext): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.get_html');
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const max = optUint(p, 'max_bytes') || DEFAULT_MAX_BYTES;
  const tabId = tab.id as number;
  const ref = refParam(p);
  let html: string;
  if (ref !== undefined) {
    const r = refTarget(ref, session, tabId);
    html = (await pageCall<{ html: string }>(tabId, 'html', r.target, r.documentId)).value.html;
  } else {
    const [injection] = await browser.scripting.executeScript({
      target: { tabId },
      func: () => document.documentElement.outerHTML,
    });
    html = typeof injection?.result === 'string' ? injection.result : '';
  }
  const t = truncateUtf8(html, max);
  return { html: t.text, truncated: t.truncated, byte_size: t.byteSize, tab_id: tabId };
}

/** Width and height from a PNG's IHDR (0 if it cannot be read). */
export function pngSize(base64: string): { width: number; height: number } {
  try {
    const head = atob(base64.slice(0, 44));
    const u32 = (o: number) =>
      ((head.charCodeAt(o) << 24) | (head.charCodeAt(o + 1) << 16) | (head.charCodeAt(o + 2) << 8) | head.charCodeAt(o + 3)) >>> 0;
    if (!head.startsWith('\x89PNG')) return { width: 0, height: 0 };
    return { width: u32(16), height: u32(20) };
  } catch {
    return { width: 0, height: 0 };
  }
}

/**
 * The visible part of the tab as PNG, or with `ref` that element, scrolled into view
 * and cropped to it (docs/protocol.md, "Observation"). Without a ref the tab must be
 * its window's active tab; the capture goes through the visible-tab API and falls
 * back to the debugger's. Our own page UI is hidden while it runs.
 */
export async function screenshot(p: Params, ctx: PageContext): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.screenshot');
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const tabId = tab.id as number;
  const ref = refParam(p);
  let image: string;
  if (ref !== undefined) {
    const r = refTarget(ref, session, tabId);
    const { value: box } = await pageCall<Rect>(tabId, 'bounds', r.target, r.documentId);
    image = await capture(tabId, () => elementShot(ctx, tabId, box));
  } else {
    if (!tab.active) {
      throw ToolError.reason('invalid_params', 'the tab must be the active tab of its window', 'tab_not_active');
    }
    image = await capture(tabId, async () => {
      try {
        const dataUrl = await browser.tabs.captureVisibleTab(tab.windowId, { format: 'png' });
        return dataUrl.replace(/^data:image\/png;base64,/, '');
      } catch {
        return (await ctx.cdp.send<{ data: string }>(tabId, 'Page.captureScreenshot', { format: 'png' })).data;
      }
    });
  }
  return { image_base64: image, ...pngSize(image), format: 'png', tab_id: tabId };
}

/** `shoot` with our page UI hidden, and a failure named as the protocol names it. */
async function capture(tabId: number, shoot: () => Promise<string>): Promise<string> {
  try {
    return await withoutOverlays(tabId, shoot);
  } catch (e) {
    if (e instanceof ToolError) throw e;
    throw ToolError.reason('cdp_failed', `screenshot failed: ${e instanceof Error ? e.message : String(e)}`, 'screenshot_capture_failed');
  }
}

/**
 * `box` (CSS pixels of the viewport) through the debugger, whose clip is in CSS
 * pixels of the document: the visual viewport's scroll offset is added.
 */
async function elementShot(ctx: PageContext, tabId: number, box: Rect): Promise<string> {
  const metrics = await ctx.cdp.send<{ cssVisualViewport: { pageX: number; pageY: number } }>(tabId, 'Page.getLayoutMetrics');
  const { pageX, pageY } = metrics.cssVisualViewport;
  const clip = { x: box.left + pageX, y: box.top + pageY, width: box.right - box.left, height: box.bottom - box.top, scale: 1 };
  return (await ctx.cdp.send<{ data: string }>(tabId, 'Page.captureScreenshot', { format: 'png', clip })).data;
}
