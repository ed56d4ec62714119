//! Capability classes: what a person lends an agent when they let it use a class of
//! tools on their browser (docs/tools.md). Every method of the catalogue has one,
//! so a policy can name classes instead of methods, and a method added later falls
//! into a class its reader already understands. `session` is the lifecycle and the
//! gateway's own wait, which every agent allowed at all may use.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    TS,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[ts(export_to = "tools/")]
pub enum Capability {
    /// Open and close the Agent Window; wait on the gateway.
    Session,
    /// Look without changing anything: tabs, snapshots, HTML, screenshots, logs,
    /// waits, asking the person for help, a recording's result.
    Read,
    /// Act on a page's content: click, hover, fill, press, select (and the hover
    /// probes of `observe`).
    Input,
    /// Change which page or tab the window shows, or how it presents itself: load,
    /// history, reload, tabs of the Agent Window, window size, emulation, and the
    /// page a recording starts on.
    Navigate,
    /// Run JavaScript in the page (`evaluate`; the person must also allow it in
    /// the extension).
    Script,
    /// Ask for one of the person's own tabs, and give it back.
    Borrow,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::Session,
        Capability::Read,
        Capability::Input,
        Capability::Navigate,
        Capability::Script,
        Capability::Borrow,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::Session => "session",
            Capability::Read => "read",
            Capability::Input => "input",
            Capability::Navigate => "navigate",
            Capability::Script => "script",
            Capability::Borrow => "borrow",
        }
    }
}

impl JsonSchema for Capability {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Capability")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        json_schema!({ "type": "string", "enum": names })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{TOOLS, tool_named};

    fn class(method: &str) -> Capability {
        tool_named(method)
            .map(|t| t.capability)
            .expect("in the catalogue")
    }

    /// The classes a person is asked about, as the product describes them.
    #[test]
    fn each_method_is_in_the_class_a_person_would_expect() {
        for m in [
            "tool.tab_list",
            "tool.snapshot",
            "tool.screenshot",
            "tool.get_html",
        ] {
            assert_eq!(class(m), Capability::Read, "{m}");
        }
        for m in [
            "tool.click",
            "tool.fill",
            "tool.press",
            "tool.select",
            "tool.hover",
        ] {
            assert_eq!(class(m), Capability::Input, "{m}");
        }
        for m in ["tool.navigate", "tool.reload", "tool.tab_create"] {
            assert_eq!(class(m), Capability::Navigate, "{m}");
        }
        assert_eq!(class("tool.evaluate"), Capability::Script);
        assert_eq!(class("tool.tab_borrow"), Capability::Borrow);
        assert_eq!(class("tool.tab_return"), Capability::Borrow);
        assert_eq!(class("tool.session_start"), Capability::Session);
        // Nothing that changes the browser is filed as a read.
        for t in TOOLS {
            if t.effect.is_gated() {
                assert_ne!(t.capability, Capability::Read, "{}", t.method);
            }
        }
    }

    #[test]
    fn wire_names_agree_with_serde() {
        for c in Capability::ALL {
            assert_eq!(serde_json::to_value(c).expect("json"), c.as_str());
        }
    }
}
