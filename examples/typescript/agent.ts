// A Latchkey agent loop with the official TypeScript MCP SDK (docs/mcp.md).
//
// It lists the team's browsers, opens a page, reads it as a snapshot, types into
// fields and clicks by ref, waits for the page to change, and saves a screenshot:
//
//   npm install
//   LATCHKEY_MCP_URL=https://gw.example.com/mcp LATCHKEY_TOKEN=lk_... \
//     npm start -- https://example.com/login \
//       --type "Email=ann@example.com" --click "Sign in" --screenshot page.png
//
// It prints what happened as one JSON object. The token never appears in it.

import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

type Block = { type: string; text?: string; data?: string; mimeType?: string };
type ToolResult = { content: Block[]; isError?: boolean; structuredContent?: Record<string, unknown> };

const textOf = (result: ToolResult): string =>
  result.content.filter((b) => b.type === 'text').map((b) => b.text ?? '').join('\n');

/**
 * The ref of the first element named `name`: the ref right after its quoted name and
 * properties (a line can carry several elements inline).
 */
function refOf(snapshot: string, name: string): string {
  const quoted = JSON.stringify(name).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const found = new RegExp(`${quoted}(?: \\[(?!ref=)[^\\]]*\\])* \\[ref=(e\\d+)\\]`).exec(snapshot);
  if (found?.[1]) return found[1];
  throw new Error(`no element named ${JSON.stringify(name)} in the snapshot:\n${snapshot}`);
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  const result = (await client.callTool({ name, arguments: args })) as ToolResult;
  if (result.isError) throw new Error(`${name} failed: ${textOf(result)}`);
  return result;
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      type: { type: 'string', multiple: true, default: [] },
      click: { type: 'string' },
      screenshot: { type: 'string', default: 'page.png' },
    },
  });
  const [url] = positionals;
  if (!url) throw new Error('usage: agent URL [--type NAME=VALUE]... [--click NAME] [--screenshot FILE]');
  const endpoint = process.env.LATCHKEY_MCP_URL ?? 'http://127.0.0.1:52800/mcp';
  const token = process.env.LATCHKEY_TOKEN;
  if (!token) throw new Error('set LATCHKEY_TOKEN to an agent token');

  const client = new Client({ name: 'latchkey-example', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const done: Record<string, unknown> = { protocol: transport.protocolVersion };
  try {
    const listed = await call(client, 'browser_list');
    const browsers = (listed.structuredContent?.browsers ?? []) as { id: string; label?: string; online: boolean }[];
    done.browsers = browsers.map(({ id, label, online }) => ({ id, label, online }));

    await call(client, 'browser_navigate', { url });
    let before = textOf(await call(client, 'browser_snapshot'));
    done.refs = (before.match(/\[ref=e\d+\]/g) ?? []).length;

    for (const pair of values.type ?? []) {
      const at = pair.indexOf('=');
      await call(client, 'browser_type', { ref: refOf(before, pair.slice(0, at)), value: pair.slice(at + 1) });
    }
    // Refs of the last snapshot are the ones to use: read the page again.
    if (values.type?.length) before = textOf(await call(client, 'browser_snapshot'));
    if (values.click) {
      await call(client, 'browser_click', { ref: refOf(before, values.click) });
      done.clicked = values.click;
    }

    // The click may start a navigation: snapshot until the page changed (a
    // snapshot taken while the page loads may fail; the next one is read).
    const body = (text: string) => text.split('\n').slice(1).join('\n');
    let after = before;
    for (let i = 0; i < 50; i++) {
      const result = (await client.callTool({ name: 'browser_snapshot', arguments: {} })) as ToolResult;
      after = textOf(result);
      if (!values.click || (!result.isError && body(after) !== body(before))) break;
      await call(client, 'browser_wait_for', { duration_ms: 200 });
    }
    done.after = after;

    const shot = await call(client, 'browser_take_screenshot');
    const image = shot.content.find((b) => b.type === 'image');
    if (!image?.data) throw new Error('the screenshot carried no image');
    const file = values.screenshot ?? 'page.png';
    await writeFile(file, Buffer.from(image.data, 'base64'));
    done.screenshot = { file, mime_type: image.mimeType };

    await call(client, 'browser_close');
  } finally {
    await client.close();
  }
  console.log(JSON.stringify(done));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
