//! One section per scenario: its table, its prose and, where it has one, its chart.

use std::fmt::Write;
use std::path::Path;

use super::Results;
use crate::idle::kib;
use crate::revoke::RevokeReport;
use crate::stats::ms;
use crate::svg::{Chart, Series};

fn chart(dir: &Path, file: &str, chart: Chart<'_>) -> anyhow::Result<String> {
    std::fs::write(dir.join(file), chart.render())?;
    Ok(format!("![{}](benchmarks/{file})\n\n", chart.title))
}

pub(super) fn idle(md: &mut String, r: &Results, charts: &Path) -> anyhow::Result<()> {
    let Some(i) = &r.idle else { return Ok(()) };
    let _ = writeln!(
        md,
        "## Idle devices\n\n`idle`: {} devices connected over WSS (TLS 1.3, ECDSA), added in \
         steps with memory read after each; then a {:.0} s quiet window and a {:.0} s window \
         with every device heartbeating once a second. Memory per device is the server's RSS \
         growth divided by the devices; kernel memory is the growth of slab caches and TCP \
         buffers machine-wide, which counts both ends of each loopback connection, so half \
         of it is charged to the server. One process can hold about 20,000 descriptors \
         here, so the run stops at {} devices and per-device figures are extrapolated: \
         devices per GiB is 1 GiB over the all-in figure.\n",
        i.devices, i.window_secs, i.window_secs, i.devices
    );
    md.push_str("| target | RSS per device | kernel per connection (both ends) | all in per device | CPU quiet | CPU per 10,000 heartbeats |\n| --- | --- | --- | --- | --- | --- |\n");
    for t in &i.targets {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.1} % | {:.0} ms |",
            t.target,
            kib(t.rss_per_device),
            kib(t.kernel_per_connection_both_ends),
            kib(t.all_in_per_device),
            t.quiet_cpu_percent,
            t.cpu_ms_per_10k_heartbeats
        );
    }
    let _ = writeln!(
        md,
        "\nlatchkeyd per device: {:.2}× the relay (which runs tungstenite's default 128 KiB \
         read buffer); {:.0} devices per GiB.\n",
        i.ratio_all_in, i.devices_per_gib
    );
    let series = i
        .targets
        .iter()
        .map(|t| Series {
            name: t.target.clone(),
            points: t
                .steps
                .iter()
                .map(|s| (s.devices as f64, s.rss_bytes as f64 / (1 << 20) as f64))
                .collect(),
        })
        .collect();
    md.push_str(&chart(
        charts,
        "memory-vs-devices.svg",
        Chart {
            title: "Server RSS vs connected WSS devices",
            x_label: "devices",
            y_label: "RSS (MiB)",
            series,
        },
    )?);
    Ok(())
}

pub(super) fn latency(md: &mut String, r: &Results, charts: &Path) -> anyhow::Result<()> {
    let Some(l) = &r.latency else { return Ok(()) };
    let _ = writeln!(
        md,
        "## Latency at low load\n\n`latency`: one call at a time, about {} B of params echoed \
         back by a simulated device, {} calls per path in 10 alternating rounds (each with a \
         warm-up). latchkeyd runs in the generator's process here (testkit's TestServer).\n",
        l.payload_bytes, l.calls
    );
    let paths = [
        ("bare relay", &l.relay),
        ("latchkeyd agent WebSocket", &l.agent_socket),
        ("latchkeyd HTTP API", &l.http),
    ];
    latency_table(md, &paths);
    let _ = writeln!(
        md,
        "\nAgent WebSocket / relay over all calls: p50 {:.2}×, p99 {:.2}×.",
        l.socket_p50_ratio, l.socket_p99_ratio
    );
    if let (Some(p50), Some(p99)) = (&l.rounds_p50, &l.rounds_p99) {
        let _ = writeln!(
            md,
            "Round by round (the goal's figures): p50 median {:.2}× ({:.2}–{:.2}), p99 median \
             {:.2}× ({:.2}–{:.2}), over {} rounds.",
            p50.median, p50.min, p50.max, p99.median, p99.min, p99.max, p50.rounds
        );
    }
    md.push('\n');
    let series = paths
        .iter()
        .map(|(name, s)| Series {
            name: (*name).to_string(),
            points: s
                .cdf
                .iter()
                .filter(|(q, _)| *q <= 0.999)
                .map(|(q, us)| (*us as f64 / 1000.0, q * 100.0))
                .collect(),
        })
        .collect();
    md.push_str(&chart(
        charts,
        "latency-distribution.svg",
        Chart {
            title: "Latency distribution, one call at a time (to p99.9)",
            x_label: "latency (ms)",
            y_label: "percentile",
            series,
        },
    )?);
    Ok(())
}

pub(super) fn throughput(md: &mut String, r: &Results, charts: &Path) -> anyhow::Result<()> {
    let Some(t) = &r.throughput else {
        return Ok(());
    };
    let _ = writeln!(
        md,
        "## Throughput\n\n`throughput`: closed loop, {:.0} s per point after a warm-up; \
         concurrency spread over 8 device/agent pairs (on latchkeyd one session per call in \
         flight, since a session runs one command at a time); about {} B of params. Calls \
         per server core is calls divided by the server's CPU seconds: what one fully busy \
         core relays, independent of how the two cores were shared with the client.\n",
        t.seconds_per_point, t.pad_bytes
    );
    point_table(md, "| target | concurrency |", &t.points);
    for o in &t.open_loop {
        let _ = writeln!(
            md,
            "\nOpen loop, {} at {} calls/s: {} calls, p50 {}, p99 {}, p999 {}, server CPU {:.2} s, {} errors.",
            o.target,
            o.rate,
            o.calls,
            ms(o.latency.p50_us),
            ms(o.latency.p99_us),
            ms(o.latency.p999_us),
            o.server_cpu_secs,
            o.errors
        );
    }
    let _ = writeln!(
        md,
        "\nAt the highest concurrency latchkeyd relays {:.2}× the relay's calls per server \
         core ({:.2}× its calls per second of wall time).\n",
        t.ratio_per_core, t.ratio_wall
    );
    if let Some(s) = &t.rounds_per_core {
        let _ = writeln!(
            md,
            "Then {} alternating rounds at that concurrency, a quarter of a point each, the \
             two taking turns at going first: per server core, latchkeyd / relay has median \
             {:.2}× ({:.2}–{:.2}); rounds in order: {}.\n",
            s.rounds,
            s.median,
            s.min,
            s.max,
            s.ratios
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let names: Vec<String> = {
        let mut v: Vec<String> = t.points.iter().map(|p| p.target.clone()).collect();
        v.dedup();
        v.sort();
        v.dedup();
        v
    };
    let series = names
        .iter()
        .map(|n| Series {
            name: n.clone(),
            points: t
                .points
                .iter()
                .filter(|p| &p.target == n)
                .map(|p| (p.concurrency as f64, p.calls_per_server_core))
                .collect(),
        })
        .collect();
    md.push_str(&chart(
        charts,
        "throughput-vs-concurrency.svg",
        Chart {
            title: "Relayed calls per server core-second vs concurrency",
            x_label: "calls in flight",
            y_label: "calls per server core-second",
            series,
        },
    )?);
    Ok(())
}

/// A table of one-call-at-a-time latencies, a row per path.
pub(super) fn latency_table(md: &mut String, paths: &[(&str, &crate::stats::Summary)]) {
    md.push_str("| path | p50 | p99 | p999 |\n| --- | --- | --- | --- |\n");
    for (name, s) in paths {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} |",
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.p999_us)
        );
    }
}

/// A table of closed-loop points, one row each; `head` names the first two
/// columns (what ran, and how many calls it kept in flight).
pub(super) fn point_table(md: &mut String, head: &str, points: &[crate::throughput::Point]) {
    let _ = writeln!(
        md,
        "{head} calls/s | server CPU s | calls per server core-second | p50 | p99 | errors |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in points {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.2} | {:.0} | {} | {} | {} |",
            p.target,
            p.concurrency,
            p.calls_per_sec,
            p.server_cpu_secs,
            p.calls_per_server_core,
            ms(p.latency.p50_us),
            ms(p.latency.p99_us),
            p.errors
        );
    }
}

pub(super) fn payload(md: &mut String, r: &Results) {
    let Some(p) = &r.payload else { return };
    // The run's own round count: JSON from before the rounds has none.
    let method = match p.round_ratios.first() {
        Some((_, s)) => format!(
            ", in {} alternating rounds (the two targets take turns, and turns at going \
             first, so that a host that speeds up or slows down weighs on both alike)",
            s.rounds
        ),
        None => String::new(),
    };
    let _ = writeln!(
        md,
        "## Large payloads\n\n`payload`: the device answers every call with a result of the \
         given size; one call at a time for {:.0} s per size and target{method}.\n",
        p.seconds_per_point,
    );
    md.push_str("| target | result size | calls | MiB/s | p50 | p99 |\n| --- | --- | --- | --- | --- | --- |\n");
    for x in &p.points {
        let _ = writeln!(
            md,
            "| {} | {} KiB | {} | {:.0} | {} | {} |",
            x.target,
            x.bytes / 1024,
            x.calls,
            x.mib_per_sec,
            ms(x.latency.p50_us),
            ms(x.latency.p99_us)
        );
    }
    let ratios: Vec<String> = p
        .ratios
        .iter()
        .map(|(b, r)| {
            let spread = crate::payload::spread_note(p, *b, "×");
            format!("{r:.2}× at {} KiB{spread}", b / 1024)
        })
        .collect();
    let _ = writeln!(
        md,
        "\nlatchkeyd / relay over all rounds: {}.\n",
        ratios.join(", ")
    );
}

pub(super) fn handshake(md: &mut String, r: &Results) {
    let Some(h) = &r.handshake else { return };
    let _ = writeln!(
        md,
        "## TLS handshakes\n\n`handshake`: {} clients connect, complete a full TLS handshake \
         (resumption off) and hang up, for {} s a server a round, from rotating 127.2.x.y \
         addresses; the relay and latchkeyd in alternating rounds.\n",
        h.concurrency, h.seconds
    );
    md.push_str("| target | round | handshakes/s | server CPU s | per server core-second | failures | negotiated |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for p in &h.points {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.2} | {:.0} | {} | {} {} |",
            p.target,
            p.round,
            p.per_sec,
            p.server_cpu_secs,
            p.per_server_core,
            p.failures,
            p.cipher_suite,
            p.key_exchange
        );
    }
    let _ = writeln!(
        md,
        "\nlatchkeyd / relay per server core: {:.2}× over all rounds{}.\n",
        h.ratio_per_core,
        h.rounds_per_core
            .as_ref()
            .map(|s| format!(
                "; per round, median {:.2}× ({:.2}–{:.2}, {} rounds)",
                s.median, s.min, s.max, s.rounds
            ))
            .unwrap_or_default()
    );
}

pub(super) fn storm(md: &mut String, r: &Results, charts: &Path) -> anyhow::Result<()> {
    let Some(s) = &r.storm else { return Ok(()) };
    let _ = writeln!(
        md,
        "## Reconnect storm\n\n`storm`: {} devices online over WSS drop their sockets at once \
         and dial again, at once or spread over a jitter window; timed until every one is \
         back (TCP, TLS, upgrade and, on latchkeyd, the authenticated upgrade and the \
         handshake). Devices retry per `Retry-After` on 503 and back off on anything else. \
         The generator has at most {} dials in flight (from the dial to the end of the \
         handshake), so that it writes each connected socket's ClientHello at once, as \
         separate machines would; see the notes. Server CPU is the server process's user \
         plus system time from the drop until the last device was back; generator CPU is \
         the load generator's own over the same span (every simulated device's TLS client, \
         upgrade and handshake). \"Cores busy\" is the two together over what the {} cores \
         could give in the all-back time: near 100 %, the storm is bound by the machine's \
         CPU, and the all-back time is the CPU both ends need divided by the cores. \
         The fleet moves between the two servers (both stay up) in alternating rounds; \
         the chart shows the first round.\n",
        s.devices,
        crate::fleet::DIALS_IN_FLIGHT,
        s.machine.cores
    );
    md.push_str("| target | round | jitter | half back | all back | server CPU | generator CPU | cores busy | 503 + Retry-After | other refusals | failures |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for x in &s.runs {
        // Runs from before the generator's CPU was read have none.
        let (generator, busy) = match x.cores_busy(s.machine.cores) {
            Some(busy) => (
                format!("{:.2} s", x.client_cpu_secs),
                format!("{:.0} %", busy * 100.0),
            ),
            None => ("—".to_string(), "—".to_string()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} ms | {:.2} s | {:.2} s | {:.2} s | {} | {} | {} | {} | {}{} |",
            x.target,
            x.round,
            x.jitter_ms,
            x.half_back_secs,
            x.all_back_secs,
            x.server_cpu_secs,
            generator,
            busy,
            x.refused_503,
            x.refused_other,
            x.failures,
            x.first_failure
                .as_ref()
                .map(|f| format!(" (first: {f})"))
                .unwrap_or_default()
        );
    }
    md.push('\n');
    let first = s.runs.iter().map(|x| x.round).min().unwrap_or_default();
    let series = s
        .runs
        .iter()
        .filter(|x| x.round == first)
        .map(|x| Series {
            name: format!("{} {} ms", x.target, x.jitter_ms),
            points: x.curve.iter().map(|(t, n)| (*t, *n as f64)).collect(),
        })
        .collect();
    md.push_str(&chart(
        charts,
        "storm-recovery.svg",
        Chart {
            title: "Reconnect storm: devices back over time",
            x_label: "seconds since every socket dropped",
            y_label: "devices back online",
            series,
        },
    )?);
    Ok(())
}

pub(super) fn revoke(md: &mut String, r: &Results) {
    let runs: Vec<&RevokeReport> = [&r.revoke, &r.revoke_pg].into_iter().flatten().collect();
    if runs.is_empty() {
        return;
    }
    md.push_str(
        "## Revocation → Close\n\n`revoke`: devices paired and online; some of them revoked \
         one at a time, each timed from the admin's `DELETE /v1/admin/devices/{id}` being \
         sent to the device receiving Close 4001 (the HTTP round trip included). latchkeyd \
         closes the socket before it commits the revocation and again after; the admin's \
         answer waits for the commit, and its own p50 and p99 follow. The last columns \
         are API tokens: as many agent sockets as samples, each on a token of its own, \
         each timed from `DELETE /v1/admin/tokens/{id}` to its socket receiving Close \
         4006.\n\n\
         | backend | devices | samples | p50 | p90 | p99 | max | answered p50 | answered p99 | token p50 | token p99 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for x in runs {
        let answered = |us: Option<u128>| us.map_or_else(|| "—".to_string(), ms);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.backend,
            x.devices,
            x.samples,
            ms(x.p50_us),
            ms(x.p90_us),
            ms(x.p99_us),
            ms(x.max_us),
            answered(x.answered_p50_us),
            answered(x.answered_p99_us),
            answered(x.token_p50_us),
            answered(x.token_p99_us)
        );
    }
    md.push('\n');
}
