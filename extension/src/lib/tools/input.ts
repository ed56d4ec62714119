// Page input (docs/protocol.md, "Tools"): click, hover, fill, press and select, on tabs of the
// session's Agent Window only. Pointer and keyboard input are trusted events through the
// Chrome debugger protocol, at the point the page agent found for the target after scrolling
// it into view; what is under that point is checked first, so an overlay gets a clear error
// rather than the click. Choosing options of a <select> is done in the page (its popup is not
// part of the page) with the input and change events a person's choice fires.

import { CLICK_CHECKED } from '@protocol/constants';
import { invalid, ToolError } from '../errors';
import { checkpoint, type Params } from '../dispatcher';
import { withDialogs } from '../cdp';
import { chordText, modifierBits, modifierKey, type KeyDef, parseChord, parseModifiers } from '../keys';
import type { Box, Target } from '../page/agent';
import { pageCall } from '../page/bridge';
import type { AgentSession } from '../sessions';
import { optBool, optStr, optUint, refuseRestricted, scopedTab, sessionOf } from './params';
import { type PageContext, refKey } from './snapshot';

export interface Resolved {
  target: Target;
  documentId: string | undefined;
  echo: { used_ref: string } | { used_selector: string };
}

function nonEmpty(p: Params, key: string): string | undefined {
  const v = optStr(p, key);
  return v === '' ? undefined : v;
}

/** The target of an input tool: exactly one of `ref` and `selector` (docs/protocol.md, "Tools"). */
export function targetOf(p: Params, session: AgentSession, tabId: number, tool: string, required = true): Resolved | undefined {
  const ref = nonEmpty(p, 'ref');
  const selector = nonEmpty(p, 'selector');
  if (ref !== undefined && selector !== undefined) throw invalid('pass either ref or selector, not both');
  if (ref === undefined && selector === undefined) {
    if (required) throw invalid(`${tool} requires a ref or a selector`);
    return undefined;
  }
  if (selector !== undefined) return { target: { selector }, documentId: undefined, echo: { used_selector: selector } };
  return refTarget(ref as string, session, tabId);
}

/** A ref of the session's current snapshot of `tabId`, or the protocol's `ref_not_found`. */
export function refTarget(ref: string, session: AgentSession, tabId: number): Resolved {
  const key = refKey(ref);
  const store = session.refs;
  if (!store) throw ToolError.reason('not_found', `ref ${key} is unknown: take a snapshot first`, 'ref_not_found');
  if (store.tabId !== tabId) {
    throw ToolError.reason('not_found', `ref ${key} belongs to the snapshot of tab ${store.tabId}, not tab ${tabId}`, 'ref_not_found');
  }
  if (store.stale) throw ToolError.reason('not_found', `ref ${key} is void: ${store.stale}`, 'ref_not_found');
  if (Number(key.slice(1)) > store.count) {
    throw ToolError.reason('not_found', `ref ${key} is not in the current snapshot (it has ${store.count} refs)`, 'ref_not_found');
  }
  return { target: { ref: key, snapshot: store.snapshot }, documentId: store.documentId, echo: { used_ref: key } };
}

async function inputTab(p: Params, ctx: PageContext, tool: string): Promise<{ session: AgentSession; tabId: number }> {
  const session = sessionOf(p, ctx.sessions, tool);
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const tabId = tab.id as number;
  // Attached before anything can open a dialog, so that no dialog blocks the page.
  await ctx.cdp.ensure(tabId);
  return { session, tabId };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', abort);
    };
    const abort = () => {
      done();
      reject(new ToolError('cancelled', 'rpc aborted by daemon cancel'));
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal.addEventListener('abort', abort);
  });
}

/** Times the pointer follows a target that moved away from under it. */
const FOLLOW_ATTEMPTS = 3;

/**
 * Scroll the target into view, check that nothing covers it, and move the pointer
 * there. Moving the pointer can change the page (a hover menu opens and the browser
 * keeps the bottom of a scrolled page in place, so the target slides away): the
 * pointer then follows the target, without scrolling again, until it is over it.
 */
async function pointAt(ctx: PageContext, tabId: number, r: Resolved, modifiers: number, signal: AbortSignal): Promise<Box> {
  const hit = (at: Box) => pageCall(tabId, 'hitTest', { ...r.target, x: at.x, y: at.y }, r.documentId);
  let { value: at } = await pageCall<Box>(tabId, 'locate', r.target, r.documentId);
  for (let attempt = 1; ; attempt++) {
    checkpoint(signal);
    try {
      // Before the pointer moves (nothing may cover the target), then after (the
      // move may have changed the page).
      await hit(at);
      // `buttons: 0`: no button is held while moving, whatever the page saw before
      // (a held button freezes hover state).
      await ctx.cdp.send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseMoved', x: at.x, y: at.y, modifiers, button: 'none', buttons: 0 });
      await hit(at);
      checkpoint(signal);
      return { x: at.x, y: at.y };
    } catch (e) {
      const moved = e instanceof ToolError && e.data?.reason === 'element_not_visible';
      if (!moved) throw e;
      if (attempt >= FOLLOW_ATTEMPTS) {
        throw ToolError.reason('permission_denied', `${e.message} (the page kept moving it while the pointer followed)`, 'element_not_visible');
      }
    }
    ({ value: at } = await pageCall<Box>(tabId, 'locate', { ...r.target, scroll: false }, r.documentId));
  }
}

const BUTTONS = ['left', 'middle', 'right'];
/** `buttons` bits of a held button (DOM MouseEvent.buttons). */
const BUTTON_BITS: Record<string, number> = { left: 1, right: 2, middle: 4 };

export async function click(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const { session, tabId } = await inputTab(p, ctx, 'tool.click');
  const r = targetOf(p, session, tabId, 'tool.click') as Resolved;
  const button = optStr(p, 'button') ?? 'left';
  if (!BUTTONS.includes(button)) throw invalid('button must be left, middle or right');
  const clickCount = optUint(p, 'click_count', 1) ?? 1;
  const modifiers = modifierBits(parseModifiers(p.modifiers));
  const wanted = p[CLICK_CHECKED];
  if (wanted !== undefined && typeof wanted !== 'boolean') throw invalid(`${CLICK_CHECKED} must be a boolean`);
  return withDialogs(ctx.cdp, tabId, async () => {
    // Latchkey's `set_checked` (docs/protocol.md, "Latchkey's additions"): a click
    // only when the element is not in the state asked for.
    const settled = wanted !== undefined && (await checkState(tabId, r, wanted)) === wanted;
    const { x, y } = settled ? (await pageCall<Box>(tabId, 'locate', r.target, r.documentId)).value : await pointAt(ctx, tabId, r, modifiers, signal);
    if (!settled) {
      const held = BUTTON_BITS[button] ?? 1;
      for (let n = 1; n <= clickCount; n++) {
        const event = { x, y, button, clickCount: n, modifiers };
        await ctx.cdp.send(tabId, 'Input.dispatchMouseEvent', { type: 'mousePressed', ...event, buttons: held });
        await ctx.cdp.send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseReleased', ...event, buttons: 0 });
      }
    }
    if (wanted === undefined) return { tab_id: tabId, ...r.echo, x, y };
    const after = await checkState(tabId, r, wanted);
    if (after !== wanted) {
      throw ToolError.reason('invalid_params', `clicking it left it ${after ? 'checked' : 'unchecked'}: the page keeps it from changing`, 'target_not_checkable');
    }
    return { tab_id: tabId, ...r.echo, x, y, [CLICK_CHECKED]: after };
  });
}

/** Whether a checkbox, radio button or switch is checked; refused for anything else, and for unchecking a checked radio button. */
async function checkState(tabId: number, r: Resolved, wanted: boolean): Promise<boolean> {
  const { value } = await pageCall<{ checked: boolean; radio: boolean }>(tabId, 'checkState', r.target, r.documentId);
  if (value.radio && value.checked && !wanted) {
    throw ToolError.reason('invalid_params', 'a radio button is unchecked only by checking another of its group', 'target_not_checkable');
  }
  return value.checked;
}

export async function hover(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const { session, tabId } = await inputTab(p, ctx, 'tool.hover');
  const r = targetOf(p, session, tabId, 'tool.hover') as Resolved;
  const modifiers = modifierBits(parseModifiers(p.modifiers));
  const settle = optUint(p, 'settle_ms') ?? 200;
  return withDialogs(ctx.cdp, tabId, async () => {
    const { x, y } = await pointAt(ctx, tabId, r, modifiers, signal);
    if (settle > 0) await sleep(settle, signal);
    return { tab_id: tabId, ...r.echo, x, y };
  });
}

async function key(ctx: PageContext, tabId: number, type: string, def: KeyDef, modifiers: number, text?: string): Promise<void> {
  await ctx.cdp.send(tabId, 'Input.dispatchKeyEvent', {
    type,
    key: def.key,
    code: def.code,
    windowsVirtualKeyCode: def.keyCode,
    nativeVirtualKeyCode: def.keyCode,
    modifiers,
    ...(def.location ? { location: def.location } : {}),
    ...(text !== undefined ? { text, unmodifiedText: text } : {}),
  });
}

export async function fill(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const { session, tabId } = await inputTab(p, ctx, 'tool.fill');
  if (typeof p.value !== 'string') throw invalid('tool.fill requires value (a string)');
  const value = p.value;
  const r = targetOf(p, session, tabId, 'tool.fill') as Resolved;
  const clearBefore = optBool(p, 'clear_before', true);
  return withDialogs(ctx.cdp, tabId, async () => {
    const { value: prep } = await pageCall<{ set: boolean; empty: boolean }>(
      tabId,
      'prepareFill',
      { ...r.target, value, clearBefore },
      r.documentId,
    );
    checkpoint(signal);
    if (!prep.set) {
      if (value !== '') {
        await ctx.cdp.send(tabId, 'Input.insertText', { text: value });
      } else if (clearBefore && !prep.empty) {
        const backspace = parseChord('Backspace').def;
        await key(ctx, tabId, 'rawKeyDown', backspace, 0);
        await key(ctx, tabId, 'keyUp', backspace, 0);
      }
    }
    return { tab_id: tabId, ...r.echo, value_length: value.length };
  });
}

export async function press(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const { session, tabId } = await inputTab(p, ctx, 'tool.press');
  if (typeof p.key !== 'string' || p.key === '') throw invalid('tool.press requires key');
  const chord = parseChord(p.key, parseModifiers(p.modifiers));
  const holdMs = optUint(p, 'hold_ms') ?? 0;
  const r = targetOf(p, session, tabId, 'tool.press', false);
  return withDialogs(ctx.cdp, tabId, async () => {
    if (r) await pageCall(tabId, 'focus', r.target, r.documentId);
    checkpoint(signal);
    let bits = 0;
    for (const m of chord.modifiers) {
      bits |= modifierBits([m]);
      await key(ctx, tabId, 'rawKeyDown', modifierKey(m), bits);
    }
    const text = chordText(chord);
    await key(ctx, tabId, text !== undefined ? 'keyDown' : 'rawKeyDown', chord.def, bits, text);
    if (holdMs > 0) await sleep(holdMs, signal);
    await key(ctx, tabId, 'keyUp', chord.def, bits);
    for (const m of [...chord.modifiers].reverse()) {
      bits &= ~modifierBits([m]);
      await key(ctx, tabId, 'keyUp', modifierKey(m), bits);
    }
    return { tab_id: tabId, key: chord.def.key, code: chord.def.code, modifiers: chord.modifiers };
  });
}

export async function select(p: Params, ctx: PageContext): Promise<unknown> {
  const { session, tabId } = await inputTab(p, ctx, 'tool.select');
  const values = p.values;
  if (!Array.isArray(values) || values.some((v) => typeof v !== 'string')) throw invalid('tool.select requires values (an array of strings)');
  const r = targetOf(p, session, tabId, 'tool.select') as Resolved;
  return withDialogs(ctx.cdp, tabId, async () => {
    const { value } = await pageCall<{ multiple: boolean; selectedValues: string[]; selectedLabels: string[] }>(
      tabId,
      'select',
      { ...r.target, values },
      r.documentId,
    );
    return {
      tab_id: tabId,
      ...r.echo,
      multiple: value.multiple,
      selected_values: value.selectedValues,
      selected_labels: value.selectedLabels,
    };
  });
}
