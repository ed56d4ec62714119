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
    const lines = out.text.split('\n');
    expect(lines[0]).toBe('- document "Sign in - Example"');
    expect(out.text).toContain('- banner');
    expect(out.text).toContain('- navigation');
    expect(out.text).toContain('- link "Home" @e1 -> /');
    expect(out.text).toContain('- link "Help" @e2 -> /help');
    expect(out.text).toContain('- heading "Sign in" [level=1]');
    expect(out.text).toContain('- textbox "Email" @e3: "ann@example.com"');
    expect(out.text).toContain('- textbox "Password" [secret] @e4');
    expect(out.text).toContain('- textbox "Code" [secret] @e5');
    expect(out.text).toContain('- checkbox "Remember me" [checked] @e6');
    expect(out.text).toContain('- combobox "Color" @e7: "Green"');
    expect(out.text).toContain('- option "Green" [selected] [value="g"]');
    expect(out.text).toContain('- listbox "Tags" [multiple] @e8');
    expect(out.text).toContain('- button "Sign in" @e9');
    expect(out.text).toContain('- button "Later" [disabled] @e10');
    expect(out.text).toContain('- link "Join" @e11 -> /join');
    expect(out.text).toContain('- paragraph: "Plain paragraph text."');
    expect(out.refs).toHaveLength(11);
    expect(out.refs[2]?.id).toBe('user');
    expect(out.truncated).toBe(false);
  });

  it('never prints secret values, hidden content or scripts', () => {
    const out = renderSnapshot(page(LOGIN));
    for (const secret of ['hunter2', '123456', 'Hidden button', 'hidden text', 'aria hidden', 'var secret']) {
      expect(out.text).not.toContain(secret);
    }
  });

  it('indents children under their container', () => {
    const out = renderSnapshot(page('<ul><li><a href="/a">A</a></li><li>Plain</li></ul>'));
    expect(out.text.split('\n').slice(1)).toEqual(['- list', '  - listitem', '    - link "A" @e1 -> /a', '  - listitem: "Plain"']);
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
