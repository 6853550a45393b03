//! `holdpoint-bench compare`: two builds' figures side by side, from the text the benchmarks
//! printed in several rounds each (see `scripts/bench-compare`, which builds both and runs
//! them interleaved).
//!
//! The benchmarks print figures as text for people, and a base commit may be older than any
//! machine-readable output, so the figures are read back from that text: each number on a
//! line is one figure, named by its section (the last `== …` line) and its line with every
//! number shown as `#`, and counted when that name repeats (the same lines under each level
//! of concurrency). A number followed by `:` is a label (`concurrency   16:`), part of the
//! name. What a figure measures is read off its unit: `…/s` is better higher; times and
//! sizes (`ns`, `µs`, `ms`, `s`, `B`, `KiB`, `MiB`) are better lower; others (counts) are
//! shown without a verdict. A verdict needs two rounds or more, and a difference of at least
//! 1%.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Which way is better for a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
    Unknown,
}

/// One number of one line of a benchmark's output.
#[derive(Clone, Debug, PartialEq)]
struct Figure {
    /// Section, line (its numbers as `#`, this one as `[#]`) and, when it repeats, its
    /// occurrence.
    name: String,
    value: f64,
    better: Better,
}

/// Every figure of one output, in the order printed.
fn figures(output: &str) -> Vec<Figure> {
    let mut section = String::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for line in output.lines() {
        let trimmed = line.trim();
        if let Some(title) = trimmed.strip_prefix("==") {
            section = title.trim().to_owned();
            continue;
        }
        let numbers = numbers(trimmed);
        if numbers.is_empty() {
            continue;
        }
        for (i, n) in numbers.iter().enumerate() {
            let mut shown = String::new();
            let mut at = 0;
            for (j, other) in numbers.iter().enumerate() {
                shown.push_str(&trimmed[at..other.start]);
                shown.push_str(if i == j { "[#]" } else { "#" });
                at = other.end;
            }
            shown.push_str(&trimmed[at..]);
            let shown = squeeze(&shown);
            let base = format!("{section} | {shown}");
            let count = seen.entry(base.clone()).or_default();
            *count += 1;
            let name = if *count == 1 {
                base
            } else {
                format!("{base} ({})", count)
            };
            out.push(Figure {
                name,
                value: n.value,
                better: n.better,
            });
        }
    }
    out
}

/// A number in a line: where it is, its value and its unit's direction.
struct Number {
    start: usize,
    end: usize,
    value: f64,
    better: Better,
}

/// The numbers of `line` that are figures: at the start of a word, not labels (followed by
/// `:`), with their unit (the word right after, if any).
fn numbers(line: &str) -> Vec<Number> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = |at: usize| at == 0 || matches!(bytes[at - 1], b' ' | b'(' | b'[' | b'~');
        // A sign belongs to the number (`-3.4%`), so that the line reads the same whatever it is.
        let signed = matches!(bytes[i], b'-' | b'+')
            && boundary(i)
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        if !(signed || (boundary(i) && bytes[i].is_ascii_digit())) {
            i += 1;
            continue;
        }
        let start = i;
        if signed {
            i += 1;
        }
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b',' || bytes[i] == b'.')
        {
            i += 1;
        }
        // A trailing comma or full stop ends a sentence, not the number.
        let mut end = i;
        while end > start && matches!(bytes[end - 1], b',' | b'.') {
            end -= 1;
        }
        let text: String = line[start..end]
            .chars()
            .filter(|c| !matches!(c, ',' | '+'))
            .collect();
        let Ok(value) = text.parse::<f64>() else {
            continue;
        };
        let rest = &line[end..];
        if rest.starts_with(':') {
            continue;
        }
        let unit = rest
            .trim_start_matches(' ')
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ')' | '('))
            .next()
            .unwrap_or_default();
        // A word glued to the number that is not a unit (a name such as `2xx`) is no figure.
        if !rest.is_empty()
            && !rest.starts_with([' ', ')', ',', ';', '%'])
            && better(unit) == Better::Unknown
        {
            continue;
        }
        found.push(Number {
            start,
            end,
            value,
            better: better(unit),
        });
    }
    found
}

fn better(unit: &str) -> Better {
    let unit = unit.trim_end_matches(['.', ',']);
    if unit.ends_with("/s") {
        return Better::Higher;
    }
    match unit {
        // `×`: a multiple of a floor (`= 17.5× the bare request's`), the nearer the better.
        "ns" | "µs" | "us" | "ms" | "s" | "B" | "KiB" | "MiB" | "GiB" | "KB" | "MB" | "GB"
        | "×" => Better::Lower,
        _ => Better::Unknown,
    }
}

/// White space runs as one space (alignment padding differs with the numbers' widths).
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One figure's values in each round, for one side.
type Rounds = BTreeMap<String, (Better, Vec<f64>)>;

fn collect(outputs: &[String]) -> (Rounds, Vec<String>) {
    let mut rounds = Rounds::new();
    let mut order = Vec::new();
    for output in outputs {
        for f in figures(output) {
            let entry = rounds.entry(f.name.clone()).or_insert_with(|| {
                order.push(f.name.clone());
                (f.better, Vec::new())
            });
            entry.1.push(f.value);
        }
    }
    (rounds, order)
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn range(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// The verdict on one figure: `worse` or `better` when head's rounds and base's do not
/// overlap at all, and their medians differ by more than either side's own spread (the
/// noise measured); else nothing.
fn verdict(better: Better, base: &[f64], head: &[f64]) -> &'static str {
    let (bmin, bmax) = range(base);
    let (hmin, hmax) = range(head);
    let (bmed, hmed) = (median(base), median(head));
    let spread = |(min, max): (f64, f64), med: f64| {
        if med == 0.0 {
            0.0
        } else {
            (max - min) / med.abs()
        }
    };
    // Below this, a difference is not worth a word even where the rounds agree exactly.
    const FLOOR: f64 = 0.01;
    let noise = spread((bmin, bmax), bmed)
        .max(spread((hmin, hmax), hmed))
        .max(FLOOR);
    // One round measures no noise at all.
    if base.len() < 2 || head.len() < 2 {
        return "";
    }
    let change = if bmed == 0.0 {
        0.0
    } else {
        (hmed - bmed) / bmed.abs()
    };
    let apart = hmin > bmax || hmax < bmin;
    if !apart || change.abs() <= noise {
        return "";
    }
    match (better, change > 0.0) {
        (Better::Higher, true) | (Better::Lower, false) => "better",
        (Better::Higher, false) | (Better::Lower, true) => "WORSE",
        (Better::Unknown, _) => "",
    }
}

fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The comparison, as printed: each figure of both sides with its median and range per
/// side, head / base, and a verdict where the difference is beyond the noise.
fn compare(base: &[String], head: &[String]) -> String {
    let (base, order) = collect(base);
    let (head, _) = collect(head);
    let mut out = String::new();
    let mut worse = 0;
    let mut section = "";
    for name in &order {
        let (Some((better, b)), Some((_, h))) = (base.get(name), head.get(name)) else {
            continue;
        };
        if b.len() != h.len() {
            continue;
        }
        let (title, line) = name.split_once(" | ").unwrap_or(("", name));
        if title != section {
            let _ = writeln!(out, "== {title}");
            section = title;
        }
        let (bmin, bmax) = range(b);
        let (hmin, hmax) = range(h);
        let ratio = if median(b) == 0.0 {
            "-".to_owned()
        } else {
            format!("{:.3}", median(h) / median(b))
        };
        let said = verdict(*better, b, h);
        if said == "WORSE" {
            worse += 1;
        }
        let _ = writeln!(
            out,
            "  {line}\n      base {} [{}–{}]   head {} [{}–{}]   head/base {ratio}  {said}",
            number(median(b)),
            number(bmin),
            number(bmax),
            number(median(h)),
            number(hmin),
            number(hmax),
        );
    }
    let only: Vec<&String> = order.iter().filter(|n| !head.contains_key(*n)).collect();
    if !only.is_empty() {
        let _ = writeln!(
            out,
            "\n{} figures of base have no counterpart in head (their lines changed)",
            only.len()
        );
    }
    let _ = writeln!(
        out,
        "\n{worse} figures WORSE beyond the noise measured (rounds apart and the medians further apart than either side's spread)"
    );
    out
}

/// Reads the outputs and prints the comparison.
pub fn run(base: &[PathBuf], head: &[PathBuf]) -> anyhow::Result<()> {
    let read = |files: &[PathBuf]| -> anyhow::Result<Vec<String>> {
        files
            .iter()
            .map(|f| {
                std::fs::read_to_string(f)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))
            })
            .collect()
    };
    print!("{}", compare(&read(base)?, &read(head)?));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP: &str = "== HTTP cycles: agent creates a question
   holdpoint serve on 127.0.0.1 (SQLite in /tmp/holdpoint-bench-x1, WAL fsynced)
  concurrency    1:     1000 cycles/s   (4000 cycles)
      create  p50   0.200 ms   p99   0.900 ms
  concurrency   16:     3000 cycles/s   (12000 cycles)
      create  p50   1.000 ms   p99   4.000 ms
";

    fn scaled(text: &str, factor: f64) -> String {
        text.replace("1000 cycles/s", &format!("{:.0} cycles/s", 1000.0 * factor))
            .replace("3000 cycles/s", &format!("{:.0} cycles/s", 3000.0 * factor))
    }

    #[test]
    fn figures_are_named_by_section_line_and_occurrence_with_their_direction() {
        let f = figures(HTTP);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert!(names.contains(
            &"HTTP cycles: agent creates a question | concurrency 1: [#] cycles/s (# cycles)"
        ));
        assert!(
            names.contains(
                &"HTTP cycles: agent creates a question | create p50 # ms p99 [#] ms (2)"
            )
        );
        let rate = f.iter().find(|f| f.value == 3000.0).unwrap();
        assert_eq!(rate.better, Better::Higher);
        let p99 = f.iter().find(|f| f.value == 4.0).unwrap();
        assert_eq!(p99.better, Better::Lower);
        let count = f.iter().find(|f| f.value == 12000.0).unwrap();
        assert_eq!(count.better, Better::Unknown);
        // Labels (`1:`, `p50`), addresses and paths are not figures: two on each line.
        assert_eq!(f.len(), 8, "{f:?}");
    }

    #[test]
    fn a_signed_number_is_a_figure_so_its_line_reads_the_same_whatever_its_sign() {
        let a = figures("== p\n  layered 200 ns each; -3.4% time against one file\n");
        let b = figures("== p\n  layered 210 ns each; +1.2% time against one file\n");
        let names = |f: &[Figure]| f.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&b));
        assert_eq!(a[1].value, -3.4);
        assert_eq!(b[1].value, 1.2);
    }

    #[test]
    fn a_multiple_of_a_floor_is_a_figure_so_its_line_reads_the_same_whatever_it_is() {
        let a = figures("== f\n   cycle CPU 300.0 µs = 17.5× the bare request's\n");
        let b = figures("== f\n   cycle CPU 310.0 µs = 20.1× the bare request's\n");
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[1].name, b[1].name);
        assert_eq!((b[1].value, b[1].better), (20.1, Better::Lower));
    }

    #[test]
    fn a_slowdown_beyond_the_noise_is_flagged_and_one_within_it_is_not() {
        let base = vec![scaled(HTTP, 1.0), scaled(HTTP, 1.01), scaled(HTTP, 0.99)];
        let slower = vec![scaled(HTTP, 0.80), scaled(HTTP, 0.81), scaled(HTTP, 0.79)];
        let said = compare(&base, &slower);
        assert!(said.contains("head/base 0.800  WORSE"), "{said}");
        assert!(said.contains("2 figures WORSE"), "{said}");
        let noisy = vec![scaled(HTTP, 0.98), scaled(HTTP, 1.02), scaled(HTTP, 0.97)];
        let said = compare(&base, &noisy);
        assert!(said.contains("0 figures WORSE"), "{said}");
        let faster = vec![scaled(HTTP, 1.3), scaled(HTTP, 1.31), scaled(HTTP, 1.29)];
        assert!(compare(&base, &faster).contains("better"));
    }
}
