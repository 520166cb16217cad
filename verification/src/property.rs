//! The properties the models check, each with a stable id that its failure
//! message carries (`[property <id>]`). A negative control counts as caught
//! only when its child fails with the property the suite names for that
//! mutant: the id is read back out of the child's panic message, so a model
//! that fails for another reason (a broken setup, a different check, a
//! crash) does not count.
//!
//! Checks are written with [`check!`](crate::check) (an `assert!` whose
//! message is tagged) and [`violated!`](crate::violated) (a tagged `panic!`).

use std::fmt;

/// A property a model checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// The tree accepts every event of a strict stream (no refusal such as a
    /// parent block not found: a lost or misplaced block shows here first).
    Accepted,
    /// A read during the writes stays within the scenario's score bounds.
    ReadBounds,
    /// Every read is a state the structure was in: the scores before or
    /// after a write, a gate view that is neither torn nor shows a pair below
    /// the length it read that was never written.
    AtomicRead,
    /// The final state (dump, node count, scores) is one of the serial
    /// outcomes of the same events.
    SerialOutcome,
    /// A lane's read after its own store credits the blocks it stored
    /// (no state older than one the caller already produced).
    ReadYourWrites,
    /// The fast path is taken exactly as often as the model designs.
    FastHits,
    /// Of two appenders racing on one tail, exactly one wins and the other
    /// misses.
    OneAppendWins,
    /// Nothing is freed while a pinned reader may still hold it, and nothing
    /// is freed twice (the grace-period reclaimer with its quarantine; also
    /// loom's own report of an `Arc` released more often than it was
    /// cloned).
    NoFreeWhileHeld,
    /// No data race on non-atomic memory (loom's causality check on its
    /// `UnsafeCell`s: a load and a store, or two stores, unordered by
    /// happens-before).
    RaceFree,
    /// At most one stale-leaf sweep is in flight.
    OneSweep,
    /// No due sweep is lost and the in-flight flag is never left set.
    SweepNotLost,
    /// Every coverage bit a rank's writes leave behind is credited to that
    /// rank: no write with a slot the rank lost (and another rank may own)
    /// outlives the removal's sweep.
    SlotOwned,
}

impl Property {
    /// Every property.
    pub const ALL: [Property; 12] = [
        Property::Accepted,
        Property::ReadBounds,
        Property::AtomicRead,
        Property::SerialOutcome,
        Property::ReadYourWrites,
        Property::FastHits,
        Property::OneAppendWins,
        Property::NoFreeWhileHeld,
        Property::RaceFree,
        Property::OneSweep,
        Property::SweepNotLost,
        Property::SlotOwned,
    ];

    /// The stable id in failure messages and reports.
    pub const fn id(self) -> &'static str {
        match self {
            Property::Accepted => "accepted",
            Property::ReadBounds => "read-bounds",
            Property::AtomicRead => "atomic-read",
            Property::SerialOutcome => "serial-outcome",
            Property::ReadYourWrites => "read-your-writes",
            Property::FastHits => "fast-hits",
            Property::OneAppendWins => "one-append-wins",
            Property::NoFreeWhileHeld => "no-free-while-held",
            Property::RaceFree => "race-free",
            Property::OneSweep => "one-sweep",
            Property::SweepNotLost => "sweep-not-lost",
            Property::SlotOwned => "slot-owned",
        }
    }

    /// The property whose tag `message` carries first, or else the one a
    /// checker's own failure message in it reports, if any.
    pub fn in_message(message: &str) -> Option<Property> {
        let tagged = message.find(TAG).and_then(|at| {
            let id = message[at + TAG.len()..].split(']').next()?;
            Property::ALL.into_iter().find(|p| p.id() == id)
        });
        tagged.or_else(|| {
            CHECKER_MESSAGES
                .iter()
                .find(|(text, _)| message.contains(text))
                .map(|&(_, property)| property)
        })
    }
}

/// What opens a tagged failure message, before the id.
const TAG: &str = "[property ";

/// The checkers' own failure messages (not our `check!`s) and the property
/// each reports: loom's causality check on `UnsafeCell` accesses and its
/// count of an `Arc`'s references, and the checker reclaimer's double-retire
/// check (`crtc_strategies::checker_state::RETIRED_TWICE`: an object retired
/// while another writer still held it, about to be retired again).
const CHECKER_MESSAGES: [(&str, Property); 3] = [
    ("Causality violation", Property::RaceFree),
    ("Arc is already released", Property::NoFreeWhileHeld),
    (
        "an object was retired twice before its free ran",
        Property::NoFreeWhileHeld,
    ),
];

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TAG}{}]", self.id())
    }
}

/// `assert!` for a model check: `check!(Property::X, condition, "format",
/// args..)` panics with the message tagged with the property's id.
#[macro_export]
macro_rules! check {
    ($property:expr, $condition:expr, $($message:tt)+) => {
        if !$condition {
            $crate::violated!($property, $($message)+);
        }
    };
}

/// `panic!` for a model check that failed: `violated!(Property::X,
/// "format", args..)`.
#[macro_export]
macro_rules! violated {
    ($property:expr, $($message:tt)+) => {
        ::std::panic!(
            "{} {}",
            {
                let property: $crate::property::Property = $property;
                property
            },
            ::std::format_args!($($message)+)
        )
    };
}

#[cfg(test)]
mod tests {
    use super::Property;

    #[test]
    fn ids_are_distinct_and_read_back() {
        for p in Property::ALL {
            let message = format!("{p} L1: the reader saw something else");
            assert_eq!(Property::in_message(&message), Some(p));
            let same = Property::ALL.iter().filter(|q| q.id() == p.id()).count();
            assert_eq!(same, 1, "{p} is not unique");
        }
        assert_eq!(Property::in_message("index out of bounds"), None);
        assert_eq!(
            Property::in_message("Causality violation: Concurrent load and mut accesses."),
            Some(Property::RaceFree)
        );
        assert_eq!(Property::in_message("[property nonsense] x"), None);
    }
}
