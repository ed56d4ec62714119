// tool.console and tool.network (docs/protocol.md, "Tools"): read a tab's buffers from a
// cursor. `since` returns entries with a greater sequence; `next_since` is the cursor
// for the next read; `truncated` says more entries are waiting.

import { invalid } from '../errors';
import type { Params } from '../dispatcher';
import { cut, FIELD_CHARS, type LogBuffers } from '../logbuffers';
import { optBool, optUint, scopedTab, sessionOf } from './params';
import type { PageContext } from './snapshot';

export interface LogContext extends PageContext {
  logs: LogBuffers;
}

const LIMIT_DEFAULT = 50;
const LIMIT_CAP = 200;
const TEXT_DEFAULT = 1_000;

function cursorOf(p: Params): number {
  const v = p.since;
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalid('since must be a safe integer >= 0');
  return v;
}

async function read(p: Params, ctx: LogContext, tool: string) {
  const session = sessionOf(p, ctx.sessions, tool);
  const since = cursorOf(p);
  const limit = Math.min(optUint(p, 'limit', 1) ?? LIMIT_DEFAULT, LIMIT_CAP);
  const maxChars = Math.min(optUint(p, 'max_text_chars', 1) ?? TEXT_DEFAULT, FIELD_CHARS);
  const tab = await scopedTab(p, session, ctx.sessions);
  const tabId = tab.id as number;
  // From now on this tab's logs are kept (they are from the first attach anyway).
  await ctx.cdp.ensure(tabId);
  return { tabId, since, limit, maxChars };
}

function page<T extends { sequence: number }>(all: T[], since: number, limit: number) {
  const entries = all.slice(0, limit);
  const next = entries.length > 0 ? (entries[entries.length - 1] as T).sequence : since;
  return { entries, next_since: next, truncated: all.length > entries.length };
}

export async function consoleLog(p: Params, ctx: LogContext): Promise<unknown> {
  const includeStack = optBool(p, 'include_stack', false);
  const { tabId, since, limit, maxChars } = await read(p, ctx, 'tool.console');
  const { entries, next_since, truncated } = page(ctx.logs.consoleSince(tabId, since).entries, since, limit);
  return {
    tab_id: tabId,
    entries: entries.map(({ stack_trace, ...e }) => {
      const [text, textCut] = cut(e.text, maxChars);
      return { ...e, text, truncated: e.truncated || textCut, ...(includeStack && stack_trace ? { stack_trace } : {}) };
    }),
    next_since,
    truncated,
  };
}

export async function networkLog(p: Params, ctx: LogContext): Promise<unknown> {
  const { tabId, since, limit, maxChars } = await read(p, ctx, 'tool.network');
  const { entries, next_since, truncated } = page(ctx.logs.networkSince(tabId, since).entries, since, limit);
  return {
    tab_id: tabId,
    entries: entries.map((e) => {
      const [url, urlCut] = cut(e.url ?? '', maxChars);
      const [error, errorCut] = cut(e.error_text ?? '', maxChars);
      return {
        ...e,
        ...(e.url !== undefined ? { url } : {}),
        ...(e.error_text !== undefined ? { error_text: error } : {}),
        truncated: e.truncated || urlCut || errorCut,
      };
    }),
    next_since,
    truncated,
  };
}
