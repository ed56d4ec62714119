import { describe, expect, it } from 'vitest';
import { pngSize, truncateUtf8 } from '../src/lib/tools/content';
import { isRestricted } from '../src/lib/tools/params';

describe('page reading helpers', () => {
  it('truncates at a UTF-8 boundary', () => {
    expect(truncateUtf8('hello', 10)).toEqual({ text: 'hello', truncated: false, byteSize: 5 });
    const r = truncateUtf8('aé€😀', 4);
    expect(r.truncated).toBe(true);
    expect(r.byteSize).toBe(10);
    expect(r.text).toBe('aé');
  });

  it('reads PNG dimensions from IHDR', () => {
    const bytes = new Uint8Array(33);
    bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
    bytes.set([0, 0, 0x05, 0x00, 0, 0, 0x02, 0xd0], 16);
    const b64 = btoa(String.fromCharCode(...bytes));
    expect(pngSize(b64)).toEqual({ width: 1280, height: 720 });
    expect(pngSize('bm90IGEgcG5n')).toEqual({ width: 0, height: 0 });
  });

  it('knows restricted pages', () => {
    for (const url of ['chrome://settings', 'chrome-extension://x/p.html', 'devtools://x', 'about:config', 'edge://x']) {
      expect(isRestricted(url)).toBe(true);
    }
    for (const url of ['about:blank', 'https://example.com', 'http://127.0.0.1/', undefined]) {
      expect(isRestricted(url)).toBe(false);
    }
  });
});
