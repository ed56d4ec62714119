import { describe, expect, it } from 'vitest';
import { matches, parseRules, refusal } from '../src/lib/siterules';

const OWN = 'chrome-extension://abcdefghijklmnopabcdefghijklmnop';
const rules = (over: Partial<{ allow_lists: string[][]; block_sites: string[]; schemes: string[] }> = {}) => ({
  allow_lists: [],
  block_sites: [],
  schemes: ['http', 'https'],
  ...over,
});

describe('site patterns', () => {
  it('match as the gateway matches them', () => {
    expect(matches('*.example.com', 'a.example.com')).toBe(true);
    expect(matches('*.example.com', 'a.b.example.com')).toBe(true);
    expect(matches('*.example.com', 'example.com')).toBe(false);
    expect(matches('*.example.com', 'badexample.com')).toBe(false);
    expect(matches('*.example.com', '.example.com')).toBe(false);
    expect(matches('example.com', 'www.example.com')).toBe(false);
    expect(matches('*', 'anything.at.all')).toBe(true);
    expect(matches('[::1]', '[::1]')).toBe(true);
  });
});

describe('refusal', () => {
  it('blocks a blocked host, with the pattern, over an allow list', () => {
    const r = rules({ allow_lists: [['*.shop.test']], block_sites: ['pay.shop.test'] });
    expect(refusal(r, 'https://pay.shop.test/checkout', OWN)).toEqual({ reason: 'site_blocked', host: 'pay.shop.test', pattern: 'pay.shop.test' });
    expect(refusal(r, 'https://www.shop.test/', OWN)).toBeUndefined();
    expect(refusal(r, 'https://evil.test/', OWN)).toEqual({ reason: 'site_not_allowed', host: 'evil.test' });
  });

  it('needs a match in every allow list', () => {
    const r = rules({ allow_lists: [['*.shop.test', 'news.test'], ['news.test']] });
    expect(refusal(r, 'http://news.test/', OWN)).toBeUndefined();
    expect(refusal(r, 'http://a.shop.test/', OWN)?.reason).toBe('site_not_allowed');
  });

  it('refuses schemes the rules do not name, and never the pages a session always shows', () => {
    const r = rules({ allow_lists: [['shop.test']] });
    expect(refusal(r, 'ftp://shop.test/', OWN)).toEqual({ reason: 'scheme_not_allowed', host: 'ftp' });
    expect(refusal(r, 'data:text/html,hi', OWN)?.reason).toBe('scheme_not_allowed');
    expect(refusal(r, 'about:blank', OWN)).toBeUndefined();
    expect(refusal(r, 'chrome://newtab/', OWN)).toBeUndefined();
    expect(refusal(r, `${OWN}/blocked.html?host=x`, OWN)).toBeUndefined();
    expect(refusal(r, 'chrome://settings/', OWN)?.reason).toBe('scheme_not_allowed');
  });

  it('reads hosts the way URLs carry them: lower case, without a trailing dot', () => {
    const r = rules({ block_sites: ['evil.test'] });
    expect(refusal(r, 'https://EVIL.test./x', OWN)?.reason).toBe('site_blocked');
  });
});

describe('parseRules', () => {
  it('takes well-formed rules and nothing else', () => {
    expect(parseRules(rules())).toEqual(rules());
    expect(parseRules(undefined)).toBeUndefined();
    expect(parseRules({ allow_lists: 'x', block_sites: [], schemes: [] })).toBeUndefined();
    expect(parseRules({ allow_lists: [], block_sites: [1], schemes: [] })).toBeUndefined();
  });
});
