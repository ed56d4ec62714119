// Errors a tool may return: only the codes and reasons of docs/protocol.md, "Error codes and close
// codes".

import type { ErrorBody } from '@protocol/ErrorBody';
import type { ErrorCode } from '@protocol/ErrorCode';

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

export type Reason =
  | 'agent_window_scope'
  | 'borrow_conflict'
  | 'restricted_tab_url'
  | 'element_not_visible'
  | 'ref_not_found'
  | 'selector_not_found'
  | 'target_not_fillable'
  | 'target_not_select'
  | 'option_not_found'
  | 'single_select_value_count'
  | 'tab_not_active'
  | 'screenshot_capture_failed'
  | 'cleanup_failed';

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
