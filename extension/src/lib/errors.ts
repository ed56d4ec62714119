// Errors a tool may return: only the codes and reasons of docs/protocol.md, "Error codes and close
// codes".

import type { ErrorBody } from '@protocol/ErrorBody';
import type { ErrorCode } from '@protocol/ErrorCode';
import type { FailureReason } from '@protocol/tools/FailureReason';

/** The codes an extension may emit (the contract's closed set). */
export type ExtensionErrorCode = Extract<
  ErrorCode,
  | 'unknown_method'
  | 'unsupported'
  | 'invalid_params'
  | 'not_found'
  | 'permission_denied'
  | 'timeout'
  | 'cdp_failed'
  | 'protocol_error'
  | 'cancelled'
>;

/** The stable `data.reason` values, from the tool catalogue's failures (docs/tools.md). */
export type Reason = FailureReason;

export class ToolError extends Error {
  constructor(
    readonly code: ExtensionErrorCode,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }

  static reason(code: ExtensionErrorCode, message: string, reason: Reason, extra: Record<string, unknown> = {}): ToolError {
    return new ToolError(code, message, { reason, ...extra });
  }

  toBody(): ErrorBody {
    return this.data ? { code: this.code, message: this.message, data: this.data } : { code: this.code, message: this.message };
  }
}

export const invalid = (message: string) => new ToolError('invalid_params', message);
export const notFound = (message: string) => new ToolError('not_found', message);
