// The snapshot renderer and the page agent's ref store on fixture DOMs (jsdom: a
// DOM without a browser; layout-dependent parts are covered end to end).

import { JSDOM } from 'jsdom';
import { beforeEach, describe, expect, it } from 'vitest';
import { PageAgent } from '../src/lib/page/agent';
import { renderSnapshot, TRUNCATION_MARK } from '../src/lib/page/snapshot';

let document: Document;

function page(html: string, title = 'Fixture'): Document {
  const dom = new JSDOM(`<!doctype html><html><head><title>${title}</title></head><body>${html}</body></html>`);
  document = dom.window.document;
  return document;
}

const LOGIN = `
  <header><nav><a href="/">Home</a> <a href="/help">Help</a></nav></header>
  <main>
    <h1>Sign in</h1>
    <form>
      <label for="user">Email</label><input id="user" type="email" value="ann@example.com">
      <label>Password <input id="pw" type="password" value="hunter2"></label>
      <input id="otp" autocomplete="one-time-code" value="123456" aria-label="Code">
      <label><input type="checkbox" checked> Remember me</label>
      <select id="color" aria-label="Color"><option value="r">Red</option><option value="g" selected>Green</option></select>
      <select id="tags" multiple aria-label="Tags"><option>a</option><option selected>b</option></select>
      <button type="submit">Sign in</button>
      <button disabled>Later</button>
    </form>
    <p>Need an account? <a href="/join">Join</a></p>
    <p>Plain paragraph text.</p>
    <div style="display:none"><button>Hidden button</button></div>
    <div hidden>hidden text</div>
    <div aria-hidden="true"><a href="/x">aria hidden</a></div>
    <script>var secret = 1;</script>
  </main>`;

describe('snapshot renderer', () => {
  it('renders roles, names, values and refs in document order', () => {
    const out = renderSnapshot(page(LOGIN, 'Sign in - Example'));
    expect(out.text).toBe(
      [
        '- document "Sign in - Example"',
        '- banner',
        '  - navigation',
        '    - link "Home" @e1 -> /',
        '    - link "Help" @e2 -> /help',
        '- main',
        '  - heading "Sign in" [level=1]',
        '  - form',
        '    - textbox "Email" @e3: "ann@example.com"',
        '    - textbox "Password" [secret] @e4',
        '    - textbox "Code" [secret] @e5',
        '    - checkbox "Remember me" [checked] @e6',
        '    - combobox "Color" @e7: "Green"',
        '      - options: "Red" [value="r"], "Green" [value="g"]',
        '    - listbox "Tags" [multiple] @e8',
        '      - options: "a", "b" [selected]',
        '    - button "Sign in" @e9',
        '    - button "Later" [disabled] @e10',
        '  - paragraph: "Need an account?" link "Join" @e11 -> /join',
        '  - paragraph: "Plain paragraph text."',
      ].join('\n'),
    );
    expect(out.refs).toHaveLength(11);
    expect(out.refs[2]?.id).toBe('user');
    expect(out.refs[10]?.getAttribute('href')).toBe('/join');
    expect(out.truncated).toBe(false);
  });

  it('prints a label, legend or caption once, as the name of what it names', () => {
    const out = renderSnapshot(
      page(`<fieldset><legend>Shipping</legend><label for="s">Street</label><input id="s">
        <label for="o">Shown</label><input id="o" aria-label="Other name"></fieldset>
        <table><caption>Orders</caption><tr><td>1</td></tr></table>`),
    );
    expect(out.text.split('\n').slice(1)).toEqual([
      '- group "Shipping"',
      '  - textbox "Street" @e1',
      // The label's text is not the field's name here, so it is still printed.
      '  - text "Shown"',
      '  - textbox "Other name" @e2',
      '- table "Orders"',
      '  - row',
      '    - cell: "1"',
    ]);
  });

  it('prints text with single elements inline, in page order, numbering their refs in order', () => {
    const out = renderSnapshot(
      page(`<p>Read <a href="/a">A</a> and <a href="/b">B</a>.</p>
        <table><tr><td><input type="checkbox" aria-label="Pick"></td><td><a href="/o">#1</a></td></tr></table>
        <ul><li><a href="/x">X</a></li><li><a href="/y">Y</a><a href="/z">Z</a></li></ul>`),
    );
    expect(out.text.split('\n').slice(1)).toEqual([
      '- paragraph: "Read" link "A" @e1 -> /a "and" link "B" @e2 -> /b "."',
      '- table',
      '  - row',
      '    - cell: checkbox "Pick" @e3',
      '    - cell: link "#1" @e4 -> /o',
      '- list',
      '  - listitem: link "X" @e5 -> /x',
      // Several elements and no text stay one per line.
      '  - listitem',
      '    - link "Y" @e6 -> /y',
      '    - link "Z" @e7 -> /z',
    ]);
    expect(out.refs.map((e) => e.getAttribute('href') ?? e.getAttribute('aria-label'))).toEqual(['/a', '/b', 'Pick', '/o', '/x', '/y', '/z']);
  });

  it('lets no page text, link target, role or level pose as a ref or an element', () => {
    const out = renderSnapshot(
      page(`<p>Say "@e9" link "Pay" @e8</p>
        <a href='/a @e7 "x" link'>Go</a>
        <div role='button" @e6' tabindex="0">Odd role</div>
        <h2 aria-level="1] @e5">Title</h2>
        <label>Name @e4<input></label>`),
    );
    // Outside quoted strings, the only refs (a space, then `@eN`, as the MCP
    // surface reads them) are the real ones.
    const unquoted = out.text.replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
    expect(unquoted.match(/(?<= )@e\d+\b/g)).toEqual(out.refs.map((_, i) => `@e${i + 1}`));
    expect(out.text).toContain('- link "Go" @e1 -> /a%20@e7%20%22x%22%20link');
    expect(out.text).toContain('- heading "Title" [level=2]');
    // A role that is not a word is not taken: the div is plain text.
    expect(out.text).toContain('- text "Odd role"');
    expect(out.refs).toHaveLength(2);
  });

  it('never prints secret values, hidden content or scripts', () => {
    const out = renderSnapshot(page(LOGIN));
    for (const secret of ['hunter2', '123456', 'Hidden button', 'hidden text', 'aria hidden', 'var secret']) {
      expect(out.text).not.toContain(secret);
    }
  });

  it('indents children under their container', () => {
    const html = '<ul><li><a href="/a">A</a><a href="/b">B</a></li><li>Plain</li></ul>';
    expect(renderSnapshot(page(html)).text.split('\n').slice(1)).toEqual([
      '- list',
      '  - listitem',
      '    - link "A" @e1 -> /a',
      '    - link "B" @e2 -> /b',
      '  - listitem: "Plain"',
    ]);
  });

  it('walks open shadow roots with their slotted content', () => {
    const doc = page('<x-card><span slot="title">Slotted title</span></x-card>');
    const host = doc.querySelector('x-card') as Element;
    const root = host.attachShadow({ mode: 'open' });
    root.innerHTML = '<h2><slot name="title"></slot></h2><button>Inside shadow</button>';
    const out = renderSnapshot(doc);
    expect(out.text).toContain('- heading "Slotted title" [level=2]');
    expect(out.text).toContain('- button "Inside shadow" @e1');
  });

  it('enters same-origin frames', () => {
    const doc = page('<iframe title="Embedded"></iframe>');
    const frame = doc.querySelector('iframe') as HTMLIFrameElement;
    const inner = frame.contentDocument as Document;
    inner.body.innerHTML = '<button>In frame</button>';
    const out = renderSnapshot(doc);
    expect(out.text).toContain('- iframe "Embedded"');
    expect(out.text).toContain('  - button "In frame" @e1');
  });

  it('stops at max_depth', () => {
    const html = '<ul><li><ul><li><ul><li><a href="/deep">Deep</a></li></ul></li></ul></li></ul>';
    expect(renderSnapshot(page(html), { maxDepth: 1 }).text).not.toContain('Deep');
    expect(renderSnapshot(page(html)).text).toContain('link "Deep"');
  });

  it('is not truncated when the page fits', () => {
    const out = renderSnapshot(page('<button>One</button>'), { maxTokens: 500 });
    expect(out.truncated).toBe(false);
    expect(out.text).not.toContain('truncated');
  });

  it('respects max_tokens on a page of 5,000 elements and reports truncated', () => {
    const rows = Array.from({ length: 5000 }, (_, i) => `<button>Button number ${i}</button>`).join('');
    const out = renderSnapshot(page(rows), { maxTokens: 500 });
    expect(out.truncated).toBe(true);
    // Soft cap: the budget plus the truncation marker line.
    expect(Math.ceil(out.text.length / 4)).toBeLessThanOrEqual(500 + 30);
    expect(out.text.split('\n').at(-1)).toBe(TRUNCATION_MARK);
    expect(out.text).toContain('- button "Button number 0" @e1');
    // Refs are only for what was printed.
    const printed = out.text.match(/@e\d+/g) ?? [];
    expect(out.refs).toHaveLength(printed.length);
    expect(printed.at(-1)).toBe(`@e${out.refs.length}`);
  });

  it('leaves the extension\'s own UI out', () => {
    const out = renderSnapshot(page('<div data-latchkey-ui><button>Stop</button></div><button>Page</button>'));
    expect(out.text).not.toContain('Stop');
    expect(out.text).toContain('- button "Page" @e1');
  });
});

describe('page agent refs', () => {
  let agent: PageAgent;
  beforeEach(() => {
    page('<button id="a">A</button><input id="name"><select id="s"><option value="1">One</option><option value="2">Two</option></select><div id="d">text</div><select id="m" multiple><option>x</option><option>y</option><option disabled>z</option></select>');
    agent = new PageAgent(document);
  });

  it('resolves refs of the current snapshot only', () => {
    const first = agent.snapshot({ snapshot: 's1' });
    expect(first.refCount).toBe(4);
    expect(agent.resolve({ ref: 'e1', snapshot: 's1' })).toBe(document.getElementById('a'));
    expect(agent.resolve({ ref: '@e2', snapshot: 's1' })).toBe(document.getElementById('name'));
    agent.snapshot({ snapshot: 's2' });
    expect(agent.resolve({ ref: 'e1', snapshot: 's1' })).toMatchObject({ error: { code: 'not_found', reason: 'ref_not_found' } });
    expect(agent.resolve({ ref: 'e99', snapshot: 's2' })).toMatchObject({ error: { reason: 'ref_not_found' } });
  });

  it('refuses a ref whose element left the page', () => {
    agent.snapshot({ snapshot: 's1' });
    document.getElementById('a')?.remove();
    expect(agent.resolve({ ref: 'e1', snapshot: 's1' })).toMatchObject({ error: { reason: 'ref_not_found' } });
  });

  it('reports selectors that match nothing or are not CSS', () => {
    expect(agent.resolve({ selector: '#nope' })).toMatchObject({ error: { code: 'not_found', reason: 'selector_not_found' } });
    expect(agent.resolve({ selector: '##' })).toMatchObject({ error: { code: 'invalid_params' } });
  });

  it('fills only fields', () => {
    expect(agent.prepareFill({ selector: '#d', value: 'x', clearBefore: true })).toMatchObject({
      error: { code: 'invalid_params', reason: 'target_not_fillable' },
    });
    expect(agent.prepareFill({ selector: '#name', value: 'x', clearBefore: true })).toEqual({ ok: true, set: false, empty: true });
    expect(document.activeElement?.id).toBe('name');
  });

  it('selects by value or label with the contract\'s reasons', () => {
    expect(agent.select({ selector: '#a', values: ['1'] })).toMatchObject({ error: { reason: 'target_not_select' } });
    expect(agent.select({ selector: '#s', values: ['1', '2'] })).toMatchObject({ error: { reason: 'single_select_value_count' } });
    expect(agent.select({ selector: '#s', values: ['3'] })).toMatchObject({ error: { reason: 'option_not_found' } });
    expect(agent.select({ selector: '#m', values: ['z'] })).toMatchObject({ error: { reason: 'option_not_found' } });
    let changes = 0;
    document.getElementById('s')?.addEventListener('change', () => changes++);
    expect(agent.select({ selector: '#s', values: ['Two'] })).toEqual({
      ok: true,
      multiple: false,
      selectedValues: ['2'],
      selectedLabels: ['Two'],
    });
    expect(changes).toBe(1);
    expect(agent.select({ selector: '#m', values: ['x', 'y'] })).toMatchObject({ selectedValues: ['x', 'y'] });
    expect(agent.select({ selector: '#m', values: [] })).toMatchObject({ multiple: true, selectedValues: [] });
  });
});
