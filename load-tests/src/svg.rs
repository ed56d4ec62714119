//! Line charts as standalone SVG for docs/benchmarks.md: linear axes with round
//! tick values, one coloured line per series and a legend. Hand-written because a
//! plotting library would bring a font stack for a few polylines.

use std::fmt::Write;

/// One named line.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f",
];

/// A round step giving about `target` ticks over `span`.
fn tick_step(span: f64, target: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn label(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart<'_> {
    pub fn render(&self) -> String {
        let all = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x_max, mut y_max) = (0f64, 0f64);
        for &(x, y) in all {
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        let x_step = tick_step(x_max, 6.0);
        let y_step = tick_step(y_max, 5.0);
        let x_top = (x_max / x_step).ceil().max(1.0) * x_step;
        let y_top = (y_max / y_step).ceil().max(1.0) * y_step;
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |x: f64| LEFT + x / x_top * plot_w;
        let py = |y: f64| TOP + plot_h - y / y_top * plot_h;
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(
            out,
            r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="24" font-size="15" font-weight="bold">{}</text>"#,
            LEFT,
            escape(self.title)
        );
        // Grid and ticks.
        let mut y = 0.0;
        while y <= y_top + y_step / 2.0 {
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                py(y) + 4.0,
                label(y),
                py = py(y)
            );
            y += y_step;
        }
        let mut x = 0.0;
        while x <= x_top + x_step / 2.0 {
            let _ = write!(
                out,
                r##"<line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{}" stroke="#eee"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 18.0,
                label(x),
                px = px(x)
            );
            x += x_step;
        }
        let _ = write!(
            out,
            r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"##,
            LEFT + plot_w / 2.0,
            HEIGHT - 16.0,
            escape(self.x_label),
            TOP + plot_h / 2.0,
            escape(self.y_label)
        );
        for (i, s) in self.series.iter().enumerate() {
            let colour = COLOURS.get(i % COLOURS.len()).copied().unwrap_or("#000");
            let points: Vec<String> = s
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
            for &(x, y) in &s.points {
                if s.points.len() <= 12 {
                    let _ = write!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                        px(x),
                        py(y)
                    );
                }
            }
            let ly = TOP + 10.0 + i as f64 * 20.0;
            let lx = LEFT + plot_w + 14.0;
            let _ = write!(
                out,
                r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
                lx + 18.0,
                lx + 24.0,
                ly + 4.0,
                escape(&s.name)
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0, 5.0), 20.0);
        assert_eq!(tick_step(7.0, 6.0), 1.0);
        assert_eq!(tick_step(0.0, 5.0), 1.0);
    }

    #[test]
    fn renders_every_series_and_escapes_text() {
        let svg = Chart {
            title: "a < b",
            x_label: "x",
            y_label: "y",
            series: vec![
                Series {
                    name: "one".into(),
                    points: vec![(0.0, 1.0), (1.0, 2.0)],
                },
                Series {
                    name: "two".into(),
                    points: vec![(0.0, 3.0)],
                },
            ],
        }
        .render();
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b"));
        assert!(svg.contains(">two<"));
    }
}
