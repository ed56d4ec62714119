// Three test pages of real-world size for the snapshot benchmark
// (docs/benchmarks.md, "Snapshots against Playwright's"): a long article, a
// form-heavy checkout and a data table of 2,000 rows. Generated from a fixed
// seed, so every run measures the same pages.

/** A small deterministic generator (mulberry32). */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the browser agent gateway session window person team token page form field button link table row ' +
  'column value order payment address city country street number email phone delivery option total price ' +
  'quantity product review summary article history research report market policy change system network'
).split(' ');

function words(rand, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)]);
  return out.join(' ');
}

const page = (title, body) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body>${body}</body></html>`;

/** A news article of ~6,000 words: headings, paragraphs, inline links, figures, lists, a nav and a footer. */
export function article() {
  const rand = random(1);
  const parts = ['<header><nav aria-label="Main">'];
  for (let i = 0; i < 12; i++) parts.push(`<a href="/section/${i}">Section ${i}</a> `);
  parts.push('</nav><form role="search"><input type="search" aria-label="Search"><button>Search</button></form></header>');
  parts.push('<main><article><h1>A long read about browsers and agents</h1>');
  for (let s = 0; s < 20; s++) {
    parts.push(`<h2>Part ${s + 1}: ${words(rand, 5)}</h2>`);
    for (let p = 0; p < 6; p++) {
      parts.push(`<p>${words(rand, 20)} <a href="/ref/${s}-${p}">${words(rand, 3)}</a> ${words(rand, 25)}.</p>`);
    }
    parts.push(`<figure><img src="data:," alt="Figure ${s + 1}: ${words(rand, 6)}" width="10" height="10"><figcaption>${words(rand, 10)}</figcaption></figure>`);
    parts.push(`<ul>${Array.from({ length: 4 }, () => `<li>${words(rand, 8)}</li>`).join('')}</ul>`);
  }
  parts.push('</article><aside><h2>Related</h2><ul>');
  for (let i = 0; i < 15; i++) parts.push(`<li><a href="/related/${i}">${words(rand, 6)}</a></li>`);
  parts.push('</ul></aside></main><footer>');
  for (let i = 0; i < 10; i++) parts.push(`<a href="/footer/${i}">${words(rand, 2)}</a> `);
  parts.push('</footer>');
  return page('Article', parts.join(''));
}

/** A checkout: addresses, delivery options, payment, a cart with quantities, and many buttons. */
export function checkout() {
  const rand = random(2);
  const field = (id, label, type = 'text', extra = '') =>
    `<label for="${id}">${label}</label><input id="${id}" name="${id}" type="${type}" ${extra}>`;
  const parts = ['<main><h1>Checkout</h1><form>'];
  for (const who of ['Shipping', 'Billing']) {
    const k = who.toLowerCase();
    parts.push(`<fieldset><legend>${who} address</legend>`);
    for (const [f, l] of [['name', 'Full name'], ['street', 'Street'], ['street2', 'Apartment'], ['city', 'City'], ['zip', 'Postcode'], ['phone', 'Phone']]) {
      parts.push(field(`${k}-${f}`, l));
    }
    parts.push(`<label for="${k}-country">Country</label><select id="${k}-country">`);
    for (let i = 0; i < 40; i++) parts.push(`<option>${words(rand, 1)} ${i}</option>`);
    parts.push('</select></fieldset>');
  }
  parts.push(field('email', 'Email', 'email', 'autocomplete="email"'));
  parts.push('<fieldset><legend>Delivery</legend>');
  for (let i = 0; i < 5; i++) parts.push(`<label><input type="radio" name="delivery" value="${i}"> ${words(rand, 4)}</label>`);
  parts.push('</fieldset><fieldset><legend>Payment</legend>');
  parts.push(field('card', 'Card number', 'text', 'autocomplete="cc-number"'));
  parts.push(field('exp', 'Expiry', 'text', 'autocomplete="cc-exp"'));
  parts.push(field('cvc', 'Security code', 'text', 'autocomplete="cc-csc"'));
  parts.push('</fieldset><h2>Your cart</h2><table><thead><tr><th>Item</th><th>Price</th><th>Quantity</th><th></th></tr></thead><tbody>');
  for (let i = 0; i < 25; i++) {
    parts.push(`<tr><td><a href="/p/${i}">${words(rand, 4)}</a></td><td>${(rand() * 100).toFixed(2)}</td>` +
      `<td><input type="number" aria-label="Quantity of item ${i + 1}" value="1" min="0"></td>` +
      `<td><button type="button">Remove item ${i + 1}</button></td></tr>`);
  }
  parts.push('</tbody></table>');
  for (let i = 0; i < 6; i++) parts.push(`<label><input type="checkbox" name="opt${i}"> ${words(rand, 6)}</label>`);
  parts.push('<label for="notes">Notes</label><textarea id="notes"></textarea>');
  parts.push('<button type="submit">Place order</button></form></main>');
  return page('Checkout', parts.join(''));
}

/** A data table of 2,000 rows: each with a link, four cells and a row checkbox. */
export function table() {
  const rand = random(3);
  const parts = ['<main><h1>Orders</h1><table><thead><tr><th>Select</th><th>Order</th><th>Customer</th><th>City</th><th>Total</th><th>Status</th></tr></thead><tbody>'];
  for (let i = 0; i < 2000; i++) {
    parts.push(`<tr><td><input type="checkbox" aria-label="Select order ${i + 1}"></td><td><a href="/o/${i}">#${10000 + i}</a></td>` +
      `<td>${words(rand, 2)}</td><td>${words(rand, 1)}</td><td>${(rand() * 1000).toFixed(2)}</td><td>${['open', 'paid', 'shipped'][i % 3]}</td></tr>`);
  }
  parts.push('</tbody></table></main>');
  return page('Orders', parts.join(''));
}

export const PAGES = { article, checkout, table };
