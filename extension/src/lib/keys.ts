// Keys for tool.press (docs/protocol.md, "Tools"): a CDP key name (`Enter`, `ArrowDown`, `a`) or
// a chord (`Ctrl+A`, `Shift+Tab`, `Meta+Enter`), resolved to what `Input.dispatchKeyEvent`
// needs. A US keyboard layout, like the browser's own automation tools; an unknown key is
// `invalid_params`.

import { invalid } from './errors';

export type Modifier = 'alt' | 'ctrl' | 'meta' | 'shift';
export const MODIFIER_BITS: Record<Modifier, number> = { alt: 1, ctrl: 2, meta: 4, shift: 8 };
const MODIFIER_ORDER: Modifier[] = ['alt', 'ctrl', 'meta', 'shift'];

const MODIFIER_NAMES: Record<string, Modifier> = {
  alt: 'alt',
  option: 'alt',
  ctrl: 'ctrl',
  control: 'ctrl',
  meta: 'meta',
  cmd: 'meta',
  command: 'meta',
  super: 'meta',
  win: 'meta',
  shift: 'shift',
};

export interface KeyDef {
  key: string;
  code: string;
  keyCode: number;
  /** Text the key types, without modifiers. */
  text?: string;
  location?: number;
}

const NAMED: KeyDef[] = [
  { key: 'Enter', code: 'Enter', keyCode: 13, text: '\r' },
  { key: 'Tab', code: 'Tab', keyCode: 9 },
  { key: 'Backspace', code: 'Backspace', keyCode: 8 },
  { key: 'Delete', code: 'Delete', keyCode: 46 },
  { key: 'Escape', code: 'Escape', keyCode: 27 },
  { key: 'ArrowUp', code: 'ArrowUp', keyCode: 38 },
  { key: 'ArrowDown', code: 'ArrowDown', keyCode: 40 },
  { key: 'ArrowLeft', code: 'ArrowLeft', keyCode: 37 },
  { key: 'ArrowRight', code: 'ArrowRight', keyCode: 39 },
  { key: 'Home', code: 'Home', keyCode: 36 },
  { key: 'End', code: 'End', keyCode: 35 },
  { key: 'PageUp', code: 'PageUp', keyCode: 33 },
  { key: 'PageDown', code: 'PageDown', keyCode: 34 },
  { key: 'Insert', code: 'Insert', keyCode: 45 },
  { key: 'CapsLock', code: 'CapsLock', keyCode: 20 },
  { key: 'ContextMenu', code: 'ContextMenu', keyCode: 93 },
  { key: 'Shift', code: 'ShiftLeft', keyCode: 16, location: 1 },
  { key: 'Control', code: 'ControlLeft', keyCode: 17, location: 1 },
  { key: 'Alt', code: 'AltLeft', keyCode: 18, location: 1 },
  { key: 'Meta', code: 'MetaLeft', keyCode: 91, location: 1 },
  { key: ' ', code: 'Space', keyCode: 32, text: ' ' },
  ...Array.from({ length: 12 }, (_, i) => ({ key: `F${i + 1}`, code: `F${i + 1}`, keyCode: 112 + i })),
];

/** Aliases people and agents use for named keys (lower case). */
const ALIASES: Record<string, string> = {
  return: 'Enter',
  esc: 'Escape',
  space: ' ',
  spacebar: ' ',
  up: 'ArrowUp',
  down: 'ArrowDown',
  left: 'ArrowLeft',
  right: 'ArrowRight',
  del: 'Delete',
  pgup: 'PageUp',
  pgdn: 'PageDown',
};

/** Punctuation: [unshifted, shifted, code, keyCode]. */
const PUNCTUATION: [string, string, string, number][] = [
  ['-', '_', 'Minus', 189],
  ['=', '+', 'Equal', 187],
  ['[', '{', 'BracketLeft', 219],
  [']', '}', 'BracketRight', 221],
  ['\\', '|', 'Backslash', 220],
  [';', ':', 'Semicolon', 186],
  ["'", '"', 'Quote', 222],
  [',', '<', 'Comma', 188],
  ['.', '>', 'Period', 190],
  ['/', '?', 'Slash', 191],
  ['`', '~', 'Backquote', 192],
];
const SHIFTED_DIGITS = ')!@#$%^&*(';

const TABLE = new Map<string, KeyDef>();
for (const d of NAMED) TABLE.set(d.key, d);
for (let c = 0; c < 26; c++) {
  const lower = String.fromCharCode(97 + c);
  const upper = lower.toUpperCase();
  TABLE.set(lower, { key: lower, code: `Key${upper}`, keyCode: 65 + c, text: lower });
  TABLE.set(upper, { key: upper, code: `Key${upper}`, keyCode: 65 + c, text: upper });
}
for (let d = 0; d < 10; d++) {
  const digit = String(d);
  TABLE.set(digit, { key: digit, code: `Digit${digit}`, keyCode: 48 + d, text: digit });
  const shifted = SHIFTED_DIGITS[d] as string;
  TABLE.set(shifted, { key: shifted, code: `Digit${digit}`, keyCode: 48 + d, text: shifted });
}
for (const [plain, shifted, code, keyCode] of PUNCTUATION) {
  TABLE.set(plain, { key: plain, code, keyCode, text: plain });
  TABLE.set(shifted, { key: shifted, code, keyCode, text: shifted });
}

function lookup(name: string): KeyDef | undefined {
  const exact = TABLE.get(name);
  if (exact) return exact;
  const lower = name.toLowerCase();
  const alias = ALIASES[lower];
  if (alias) return TABLE.get(alias);
  for (const d of NAMED) if (d.key.toLowerCase() === lower) return d;
  return undefined;
}

export function parseModifiers(values: unknown): Modifier[] {
  if (values === undefined) return [];
  if (!Array.isArray(values)) throw invalid('modifiers must be an array of alt, ctrl, meta, shift');
  return values.map((v) => {
    const m = typeof v === 'string' ? MODIFIER_NAMES[v.toLowerCase()] : undefined;
    if (!m) throw invalid(`unknown modifier ${JSON.stringify(v)}: use alt, ctrl, meta or shift`);
    return m;
  });
}

export interface Chord {
  def: KeyDef;
  modifiers: Modifier[];
}

/** Parse `Enter`, `a` or `Ctrl+Shift+K`; `extra` modifiers are merged in. */
export function parseChord(input: string, extra: Modifier[] = []): Chord {
  if (input === '') throw invalid('tool.press requires key');
  const parts = input.endsWith('++') ? [...input.slice(0, -2).split('+'), '+'] : input === '+' ? ['+'] : input.split('+');
  const keyName = parts.pop() ?? '';
  const mods = new Set<Modifier>(extra);
  for (const p of parts) {
    const m = MODIFIER_NAMES[p.trim().toLowerCase()];
    if (!m) throw invalid(`unknown modifier ${JSON.stringify(p)} in key ${JSON.stringify(input)}`);
    mods.add(m);
  }
  let def = lookup(keyName);
  // In a chord a letter names the physical key: Ctrl+A is Ctrl with the A key.
  if (def && parts.length > 0 && /^[A-Z]$/.test(keyName)) def = TABLE.get(keyName.toLowerCase());
  if (!def) throw invalid(`unknown key ${JSON.stringify(keyName)}: use a key name like Enter, Tab, ArrowDown, a, or a chord like Ctrl+A`);
  return { def, modifiers: MODIFIER_ORDER.filter((m) => mods.has(m)) };
}

export function modifierBits(modifiers: Modifier[]): number {
  return modifiers.reduce((bits, m) => bits | MODIFIER_BITS[m], 0);
}

/** The text a chord types: none when Ctrl, Alt or Meta is held. */
export function chordText(chord: Chord): string | undefined {
  if (chord.modifiers.some((m) => m !== 'shift')) return undefined;
  const text = chord.def.text;
  if (text === undefined) return undefined;
  return chord.modifiers.includes('shift') && /^[a-z]$/.test(text) ? text.toUpperCase() : text;
}

/** The definition of a modifier's own key (pressed around the main key). */
export function modifierKey(m: Modifier): KeyDef {
  const name = { alt: 'Alt', ctrl: 'Control', meta: 'Meta', shift: 'Shift' }[m];
  return TABLE.get(name) as KeyDef;
}
