import { describe, expect, it } from 'vitest';
import { ToolError } from '../src/lib/errors';
import { chordText, modifierBits, parseChord, parseModifiers } from '../src/lib/keys';

describe('keys for tool.press', () => {
  it('resolves named keys, letters and aliases', () => {
    expect(parseChord('Enter').def).toMatchObject({ key: 'Enter', code: 'Enter', keyCode: 13, text: '\r' });
    expect(parseChord('esc').def.key).toBe('Escape');
    expect(parseChord('ArrowDown').def.keyCode).toBe(40);
    expect(parseChord('a').def).toMatchObject({ key: 'a', code: 'KeyA', keyCode: 65 });
    expect(parseChord('+').def).toMatchObject({ key: '+', code: 'Equal' });
  });

  it('parses chords and merges modifiers', () => {
    const c = parseChord('Ctrl+A');
    expect(c.def.key).toBe('a');
    expect(c.modifiers).toEqual(['ctrl']);
    expect(chordText(c)).toBeUndefined();
    expect(modifierBits(c.modifiers)).toBe(2);
    const merged = parseChord('Shift+Tab', parseModifiers(['alt']));
    expect(merged.modifiers).toEqual(['alt', 'shift']);
    expect(modifierBits(merged.modifiers)).toBe(9);
    expect(parseChord('Control++').def.key).toBe('+');
    expect(chordText(parseChord('Shift+a'))).toBe('A');
    expect(parseChord('Meta+Enter').modifiers).toEqual(['meta']);
  });

  it('refuses unknown keys and modifiers with invalid_params', () => {
    for (const bad of ['NoSuchKey', 'Hyper+A', 'Ctrl+', '']) {
      expect(() => parseChord(bad)).toThrowError(ToolError);
      try {
        parseChord(bad);
      } catch (e) {
        expect((e as ToolError).code).toBe('invalid_params');
      }
    }
    expect(() => parseModifiers(['ctrl', 'hyper'])).toThrowError(/unknown modifier/);
    expect(() => parseModifiers('ctrl')).toThrowError(/array/);
  });
});
