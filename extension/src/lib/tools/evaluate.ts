// tool.evaluate (docs/protocol.md, "Tools"): JavaScript in an Agent Window page, through
// `Runtime.evaluate`. Off until the person turns it on in the extension's settings;
// while off every call is `permission_denied`. A thrown exception is a result (`ok:
// false`), not an RPC error.

import { invalid, ToolError } from '../errors';
import { checkpoint, type Params } from '../dispatcher';
import { withDialogs } from '../cdp';
import { loadSettings } from '../settings';
import { optBool, refuseRestricted, scopedTab, sessionOf, str } from './params';
import type { PageContext } from './snapshot';

interface RemoteObject {
  type: string;
  subtype?: string;
  className?: string;
  value?: unknown;
  unserializableValue?: string;
  description?: string;
  objectId?: string;
}

interface ExceptionDetails {
  text: string;
  lineNumber?: number;
  columnNumber?: number;
  exception?: RemoteObject;
}

/** A CDP remote object as the contract's `value`. */
export function valueOf(o: RemoteObject, byValue: boolean): unknown {
  if (o.type === 'undefined') return null;
  // NaN, ±Infinity, -0 and BigInt come back as their text.
  if (o.unserializableValue !== undefined) return o.unserializableValue;
  if (byValue && 'value' in o) return o.value ?? null;
  if (!byValue && o.type !== 'object' && o.type !== 'function' && 'value' in o) return o.value ?? null;
  return {
    type: o.type,
    ...(o.subtype ? { subtype: o.subtype } : {}),
    ...(o.className ? { className: o.className } : {}),
    ...(o.objectId ? { objectId: o.objectId } : {}),
    ...(o.description ? { description: o.description } : {}),
  };
}

export async function evaluate(p: Params, ctx: PageContext, signal: AbortSignal): Promise<unknown> {
  const session = sessionOf(p, ctx.sessions, 'tool.evaluate');
  const expression = str(p, 'expression', 'tool.evaluate');
  const awaitPromise = optBool(p, 'await_promise', true);
  const returnByValue = optBool(p, 'return_by_value', true);
  if (!(await loadSettings()).allowEvaluate) {
    throw new ToolError(
      'permission_denied',
      'running JavaScript is turned off in this browser; its owner can allow it in the Latchkey extension settings',
    );
  }
  const tab = await scopedTab(p, session, ctx.sessions);
  refuseRestricted(tab);
  const tabId = tab.id as number;
  await ctx.cdp.ensure(tabId);
  checkpoint(signal);
  if (expression.length > 1_000_000) throw invalid('expression is longer than 1,000,000 characters');
  return withDialogs(ctx.cdp, tabId, async () => {
    const r = await ctx.cdp.send<{ result: RemoteObject; exceptionDetails?: ExceptionDetails }>(tabId, 'Runtime.evaluate', {
      expression,
      awaitPromise,
      returnByValue,
      userGesture: true,
    });
    if (r.exceptionDetails) {
      const d = r.exceptionDetails;
      return {
        ok: false,
        tab_id: tabId,
        error: {
          text: d.exception?.description ?? d.text,
          ...(d.lineNumber !== undefined ? { line: d.lineNumber } : {}),
          ...(d.columnNumber !== undefined ? { column: d.columnNumber } : {}),
        },
      };
    }
    return { ok: true, tab_id: tabId, value: valueOf(r.result, returnByValue) };
  });
}
