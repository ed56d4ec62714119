//! The audit trail's and the MCP endpoint's part of the report: their goals and
//! their sections. Both are measured by scenarios of their own (`audit-writer`,
//! `mcp`) beside the relay comparisons, since neither has a bare-relay twin: the
//! audit row rides on every tool call of the latency and throughput scenarios,
//! and MCP is set against the agent WebSocket on the same latchkeyd.

use std::fmt::Write;

use super::Results;
use super::goals::{Goal, median_or_pooled, spread};

/// The per-call audit row's budget: latchkeyd writes a row for every tool call
/// in the latency and throughput scenarios, so their figures judge it (a looser
/// bound than the relay goals above, which the row must also fit in).
pub(super) fn audited_calls(r: &Results) -> Goal {
    let p99 = r
        .latency
        .as_ref()
        .map(|l| median_or_pooled(l.rounds_p99.as_ref(), l.socket_p99_ratio));
    let per_core = r
        .throughput
        .as_ref()
        .map(|t| median_or_pooled(t.rounds_per_core.as_ref(), t.ratio_per_core));
    let measured = match (&p99, &per_core) {
        (Some(l), Some(t)) => format!("throughput per server core {}; latency p99 {}", t.1, l.1),
        _ => String::new(),
    };
    Goal {
        what: "A row in the audit trail for every tool call (throughput and latency above)",
        target: "throughput ≥ 0.7× per server core; latency p99 ≤ 1.5×".into(),
        measured,
        met: p99.zip(per_core).map(|(l, t)| l.0 <= 1.5 && t.0 >= 0.7),
    }
}

/// MCP against the agent WebSocket on the same server: p50 one call at a time,
/// calls per server core with many in flight. Judged on the plain client's
/// figures where the run has them (a client as lean as the socket's, so the two
/// paths are compared rather than two client libraries), with the SDK client's
/// beside them; a run from before the plain client is judged on the SDK's.
pub(super) fn mcp(r: &Results) -> Goal {
    let Some(m) = &r.mcp else {
        return Goal {
            what: MCP_GOAL,
            target: MCP_TARGET.into(),
            measured: String::new(),
            met: None,
        };
    };
    let sdk_p50 = median_or_pooled(m.rounds_p50.as_ref(), m.p50_ratio);
    let sdk = format!(
        "p50 {}; per server core {:.2}×",
        sdk_p50.1, m.ratio_per_core
    );
    let (judged, measured) = match (&m.plain, m.plain_ratio_per_core) {
        (Some(plain), Some(pooled_core)) => {
            let pooled = plain.p50_us as f64 / m.socket.p50_us.max(1) as f64;
            let p50 = median_or_pooled(m.plain_rounds_p50.as_ref(), pooled);
            let core = median_or_pooled(m.plain_rounds_per_core.as_ref(), pooled_core);
            (
                (p50.0, core.0),
                format!(
                    "plain client: p50 {}; per server core {}. \
                     The SDK's client: {sdk}",
                    p50.1, core.1
                ),
            )
        }
        _ => (
            (sdk_p50.0, m.ratio_per_core),
            format!("the SDK's client: {sdk}"),
        ),
    };
    let errors = m.errors();
    Goal {
        what: MCP_GOAL,
        target: MCP_TARGET.into(),
        measured: format!("{measured}; {errors} errors"),
        met: Some(judged.0 <= 1.5 && judged.1 >= 0.5 && errors == 0),
    }
}

const MCP_GOAL: &str = "MCP tool call (`/mcp`) / agent WebSocket call";
const MCP_TARGET: &str = "p50 ≤ 1.5×; calls per server core ≥ 0.5× (plain client); no errors";

pub(super) fn audit_writer_section(md: &mut String, r: &Results) {
    let runs: Vec<_> = [r.audit_sqlite.as_ref(), r.audit_pg.as_ref()]
        .into_iter()
        .flatten()
        .collect();
    if runs.is_empty() {
        return;
    }
    md.push_str(
        "## The audit writer\n\n`audit-writer`: tool-call rows (`session.call`, shaped as the \
         agent path makes them) queued by 64 tasks at once into the group commit that \
         latchkeyd runs, hash-chained as in production, until every row is committed. \
         Storage is what the store grew by (SQLite: the database and its write-ahead log \
         after a checkpoint; PostgreSQL: the audit table with its indexes and TOAST).\n\n\
         | store | rows | seconds | rows/s | storage per million rows |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for w in runs {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {:.0} | {:.0} MB |",
            w.backend,
            w.rows,
            w.seconds,
            w.rows_per_sec,
            w.bytes_per_million / 1e6
        );
    }
    md.push('\n');
}

pub(super) fn mcp_section(md: &mut String, r: &Results) {
    let Some(m) = &r.mcp else { return };
    let _ = writeln!(
        md,
        "## MCP\n\n`mcp`: the same navigation (~200 B of params, judged by the catalogue on \
         every path) through `/mcp`, through the HTTP API, and on the agent WebSocket, against \
         one latchkeyd with {} s per measure; one call at a time in 10 rounds taking turns, \
         then calls in flight on each path with the server's CPU time from /proc (the socket \
         and the plain client in 4 rounds taking turns, judged on the median round). `/mcp` is \
         called by two clients, each keeping its connections: a plain HTTP client that posts \
         each call as one JSON-RPC request of the stateless revision on hyper's own \
         connection, driven in the caller's task, and reads the answer as JSON \
         (`load-tests/src/mcp_plain.rs`), as lean as the testkit's agent is on the socket, so \
         that the goal compares the two paths rather than two client libraries; \
         and the official Rust SDK's client, which is what many agents run.\n",
        m.seconds
    );
    let mut rows = vec![
        ("agent WebSocket", &m.socket),
        ("HTTP API", &m.http),
        ("MCP, the SDK's client", &m.mcp),
    ];
    if let Some(plain) = &m.plain {
        rows.push(("MCP, plain client", plain));
    }
    super::sections::latency_table(md, &rows);
    md.push('\n');
    super::sections::point_table(md, "| path | in flight |", &m.points);
    let _ = writeln!(
        md,
        "\nMCP (the SDK's client) / agent WebSocket over all calls: p50 {:.2}×, p99 {:.2}×; \
         {:.2}× the calls per server core.",
        m.p50_ratio, m.p99_ratio, m.ratio_per_core
    );
    if let (Some(p50), Some(p99)) = (&m.rounds_p50, &m.rounds_p99) {
        let _ = writeln!(
            md,
            "Round by round, the SDK's client: p50 {}, p99 {}.",
            spread(p50),
            spread(p99)
        );
    }
    if let (Some(p50), Some(p99), Some(core)) = (
        &m.plain_rounds_p50,
        &m.plain_rounds_p99,
        m.plain_ratio_per_core,
    ) {
        let _ = writeln!(
            md,
            "Round by round, the plain client (the goal's figures): p50 {}, p99 {}; {core:.2}× \
             the calls per server core over all rounds{}.",
            spread(p50),
            spread(p99),
            m.plain_rounds_per_core
                .as_ref()
                .map(|s| format!(", {} round by round", spread(s)))
                .unwrap_or_default()
        );
    }
    md.push('\n');
}
