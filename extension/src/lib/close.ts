// What to do when the gateway closes the socket, by close code. The rule itself is
// the generated AFTER_CLOSE table (docs/error-codes.md, "WebSocket close codes");
// this only turns it into the extension's states.

import { AFTER_CLOSE, CloseCodes } from '@protocol/constants';

export type CloseDecision =
  | { kind: 'reconnect' }
  /** Stop and ask the person to pair again. */
  | { kind: 'stop'; state: 'revoked' | 'expired' }
  /** A newer connection of this device took over: do not fight it. */
  | { kind: 'replaced' };

export function decideOnClose(code: number): CloseDecision {
  switch (AFTER_CLOSE[code] ?? 'reconnect') {
    case 'pair_again':
      return { kind: 'stop', state: code === CloseCodes.Expired ? 'expired' : 'revoked' };
    case 'yield':
      return { kind: 'replaced' };
    // 'drop_token' is for agent sockets; a device never receives it.
    case 'drop_token':
    case 'reconnect':
      return { kind: 'reconnect' };
  }
}
