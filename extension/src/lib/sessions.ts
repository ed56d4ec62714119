// Agent sessions in this browser: each is one Agent Window (AW). Lives in the service
// worker's memory; every session is torn down when the connection drops
// (docs/protocol.md, "Liveness": nothing survives a reconnect).

import type { SessionAgent } from '@protocol/SessionAgent';
import type { SiteRules } from '@protocol/SiteRules';
import type { EmulateOverridesParams } from '@protocol/tools/EmulateOverridesParams';

export interface Borrowed {
  originalWindowId: number;
  originalIndex: number;
}

/** Where a session's refs are valid: one tab, one document, one snapshot (docs/protocol.md,
/** "Tools"). */
export interface RefStore {
  tabId: number;
  documentId: string | undefined;
  snapshot: string;
  count: number;
  /** Why the refs no longer work (the tab navigated), if they do not. */
  stale?: string;
}

export interface AgentSession {
  id: string;
  windowId: number;
  /** Who drives it, when the gateway says (Latchkey's `agent_info`). */
  agent?: SessionAgent;
  /** When it started (ms since the epoch). */
  startedAt: number;
  /** The agent's last call in it: method and when it finished. */
  lastAction?: { method: string; at: number };
  /**
   * Tabs that are the agent's: the window's first tab, those it created, and
   * those its pages opened. A tab the person opens in the window is not one of
   * them and is moved out (docs/extension.md, "Agent Windows").
   */
  agentTabs: Set<number>;
  /** Tabs this session borrowed from the person, by tab id. */
  borrowed: Map<number, Borrowed>;
  /** The refs of the last snapshot or observe. */
  refs?: RefStore;
  /**
   * What `tool.emulate` set on each tab, by tab id: a later call merges into it
   * (docs/protocol.md, "Tabs and window"). The debugger's overrides go with the
   * session, when it detaches.
   */
  emulation?: Map<number, EmulateOverridesParams>;
  /** The site rules the gateway sent (docs/policy.md, "Enforcement in the browser"). */
  rules?: SiteRules;
  /**
   * The person ended it and it is being torn down: from that moment no call acts
   * in it and the popup no longer lists it, though its window and borrowed tabs
   * take a moment longer to go (docs/extension.md, "Agent Windows").
   */
  ending?: true;
}

export class Sessions {
  private readonly byId = new Map<string, AgentSession>();

  /** `changed` is told whenever a session comes or goes (the toolbar icon). */
  constructor(private readonly changed: () => void = () => undefined) {}

  get(id: string): AgentSession | undefined {
    return this.byId.get(id);
  }

  add(session: AgentSession): void {
    this.byId.set(session.id, session);
    this.changed();
  }

  remove(id: string): void {
    if (this.byId.delete(id)) this.changed();
  }

  byWindow(windowId: number): AgentSession | undefined {
    for (const s of this.byId.values()) if (s.windowId === windowId) return s;
    return undefined;
  }

  /** Whether `windowId` is any session's Agent Window. */
  isAgentWindow(windowId: number): boolean {
    return this.byWindow(windowId) !== undefined;
  }

  /** Whether `tabId` is the agent's in its session: created, opened by its pages, or borrowed. */
  isAgentTab(session: AgentSession, tabId: number): boolean {
    return session.agentTabs.has(tabId) || session.borrowed.has(tabId);
  }

  /** The session that borrowed `tabId`, if any. */
  borrowerOf(tabId: number): AgentSession | undefined {
    for (const s of this.byId.values()) if (s.borrowed.has(tabId)) return s;
    return undefined;
  }

  all(): AgentSession[] {
    return [...this.byId.values()];
  }

  get size(): number {
    return this.byId.size;
  }
}
