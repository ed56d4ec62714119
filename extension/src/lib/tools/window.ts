// The Agent Window's size and a tab's emulation (docs/protocol.md, "Tabs and window"):
// tool.window_resize sets the window's outer size; tool.emulate overrides what one tab
// of the window looks like to its pages (viewport, user agent, touch) through the
// debugger. Overrides merge into what the tab already has and last until `off`, or
// until the session ends and the debugger detaches, which clears them all.

import { browser } from 'wxt/browser';
import type { EmulateOverridesParams } from '@protocol/tools/EmulateOverridesParams';
import type { UaMetadataParams } from '@protocol/tools/UaMetadataParams';
import { invalid } from '../errors';
import type { Params } from '../dispatcher';
import { withDialogs } from '../cdp';
import { optBool, refuseRestricted, scopedTab, sessionOf } from './params';
import type { PageContext } from './snapshot';

/** The contract's bounds for the Agent Window's outer size, in pixels. */
const MIN_WINDOW = 100;
const MAX_WINDOW = 7680;

function dimension(p: Params, key: string): number {
  const v = p[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < MIN_WINDOW || v > MAX_WINDOW) {
    throw invalid(`tool.window_resize requires ${key}, an integer ${MIN_WINDOW}..=${MAX_WINDOW}`);
  }
  return v;
}

export async function windowResize(p: Params, ctx: PageContext): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.window_resize');
  const width = dimension(p, 'width');
  const height = dimension(p, 'height');
  const w = await browser.windows.update(session.windowId, { state: 'normal', width, height });
  return { window_id: session.windowId, width: w.width ?? width, height: w.height ?? height };
}

type Overrides = EmulateOverridesParams;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One override of the request, checked as the contract types it. */
function field<T>(o: Record<string, unknown>, key: string, ok: (v: unknown) => boolean, what: string): T | undefined {
  const v = o[key];
  if (v === undefined) return undefined;
  if (!ok(v)) throw invalid(`overrides.${key} must be ${what}`);
  return v as T;
}

const positiveInt = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 4_294_967_295;
const str = (v: unknown) => typeof v === 'string';
const bool = (v: unknown) => typeof v === 'boolean';

function metadata(v: unknown): boolean {
  if (!isObject(v)) return false;
  const brands = v.brands;
  if (brands !== undefined && !(Array.isArray(brands) && brands.every((b) => isObject(b) && str(b.brand) && str(b.version)))) return false;
  return ['full_version', 'platform', 'platform_version', 'architecture', 'model'].every((k) => v[k] === undefined || str(v[k]))
    && (v.mobile === undefined || bool(v.mobile));
}

/** The request's overrides, judged by the contract's rules (docs/protocol.md, "Tabs and window"). */
export function readOverrides(v: unknown): Overrides {
  if (!isObject(v)) throw invalid('overrides must be an object');
  const o: Overrides = {
    width: field(v, 'width', positiveInt, 'an integer >= 1'),
    height: field(v, 'height', positiveInt, 'an integer >= 1'),
    device_scale_factor: field(v, 'device_scale_factor', (x) => typeof x === 'number' && Number.isFinite(x) && x > 0, 'finite and above 0'),
    mobile: field(v, 'mobile', bool, 'a boolean'),
    user_agent: field(v, 'user_agent', str, 'a string'),
    accept_language: field(v, 'accept_language', str, 'a string'),
    user_agent_metadata: field<UaMetadataParams>(v, 'user_agent_metadata', metadata, 'user agent metadata'),
    touch: field(v, 'touch', bool, 'a boolean'),
    max_touch_points: field(v, 'max_touch_points', positiveInt, 'an integer >= 1'),
  };
  for (const k of Object.keys(o) as (keyof Overrides)[]) if (o[k] === undefined) delete o[k];
  const viewport = o.width !== undefined && o.height !== undefined;
  if ((o.width === undefined) !== (o.height === undefined)) throw invalid('set width and height together');
  if (!viewport && o.device_scale_factor !== undefined) throw invalid('overrides.device_scale_factor needs width and height');
  if (!viewport && o.mobile !== undefined) throw invalid('overrides.mobile needs width and height');
  if (o.user_agent === undefined && (o.accept_language !== undefined || o.user_agent_metadata !== undefined)) {
    throw invalid('overrides.accept_language and overrides.user_agent_metadata need user_agent');
  }
  if (!viewport && o.user_agent === undefined && o.touch === undefined && o.max_touch_points === undefined) {
    throw invalid('overrides must set the viewport, user_agent, touch or max_touch_points');
  }
  return o;
}

/** The debugger's form of the contract's user agent metadata (its required keys filled in). */
function cdpMetadata(m: UaMetadataParams): Record<string, unknown> {
  return {
    brands: m.brands ?? [],
    fullVersion: m.full_version ?? '',
    platform: m.platform ?? '',
    platformVersion: m.platform_version ?? '',
    architecture: m.architecture ?? '',
    model: m.model ?? '',
    mobile: m.mobile ?? false,
  };
}

export async function emulate(p: Params, ctx: PageContext): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.emulate');
  const off = optBool(p, 'off', false);
  if (off && p.overrides !== undefined) throw invalid('pass either off or overrides, not both');
  if (!off && p.overrides === undefined) throw invalid('tool.emulate requires overrides unless off is true');
  const requested = off ? undefined : readOverrides(p.overrides);
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const tabId = tab.id as number;
  const send = (method: string, params: Record<string, unknown> = {}) => ctx.cdp.send(tabId, method, params);
  const emulation = (session.emulation ??= new Map());
  return withDialogs(ctx.cdp, tabId, async () => {
    if (!requested) {
      await send('Emulation.clearDeviceMetricsOverride');
      await send('Emulation.setUserAgentOverride', { userAgent: '' });
      await send('Emulation.setTouchEmulationEnabled', { enabled: false });
      emulation.delete(tabId);
      return { tab_id: tabId, cleared: true };
    }
    const o: Overrides = { ...emulation.get(tabId), ...requested };
    if (requested.width !== undefined) {
      await send('Emulation.setDeviceMetricsOverride', {
        width: o.width,
        height: o.height,
        deviceScaleFactor: o.device_scale_factor ?? 0,
        mobile: o.mobile ?? false,
      });
    }
    if (requested.user_agent !== undefined) {
      await send('Emulation.setUserAgentOverride', {
        userAgent: o.user_agent,
        ...(o.accept_language !== undefined ? { acceptLanguage: o.accept_language } : {}),
        ...(o.user_agent_metadata !== undefined ? { userAgentMetadata: cdpMetadata(o.user_agent_metadata) } : {}),
      });
    }
    if (requested.touch !== undefined || requested.max_touch_points !== undefined) {
      const enabled = o.touch ?? true;
      await send('Emulation.setTouchEmulationEnabled', { enabled, ...(enabled && o.max_touch_points !== undefined ? { maxTouchPoints: o.max_touch_points } : {}) });
    }
    emulation.set(tabId, o);
    return { tab_id: tabId, cleared: false, applied: o, note: 'applies to this tab only, until off or the session ends' };
  });
}
