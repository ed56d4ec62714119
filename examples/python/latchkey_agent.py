"""A Latchkey agent loop with the official Python MCP SDK (docs/mcp.md).

It lists the team's browsers, opens a page, reads it as a snapshot, types into
fields and clicks by ref, waits for the page to change, and saves a screenshot:

    pip install -r requirements.txt
    LATCHKEY_MCP_URL=https://gw.example.com/mcp LATCHKEY_TOKEN=lk_... \
      python latchkey_agent.py https://example.com/login \
        --type "Email=ann@example.com" --click "Sign in" --screenshot page.png

It prints what happened as one JSON object. The token never appears in it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def ref_of(snapshot: str, name: str) -> str:
    """The ref of the first element named `name`: the ref right after its quoted name
    and properties (a line can carry several elements inline)."""
    pattern = re.escape(json.dumps(name, ensure_ascii=False)) + r"(?: \[(?!ref=)[^\]]*\])* \[ref=(e\d+)\]"
    found = re.search(pattern, snapshot)
    if found:
        return found.group(1)
    raise SystemExit(f"no element named {name!r} in the snapshot:\n{snapshot}")


async def call(client: Client, tool: str, arguments: dict | None = None):
    result = await client.call_tool(tool, arguments or {})
    if result.is_error:
        raise SystemExit(f"{tool} failed: {text_of(result)}")
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the page to open")
    parser.add_argument("--type", action="append", default=[], metavar="NAME=VALUE",
                        help="type VALUE into the field named NAME (repeatable)")
    parser.add_argument("--click", metavar="NAME", help="then click the element named NAME")
    parser.add_argument("--screenshot", default="page.png", metavar="FILE")
    args = parser.parse_args()

    url = os.environ.get("LATCHKEY_MCP_URL", "http://127.0.0.1:52800/mcp")
    token = os.environ["LATCHKEY_TOKEN"]
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        done: dict = {"protocol": client.protocol_version}
        browsers = (await call(client, "browser_list")).structured_content["browsers"]
        done["browsers"] = [{"id": b["id"], "label": b.get("label"), "online": b["online"]} for b in browsers]

        await call(client, "browser_navigate", {"url": args.url})
        before = text_of(await call(client, "browser_snapshot"))
        done["refs"] = len(re.findall(r"\[ref=e\d+\]", before))

        for pair in args.type:
            name, _, value = pair.partition("=")
            await call(client, "browser_type", {"ref": ref_of(before, name), "value": value})
        if args.type:
            # Refs of the last snapshot are the ones to use: read the page again.
            before = text_of(await call(client, "browser_snapshot"))
        if args.click:
            await call(client, "browser_click", {"ref": ref_of(before, args.click)})
            done["clicked"] = args.click

        # The click may start a navigation: snapshot until the page changed (a
        # snapshot taken while the page loads may fail; the next one is read).
        after = before
        for _ in range(50):
            result = await client.call_tool("browser_snapshot", {})
            after = text_of(result)
            changed = after.splitlines()[1:] != before.splitlines()[1:]
            if not args.click or (not result.is_error and changed):
                break
            await call(client, "browser_wait_for", {"duration_ms": 200})
        done["after"] = after

        shot = await call(client, "browser_take_screenshot")
        image = next(block for block in shot.content if block.type == "image")
        with open(args.screenshot, "wb") as out:
            out.write(base64.b64decode(image.data))
        done["screenshot"] = {"file": args.screenshot, "mime_type": image.mime_type}

        await call(client, "browser_close")
        json.dump(done, sys.stdout)
        print()


if __name__ == "__main__":
    asyncio.run(main())
