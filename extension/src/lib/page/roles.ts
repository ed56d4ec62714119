// ARIA roles and accessible names, the parts a snapshot needs: explicit roles,
// the implicit roles of HTML elements, and names from aria-labelledby, aria-label,
// <label>, alt, placeholder, title and content (a pragmatic subset of accname 1.2).

const INPUT_ROLES: Record<string, string> = {
  button: 'button',
  submit: 'button',
  reset: 'button',
  image: 'button',
  file: 'button',
  color: 'button',
  checkbox: 'checkbox',
  radio: 'radio',
  range: 'slider',
  number: 'spinbutton',
  search: 'searchbox',
};

const TAG_ROLES: Record<string, string> = {
  BUTTON: 'button',
  TEXTAREA: 'textbox',
  OPTION: 'option',
  H1: 'heading',
  H2: 'heading',
  H3: 'heading',
  H4: 'heading',
  H5: 'heading',
  H6: 'heading',
  NAV: 'navigation',
  MAIN: 'main',
  ASIDE: 'complementary',
  FORM: 'form',
  DIALOG: 'dialog',
  TABLE: 'table',
  TR: 'row',
  TH: 'columnheader',
  TD: 'cell',
  UL: 'list',
  OL: 'list',
  LI: 'listitem',
  P: 'paragraph',
  FIELDSET: 'group',
  SUMMARY: 'button',
  PROGRESS: 'progressbar',
  METER: 'meter',
  HR: 'separator',
  ARTICLE: 'article',
  HEADER: 'banner',
  FOOTER: 'contentinfo',
};

/** Roles whose name comes from their content when nothing else names them. */
const NAME_FROM_CONTENT = new Set([
  'button', 'link', 'heading', 'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab', 'checkbox',
  'radio', 'switch', 'treeitem', 'tooltip',
]);

/** The element's role, or undefined for generic containers. */
export function roleOf(el: Element): string | undefined {
  // The first token that can be a role: a role is printed unquoted, so anything but
  // a lowercase word (`doc-abstract` included) is not taken from the page.
  const explicit = el
    .getAttribute('role')
    ?.trim()
    .toLowerCase()
    .split(/\s+/)
    .find((r) => /^[a-z][a-z-]{0,39}$/.test(r));
  if (explicit === 'none' || explicit === 'presentation') return undefined;
  if (explicit) return explicit;
  const tag = el.tagName.toUpperCase();
  switch (tag) {
    case 'A':
    case 'AREA':
      return el.hasAttribute('href') ? 'link' : undefined;
    case 'INPUT': {
      const type = (el.getAttribute('type') ?? 'text').toLowerCase();
      return INPUT_ROLES[type] ?? 'textbox';
    }
    case 'SELECT': {
      const select = el as HTMLSelectElement;
      return select.multiple || select.size > 1 ? 'listbox' : 'combobox';
    }
    case 'IMG':
      return el.getAttribute('alt') === '' ? undefined : 'img';
    case 'SVG':
      return el.querySelector('title') || el.getAttribute('aria-label') ? 'img' : undefined;
    case 'HEADER':
    case 'FOOTER':
      // Landmarks only at the top level, not inside articles or sections.
      return el.closest('article, aside, main, nav, section') ? undefined : TAG_ROLES[tag];
  }
  if ((el as HTMLElement).isContentEditable && el.getAttribute('contenteditable') !== null) return 'textbox';
  return TAG_ROLES[tag];
}

function collapse(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

/** Visible text of a subtree, with images' alt text; hidden parts skipped. */
export function textOf(node: Node): string {
  const parts: string[] = [];
  const visit = (n: Node) => {
    if (n.nodeType === 3) {
      parts.push(n.textContent ?? '');
      return;
    }
    if (n.nodeType !== 1) return;
    const el = n as Element;
    if (['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(el.tagName)) return;
    if (el.hasAttribute('hidden') || el.getAttribute('aria-hidden') === 'true') return;
    const style = el.ownerDocument.defaultView?.getComputedStyle(el);
    if (style?.display === 'none' || style?.visibility === 'hidden') return;
    if (el.tagName === 'IMG') {
      parts.push(` ${el.getAttribute('alt') ?? ''} `);
      return;
    }
    const label = el.getAttribute('aria-label');
    if (label) {
      parts.push(` ${label} `);
      return;
    }
    const kids =
      el.tagName === 'SLOT'
        ? (el as HTMLSlotElement).assignedNodes({ flatten: true })
        : [...(el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes)];
    for (const c of kids) visit(c);
    if (BLOCKISH.has(el.tagName)) parts.push(' ');
  };
  visit(node);
  return collapse(parts.join(''));
}

/** Elements whose text is separated from what follows. */
const BLOCKISH = new Set(['DIV', 'P', 'LI', 'TD', 'TH', 'BR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6']);

function byIds(el: Element, ids: string): string {
  const root = el.getRootNode() as Document | ShadowRoot;
  return collapse(
    ids
      .split(/\s+/)
      .map((id) => {
        const target = root.getElementById?.(id) ?? el.ownerDocument.getElementById(id);
        return target ? textOf(target) : '';
      })
      .join(' '),
  );
}

function labelsOf(el: Element): string {
  const labels = (el as HTMLInputElement).labels;
  if (!labels || labels.length === 0) return '';
  return collapse(
    [...labels]
      .map((label) => {
        // The label's text without the control's own value inside it.
        const copy = label.cloneNode(true) as Element;
        for (const c of copy.querySelectorAll('input, select, textarea')) c.remove();
        return textOf(copy);
      })
      .join(' '),
  );
}

/** The accessible name of `el` in `role`. */
export function accessibleName(el: Element, role: string): string {
  const labelledBy = el.getAttribute('aria-labelledby');
  if (labelledBy) {
    const n = byIds(el, labelledBy);
    if (n) return n;
  }
  const aria = collapse(el.getAttribute('aria-label') ?? '');
  if (aria) return aria;
  const tag = el.tagName;
  if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') {
    const input = el as HTMLInputElement;
    const type = (input.getAttribute('type') ?? '').toLowerCase();
    if (tag === 'INPUT' && ['button', 'submit', 'reset'].includes(type)) {
      return collapse(input.value || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : ''));
    }
    if (tag === 'INPUT' && type === 'image') return collapse(input.getAttribute('alt') ?? 'Submit');
    const fromLabel = labelsOf(el);
    if (fromLabel) return fromLabel;
    const placeholder = collapse(el.getAttribute('placeholder') ?? '');
    if (placeholder) return placeholder;
    return collapse(el.getAttribute('title') ?? '');
  }
  if (tag === 'IMG') return collapse(el.getAttribute('alt') ?? el.getAttribute('title') ?? '');
  if (tag === 'svg' || tag === 'SVG') return collapse(el.querySelector('title')?.textContent ?? '');
  if (tag === 'FIELDSET') {
    const legend = el.querySelector(':scope > legend');
    if (legend) return textOf(legend);
  }
  if (tag === 'TABLE') {
    const caption = el.querySelector(':scope > caption');
    if (caption) return textOf(caption);
  }
  if (NAME_FROM_CONTENT.has(role)) {
    const t = textOf(el);
    if (t) return t;
  }
  return collapse(el.getAttribute('title') ?? '');
}
