// Pairing links: wss://HOST[:PORT]/PATH#SECRET (docs/protocol.md, "Pairing links").

export interface PairingLink {
  /** The WebSocket URL, without the fragment. */
  wsUrl: string;
  /** `https://HOST/PATH/authorize` (or http for loopback). */
  authorizeUrl: string;
  /** The one-time pairing secret from the fragment. */
  secret: string;
  /** Host (and port) for display. */
  host: string;
}

export type LinkError =
  | 'not_a_url'
  | 'bad_scheme'
  | 'insecure_remote'
  | 'userinfo'
  | 'query'
  | 'bad_fragment';

export type ParsedLink = { ok: true; link: PairingLink } | { ok: false; error: LinkError; message: string };

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
const SECRET = /^[A-Za-z0-9_-]{32,256}$/;

const MESSAGES: Record<LinkError, string> = {
  not_a_url: 'That is not a pairing link. Paste the whole link your admin sent.',
  bad_scheme: 'The link must start with wss:// (ws:// only for this computer).',
  insecure_remote: 'Plain ws:// is only allowed for localhost; this link must use wss://.',
  userinfo: 'The link must not contain a user name or password.',
  query: 'The link must not contain a query string (?…).',
  bad_fragment: 'The link is incomplete: the part after # must be 32 to 256 letters, digits, - or _.',
};

function fail(error: LinkError): ParsedLink {
  return { ok: false, error, message: MESSAGES[error] };
}

/** Validate a pasted link exactly as the contract requires; nothing is stored here. */
export function parseLink(input: string): ParsedLink {
  const text = input.trim();
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail('not_a_url');
  }
  if (url.protocol !== 'wss:' && url.protocol !== 'ws:') return fail('bad_scheme');
  if (url.protocol === 'ws:' && !LOOPBACK.has(url.hostname)) return fail('insecure_remote');
  if (url.username !== '' || url.password !== '') return fail('userinfo');
  const beforeFragment = text.split('#')[0] ?? '';
  if (url.search !== '' || beforeFragment.includes('?')) return fail('query');
  const secret = url.hash.startsWith('#') ? url.hash.slice(1) : '';
  if (!SECRET.test(secret)) return fail('bad_fragment');
  const base = `${url.protocol}//${url.host}${url.pathname}`;
  const wsUrl = base;
  const httpBase = base.replace(/^wss:/, 'https:').replace(/^ws:/, 'http:').replace(/\/+$/, '');
  return {
    ok: true,
    link: { wsUrl, authorizeUrl: `${httpBase}/authorize`, secret, host: url.host },
  };
}
