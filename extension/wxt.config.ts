import { resolve } from 'node:path';
import { defineConfig } from 'wxt';

// The extension side of the BrowserSkill 1.x protocol (docs/protocol.md).
export default defineConfig({
  srcDir: 'src',
  alias: {
    // Wire types are generated from latchkey-protocol; never hand-written here.
    '@protocol': resolve(__dirname, '../protocol/bindings'),
  },
  manifest: {
    name: 'Latchkey',
    description: "Lend this browser to your team's agents, in windows you can see and stop.",
    permissions: ['storage', 'alarms', 'tabs', 'scripting', 'webNavigation', 'webRequest', 'debugger', 'notifications'],
    host_permissions: ['<all_urls>'],
    minimum_chrome_version: '116',
    icons: { 16: '/icon-16.png', 32: '/icon-32.png', 48: '/icon-48.png', 128: '/icon-128.png' },
    action: { default_title: 'Latchkey', default_icon: { 16: '/icon-16.png', 32: '/icon-32.png' } },
  },
});
