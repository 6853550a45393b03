//! The crash loop (`holdpoint_test_support::chaos`) with a few kills: `holdpoint serve` killed
//! with SIGKILL at random moments under load and started again; nothing acknowledged lost,
//! nothing decided or run twice, no deadline missed, every stream client resumed without a
//! gap, the audit log intact. `scripts/chaos` runs the same loop with more kills.

use holdpoint_test_support::chaos;

/// Kills per run: enough to hit each kind of moment, cheap enough for every run of the suite.
const KILLS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_again_and_again_under_load_the_server_loses_nothing_and_does_nothing_twice() {
    let seed = std::env::var("HOLDPOINT_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(chaos::fresh_seed);
    let report = chaos::run_in(
        &std::env::temp_dir(),
        env!("CARGO_BIN_EXE_holdpoint").into(),
        KILLS,
        seed,
    )
    .await;
    assert!(report.ok(), "seed {seed}:\n{report}");
    // The load reached every part the checks look at.
    for what in [
        "holds acknowledged to agents",
        "decisions acknowledged to people",
        "turns started",
        "tool calls run (result executed, one line)",
        "live-stream resumptions with Last-Event-ID",
        "  of which expired at their deadline",
    ] {
        assert!(report.get(what) > 0, "no {what}:\n{report}");
    }
}
