// The page side of the tools: runs in the extension's isolated world of an Agent
// Window page, installed by the `page-agent` script. It keeps the refs of the last
// snapshot of this document, finds targets, checks what is under the pointer, and
// prepares fields. It never synthesises input: clicks and keys come from the
// service worker as trusted events through the Chrome debugger protocol.
//
// Answers are plain objects (they cross from the page to the service worker):
// `{ok: true, …}` or `{error: {code, message, reason?}}`.

import { PAGE_UI_GLOBAL } from './global';
import { OWN_UI_ATTRIBUTE, renderSnapshot, type SnapshotOptions } from './snapshot';

/** How long the banner stays out of the way of an agent's click beneath it. */
const OWN_UI_STEP_ASIDE_MS = 1_500;

export interface PageError {
  error: { code: string; message: string; reason?: string };
}

export interface Target {
  ref?: string;
  selector?: string;
  /** The snapshot the ref came from: a newer snapshot of this document voids it. */
  snapshot?: string;
}

export interface Box {
  x: number;
  y: number;
}

/** A box in CSS pixels of a viewport. */
export interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

function clipTo(r: Rect, view: Window): Rect {
  return {
    left: Math.max(r.left, 0),
    top: Math.max(r.top, 0),
    right: Math.min(r.right, view.innerWidth),
    bottom: Math.min(r.bottom, view.innerHeight),
  };
}

const fail = (code: string, message: string, reason?: string): PageError => ({
  error: reason ? { code, message, reason } : { code, message },
});

const TEXT_INPUT_TYPES = new Set(['text', 'email', 'password', 'search', 'tel', 'url', 'number', '']);
const VALUE_INPUT_TYPES = new Set(['date', 'time', 'datetime-local', 'month', 'week', 'color', 'range']);

/** Short description of an element for error messages: `<div id="x" class="a b">`. */
export function describe(el: Element): string {
  let s = `<${el.tagName.toLowerCase()}`;
  if (el.id) s += ` id="${el.id}"`;
  const cls = el.getAttribute('class')?.trim();
  if (cls) s += ` class="${cls.slice(0, 60)}"`;
  return `${s}>`;
}

/** Whether `inner` is `outer` or inside it, across shadow roots. */
function within(outer: Element, inner: Node | null): boolean {
  for (let n: Node | null = inner; n; n = n.parentNode ?? (n as ShadowRoot).host ?? null) {
    if (n === outer) return true;
  }
  return false;
}

function scrollToCentre(el: Element): void {
  el.scrollIntoView?.({ block: 'center', inline: 'center', behavior: 'instant' as ScrollBehavior });
}

/** Fire the event a person's edit fires, built in the element's own window. */
function fire(el: Element, type: 'input' | 'change'): void {
  const view = el.ownerDocument.defaultView;
  if (!view) return;
  el.dispatchEvent(new view.Event(type, { bubbles: true, composed: type === 'input' }));
}

function isOwnUi(el: Element | null): boolean {
  for (let n: Node | null = el; n; n = n.parentNode ?? (n as ShadowRoot).host ?? null) {
    if (n.nodeType === 1 && (n as Element).hasAttribute(OWN_UI_ATTRIBUTE)) return true;
  }
  return false;
}

/** One condition of request_help's completion criteria: every field given must hold. */
export interface Condition {
  url_contains?: string;
  url_matches?: string;
  selector_exists?: string;
  selector_missing?: string;
  text_exists?: string;
  text_missing?: string;
}

export interface Criteria {
  any?: Condition[];
  all?: Condition[];
}

const HIGHLIGHT_OUTLINE = '3px solid #f29900';

export class PageAgent {
  private refs: Element[] = [];
  private snapshotId = '';
  /** Elements outlined for the person, with the outline they had. */
  private outlined: { el: HTMLElement; outline: string; offset: string }[] = [];

  constructor(private readonly doc: Document) {}

  snapshot(options: SnapshotOptions & { snapshot: string }): { text: string; truncated: boolean; refCount: number } {
    const out = renderSnapshot(this.doc, options);
    this.refs = out.refs;
    this.snapshotId = options.snapshot;
    return { text: out.text, truncated: out.truncated, refCount: out.refs.length };
  }

  /** The element a target names, or the protocol's lookup error (docs/protocol.md, "Tools"). */
  resolve(target: Target): Element | PageError {
    if (target.ref !== undefined) {
      const n = /^@?e(\d+)$/.exec(target.ref);
      const el = n && target.snapshot === this.snapshotId ? this.refs[Number(n[1]) - 1] : undefined;
      if (!el) return fail('not_found', `ref ${target.ref} is not in the current snapshot; take a new snapshot`, 'ref_not_found');
      if (!el.isConnected) {
        return fail('not_found', `ref ${target.ref} is no longer in the page (it was removed); take a new snapshot`, 'ref_not_found');
      }
      return el;
    }
    let el: Element | null;
    try {
      el = this.doc.querySelector(target.selector ?? '');
    } catch {
      return fail('invalid_params', `selector ${JSON.stringify(target.selector)} is not valid CSS`);
    }
    if (!el) return fail('not_found', `no element matches ${JSON.stringify(target.selector)}`, 'selector_not_found');
    return el;
  }

  /**
   * Scroll the target into view (unless `scroll` is false) and give the point to act
   * on, in CSS pixels of the top-level viewport (frames' offsets added): the centre
   * of its visible part.
   */
  locate(target: Target & { scroll?: boolean }): (Box & { ok: true }) | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    if (target.scroll !== false) scrollToCentre(el);
    const rect = [...el.getClientRects()].find((r) => r.width > 0 && r.height > 0);
    if (!rect) return fail('permission_denied', `${describe(el)} has no size on screen (hidden or empty)`, 'element_not_visible');
    const { left, top, right, bottom } = this.inTopViewport(el, rect);
    if (right <= left || bottom <= top) {
      return fail('permission_denied', `${describe(el)} is outside the visible area`, 'element_not_visible');
    }
    return { ok: true, x: Math.round(((left + right) / 2) * 100) / 100, y: Math.round(((top + bottom) / 2) * 100) / 100 };
  }

  /** `rect`, of `el`'s own viewport, cut to each frame's viewport on the way up and moved by the frames' offsets. */
  private inTopViewport(el: Element, rect: Rect): Rect {
    let r: Rect = { left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom };
    for (let view = el.ownerDocument.defaultView; view; ) {
      r = clipTo(r, view);
      const frame = view.frameElement;
      if (!frame || view === this.doc.defaultView) break;
      const fr = frame.getBoundingClientRect();
      const dx = fr.left + frame.clientLeft;
      const dy = fr.top + frame.clientTop;
      r = { left: r.left + dx, top: r.top + dy, right: r.right + dx, bottom: r.bottom + dy };
      view = frame.ownerDocument.defaultView;
    }
    return r;
  }

  /**
   * The topmost page element at a point, through same-origin frames and open shadow
   * roots, looking through the extension's own UI (which then steps aside briefly
   * so that the trusted click reaches the page).
   */
  private hitAt(x: number, y: number): Element | null {
    let doc: Document = this.doc;
    let px = x;
    let py = y;
    for (;;) {
      const raw = doc.elementsFromPoint(px, py);
      if (doc === this.doc && raw[0] && isOwnUi(raw[0])) {
        const ui = (globalThis as unknown as Record<string, { hideFor?: (ms: number) => void } | undefined>)[PAGE_UI_GLOBAL];
        ui?.hideFor?.(OWN_UI_STEP_ASIDE_MS);
      }
      const stack = raw.filter((e) => !isOwnUi(e));
      let hit: Element | null = stack[0] ?? null;
      while (hit?.shadowRoot) {
        const deeper = hit.shadowRoot.elementFromPoint(px, py);
        if (!deeper || deeper === hit) break;
        hit = deeper;
      }
      if (hit && (hit.tagName === 'IFRAME' || hit.tagName === 'FRAME')) {
        let inner: Document | null = null;
        try {
          inner = (hit as HTMLIFrameElement).contentDocument;
        } catch {
          inner = null;
        }
        if (inner) {
          const r = hit.getBoundingClientRect();
          px -= r.left + hit.clientLeft;
          py -= r.top + hit.clientTop;
          doc = inner;
          continue;
        }
      }
      return hit;
    }
  }

  /**
   * Whether a click at (x, y) reaches the target: an overlay on top of it is a clear
   * error, not a click on something else. The extension's own banner is looked through.
   */
  hitTest(target: Target & Box): { ok: true } | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    const hit = this.hitAt(target.x, target.y);
    if (hit && (within(el, hit) || (hit.tagName === 'LABEL' && (hit as HTMLLabelElement).control === el))) return { ok: true };
    if (!el.isConnected) return fail('not_found', `${describe(el)} was removed from the page during the action`, 'ref_not_found');
    const what = hit ? describe(hit) : 'nothing';
    return fail(
      'permission_denied',
      `${describe(el)} is covered by ${what} at (${Math.round(target.x)}, ${Math.round(target.y)}); close or scroll past it, then snapshot again`,
      'element_not_visible',
    );
  }

  /** Focus the target (for `press`). */
  focus(target: Target): { ok: true } | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    scrollToCentre(el);
    (el as HTMLElement).focus?.();
    return { ok: true };
  }

  /**
   * Get a field ready for typing: check it can be filled, focus it, and select its
   * content (to replace it) or put the caret at its end (to append). Fields that take
   * no typing (date, colour, range) are set directly: `{ok, set: true}`.
   */
  prepareFill(target: Target & { value: string; clearBefore: boolean }): { ok: true; set: boolean; empty: boolean } | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    const html = el as HTMLElement;
    const tag = el.tagName;
    const type = tag === 'INPUT' ? (el.getAttribute('type') ?? '').toLowerCase() : '';
    const isText = tag === 'TEXTAREA' || (tag === 'INPUT' && (TEXT_INPUT_TYPES.has(type) || !INPUT_TYPES_KNOWN.has(type)));
    const isValue = tag === 'INPUT' && VALUE_INPUT_TYPES.has(type);
    if (!isText && !isValue && !html.isContentEditable) {
      return fail('invalid_params', `${describe(el)} is not a text field, textarea or editable element`, 'target_not_fillable');
    }
    const field = el as HTMLInputElement;
    if (field.disabled || el.getAttribute('aria-disabled') === 'true') return fail('invalid_params', `${describe(el)} is disabled`);
    if ((isText || isValue) && field.readOnly) return fail('invalid_params', `${describe(el)} is read-only`);
    scrollToCentre(el);
    html.focus();
    if (isValue) {
      field.value = target.clearBefore ? target.value : field.value + target.value;
      fire(field, 'input');
      fire(field, 'change');
      return { ok: true, set: true, empty: false };
    }
    if (isText) {
      const len = field.value.length;
      // Number fields do not support selection ranges; select() works for all.
      if (target.clearBefore) field.select();
      else if (type !== 'number' && type !== 'email') field.setSelectionRange(len, len);
      return { ok: true, set: false, empty: len === 0 };
    }
    const selection = el.ownerDocument.getSelection();
    const range = el.ownerDocument.createRange();
    range.selectNodeContents(el);
    if (!target.clearBefore) range.collapse(false);
    selection?.removeAllRanges();
    selection?.addRange(range);
    return { ok: true, set: false, empty: (el.textContent ?? '') === '' };
  }

  /**
   * Whether a checkbox, radio button or switch (native or by ARIA role) is checked,
   * for Latchkey's `set_checked`; anything else is `target_not_checkable`.
   */
  checkState(target: Target): { ok: true; checked: boolean; radio: boolean } | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    const type = el.tagName === 'INPUT' ? (el as HTMLInputElement).type : '';
    if (type === 'checkbox' || type === 'radio') {
      return { ok: true, checked: (el as HTMLInputElement).checked, radio: type === 'radio' };
    }
    const role = el.getAttribute('role');
    if (role === 'checkbox' || role === 'radio' || role === 'switch' || role === 'menuitemcheckbox' || role === 'menuitemradio') {
      return { ok: true, checked: el.getAttribute('aria-checked') === 'true', radio: role === 'radio' || role === 'menuitemradio' };
    }
    return fail('invalid_params', `${describe(el)} is not a checkbox, radio button or switch`, 'target_not_checkable');
  }

  /** The element's own HTML, for `tool.get_html` with a ref. */
  html(target: Target): { ok: true; html: string } | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    return { ok: true, html: el.outerHTML };
  }

  /**
   * The element scrolled into view, and its box in CSS pixels of the top-level
   * viewport (frames' offsets added), cut to what the viewport shows: what
   * `tool.screenshot` with a ref captures.
   */
  bounds(target: Target): ({ ok: true } & Rect) | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    scrollToCentre(el);
    const rect = this.inTopViewport(el, el.getBoundingClientRect());
    if (rect.right - rect.left < 1 || rect.bottom - rect.top < 1) {
      return fail('permission_denied', `${describe(el)} has no size on screen (hidden, empty or outside the visible area)`, 'element_not_visible');
    }
    return { ok: true, ...rect };
  }

  /** Outline request_help's targets for the person; the first found is scrolled into view. */
  highlight(args: { targets: Target[] }): { ok: true; matched: boolean[] } {
    this.unhighlight();
    const matched = args.targets.map((t) => {
      const el = this.resolve(t);
      if ('error' in el) return false;
      const html = el as HTMLElement;
      if (this.outlined.length === 0) scrollToCentre(el);
      this.outlined.push({ el: html, outline: html.style.outline, offset: html.style.outlineOffset });
      html.style.outline = HIGHLIGHT_OUTLINE;
      html.style.outlineOffset = '2px';
      return true;
    });
    return { ok: true, matched };
  }

  unhighlight(): { ok: true } {
    for (const { el, outline, offset } of this.outlined) {
      el.style.outline = outline;
      el.style.outlineOffset = offset;
    }
    this.outlined = [];
    return { ok: true };
  }

  /** Whether request_help's completion criteria hold on this page now. */
  conditions(criteria: Criteria): { ok: true; met: boolean } | PageError {
    const holds = (c: Condition): boolean | PageError => {
      const href = this.doc.location?.href ?? '';
      const text = () => (this.doc.body as HTMLElement | null)?.innerText ?? this.doc.body?.textContent ?? '';
      const query = (selector: string): Element | null | PageError => {
        try {
          return this.doc.querySelector(selector);
        } catch {
          return fail('invalid_params', `completion selector ${JSON.stringify(selector)} is not valid CSS`);
        }
      };
      if (c.url_contains !== undefined && !href.includes(c.url_contains)) return false;
      if (c.url_matches !== undefined && !new RegExp(c.url_matches).test(href)) return false;
      for (const [selector, want] of [
        [c.selector_exists, true],
        [c.selector_missing, false],
      ] as const) {
        if (selector === undefined) continue;
        const found = query(selector);
        if (found && 'error' in found) return found;
        if ((found !== null) !== want) return false;
      }
      if (c.text_exists !== undefined && !text().includes(c.text_exists)) return false;
      if (c.text_missing !== undefined && text().includes(c.text_missing)) return false;
      return true;
    };
    const all = criteria.all ?? [];
    const any = criteria.any ?? [];
    const results = [...all, ...any].map(holds);
    const error = results.find((r): r is PageError => typeof r === 'object');
    if (error) return error;
    const allHold = results.slice(0, all.length).every((r) => r === true);
    const anyHolds = any.length === 0 || results.slice(all.length).some((r) => r === true);
    return { ok: true, met: allHold && anyHolds };
  }

  /** Choose options of a <select> by value (or, failing that, by label). */
  select(target: Target & { values: string[] }):
    | { ok: true; multiple: boolean; selectedValues: string[]; selectedLabels: string[] }
    | PageError {
    const el = this.resolve(target);
    if ('error' in el) return el;
    if (el.tagName !== 'SELECT') return fail('invalid_params', `${describe(el)} is not a <select>`, 'target_not_select');
    const select = el as HTMLSelectElement;
    if (select.disabled) return fail('invalid_params', `${describe(el)} is disabled`);
    if (!select.multiple && target.values.length !== 1) {
      return fail('invalid_params', `a single select takes exactly one value, got ${target.values.length}`, 'single_select_value_count');
    }
    const options = [...select.options];
    const chosen: HTMLOptionElement[] = [];
    for (const v of target.values) {
      const o = options.find((x) => x.value === v) ?? options.find((x) => (x.label || x.text).trim() === v);
      if (!o || o.disabled) return fail('invalid_params', `no ${o ? 'enabled ' : ''}option ${JSON.stringify(v)} in ${describe(el)}`, 'option_not_found');
      chosen.push(o);
    }
    select.focus();
    for (const o of options) o.selected = chosen.includes(o);
    fire(select, 'input');
    fire(select, 'change');
    const selected = [...select.selectedOptions];
    return {
      ok: true,
      multiple: select.multiple,
      selectedValues: selected.map((o) => o.value),
      selectedLabels: selected.map((o) => (o.label || o.text).trim()),
    };
  }
}

const INPUT_TYPES_KNOWN = new Set([
  ...TEXT_INPUT_TYPES,
  ...VALUE_INPUT_TYPES,
  'checkbox', 'radio', 'file', 'submit', 'reset', 'button', 'image', 'hidden',
]);
