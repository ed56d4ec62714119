// Reading pages: tool.get_html and tool.screenshot (docs/protocol.md, "Tools").

import { browser } from 'wxt/browser';
import { ToolError } from '../errors';
import type { Params } from '../dispatcher';
import type { Sessions } from '../sessions';
import { optUint, refuseRestricted, scopedTab, sessionOf } from './params';

const DEFAULT_MAX_BYTES = 524_288;

/** Cut UTF-8 text to at most `max` bytes at a character boundary. */
export function truncateUtf8(text: string, max: number): { text: string; truncated: boolean; byteSize: number } {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= max) return { text, truncated: false, byteSize: bytes.length };
  let cut = max;
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return { text: new TextDecoder().decode(bytes.subarray(0, cut)), truncated: true, byteSize: bytes.length };
}

export async function getHtml(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.get_html');
  const tab = await scopedTab(p, session, sessions);
  refuseRestricted(tab);
  const max = optUint(p, 'max_bytes') || DEFAULT_MAX_BYTES;
  const tabId = tab.id as number;
  const [injection] = await browser.scripting.executeScript({
    target: { tabId },
    func: () => document.documentElement.outerHTML,
  });
  const html = typeof injection?.result === 'string' ? injection.result : '';
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

export async function screenshot(p: Params, sessions: Sessions): Promise<unknown> {
  const session = sessionOf(p, sessions, 'tool.screenshot');
  const tab = await scopedTab(p, session, sessions);
  refuseRestricted(tab);
  if (!tab.active) {
    throw ToolError.reason('invalid_params', 'the tab must be the active tab of its window', 'tab_not_active');
  }
  let dataUrl: string;
  try {
    dataUrl = await browser.tabs.captureVisibleTab(tab.windowId, { format: 'png' });
  } catch (e) {
    throw ToolError.reason('cdp_failed', `screenshot failed: ${e instanceof Error ? e.message : String(e)}`, 'screenshot_capture_failed');
  }
  const image = dataUrl.replace(/^data:image\/png;base64,/, '');
  return { image_base64: image, ...pngSize(image), format: 'png', tab_id: tab.id };
}
