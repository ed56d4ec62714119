//! How each `tool.*` method can fail beyond what every call can (docs/protocol.md,
//! "Tools"; every code with when it happens is in docs/error-codes.md). Each entry
//! is a code, the stable `data.reason` that tells apart failures sharing a code,
//! and when it happens. The browser sends only the protocol's own codes; the
//! reasons are a closed set that extensions and agents both read from here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::ErrorCode;

/// The `data.reason` of a tool failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export_to = "tools/")]
pub enum FailureReason {
    /// The tab is outside the session's Agent Window (borrow it first), or in
    /// another session's.
    AgentWindowScope,
    /// Another session has borrowed the tab.
    BorrowConflict,
    /// A browser page extensions may not read or script (`chrome://`, the web
    /// store, other extensions' pages).
    RestrictedTabUrl,
    /// The element has no box to act on, or something else covers it.
    ElementNotVisible,
    /// The ref is unknown, from another tab or snapshot, or its page changed.
    RefNotFound,
    /// No element matches the selector.
    SelectorNotFound,
    /// `fill` on an element that is not a text field or editable.
    TargetNotFillable,
    /// `click` with Latchkey's `latchkey_checked` on an element that is not a
    /// checkbox, radio button or switch, or `false` on a checked radio button
    /// (which only another button of its group unchecks).
    TargetNotCheckable,
    /// `select` on an element that is not a `<select>`.
    TargetNotSelect,
    /// `select` asked for an option the element does not have.
    OptionNotFound,
    /// A single-choice `<select>` given anything but one value.
    SingleSelectValueCount,
    /// A whole-tab screenshot of a tab that is not its window's active tab.
    TabNotActive,
    /// Neither way of capturing the tab worked.
    ScreenshotCaptureFailed,
    /// A session start failed and the window opened for it could not be closed.
    CleanupFailed,
    /// The browser's person did not let the session start (a start that asked
    /// them, docs/policy.md "Consent"); the policies' reason of the same name.
    ConsentDenied,
    /// The tab shows a host the session's site rules block (Latchkey's
    /// `site_rules`, docs/policy.md); the policies' reason of the same name.
    SiteBlocked,
    /// The tab shows a host no allow list of the session's site rules names.
    SiteNotAllowed,
    /// The tab shows a page whose scheme the session's site rules do not allow.
    SchemeNotAllowed,
    /// The person refused to lend the tab (our extension; a contract-only one
    /// answers `cancelled` without a reason).
    BorrowDenied,
    /// Nobody answered the borrow confirmation in time.
    BorrowTimedOut,
}

impl FailureReason {
    pub const ALL: [FailureReason; 20] = [
        Self::AgentWindowScope,
        Self::BorrowConflict,
        Self::RestrictedTabUrl,
        Self::ElementNotVisible,
        Self::RefNotFound,
        Self::SelectorNotFound,
        Self::TargetNotFillable,
        Self::TargetNotCheckable,
        Self::TargetNotSelect,
        Self::OptionNotFound,
        Self::SingleSelectValueCount,
        Self::TabNotActive,
        Self::ScreenshotCaptureFailed,
        Self::CleanupFailed,
        Self::ConsentDenied,
        Self::SiteBlocked,
        Self::SiteNotAllowed,
        Self::SchemeNotAllowed,
        Self::BorrowDenied,
        Self::BorrowTimedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentWindowScope => "agent_window_scope",
            Self::BorrowConflict => "borrow_conflict",
            Self::RestrictedTabUrl => "restricted_tab_url",
            Self::ElementNotVisible => "element_not_visible",
            Self::RefNotFound => "ref_not_found",
            Self::SelectorNotFound => "selector_not_found",
            Self::TargetNotFillable => "target_not_fillable",
            Self::TargetNotCheckable => "target_not_checkable",
            Self::TargetNotSelect => "target_not_select",
            Self::OptionNotFound => "option_not_found",
            Self::SingleSelectValueCount => "single_select_value_count",
            Self::TabNotActive => "tab_not_active",
            Self::ScreenshotCaptureFailed => "screenshot_capture_failed",
            Self::CleanupFailed => "cleanup_failed",
            Self::ConsentDenied => "consent_denied",
            Self::SiteBlocked => "site_blocked",
            Self::SiteNotAllowed => "site_not_allowed",
            Self::SchemeNotAllowed => "scheme_not_allowed",
            Self::BorrowDenied => "borrow_denied",
            Self::BorrowTimedOut => "borrow_timed_out",
        }
    }
}

/// One way a method fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub code: ErrorCode,
    pub reason: Option<FailureReason>,
    pub when: &'static str,
}

const fn f(code: ErrorCode, reason: Option<FailureReason>, when: &'static str) -> Failure {
    Failure { code, reason, when }
}

use ErrorCode::{
    Cancelled, CdpFailed, InvalidParams, NotFound, PermissionDenied, ProtocolError, Timeout,
};
use FailureReason as R;

const OUTSIDE: Failure = f(
    PermissionDenied,
    Some(R::AgentWindowScope),
    "the tab is not in the session's Agent Window",
);
const RESTRICTED: Failure = f(
    PermissionDenied,
    Some(R::RestrictedTabUrl),
    "the tab shows a page extensions may not read",
);
const BORROWED: Failure = f(
    PermissionDenied,
    Some(R::BorrowConflict),
    "another session borrowed the tab",
);
const REF: Failure = f(
    NotFound,
    Some(R::RefNotFound),
    "the ref is unknown, of another tab, or its page changed since the snapshot",
);
const SELECTOR: Failure = f(
    NotFound,
    Some(R::SelectorNotFound),
    "no element matches the selector",
);
const HIDDEN: Failure = f(
    PermissionDenied,
    Some(R::ElementNotVisible),
    "the element has no box, or something else covers it",
);
const DIALOG_LOOP: Failure = f(
    CdpFailed,
    None,
    "the page opened dialogs in a loop and was unloaded",
);
const NO_HISTORY: Failure = f(InvalidParams, None, "there is no history entry to move to");
const NAVIGATION_REFUSED: Failure = f(
    CdpFailed,
    None,
    "the browser refused the navigation (a DNS error, say)",
);

const PAGE_INPUT: &[Failure] = &[OUTSIDE, RESTRICTED, REF, SELECTOR, HIDDEN, DIALOG_LOOP];
const READ: &[Failure] = &[RESTRICTED, REF];

/// The failures particular to each method that has any.
static FAILURES: &[(&[&str], &[Failure])] = &[
    (
        &["tool.session_start"],
        &[
            f(
                ProtocolError,
                None,
                "the browser could not open the window, or the session id is taken",
            ),
            f(
                ProtocolError,
                Some(R::CleanupFailed),
                "the browser could not close a window it opened for a start that failed",
            ),
            f(
                PermissionDenied,
                Some(R::ConsentDenied),
                "the start asked the browser's person (Latchkey's `consent` addition), who said no or did not answer in time",
            ),
        ],
    ),
    (
        &["tool.session_stop"],
        &[f(NotFound, None, "the browser has no such session")],
    ),
    (
        &["tool.tab_close"],
        &[
            OUTSIDE,
            BORROWED,
            f(
                InvalidParams,
                None,
                "the tab was borrowed by this session: return it first",
            ),
        ],
    ),
    (&["tool.tab_select"], &[OUTSIDE, BORROWED]),
    (
        &["tool.tab_borrow"],
        &[
            f(
                PermissionDenied,
                Some(R::SiteBlocked),
                "the tab shows a host the session's site rules block (`data.host`, `data.pattern`)",
            ),
            f(
                PermissionDenied,
                Some(R::SiteNotAllowed),
                "the tab shows a host the session's site rules do not allow",
            ),
            f(
                PermissionDenied,
                Some(R::SchemeNotAllowed),
                "the tab shows a page of a scheme the session's site rules do not allow",
            ),
            f(
                Cancelled,
                Some(R::BorrowDenied),
                "the person refused to lend the tab",
            ),
            f(
                Cancelled,
                Some(R::BorrowTimedOut),
                "nobody answered the confirmation in time (60 s by default in our extension, about 7 s in a contract-only one)",
            ),
            f(
                InvalidParams,
                None,
                "the tab is already in this session's window, or already borrowed by it",
            ),
            BORROWED,
            f(
                PermissionDenied,
                Some(R::AgentWindowScope),
                "the tab is in another session's Agent Window",
            ),
        ],
    ),
    (
        &["tool.tab_return"],
        &[f(NotFound, None, "this session did not borrow the tab")],
    ),
    (
        &["tool.navigate"],
        &[OUTSIDE, NAVIGATION_REFUSED, DIALOG_LOOP],
    ),
    (
        &["tool.navigate_back", "tool.navigate_forward"],
        &[OUTSIDE, NO_HISTORY, DIALOG_LOOP],
    ),
    (
        &["tool.reload", "tool.wait_for_navigation", "tool.emulate"],
        &[OUTSIDE],
    ),
    (
        &["tool.wait_ms"],
        &[f(Cancelled, None, "the call was cancelled")],
    ),
    (
        &["tool.click"],
        &[
            OUTSIDE,
            RESTRICTED,
            REF,
            SELECTOR,
            HIDDEN,
            DIALOG_LOOP,
            f(
                InvalidParams,
                Some(R::TargetNotCheckable),
                "Latchkey's `latchkey_checked` on an element that is not a checkbox, radio button or switch, or `false` on a checked radio button",
            ),
        ],
    ),
    (&["tool.hover"], PAGE_INPUT),
    (
        &["tool.fill"],
        &[
            OUTSIDE,
            RESTRICTED,
            REF,
            SELECTOR,
            f(
                InvalidParams,
                Some(R::TargetNotFillable),
                "the element is not a text field or editable",
            ),
            DIALOG_LOOP,
        ],
    ),
    (
        &["tool.press"],
        &[
            OUTSIDE,
            RESTRICTED,
            REF,
            SELECTOR,
            f(InvalidParams, None, "the key is not one the browser knows"),
        ],
    ),
    (
        &["tool.select"],
        &[
            OUTSIDE,
            RESTRICTED,
            REF,
            SELECTOR,
            f(
                InvalidParams,
                Some(R::TargetNotSelect),
                "the element is not a <select>",
            ),
            f(
                InvalidParams,
                Some(R::SingleSelectValueCount),
                "a single-choice <select> given anything but one value",
            ),
            f(
                InvalidParams,
                Some(R::OptionNotFound),
                "a value is not one of its options",
            ),
        ],
    ),
    (&["tool.snapshot", "tool.get_html"], READ),
    (&["tool.observe"], &[OUTSIDE, RESTRICTED]),
    (
        &["tool.screenshot"],
        &[
            RESTRICTED,
            REF,
            f(
                InvalidParams,
                Some(R::TabNotActive),
                "a whole-tab screenshot of a tab that is not active",
            ),
            f(
                CdpFailed,
                Some(R::ScreenshotCaptureFailed),
                "neither way of capturing worked",
            ),
        ],
    ),
    (
        &["tool.evaluate"],
        &[
            f(
                PermissionDenied,
                None,
                "the person has not allowed scripts in this browser",
            ),
            OUTSIDE,
            RESTRICTED,
            DIALOG_LOOP,
        ],
    ),
    (
        &["tool.request_help"],
        &[
            OUTSIDE,
            f(
                Cancelled,
                None,
                "the call was cancelled (the person declining is the `cancelled` outcome, not an error)",
            ),
        ],
    ),
    (
        &["tool.record_start"],
        &[f(ProtocolError, None, "a recording is already running")],
    ),
    (
        &["tool.record_stop"],
        &[f(NotFound, None, "nothing is being recorded")],
    ),
    (
        &["tool.record_await"],
        &[
            f(NotFound, None, "nothing is being recorded"),
            f(Timeout, None, "the person did not finish within timeout_ms"),
            f(Cancelled, None, "the recording was cleared"),
        ],
    ),
];

/// The failures particular to `method` (empty for methods without any).
pub fn of(method: &str) -> &'static [Failure] {
    FAILURES
        .iter()
        .find(|(methods, _)| methods.contains(&method))
        .map_or(&[], |(_, failures)| *failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tool_named;

    #[test]
    fn every_entry_names_catalogue_methods_once() {
        let mut seen = std::collections::HashSet::new();
        for (methods, failures) in FAILURES {
            assert!(!failures.is_empty());
            for m in *methods {
                assert!(tool_named(m).is_some(), "{m} is not in the catalogue");
                assert!(seen.insert(*m), "{m} twice");
            }
        }
        assert_eq!(of("tool.future_method"), &[]);
        assert_eq!(of("tool.tab_return")[0].code, NotFound);
    }

    #[test]
    fn reasons_are_listed_once_with_their_wire_names() {
        for r in FailureReason::ALL {
            let wire = serde_json::to_value(r).expect("json");
            assert_eq!(wire, r.as_str());
        }
    }
}
