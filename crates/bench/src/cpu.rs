//! How busy the whole machine was while a level ran, from `/proc/stat`: every process counts
//! (the server, the load generator, PostgreSQL), and time waiting on the disk counts as idle.
//! A rate with CPU to spare is limited by waiting (round trips, flushes, a lock); one with
//! none, by the work itself.
//!
//! Beside it, the CPU time of the processes a benchmark involves, from `/proc/PID/stat`
//! ([`Involved`]): this process and its descendants, and PostgreSQL's server processes. It
//! leaves out whatever else the machine ran meanwhile (a build, another benchmark), so it is
//! the figure to read CPU per operation from where the machine is not quiet.

use std::collections::HashMap;

/// The machine's CPU time so far, in clock ticks: busy and in all.
#[derive(Clone, Copy)]
pub struct CpuTimes {
    busy: u64,
    total: u64,
}

impl CpuTimes {
    /// Now; `None` where `/proc/stat` cannot be read (not Linux, say).
    pub fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let total: u64 = ticks.iter().take(8).sum();
        let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
        Some(CpuTimes {
            busy: total - idle,
            total,
        })
    }

    /// The share of the machine's CPUs busy from `self` to `later`, 0 to 1.
    pub fn busy_until(self, later: CpuTimes) -> Option<f64> {
        self.share_until(later, later.busy.checked_sub(self.busy)?)
    }

    /// The share of the machine's CPUs that `ticks` of CPU time (in `/proc/stat`'s unit, as
    /// `/proc/PID/stat`'s are) came to from `self` to `later`.
    pub fn share_until(self, later: CpuTimes, ticks: u64) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        (total > 0).then(|| ticks as f64 / total as f64)
    }
}

/// CPU time used so far by the processes a benchmark involves, in clock ticks: this process
/// and its descendants (nodes and load generators in process, any `holdpoint serve` child),
/// and every PostgreSQL server process (`postgres`: the postmaster, its background processes
/// and a backend per connection).
///
/// Each process is counted with its reaped children (`utime + stime + cutime + cstime`), so a
/// process that ends between two readings still counts, in its parent: a backend alive at
/// both counts its difference; one that ended counts its whole life in the postmaster's
/// children's time, less what it had used at the first reading; one that started counts from
/// nothing. Missed: a process whose parent is in neither set and never reaps it. Counted when
/// it should not be: other clients' PostgreSQL sessions on the same server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Involved {
    /// This process and its descendants.
    pub ours: u64,
    /// PostgreSQL's server processes (not among ours).
    pub postgres: u64,
}

impl Involved {
    /// Now; `None` where `/proc` cannot be read (not Linux, say).
    pub fn now() -> Option<Involved> {
        let mut processes = Vec::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            // A process can end between the listing and the read.
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some(process) = Process::parse(&stat) {
                processes.push((pid, process));
            }
        }
        Some(Involved::of(std::process::id(), &processes))
    }

    /// The sums over `processes` (each with its pid) for the process `me`.
    fn of(me: u32, processes: &[(u32, Process)]) -> Involved {
        let children: HashMap<u32, Vec<u32>> =
            processes.iter().fold(HashMap::new(), |mut map, (pid, p)| {
                map.entry(p.parent).or_default().push(*pid);
                map
            });
        let mut ours = vec![me];
        let mut at = 0;
        while let Some(&pid) = ours.get(at) {
            ours.extend(children.get(&pid).into_iter().flatten().copied());
            at += 1;
        }
        let mut sum = Involved::default();
        for (pid, p) in processes {
            if ours.contains(pid) {
                sum.ours += p.ticks;
            } else if matches!(p.name, ProcessName::Postgres) {
                sum.postgres += p.ticks;
            }
        }
        sum
    }

    /// What the processes used from `self` to `later`, as shares of the machine's CPUs
    /// (`machine` are the machine's readings at the same two moments).
    pub fn until(self, later: Involved, machine: (CpuTimes, CpuTimes)) -> Option<InvolvedShares> {
        let (before, after) = machine;
        Some(InvolvedShares {
            ours: before.share_until(after, later.ours.checked_sub(self.ours)?)?,
            postgres: before.share_until(after, later.postgres.checked_sub(self.postgres)?)?,
        })
    }
}

/// The CPU time of the processes involved between two readings, as shares of the machine's
/// CPUs (as [`CpuTimes::busy_until`]'s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InvolvedShares {
    pub ours: f64,
    pub postgres: f64,
}

impl InvolvedShares {
    pub fn total(self) -> f64 {
        self.ours + self.postgres
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcessName {
    Postgres,
    Other,
}

/// What counts of one line of `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Process {
    name: ProcessName,
    parent: u32,
    /// Its CPU time and its reaped children's, in clock ticks.
    ticks: u64,
}

impl Process {
    /// `pid (comm) state ppid …`: the name may hold spaces and parentheses, so the fields are
    /// counted from its last `)`; utime, stime, cutime and cstime are the 14th to 17th.
    fn parse(stat: &str) -> Option<Process> {
        let (head, rest) = stat.rsplit_once(')')?;
        let (_, comm) = head.split_once('(')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let parent = fields.get(1)?.parse().ok()?;
        let ticks = fields
            .get(11..15)?
            .iter()
            .map(|t| t.parse::<u64>().ok())
            .sum::<Option<u64>>()?;
        let name = match comm {
            "postgres" | "postmaster" => ProcessName::Postgres,
            _ => ProcessName::Other,
        };
        Some(Process {
            name,
            parent,
            ticks,
        })
    }
}

/// One process's CPU time so far, with its reaped children's, in clock ticks; `None` once
/// it is gone (or where `/proc` cannot be read).
pub fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(Process::parse(&stat)?.ticks)
}

/// The machine's CPUs, for saying how many the share is of.
pub fn count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two readings of the machine: 150 of 200 ticks busy between them.
    const READINGS: (CpuTimes, CpuTimes) = (
        CpuTimes {
            busy: 100,
            total: 400,
        },
        CpuTimes {
            busy: 250,
            total: 600,
        },
    );

    #[test]
    fn the_share_is_of_the_time_between_two_readings() {
        let (before, after) = READINGS;
        assert_eq!(before.busy_until(after), Some(0.75));
        assert_eq!(after.busy_until(before), None, "readings out of order");
        assert_eq!(after.busy_until(after), None, "no time between them");
    }

    #[test]
    fn a_process_line_gives_its_parent_and_its_time_with_its_reaped_childrens() {
        let line = "4242 (postgres) S 26328 26328 26328 0 -1 4194368 1210 0 0 0 \
                    31 7 5 2 20 0 1 0 5571290 224538624 2900 18446744073709551615";
        assert_eq!(
            Process::parse(line),
            Some(Process {
                name: ProcessName::Postgres,
                parent: 26328,
                ticks: 31 + 7 + 5 + 2,
            })
        );
        // A name with spaces and parentheses of its own.
        let odd = "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7 8";
        let odd = Process::parse(odd).unwrap();
        assert_eq!(
            (odd.name, odd.parent, odd.ticks),
            (ProcessName::Other, 1, 10)
        );
        assert_eq!(Process::parse("7 (short) R 1 2 3"), None);
    }

    #[test]
    fn ours_are_this_process_and_its_descendants_and_postgres_is_the_rest_of_its_name() {
        let p = |name, parent, ticks| Process {
            name,
            parent,
            ticks,
        };
        use ProcessName::{Other, Postgres};
        let processes = [
            (1, p(Other, 0, 1000)),
            (10, p(Other, 1, 100)),   // the bench
            (11, p(Other, 10, 20)),   // a `holdpoint serve` child
            (12, p(Other, 11, 3)),    // its child
            (13, p(Other, 1, 50)),    // unrelated
            (20, p(Postgres, 1, 40)), // the postmaster
            (21, p(Postgres, 20, 5)), // a backend
            (30, p(Postgres, 10, 7)), // a postgres the bench started: ours, once
        ];
        assert_eq!(
            Involved::of(10, &processes),
            Involved {
                ours: 100 + 20 + 3 + 7,
                postgres: 40 + 5,
            }
        );
    }

    #[test]
    fn the_processes_time_is_a_share_of_the_machines() {
        let machine = READINGS;
        let before = Involved {
            ours: 10,
            postgres: 5,
        };
        let after = Involved {
            ours: 110,
            postgres: 55,
        };
        let shares = before.until(after, machine).unwrap();
        assert_eq!(shares.ours, 0.5);
        assert_eq!(shares.postgres, 0.25);
        assert_eq!(shares.total(), 0.75);
        assert_eq!(after.until(before, machine), None, "readings out of order");
    }

    #[test]
    fn this_process_is_found_and_its_time_grows() {
        let before = Involved::now().unwrap();
        // Spins until a clock tick of its time is counted (a busy machine gives it less
        // than the wall's time).
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut after = before;
        while after.ours == before.ours && std::time::Instant::now() < give_up {
            let spin = std::time::Instant::now() + std::time::Duration::from_millis(20);
            while std::time::Instant::now() < spin {
                std::hint::spin_loop();
            }
            after = Involved::now().unwrap();
        }
        assert!(after.ours > before.ours, "{before:?} then {after:?}");
    }
}
