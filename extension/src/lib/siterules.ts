// A session's site rules (docs/policy.md, "Enforcement in the browser"): the same
// matching as the gateway's (latchkey-protocol, policy::sites), so that both
// agree on every host. The gateway checks the URLs it sees; this checks every
// navigation of an agent tab, including those it cannot see (redirects, links,
// window.open, form posts).

import type { SiteRules } from '@protocol/SiteRules';
import { MAX_REPORTED_HOST_CHARS } from '@protocol/constants';

export type SiteReason = 'site_blocked' | 'site_not_allowed' | 'scheme_not_allowed';

export interface Refusal {
  reason: SiteReason;
  /** The host the tab was headed to (or the scheme, when that was refused). */
  host: string;
  /** The block pattern that matched. */
  pattern?: string;
}

/** Whether canonical `pattern` names `host`: `*`, `*.parent` (strictly below), or the host itself. */
export function matches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) {
    const parent = pattern.slice(2);
    if (!host.endsWith(parent)) return false;
    const head = host.slice(0, host.length - parent.length);
    return head.length > 1 && head.endsWith('.');
  }
  return pattern === host;
}

/** Pages a session may always show: the blank page, the new-tab page, our own pages. */
function alwaysAllowed(url: URL, ownOrigin: string): boolean {
  if (url.protocol === 'about:') return url.href === 'about:blank' || url.href === 'about:srcdoc';
  if (url.origin === ownOrigin || url.href.startsWith(ownOrigin)) return true;
  return url.protocol === 'chrome:' && url.hostname === 'newtab';
}

const isStringList = (v: unknown, max: number): v is string[] =>
  Array.isArray(v) && v.length <= max && v.every((s) => typeof s === 'string' && s.length <= 260);

/** `site_rules` as the gateway sent them, or undefined when absent or malformed. */
export function parseRules(raw: unknown): SiteRules | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const lists = r.allow_lists;
  if (!Array.isArray(lists) || lists.length > 8 || !lists.every((l) => isStringList(l, 100))) return undefined;
  if (!isStringList(r.block_sites, 400) || !isStringList(r.schemes, 16)) return undefined;
  return { allow_lists: lists as string[][], block_sites: r.block_sites, schemes: r.schemes };
}

/** Why `href` may not be shown in a session under `rules`, or undefined when it may. */
export function refusal(rules: SiteRules, href: string, ownOrigin: string): Refusal | undefined {
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return { reason: 'scheme_not_allowed', host: href.slice(0, 40) };
  }
  if (alwaysAllowed(url, ownOrigin)) return undefined;
  const scheme = url.protocol.replace(/:$/, '').toLowerCase();
  if (!rules.schemes.includes(scheme)) return { reason: 'scheme_not_allowed', host: scheme };
  const host = url.hostname.toLowerCase().replace(/\.$/, '').slice(0, MAX_REPORTED_HOST_CHARS);
  const blocked = rules.block_sites.find((p) => matches(p, host));
  if (blocked !== undefined) return { reason: 'site_blocked', host, pattern: blocked };
  if (rules.allow_lists.some((list) => host === '' || !list.some((p) => matches(p, host)))) {
    return { reason: 'site_not_allowed', host };
  }
  return undefined;
}
