//! The value types the tool catalogue's params are made of: each one refuses, while
//! it is read, what the extension protocol (docs/protocol.md) does not allow, so a
//! bad value is answered by the gateway with the field's name instead of travelling
//! to the browser.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A value type's TypeScript: the primitive it is read from (its range is the
/// schema's to state; TypeScript has no way to).
macro_rules! primitive_ts {
    ($name:ident, $ts:literal) => {
        impl TS for $name {
            type WithoutGenerics = Self;
            type OptionInnerType = Self;
            fn name(_: &ts_rs::Config) -> String {
                String::from($ts)
            }
            fn inline(cfg: &ts_rs::Config) -> String {
                <Self as TS>::name(cfg)
            }
        }
    };
}

/// A value type's JSON Schema, inlined where it is used (each is a handful of
/// keywords; a `$defs` entry per range would only add indirection for readers).
macro_rules! inline_schema {
    ($name:ident, $schema:tt) => {
        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

/// Largest integer JavaScript represents exactly: tab ids and cursors above it would
/// change on their way through the extension.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

macro_rules! checked_integer {
    ($(#[$doc:meta])* $name:ident($inner:ty), $min:expr, $max:expr, $expect:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = <$inner>::deserialize(d)?;
                if (($min)..=($max)).contains(&v) {
                    Ok($name(v))
                } else {
                    Err(de::Error::custom(format_args!(
                        concat!("{} is out of range: expected ", $expect),
                        v
                    )))
                }
            }
        }

        primitive_ts!($name, "number");

        inline_schema!($name, {
            "type": "integer",
            "minimum": $min,
            "maximum": $max,
        });
    };
}

checked_integer!(
    /// A tab id: a positive safe integer.
    TabId(i64), 1, MAX_SAFE_INTEGER as i64, "a positive integer up to 2^53-1"
);
checked_integer!(
    /// `timeout_ms`: 1 ..= u32::MAX (the gateway's own ceiling is applied apart).
    TimeoutMs(u64), 1, u64::from(u32::MAX), "1..=4294967295"
);
checked_integer!(
    /// An Agent Window or viewport dimension in CSS pixels.
    WindowDimension(u32), 100, 7680, "100..=7680"
);
checked_integer!(
    /// A count that must be at least one.
    Positive(u32), 1, u32::MAX, "at least 1"
);
checked_integer!(
    /// A u32 that may be zero.
    Count(u32), 0, u32::MAX, "0..=4294967295"
);
checked_integer!(
    /// A non-negative tab index.
    Index(i32), 0, i32::MAX, "0..=2147483647"
);
checked_integer!(
    /// A log cursor: a safe integer, zero or more.
    Cursor(u64), 0, MAX_SAFE_INTEGER, "0..=2^53-1"
);
checked_integer!(
    /// `tool.wait_ms`'s duration: at most five minutes.
    WaitDuration(u64), 0, 300_000, "0..=300000"
);

/// A string, checked for being one and nothing more: it is not copied (a `fill`
/// value or an `evaluate` expression can be megabytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text;

/// A string that must not be empty; not copied either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonEmpty;

/// Reads a string without keeping it; `non_empty` refuses `""`.
struct StrVisitor {
    non_empty: bool,
}

impl de::Visitor<'_> for StrVisitor {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.non_empty {
            "a non-empty string"
        } else {
            "a string"
        })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if self.non_empty && v.is_empty() {
            Err(E::custom("must not be empty"))
        } else {
            Ok(())
        }
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor { non_empty: false })?;
        Ok(Text)
    }
}

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor { non_empty: true })?;
        Ok(NonEmpty)
    }
}

inline_schema!(Text, { "type": "string" });
primitive_ts!(Text, "string");
primitive_ts!(NonEmpty, "string");
primitive_ts!(PositiveFinite, "number");
inline_schema!(NonEmpty, { "type": "string", "minLength": 1 });
inline_schema!(PositiveFinite, { "type": "number", "exclusiveMinimum": 0 });

/// A finite number above zero.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct PositiveFinite(pub f64);

impl<'de> Deserialize<'de> for PositiveFinite {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v.is_finite() && v > 0.0 {
            Ok(PositiveFinite(v))
        } else {
            Err(de::Error::custom(format_args!(
                "{v} must be finite and above 0"
            )))
        }
    }
}

/// An enum of the protocol, each variant with its wire name written once: serde
/// reads and writes it, and `NAMES` lists them (the CLI offers them as choices).
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
        #[ts(export_to = "tools/")]
        pub enum $name {
            $(#[serde(rename = $wire)] $variant,)+
        }

        impl $name {
            /// Every wire name, in the protocol's order.
            pub const NAMES: &'static [&'static str] = &[$($wire),+];
        }
    };
}

wire_enum!(
    /// The page lifecycle phase a navigation waits for.
    WaitUntil {
        Load = "load",
        Domcontentloaded = "domcontentloaded",
        Networkidle = "networkidle",
        Commit = "commit",
    }
);

wire_enum!(
    /// Which tabs `tool.tab_list` lists.
    TabScope { User = "user", Agent = "agent", All = "all" }
);

wire_enum!(
    /// A mouse button.
    Button { Left = "left", Middle = "middle", Right = "right" }
);

wire_enum!(
    /// A modifier key held during input.
    Modifier { Alt = "alt", Ctrl = "ctrl", Meta = "meta", Shift = "shift" }
);
