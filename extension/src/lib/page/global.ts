// Names shared by the service worker and the scripts it injects into pages.

/** Where the page agent lives in the isolated world of a page. */
export const PAGE_AGENT_GLOBAL = '__latchkeyPageAgent';
/** The injected scripts (WXT unlisted scripts). */
export const PAGE_AGENT_FILE = '/page-agent.js';
export const BANNER_FILE = '/agent-banner.js';
/** Where the banner and help overlay live in the isolated world of a page. */
export const PAGE_UI_GLOBAL = '__latchkeyPageUi';
