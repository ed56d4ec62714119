// The local test site: small pages for navigation, and pages that exercise
// snapshots and input (a login form, a checkout form, selects, keys, a hover menu, dialogs, an
// overlay, a page of 5,000 elements).

import { once } from 'node:events';
import http from 'node:http';

const page = (title, body, head = '') =>
  `<!doctype html><html><head><title>${title}</title>${head}</head><body><h1>${title}</h1>${body}</body></html>`;

const STATIC = {
  '/a': page('Page A', '<p>Alpha content</p><a href="/b">to B</a>'),
  '/b': page('Page B', '<p>Bravo content</p>'),
  '/c': page('Page C', '<p>Charlie content</p>'),
  '/login': page(
    'Sign in',
    `<form method="post" action="/login">
       <label for="user">Email</label> <input id="user" name="user" type="email" autocomplete="username">
       <label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password">
       <button type="submit">Sign in</button>
     </form>`,
  ),
  '/controls': page(
    'Controls',
    `<label for="size">Size</label>
     <select id="size" onchange="document.getElementById('size-out').textContent = 'size: ' + this.value">
       <option value="s">Small</option><option value="m">Medium</option><option value="l">Large</option>
     </select>
     <p id="size-out">size: s</p>
     <label for="toppings">Toppings</label>
     <select id="toppings" multiple onchange="document.getElementById('top-out').textContent = 'toppings: ' + [...this.selectedOptions].map(o => o.value).join(',')">
       <option value="cheese">Cheese</option><option value="olives">Olives</option><option value="ham">Ham</option>
     </select>
     <p id="top-out">toppings: none</p>
     <form id="search" onsubmit="event.preventDefault(); document.getElementById('submitted').textContent = 'submitted: ' + document.getElementById('q').value">
       <label for="q">Query</label> <input id="q" name="q">
     </form>
     <p id="submitted">submitted: nothing</p>
     <p id="selection">selected: 0</p>
     <div class="menu"><button id="products">Products</button>
       <ul class="items"><li><a href="/b">Laptops</a></li><li><a href="/c">Phones</a></li></ul></div>
     <button id="save" onclick="alert('Saved!')">Save</button>
     <div style="height: 40px"></div>
     <div style="position: relative; width: 300px; height: 60px">
       <button id="covered" onclick="document.title = 'clicked covered'">Covered</button>
       <div id="overlay" style="position: absolute; inset: 0; background: rgba(0,0,0,.5)">Cookie wall</div>
     </div>
     <button id="vanish" onmouseover="this.remove()">Vanish</button>
     <div contenteditable="true" id="notes" aria-label="Notes"></div>
     <script>
       document.addEventListener('selectionchange', () => {
         const q = document.getElementById('q');
         document.getElementById('selection').textContent = 'selected: ' + (q.selectionEnd - q.selectionStart);
       });
     </script>`,
    // A dropdown as sites build them: out of the flow, shown while hovered.
    `<style>.menu { position: relative } .items { display: none; position: absolute; top: 100%; left: 0; margin: 0;
       background: #fff; border: 1px solid #ccc } .menu:hover .items { display: block }</style>`,
  ),
  '/checkout': page(
    'Checkout',
    `<form onsubmit="event.preventDefault()" oninput="show()" onchange="show()">
       <label for="name">Full name</label> <input id="name">
       <label for="country">Country</label>
       <select id="country"><option value="">Choose…</option><option value="fr">France</option><option value="de">Germany</option></select>
       <label for="qty">Quantity</label> <input id="qty" type="range" min="1" max="10" value="1">
       <label><input id="gift" type="checkbox"> Gift wrap</label>
     </form>
     <p id="summary">name: ; country: ; quantity: 1; gift: no</p>
     <div style="height: 1500px"></div>
     <button id="pay" aria-label="Pay" style="width: 160px; height: 48px; border: 0; background: rgb(51, 102, 204)"></button>
     <script>
       function show() {
         const v = (id) => document.getElementById(id).value;
         document.getElementById('summary').textContent = 'name: ' + v('name') + '; country: ' + v('country') + '; quantity: ' + v('qty') + '; gift: ' + (document.getElementById('gift').checked ? 'yes' : 'no');
       }
     </script>`,
  ),
  '/big': page(
    'Big',
    Array.from({ length: 5000 }, (_, i) => `<a href="/item/${i}">Item ${i}</a>`).join(' '),
  ),
  '/help': page(
    'Verify',
    `<p>Prove you are human.</p>
     <button id="human" onclick="document.getElementById('state').textContent = 'Verified'">I am human</button>
     <p id="state">Not verified</p>
     <script>
       console.log('hello from the page', 42);
       console.warn('careful');
       fetch('/missing').catch(() => undefined);
     </script>`,
  ),
  '/greet': page('Greeting', `<p>Greeted</p><script>alert('Welcome!')</script>`),
  '/dialogs': page(
    'Dialogs',
    `<button id="loop" onclick="for (;;) alert('again')">Loop</button>
     <button id="confirm" onclick="document.getElementById('answer').textContent = 'answer: ' + confirm('Delete everything?')">Ask</button>
     <p id="answer">answer: none</p>`,
  ),
};

export async function startSite() {
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/login') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        const ok = form.get('user') === 'ann@example.com' && form.get('password') === 'correct horse';
        res.writeHead(ok ? 200 : 401, { 'content-type': 'text/html; charset=utf-8' });
        res.end(ok ? page('Welcome', `<p>Signed in as ${form.get('user')}</p>`) : page('Sign in failed', '<p>Wrong password</p>'));
      });
      return;
    }
    // A server redirect, to test navigations the gateway never sees.
    if (req.url?.startsWith('/redirect?')) {
      const to = new URL(req.url, 'http://site').searchParams.get('to') ?? '/a';
      res.writeHead(302, { location: to });
      res.end();
      return;
    }
    const html = STATIC[req.url ?? ''];
    res.writeHead(html ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html ?? 'not found');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  return { server, base: `http://127.0.0.1:${port}` };
}
