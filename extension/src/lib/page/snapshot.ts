// The page as an agent reads it (docs/protocol.md, "Tools"): a compact outline of the
// accessibility tree — roles, names, values of non-secret fields, headings, links, form
// controls — where everything actionable carries a ref `@eN`.
//
// Runs in the page (the extension's isolated world), and under jsdom in the unit tests:
// it only reads the DOM and never changes it. Open shadow roots and same-origin frames
// are walked; cross-origin frames are named but not entered.

import { flatten, formatLine, type Inline, type Item, type OutlineLine, type OutlineNode, safeHref } from './outline';
import { accessibleName, roleOf } from './roles';

export interface SnapshotOptions {
  /** Deepest outline level printed (0 = top level only); default unlimited. */
  maxDepth?: number;
  /** Soft cap: tokens ≈ ⌈chars / 4⌉; default unlimited. */
  maxTokens?: number;
}

export interface SnapshotOutput {
  text: string;
  truncated: boolean;
  /** `refs[i]` is the element printed as `@e{i+1}`. */
  refs: Element[];
}

/** Marks the extension's own UI in pages (banner, help overlay): never in a snapshot. */
export const OWN_UI_ATTRIBUTE = 'data-latchkey-ui';

/** Roles whose content is their name: printed as one line, not descended into. */
const LEAF_ROLES = new Set([
  'button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio', 'switch', 'slider', 'spinbutton', 'img',
  'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab', 'separator', 'progressbar', 'meter', 'treeitem',
]);

/** Roles a person can act on: they get a ref. */
const ACTIONABLE_ROLES = new Set([
  'button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio', 'switch', 'slider', 'spinbutton', 'combobox',
  'listbox', 'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab', 'treeitem',
]);

/**
 * Roles whose content reads as prose: text with links or fields in it prints inline.
 * Structural containers (forms, groups, lists, tables, landmarks) keep one element
 * per line unless they hold a single element.
 */
const FLOW_ROLES = new Set([
  'paragraph', 'cell', 'gridcell', 'columnheader', 'rowheader', 'listitem', 'heading', 'generic', 'blockquote',
  'caption', 'term', 'definition', 'note', 'status', 'alert', 'emphasis', 'strong', 'code', 'label', 'legend',
]);

const SKIPPED_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'TITLE', 'BASE']);

/** Autocomplete tokens of fields whose values are secrets: never printed. */
const SECRET_AUTOCOMPLETE = /\b(current-password|new-password|one-time-code|cc-number|cc-csc|cc-exp\S*)\b/;

const MAX_NAME_CHARS = 120;
export const TRUNCATION_MARK = '- … (truncated: the page goes on; raise max_tokens, or lower max_depth)';
const MAX_TEXT_CHARS = 2000;
const MAX_HREF_CHARS = 120;

export function isSecretField(el: Element): boolean {
  if (el.tagName === 'INPUT' && (el as HTMLInputElement).type === 'password') return true;
  return SECRET_AUTOCOMPLETE.test(el.getAttribute('autocomplete') ?? '');
}

/** Hidden from people and assistive technology: skipped with its subtree. */
export function isHidden(el: Element): boolean {
  if (el.hasAttribute('hidden') || el.getAttribute('aria-hidden') === 'true') return true;
  if (el.tagName === 'INPUT' && (el as HTMLInputElement).type === 'hidden') return true;
  const style = el.ownerDocument.defaultView?.getComputedStyle(el);
  if (!style) return false;
  return style.display === 'none' || style.visibility === 'hidden' || style.visibility === 'collapse';
}

function clip(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function collapse(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

function propsOf(el: Element, role: string): string[] {
  const props: string[] = [];
  const input = el as HTMLInputElement;
  if (role === 'heading') {
    // A number, never the attribute's text: a property is printed unquoted.
    const aria = Number(el.getAttribute('aria-level') ?? '');
    const level = Number.isInteger(aria) && aria >= 1 && aria <= 99 ? aria : Number(/^H([1-6])$/.exec(el.tagName)?.[1] ?? 2);
    props.push(`level=${level}`);
  }
  if (role === 'checkbox' || role === 'radio' || role === 'switch') {
    const checked = el.tagName === 'INPUT' ? input.checked : el.getAttribute('aria-checked') === 'true';
    if (checked) props.push('checked');
  }
  if (role === 'option' && ((el as HTMLOptionElement).selected || el.getAttribute('aria-selected') === 'true')) {
    props.push('selected');
  }
  if (isSecretField(el)) props.push('secret');
  if (role === 'listbox' && (el as HTMLSelectElement).multiple) props.push('multiple');
  const expanded = el.getAttribute('aria-expanded');
  if (expanded === 'true') props.push('expanded');
  if (expanded === 'false') props.push('collapsed');
  if ((el as HTMLButtonElement).disabled || el.getAttribute('aria-disabled') === 'true') props.push('disabled');
  if (input.required) props.push('required');
  if (input.readOnly && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA')) props.push('readonly');
  return props;
}

function valueOf(el: Element, role: string): string | undefined {
  if (isSecretField(el)) return undefined;
  if (el.tagName === 'SELECT') {
    const select = el as HTMLSelectElement;
    if (select.multiple) return undefined;
    const chosen = select.selectedOptions[0];
    return chosen ? collapse(chosen.label || chosen.text) : undefined;
  }
  if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
    if (!['textbox', 'searchbox', 'slider', 'spinbutton', 'combobox'].includes(role)) return undefined;
    const v = (el as HTMLInputElement).value;
    return v === '' ? undefined : clip(v, MAX_TEXT_CHARS);
  }
  if ((el as HTMLElement).isContentEditable || el.getAttribute('contenteditable') === 'true') {
    const v = collapse(el.textContent ?? '');
    return v === '' ? undefined : clip(v, MAX_TEXT_CHARS);
  }
  const now = el.getAttribute('aria-valuenow');
  return now ?? undefined;
}

function isActionable(el: Element, role: string | undefined): boolean {
  if (role && ACTIONABLE_ROLES.has(role)) {
    // Options of a native <select> are chosen through the select's own ref.
    return !(el.tagName === 'OPTION');
  }
  if (el.tagName === 'SUMMARY') return true;
  if ((el as HTMLElement).isContentEditable && el.getAttribute('contenteditable') !== null) return true;
  const tabindex = el.getAttribute('tabindex');
  return el.hasAttribute('onclick') || (tabindex !== null && Number(tabindex) >= 0 && role !== undefined);
}

/** The children a person sees: a shadow root replaces light children; slots project them. */
function renderedChildren(node: Element | DocumentFragment): Node[] {
  if (node.nodeType === 1) {
    const el = node as unknown as Element;
    if (el.shadowRoot) return [...el.shadowRoot.childNodes];
    if (el.tagName === 'SLOT') {
      const assigned = (el as HTMLSlotElement).assignedNodes({ flatten: true });
      return assigned.length > 0 ? assigned : [...el.childNodes];
    }
    if (el.tagName === 'DETAILS' && !(el as HTMLDetailsElement).open) {
      return [...el.children].filter((c) => c.tagName === 'SUMMARY');
    }
  }
  return [...node.childNodes];
}

function mergeText(items: Item[]): Item[] {
  const merged: Item[] = [];
  for (const item of items) {
    const last = merged[merged.length - 1];
    if (item.kind === 'text' && last?.kind === 'text') last.text = `${last.text} ${item.text}`;
    else merged.push(item.kind === 'text' ? { ...item } : item);
  }
  return merged;
}

/**
 * Walks the rendered tree into items. With a token budget it stops once it has
 * gathered about twice what can be printed, so a huge page costs no more to read
 * than a page of the budget's size.
 */
class Walker {
  private spent = 0;
  stopped = false;

  constructor(private readonly budget: number) {}

  private spend(chars: number): void {
    this.spent += chars;
    if (this.spent > this.budget * 2) this.stopped = true;
  }

  children(parent: Element | DocumentFragment): Item[] {
    const out: Item[] = [];
    for (const child of renderedChildren(parent)) {
      if (this.stopped) break;
      if (child.nodeType === 3) {
        const t = collapse(child.textContent ?? '');
        if (t) {
          this.spend(t.length + 8);
          out.push({ kind: 'text', text: t });
        }
      } else if (child.nodeType === 1) {
        out.push(...this.element(child as Element));
      }
    }
    return mergeText(out);
  }

  private frame(el: Element): Item[] {
    const title = collapse(el.getAttribute('title') ?? el.getAttribute('name') ?? '');
    let doc: Document | null = null;
    try {
      doc = (el as HTMLIFrameElement).contentDocument;
    } catch {
      doc = null;
    }
    if (!doc?.body) {
      return [{ kind: 'node', line: { role: 'iframe', name: title, props: ['cross-origin, not included'] }, children: [] }];
    }
    return [{ kind: 'node', line: { role: 'iframe', name: title, props: [] }, children: this.children(doc.body) }];
  }

  element(el: Element): Item[] {
    if (SKIPPED_TAGS.has(el.tagName) || el.hasAttribute(OWN_UI_ATTRIBUTE) || isHidden(el)) return [];
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') return this.frame(el);
    const role = roleOf(el);
    const actionable = isActionable(el, role);
    if (!role && !actionable) {
      if (el.tagName === 'svg' || el.tagName === 'SVG') return [];
      if (el.tagName === 'LABEL' || el.tagName === 'LEGEND' || el.tagName === 'CAPTION') return this.naming(el);
      return this.children(el);
    }
    const effectiveRole = role ?? 'generic';
    const line: Omit<OutlineLine, 'depth'> = {
      role: effectiveRole,
      name: clip(accessibleName(el, effectiveRole), MAX_NAME_CHARS),
      props: propsOf(el, effectiveRole),
    };
    const value = valueOf(el, effectiveRole);
    if (value !== undefined) line.value = value;
    if (effectiveRole === 'link') {
      const href = el.getAttribute('href');
      if (href && !href.startsWith('javascript:')) line.href = safeHref(href, MAX_HREF_CHARS);
    }
    if (actionable) line.target = el;
    this.spend(effectiveRole.length + line.name.length + (line.value?.length ?? 0) + 12);
    if (LEAF_ROLES.has(effectiveRole)) return [{ kind: 'node', line, children: [] }];
    if (el.tagName === 'SELECT') {
      line.choices = choicesOf(el as HTMLSelectElement);
      return [{ kind: 'node', line, children: [] }];
    }
    let children = this.children(el);
    // A field's value already says what its text would.
    if (line.value !== undefined) children = children.filter((c) => c.kind !== 'text');
    const inline = inlineOf(children, line);
    if (inline) {
      if (inline.length > 0) line.inline = inline;
      children = [];
    }
    return [{ kind: 'node', line, children }];
  }

  /**
   * A label's, legend's or caption's text is the name of what it labels, which is
   * printed with that name: the text is left out where the name already holds it.
   */
  private naming(el: Element): Item[] {
    const items = this.children(el);
    const named = namedBy(el);
    if (!named || isHidden(named)) return items;
    const name = accessibleName(named, roleOf(named) ?? 'generic');
    // The parent merges what text is left with its neighbours.
    return items.filter((i) => i.kind !== 'text' || !name.includes(i.text));
  }
}

/** The element a label, legend or caption names, if any. */
function namedBy(el: Element): Element | null {
  if (el.tagName === 'LABEL') return (el as HTMLLabelElement).control;
  const parent = el.parentElement;
  if (el.tagName === 'LEGEND' && parent?.tagName === 'FIELDSET' && parent.querySelector(':scope > legend') === el) return parent;
  if (el.tagName === 'CAPTION' && parent?.tagName === 'TABLE' && parent.querySelector(':scope > caption') === el) return parent;
  return null;
}

/**
 * A native select's options for the `options` line: the label, the value where it
 * differs, and `[selected]` where the select's own value cannot say it (multiple).
 */
function choicesOf(select: HTMLSelectElement): string[] {
  return [...select.options].map((o) => {
    const label = clip(collapse(o.label || o.text), MAX_NAME_CHARS);
    let s = JSON.stringify(label);
    if (o.selected && select.multiple) s += ' [selected]';
    if (o.value !== label) s += ` [value=${JSON.stringify(clip(o.value, MAX_NAME_CHARS))}]`;
    if (o.disabled) s += ' [disabled]';
    return s;
  });
}

/**
 * A container of prose whose content is page text with elements in it (a paragraph
 * with links), or any container holding one element (a cell with a checkbox), prints
 * that content inline on its own line, as prose reads. `undefined` keeps the children
 * as lines: several elements and no text (a menu, a list of links) or a structure (a
 * form group) read better one per line.
 * An empty array means the content was only the container's own name.
 */
function inlineOf(children: Item[], line: Omit<OutlineLine, 'depth'>): Inline[] | undefined {
  if (children.length === 0) return undefined;
  const only = children[0];
  if (children.length === 1 && only?.kind === 'text') {
    return only.text === line.name ? [] : [{ kind: 'text', text: clip(only.text, MAX_TEXT_CHARS) }];
  }
  if (line.value !== undefined) return undefined;
  let texts = 0;
  const inline: Inline[] = [];
  for (const c of children) {
    if (c.kind === 'text') {
      texts += 1;
      inline.push({ kind: 'text', text: clip(c.text, MAX_TEXT_CHARS) });
    } else if (c.children.length === 0 && LEAF_ROLES.has(c.line.role) && !c.line.choices) {
      inline.push({ kind: 'node', node: c.line as OutlineNode });
    } else {
      return undefined;
    }
  }
  return inline.length === 1 || (texts > 0 && FLOW_ROLES.has(line.role)) ? inline : undefined;
}

/** Render `doc` as snapshot text; refs are numbered in document order from 1. */
export function renderSnapshot(doc: Document, options: SnapshotOptions = {}): SnapshotOutput {
  const lines: OutlineLine[] = [];
  const title = collapse(doc.title ?? '');
  const root = doc.body ?? doc.documentElement;
  const budget = options.maxTokens === undefined ? Number.POSITIVE_INFINITY : options.maxTokens * 4;
  const walker = new Walker(budget);
  flatten(root ? walker.children(root) : [], 0, options.maxDepth ?? Number.POSITIVE_INFINITY, lines);
  const refs: Element[] = [];
  const out: string[] = [];
  let used = 0;
  if (title) {
    const head = `- document ${JSON.stringify(clip(title, MAX_NAME_CHARS))}`;
    out.push(head);
    used += head.length + 1;
  }
  let truncated = false;
  for (const line of lines) {
    const { text, targets } = formatLine(line, refs.length + 1);
    if (used + text.length + 1 > budget && out.length > 0) {
      truncated = true;
      break;
    }
    out.push(text);
    used += text.length + 1;
    refs.push(...targets);
  }
  if (walker.stopped) truncated = true;
  if (truncated) out.push(TRUNCATION_MARK);
  return { text: out.join('\n'), truncated, refs };
}

