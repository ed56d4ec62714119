// The snapshot's text form (docs/extension.md, "Snapshots and refs"): one line per
// node, indented by nesting, and a container whose content is page text and single
// elements prints that content after its colon, in page order. Everything a page
// controls is either JSON-quoted (names, values, text) or reduced to characters that
// cannot end a token (link targets, properties), so page text can never pose as a
// ref or as an element of the outline.

/** One element as printed. */
export interface OutlineNode {
  role: string;
  name: string;
  props: string[];
  value?: string;
  href?: string;
  /** The element behind a ref; set for what a person can act on. */
  target?: Element;
}

/** What a line carries after its colon: page text and leaf elements, in page order. */
export type Inline = { kind: 'text'; text: string } | { kind: 'node'; node: OutlineNode };

export interface OutlineLine extends OutlineNode {
  depth: number;
  inline?: Inline[];
  /** A native select's options, each already formatted: the `options` line under it. */
  choices?: string[];
}

/** The walk's result before depths are known. */
export type Item =
  | { kind: 'text'; text: string }
  | { kind: 'node'; line: Omit<OutlineLine, 'depth'>; children: Item[] };

/**
 * Page text, quoted. A line break inside the text (JSON escapes it) can never start
 * a line of the outline.
 */
const quote = (s: string): string => JSON.stringify(s);

/**
 * A link target as the page wrote it, with whitespace, quotes and control characters
 * percent-encoded: it ends at the first space, as every unquoted token does.
 */
export function safeHref(href: string, max: number): string {
  const clipped = href.length > max ? `${href.slice(0, max - 1)}…` : href;
  return clipped.replace(/[\s"\\\u0000-\u001f\u007f]/g, (c) => encodeURIComponent(c));
}

function node(n: OutlineNode, ref: (el: Element) => string): string {
  let s = n.role;
  if (n.name) s += ` ${quote(n.name)}`;
  for (const p of n.props) s += ` [${p}]`;
  if (n.target) s += ` ${ref(n.target)}`;
  if (n.value !== undefined) s += `: ${quote(n.value)}`;
  if (n.href !== undefined) s += ` -> ${n.href}`;
  return s;
}

/** A line and the elements its refs name, numbered from `firstRef`. */
export function formatLine(line: OutlineLine, firstRef: number): { text: string; targets: Element[] } {
  const targets: Element[] = [];
  const ref = (el: Element): string => {
    targets.push(el);
    return `@e${firstRef + targets.length - 1}`;
  };
  let s = `${'  '.repeat(line.depth)}- `;
  if (line.role === 'text') {
    const text = line.inline?.[0];
    return { text: `${s}text ${quote(text?.kind === 'text' ? text.text : '')}`, targets };
  }
  if (line.role === 'options') return { text: `${s}options: ${(line.choices ?? []).join(', ')}`, targets };
  s += node(line, ref);
  if (line.inline && line.inline.length > 0 && line.value === undefined) {
    s += `: ${line.inline.map((i) => (i.kind === 'text' ? quote(i.text) : node(i.node, ref))).join(' ')}`;
  }
  return { text: s, targets };
}

/** Items to lines, depth first; nothing deeper than `maxDepth`. */
export function flatten(items: Item[], depth: number, maxDepth: number, out: OutlineLine[]): void {
  for (const item of items) {
    if (depth > maxDepth) return;
    if (item.kind === 'text') {
      out.push({ depth, role: 'text', name: '', props: [], inline: [item] });
    } else {
      const { choices, ...line } = item.line;
      out.push({ depth, ...line });
      if (choices && depth + 1 <= maxDepth) out.push({ depth: depth + 1, role: 'options', name: '', props: [], choices });
      flatten(item.children, depth + 1, maxDepth, out);
    }
  }
}
