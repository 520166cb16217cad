//! Stale-leaf sweep scheduling: the lanes' tallies, the shared estimates,
//! and the volume and timer trigger that claims the one sweep in flight (the
//! sweep itself is `sweep`).
//!
//! Protocol.
//!
//! *Tallies.* Each lane counts, locally, blocks it linked into the tree and
//! blocks it left on holder-less nodes (negative when a store revives one).
//! The tree folds a lane's tally into two shared estimates (`linked`, `dead`)
//! only when one delta reached [`FOLD_THRESHOLD`] in magnitude, or when forced
//! (an idle lane, a flush, before a sweep), so no event pays a shared
//! read-modify-write. Estimates are read clamped at zero: a fold racing a
//! sweep's overwrite may drive them low.
//!
//! *Scheduling* ([`SweepTrigger::try_claim`]). The volume rule reads two
//! atomics: a sweep is due when `dead > 0` and `dead ≥ max((linked − dead) /
//! 8, dead_floor)`; only then is the clock read, and the sweep must also
//! respect the duty-cycle gap `max(min_gap, 10 × last duration)` since the
//! last one finished. Otherwise the timer rule fires once `timer` passed
//! since the last finish. Either way the caller must win the one-in-flight
//! flag (compare-exchange false → true), so at most one sweep runs; the flag
//! is released when the sweep finishes or when the claim is cancelled, also
//! on unwinding. The indexer checks the volume rule alone on every enqueue
//! (no clock read in the common case) and both rules when a lane goes idle.

use super::sweep::SweepStats;
use super::{Lane, Tree};
use crtc_strategies::mutant;
use crtc_strategies::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use crtc_strategies::ShapeGate;
use std::time::Duration;

/// A lane folds its tally once a delta reaches this magnitude.
pub const FOLD_THRESHOLD: i64 = 1024;

/// When stale-leaf sweeps run: by volume (dead blocks against live ones),
/// by a timer, both, or never. This schedules the sweep that unlinks
/// holder-less leaves; freeing unlinked nodes is the reclaimer's job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPolicy {
    /// Schedule sweeps by volume (dead blocks against live ones).
    pub volume: bool,
    /// Fewest dead blocks that make a volume sweep due.
    pub dead_floor: u64,
    /// Shortest time between the end of one volume sweep and the next.
    pub min_gap: Duration,
    /// Sweep at least this often (`None`: no timer).
    pub timer: Option<Duration>,
}

impl Default for SweepPolicy {
    fn default() -> Self {
        Self {
            volume: true,
            dead_floor: 65_536,
            min_gap: Duration::from_millis(100),
            timer: Some(Duration::from_secs(300)),
        }
    }
}

impl SweepPolicy {
    /// Sweeps as soon as one block is dead, with no gap (tests, soaks).
    pub fn eager() -> Self {
        Self {
            volume: true,
            dead_floor: 1,
            min_gap: Duration::ZERO,
            timer: None,
        }
    }

    /// Never schedules a sweep (direct [`Tree::sweep_stale`] calls still run).
    pub fn disabled() -> Self {
        Self {
            volume: false,
            timer: None,
            ..Self::default()
        }
    }
}

/// Why a sweep was scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepReason {
    /// Dead blocks crossed the volume rule.
    Volume,
    /// The timer expired.
    Timer,
    /// A direct request ([`Tree::sweep_stale`]).
    Forced,
}

/// The one-in-flight flag, won by a scheduler. Pass it to `run_sweep` or
/// `cancel_sweep` (the tree's, or `TreeHooks` in `crate::harness`);
/// dropping it otherwise leaves the flag set.
#[must_use = "a claim holds the one-in-flight flag until run or cancelled"]
#[derive(Debug)]
pub struct SweepClaim {
    /// Why the sweep was scheduled.
    pub reason: SweepReason,
}

/// The shared estimates, the one-in-flight flag and the duty-cycle record.
/// Time is passed in (microseconds on any monotone clock), so the rules can
/// be checked with a fixed clock.
#[derive(Debug)]
pub struct SweepTrigger {
    config: SweepPolicy,
    linked: AtomicI64,
    dead: AtomicI64,
    in_flight: AtomicBool,
    last_finish_us: AtomicU64,
    last_duration_us: AtomicU64,
    finished: AtomicU64,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl SweepTrigger {
    /// A trigger with empty estimates whose clock starts at 0.
    pub fn new(config: SweepPolicy) -> Self {
        Self {
            config,
            linked: AtomicI64::new(0),
            dead: AtomicI64::new(0),
            in_flight: AtomicBool::new(false),
            last_finish_us: AtomicU64::new(0),
            last_duration_us: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SweepPolicy {
        &self.config
    }

    /// Folds a lane's deltas into the estimates.
    pub fn add(&self, linked: i64, dead: i64) {
        // Relaxed: estimates only; nothing is published through them.
        self.linked.fetch_add(linked, Ordering::Relaxed);
        // Relaxed: as above.
        self.dead.fetch_add(dead, Ordering::Relaxed);
    }

    /// The estimates `(linked, dead)`, clamped at zero.
    pub fn estimates(&self) -> (u64, u64) {
        // Relaxed: estimates only.
        let linked = self.linked.load(Ordering::Relaxed).max(0) as u64;
        // Relaxed: estimates only.
        let dead = self.dead.load(Ordering::Relaxed).max(0) as u64;
        (linked, dead)
    }

    /// The volume rule, from the estimates alone (no clock).
    pub fn volume_ready(&self) -> bool {
        if !self.config.volume {
            return false;
        }
        let (linked, dead) = self.estimates();
        let live = linked.saturating_sub(dead);
        dead > 0 && dead >= (live / 8).max(self.config.dead_floor)
    }

    /// Whether the duty-cycle gap since the last sweep has passed at `now_us`.
    pub fn gap_elapsed(&self, now_us: u64) -> bool {
        // Relaxed: a scheduling heuristic; the flag orders the sweeps.
        let last = self.last_finish_us.load(Ordering::Relaxed);
        // Relaxed: as above.
        let duration = self.last_duration_us.load(Ordering::Relaxed);
        let gap = micros(self.config.min_gap).max(duration.saturating_mul(10));
        now_us.saturating_sub(last) >= gap
    }

    /// Whether the timer has expired at `now_us`.
    pub fn timer_expired(&self, now_us: u64) -> bool {
        // Relaxed: a scheduling heuristic.
        let last = self.last_finish_us.load(Ordering::Relaxed);
        self.config
            .timer
            .is_some_and(|t| now_us.saturating_sub(last) >= micros(t))
    }

    /// Claims the flag if a sweep is due by volume or by the timer;
    /// `now_us` is called at most once, and only when the volume rule holds
    /// or a timer is configured.
    pub fn try_claim(&self, now_us: impl FnOnce() -> u64) -> Option<SweepReason> {
        self.claim_if(now_us, true)
    }

    /// Like [`SweepTrigger::try_claim`] but by volume only: reads no clock
    /// unless the volume rule holds (the per-enqueue check).
    pub fn try_claim_volume(&self, now_us: impl FnOnce() -> u64) -> Option<SweepReason> {
        self.claim_if(now_us, false)
    }

    fn claim_if(&self, now_us: impl FnOnce() -> u64, timer: bool) -> Option<SweepReason> {
        let volume = self.volume_ready();
        let timer = timer && self.config.timer.is_some();
        if !volume && !timer {
            return None;
        }
        let now = now_us();
        let reason = if volume && self.gap_elapsed(now) {
            SweepReason::Volume
        } else if timer && self.timer_expired(now) {
            SweepReason::Timer
        } else {
            return None;
        };
        self.claim().then_some(reason)
    }

    /// Claims the flag unconditionally; false if a sweep is in flight.
    pub fn claim(&self) -> bool {
        if mutant!(RacySweepClaim) {
            return self.racy_claim();
        }
        // Acquire: pairs with the Release that freed the flag, so the last
        // sweep's overwrite of the estimates is visible to this one.
        self.in_flight
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Negative control (mutant `RacySweepClaim`, reached in checker builds
    /// only): a load, then a store, so two schedulers that both load `false`
    /// both win.
    fn racy_claim(&self) -> bool {
        // Acquire: as in `claim`.
        if self.in_flight.load(Ordering::Acquire) {
            return false;
        }
        // Relaxed: broken on purpose; the load above decided.
        self.in_flight.store(true, Ordering::Relaxed);
        true
    }

    /// Whether a sweep is in flight.
    pub fn in_flight(&self) -> bool {
        // Acquire: pairs with the Release that frees the flag.
        self.in_flight.load(Ordering::Acquire)
    }

    /// Records a finished sweep: overwrites the estimates with its recount,
    /// records its end and duration, and frees the flag.
    pub fn finish(&self, now_us: u64, duration_us: u64, linked: u64, dead: u64) {
        // Relaxed (all four): published by the Release below.
        self.linked.store(linked as i64, Ordering::Relaxed);
        self.dead.store(dead as i64, Ordering::Relaxed);
        self.last_finish_us.store(now_us, Ordering::Relaxed);
        self.last_duration_us.store(duration_us, Ordering::Relaxed);
        // Relaxed: a statistic.
        self.finished.fetch_add(1, Ordering::Relaxed);
        if mutant!(SweepFinishKeepsFlag) {
            return;
        }
        // Release: the next claimer sees the overwritten estimates.
        self.in_flight.store(false, Ordering::Release);
    }

    /// Frees the flag without recording a sweep.
    pub fn cancel(&self) {
        // Release: pairs with the Acquire of the next claim.
        self.in_flight.store(false, Ordering::Release);
    }

    /// Number of sweeps finished.
    pub fn finished(&self) -> u64 {
        // Relaxed: a statistic.
        self.finished.load(Ordering::Relaxed)
    }
}

/// Frees the flag if the sweep ends without finishing (unwinding).
pub(super) struct FlagGuard<'a> {
    pub(super) trigger: &'a SweepTrigger,
    pub(super) armed: bool,
}

impl Drop for FlagGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.trigger.cancel();
        }
    }
}

impl<G: ShapeGate> Tree<G> {
    /// Folds `lane`'s tally into the shared estimates if a delta is large,
    /// or whenever it is non-zero with `force`.
    pub(crate) fn fold_tally(&self, lane: &mut Lane<G>, force: bool) {
        let tally = lane.tally();
        let large = tally.linked.abs() >= FOLD_THRESHOLD || tally.dead.abs() >= FOLD_THRESHOLD;
        let pending = tally.linked != 0 || tally.dead != 0;
        if large || (force && pending) {
            let tally = lane.take_tally();
            self.trigger.add(tally.linked, tally.dead);
        }
    }

    /// The shared reclamation estimates `(linked, dead)` in blocks.
    pub(crate) fn reclaim_estimates(&self) -> (u64, u64) {
        self.trigger.estimates()
    }

    /// The trigger (estimates, flag and duty-cycle record).
    pub(crate) fn sweep_trigger(&self) -> &SweepTrigger {
        &self.trigger
    }

    pub(super) fn now_us(&self) -> u64 {
        micros(self.created.elapsed())
    }

    /// Claims a sweep if one is due (volume or timer) and none is in flight.
    pub(crate) fn sweep_due(&self) -> Option<SweepClaim> {
        self.trigger
            .try_claim(|| self.now_us())
            .map(|reason| SweepClaim { reason })
    }

    /// Claims a sweep if one is due by volume; reads no clock unless the
    /// volume rule holds. Cheap enough for every enqueue.
    pub(crate) fn sweep_due_by_volume(&self) -> Option<SweepClaim> {
        self.trigger
            .try_claim_volume(|| self.now_us())
            .map(|reason| SweepClaim { reason })
    }

    /// Gives a claim back without sweeping (e.g. the task could not be sent).
    pub(crate) fn cancel_sweep(&self, claim: SweepClaim) {
        let SweepClaim { .. } = claim;
        self.trigger.cancel();
    }

    /// Sweeps now unless a sweep is in flight (then `None`).
    pub fn sweep_stale(&self) -> Option<SweepStats> {
        self.trigger.claim().then(|| {
            self.run_sweep(SweepClaim {
                reason: SweepReason::Forced,
            })
        })
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::*;

    fn trigger(floor: u64, gap_ms: u64, timer_ms: Option<u64>) -> SweepTrigger {
        SweepTrigger::new(SweepPolicy {
            volume: true,
            dead_floor: floor,
            min_gap: Duration::from_millis(gap_ms),
            timer: timer_ms.map(Duration::from_millis),
        })
    }

    #[test]
    fn volume_rule_needs_an_eighth_of_live_and_the_floor() {
        let t = trigger(4, 0, None);
        t.add(100, 3);
        assert!(!t.volume_ready(), "below the floor");
        t.add(0, 7);
        assert!(!t.volume_ready(), "10 dead < 90 live / 8");
        t.add(0, 1);
        assert!(t.volume_ready(), "11 dead >= 89 live / 8");
        assert!(!SweepTrigger::new(SweepPolicy::disabled()).volume_ready());
    }

    #[test]
    fn volume_and_timer_share_one_in_flight_sweep() {
        let t = trigger(1, 0, Some(1));
        t.add(10, 10);
        assert_eq!(t.try_claim(|| 5_000), Some(SweepReason::Volume));
        assert_eq!(t.try_claim(|| 5_000), None, "one in flight");
        assert!(!t.claim());
        t.finish(6_000, 10, 0, 0);
        assert!(!t.in_flight());
        assert_eq!(t.try_claim(|| 7_000), Some(SweepReason::Timer));
        t.cancel();
        assert!(!t.in_flight());
    }

    #[test]
    fn the_volume_check_reads_no_clock_unless_volume_holds() {
        let t = trigger(4, 0, Some(1));
        t.add(100, 1);
        let clock = || -> u64 { panic!("the clock was read") };
        assert_eq!(t.try_claim_volume(clock), None);
        assert_eq!(t.try_claim(|| 5_000), Some(SweepReason::Timer));
    }

    #[test]
    fn gap_rule_spaces_volume_sweeps() {
        let t = trigger(1, 0, None);
        t.add(4, 4);
        assert!(t.claim());
        t.finish(1_000, 20, 4, 4);
        assert_eq!(t.try_claim(|| 1_199), None, "10 × 20 µs not yet over");
        assert_eq!(t.try_claim(|| 1_200), Some(SweepReason::Volume));
        let gapped = trigger(1, 1, None);
        gapped.add(4, 4);
        assert!(gapped.claim());
        gapped.finish(2_000, 1, 4, 4);
        assert_eq!(gapped.try_claim(|| 2_999), None, "the 1 ms gap wins");
        assert_eq!(gapped.try_claim(|| 3_000), Some(SweepReason::Volume));
    }

    #[test]
    fn estimates_are_clamped_and_overwritten() {
        let t = trigger(1, 0, None);
        t.add(-5, -5);
        assert_eq!(t.estimates(), (0, 0));
        t.add(20, 8);
        assert!(t.claim());
        t.finish(1, 1, 12, 0);
        assert_eq!(t.estimates(), (12, 0));
        assert_eq!(t.finished(), 1);
    }
}
