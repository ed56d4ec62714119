import { resolve } from 'node:path';
import { defineConfig } from 'wxt';

// The extension side of wire contract 1.x (shared/docs/wire-contract.md, §10.2).
export default defineConfig({
  srcDir: 'src',
  alias: {
    // Wire types are generated from latchkey-protocol; never hand-written here.
    '@protocol': resolve(__dirname, '../protocol/bindings'),
  },
  manifest: {
    name: 'Latchkey',
    description: "Lend this browser to your team's agents, in windows you can see and stop.",
    permissions: ['storage', 'alarms', 'tabs', 'scripting', 'webNavigation'],
    host_permissions: ['<all_urls>'],
    minimum_chrome_version: '116',
    action: { default_title: 'Latchkey' },
  },
});
