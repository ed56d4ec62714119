import { describe, expect, it } from 'vitest';
import { readOverrides } from '../src/lib/tools/window';

const refused = (v: unknown): string => {
  try {
    readOverrides(v);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('accepted');
};

describe('tool.emulate overrides', () => {
  it('keeps what is set and drops what is not', () => {
    expect(readOverrides({ width: 390, height: 844, device_scale_factor: 3, mobile: true })).toEqual({
      width: 390,
      height: 844,
      device_scale_factor: 3,
      mobile: true,
    });
    expect(readOverrides({ user_agent: 'UA', accept_language: 'fr', user_agent_metadata: { brands: [{ brand: 'B', version: '1' }] } })).toEqual({
      user_agent: 'UA',
      accept_language: 'fr',
      user_agent_metadata: { brands: [{ brand: 'B', version: '1' }] },
    });
    expect(readOverrides({ max_touch_points: 5 })).toEqual({ max_touch_points: 5 });
  });

  it('refuses what the contract refuses, naming it', () => {
    expect(refused({ width: 390 })).toMatch(/width and height together/);
    expect(refused({ device_scale_factor: 2, user_agent: 'x' })).toMatch(/device_scale_factor needs width and height/);
    expect(refused({ mobile: true, touch: true })).toMatch(/mobile needs width and height/);
    expect(refused({ accept_language: 'fr', touch: true })).toMatch(/need user_agent/);
    expect(refused({ accept_language: 'fr' })).toMatch(/need user_agent/);
    expect(refused({})).toMatch(/must set the viewport, user_agent, touch or max_touch_points/);
    expect(refused({ width: 0, height: 10 })).toMatch(/overrides.width must be an integer >= 1/);
    expect(refused({ width: 10, height: 10, device_scale_factor: Number.POSITIVE_INFINITY })).toMatch(/finite/);
    expect(refused({ max_touch_points: 0 })).toMatch(/max_touch_points/);
    expect(refused({ user_agent: 'x', user_agent_metadata: { brands: [{ brand: 1 }] } })).toMatch(/user_agent_metadata/);
    expect(refused([])).toMatch(/must be an object/);
  });
});
