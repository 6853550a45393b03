//! What the disk under the benchmark charges for durability.
//!
//! Every acknowledged write waits for an fdatasync of the WAL, so the durable figures move with
//! the disk: on the same two cores, a period when this fsync cost 0.14 ms gave an HTTP cycle
//! p50 near 1.1 ms, one when it cost 0.04–0.05 ms gave 0.5 ms. Printing the probe next to the
//! figures says which kind of disk they were measured on.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::stats::{Latencies, ms};

/// About what one lone hold write adds to the WAL (fourteen frames of a 4 KiB page).
const WRITE: usize = 56 * 1024;
/// Slots the probe cycles through: the WAL too is overwritten in place once it starts over.
const SLOTS: u64 = 16;
const ROUNDS: usize = 200;

/// The p50 and p99 of writing `WRITE` bytes over existing data and then fdatasync.
fn probe(dir: &Path) -> std::io::Result<Latencies> {
    let path = dir.join("disk-probe");
    let file = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let block = vec![0x5a_u8; WRITE];
    for slot in 0..SLOTS {
        file.write_all_at(&block, slot * WRITE as u64)?;
    }
    file.sync_all()?;
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let start = Instant::now();
        file.write_all_at(&block, (round as u64 % SLOTS) * WRITE as u64)?;
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(Latencies::new(samples))
}

/// Prints the probe's figures as a header line of a durable benchmark.
///
/// Returns the p50, when the probe ran.
pub fn describe(dir: &Path) -> Option<std::time::Duration> {
    match probe(dir) {
        Ok(lat) => {
            println!(
                "   disk: {} KiB overwritten + fdatasync   p50 {}   p99 {}",
                WRITE / 1024,
                ms(lat.percentile(50.0)),
                ms(lat.percentile(99.0))
            );
            Some(lat.percentile(50.0))
        }
        Err(e) => {
            println!("   disk: the fsync probe failed ({e})");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_probe_times_every_round_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let lat = probe(dir.path()).unwrap();
        assert_eq!(lat.len(), ROUNDS);
        assert!(lat.percentile(50.0) > Duration::ZERO);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
