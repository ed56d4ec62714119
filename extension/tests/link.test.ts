import { describe, expect, it } from 'vitest';
import { parseLink } from '../src/lib/link';

const SECRET = 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE';

describe('parseLink', () => {
  it.each([
    [`wss://gw.example.com/extension#${SECRET}`, 'https://gw.example.com/extension/authorize', 'gw.example.com'],
    [`wss://gw.example.com:8443/p/extension/#${SECRET}`, 'https://gw.example.com:8443/p/extension/authorize', 'gw.example.com:8443'],
    [`ws://127.0.0.1:52800/extension#${SECRET}`, 'http://127.0.0.1:52800/extension/authorize', '127.0.0.1:52800'],
    [`ws://localhost/extension#${SECRET}`, 'http://localhost/extension/authorize', 'localhost'],
    [`ws://[::1]:9/extension#${SECRET}`, 'http://[::1]:9/extension/authorize', '[::1]:9'],
    [`  wss://gw.example.com/extension#${SECRET}\n`, 'https://gw.example.com/extension/authorize', 'gw.example.com'],
  ])('accepts %s', (input, authorizeUrl, host) => {
    const r = parseLink(input);
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.link.authorizeUrl).toBe(authorizeUrl);
      expect(r.link.secret).toBe(SECRET);
      expect(r.link.host).toBe(host);
      expect(r.link.wsUrl.includes('#')).toBe(false);
    }
  });

  it.each([
    ['not a url', 'not_a_url'],
    [`https://gw.example.com/extension#${SECRET}`, 'bad_scheme'],
    [`ws://gw.example.com/extension#${SECRET}`, 'insecure_remote'],
    [`ws://192.168.1.5/extension#${SECRET}`, 'insecure_remote'],
    [`wss://user:pw@gw.example.com/extension#${SECRET}`, 'userinfo'],
    [`wss://gw.example.com/extension?x=1#${SECRET}`, 'query'],
    [`wss://gw.example.com/extension?#${SECRET}`, 'query'],
    ['wss://gw.example.com/extension#short', 'bad_fragment'],
    ['wss://gw.example.com/extension', 'bad_fragment'],
    [`wss://gw.example.com/extension#${SECRET.slice(0, 31)}`, 'bad_fragment'],
    [`wss://gw.example.com/extension#${'a'.repeat(257)}`, 'bad_fragment'],
    [`wss://gw.example.com/extension#${SECRET.slice(0, 40)}!!!`, 'bad_fragment'],
  ])('refuses %s', (input, error) => {
    const r = parseLink(input);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toBe(error);
      expect(r.message.length).toBeGreaterThan(10);
    }
  });
});
