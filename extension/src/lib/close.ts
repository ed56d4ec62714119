// What to do when the gateway closes the socket, by close code.

import { CloseCodes } from '@protocol/constants';

export type CloseDecision =
  | { kind: 'reconnect' }
  /** Stop and ask the person to pair again. */
  | { kind: 'stop'; state: 'revoked' | 'expired' }
  /** A newer connection of this device took over: do not fight it. */
  | { kind: 'replaced' };

export function decideOnClose(code: number): CloseDecision {
  switch (code) {
    case CloseCodes.Revoked:
      return { kind: 'stop', state: 'revoked' };
    case CloseCodes.Expired:
      return { kind: 'stop', state: 'expired' };
    case CloseCodes.Replaced:
      return { kind: 'replaced' };
    default:
      return { kind: 'reconnect' };
  }
}
