// Injected into Agent Window pages (isolated world) before the first page tool
// runs: installs the page side of the tools (lib/page/agent.ts) once per document.

import { defineUnlistedScript } from 'wxt/utils/define-unlisted-script';
import { PageAgent } from '../lib/page/agent';
import { PAGE_AGENT_GLOBAL } from '../lib/page/global';

export default defineUnlistedScript(() => {
  const g = globalThis as unknown as Record<string, unknown>;
  if (!g[PAGE_AGENT_GLOBAL]) g[PAGE_AGENT_GLOBAL] = new PageAgent(document);
});
