//! How busy the whole machine was while a level ran, from `/proc/stat`: every process counts
//! (the server, the load generator, PostgreSQL), and time waiting on the disk counts as idle.
//! A rate with CPU to spare is limited by waiting (round trips, flushes, a lock); one with
//! none, by the work itself.

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
        let total = later.total.checked_sub(self.total)?;
        let busy = later.busy.checked_sub(self.busy)?;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

/// The machine's CPUs, for saying how many the share is of.
pub fn count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_of_the_time_between_two_readings() {
        let (before, after) = (
            CpuTimes {
                busy: 100,
                total: 400,
            },
            CpuTimes {
                busy: 250,
                total: 600,
            },
        );
        assert_eq!(before.busy_until(after), Some(0.75));
        assert_eq!(after.busy_until(before), None, "readings out of order");
        assert_eq!(after.busy_until(after), None, "no time between them");
    }
}
