//! Negative controls: each mutant of `crtc_strategies::mutants` is run in a
//! child process of the test binary
//! against the models named to catch it, and counts as caught only when the
//! child fails with the [`Property`] the suite names for it: the property's
//! id is read from the child's panic message. A child that passes, fails
//! another check, or dies by a signal has not caught the mutant, and a
//! mutant no model caught fails the test. The property must be tagged in
//! the child's first panic message (its root cause): an untagged panic
//! followed by a tagged one, or a tag elsewhere in its output, is not a
//! catch.
//!
//! Protocol between parent and child: the parent re-runs its own test
//! binary's test (exact name, one thread) with [`CHILD_ENV`] set to
//! `"<mutant id> <model>"`; the child selects the mutant, runs the model,
//! catches its panic and prints one line `crtc-mutant-verdict: caught
//! <model> <the caught payload's property id or "untagged">` or `...
//! survived <model>: <detail>`; the parent judges a failed child by its
//! first panic message, not by that id.
//! A child process confines what a failed model leaves behind (abandoned
//! threads, checker bookkeeping, the process-wide mutant switch) to one run.

use super::Suite;
use crate::property::Property;
use crtc_strategies::mutants::Mutant;
use std::process::Command;
use std::time::Instant;

/// Selects a mutant for its lifetime; dropping it (also while unwinding)
/// selects [`Mutant::None`] again.
#[derive(Debug)]
pub struct MutantGuard(());

impl MutantGuard {
    /// Selects `mutant`.
    pub fn select(mutant: Mutant) -> Self {
        mutant.select();
        Self(())
    }
}

impl Drop for MutantGuard {
    fn drop(&mut self) {
        Mutant::None.select();
    }
}

/// Environment variable through which a parent test hands a child process
/// its negative control: `"<mutant id> <model name>"`.
pub const CHILD_ENV: &str = "CRTC_MUTANT_CHILD";

/// The line a child prints with its verdict.
const VERDICT: &str = "crtc-mutant-verdict:";

/// What must catch a negative control: the property whose check must fail,
/// and the models that may show it (tried in order).
#[derive(Clone, Debug)]
pub struct Catch {
    /// The property.
    pub property: Property,
    /// The models.
    pub models: Vec<&'static str>,
}

impl Catch {
    /// `property`, shown by one of `models`.
    pub fn new(property: Property, models: &[&'static str]) -> Self {
        Self {
            property,
            models: models.to_vec(),
        }
    }
}

/// One negative control: a mutant, its label in reports, and what must
/// catch it.
#[derive(Clone, Debug)]
pub struct Control {
    /// The mutant the child selects.
    pub mutant: Mutant,
    /// The name in reports.
    pub label: String,
    /// What must catch it.
    pub catch: Catch,
}

/// How a negative-control child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildOutcome {
    /// The model passed.
    Survived,
    /// The model failed a check tagged with this property (`None`: a panic
    /// without a property tag, such as an index out of bounds).
    Failed(Option<Property>),
    /// The child died without a verdict (a signal, an abort).
    Crashed,
}

/// What a negative-control child reported.
#[derive(Clone, Debug)]
pub struct ChildVerdict {
    /// How it ended.
    pub outcome: ChildOutcome,
    /// The child's own summary, or its exit status when it crashed.
    pub detail: String,
    /// The first panic message the child printed, if any.
    pub panic: Option<String>,
}

/// The negative control this process was started for, if it is a child:
/// `(mutant, model name)`.
pub fn child_request() -> Option<(Mutant, String)> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    let (id, model) = spec.split_once(' ')?;
    let mutant = Mutant::by_id(id.parse().ok()?)?;
    Some((mutant, model.to_string()))
}

/// In a child: selects `mutant`, runs `model` (which panics when a check
/// fails), and prints the verdict with the failed property for the parent.
/// The process ends right after, so the checker state a failed model leaves
/// behind is never reused.
pub fn child_run(mutant: Mutant, model: &str, run: impl FnOnce() -> String) {
    let guard = MutantGuard::select(mutant);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    drop(guard);
    match result {
        Ok(detail) => println!("{VERDICT} survived {model}: {detail}"),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            let property = Property::in_message(message).map_or("untagged", Property::id);
            println!("{VERDICT} caught {model} {property}");
        }
    }
}

/// In the parent: re-runs this test binary's test `test` (exact name, one
/// thread) with `mutant` and `model` selected, and returns its verdict: a
/// failed child's property is the one its first panic message carries
/// (`None` when that message has no tag).
pub fn spawn_child(test: &str, mutant: Mutant, model: &str) -> ChildVerdict {
    spawn_child_with(test, mutant, model, &[])
}

/// [`spawn_child`] with the environment variables `env` set in the child
/// (a checker knob the control depends on).
pub fn spawn_child_with(
    test: &str,
    mutant: Mutant,
    model: &str,
    env: &[(&str, &str)],
) -> ChildVerdict {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{} {model}", mutant as u8))
        .envs(env.iter().copied())
        .output()
        .expect("start the child test process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let root = first_panic(&stderr).or_else(|| first_panic(&stdout));
    let panic = root
        .as_deref()
        .and_then(|m| m.lines().next())
        .map(|l| l.trim().chars().take(200).collect());
    let verdict = stdout
        .lines()
        .find_map(|l| l.split_once(VERDICT).map(|(_, v)| v.trim().to_string()));
    let Some(verdict) = verdict else {
        assert!(
            output.status.code().is_none(),
            "the child for mutant {mutant:?} / {model} printed no verdict (status {}):\n\
             --- stdout\n{stdout}\n--- stderr\n{stderr}",
            output.status
        );
        return ChildVerdict {
            outcome: ChildOutcome::Crashed,
            detail: format!("crashed ({})", output.status),
            panic,
        };
    };
    // The property is the root panic's own: the first panic message the
    // child printed must carry its tag. A later tagged panic (a check that
    // fails after an untagged panic broke the model), or a tag elsewhere in
    // the output, does not count, and neither does the payload the child
    // caught, which a checker or a thread join may have replaced.
    let outcome = match verdict.strip_prefix("caught ") {
        Some(_) => ChildOutcome::Failed(root.as_deref().and_then(Property::in_message)),
        None => ChildOutcome::Survived,
    };
    ChildVerdict {
        outcome,
        detail: verdict,
        panic,
    }
}

/// The message of the first panic in `output` (what the panic hook printed
/// after its `panicked at <location>:` line), up to the next line the hook,
/// the checkers or libtest print (`note:`, another thread's panic, shuttle's
/// failure report, a verdict, a test's status), if there is a panic.
fn first_panic(output: &str) -> Option<String> {
    const ENDS: [&str; 6] = [
        "note: ",
        "thread '",
        "Task failed",
        "test panicked in task",
        VERDICT,
        "test ",
    ];
    let mut lines = output.lines().skip_while(|l| !l.contains("panicked at"));
    lines.next()?;
    let message: Vec<&str> = lines
        .take_while(|l| !ENDS.iter().any(|end| l.starts_with(end)))
        .collect();
    Some(message.join("\n"))
}

impl Suite {
    /// The body of a negative-control test named `test`. In a child (see
    /// [`child_request`]) it runs the requested model under the requested
    /// mutant. In the parent it runs, for every control, its catching
    /// models in child processes until one fails with the control's
    /// property (every model of the suite if `CRTC_MUTANT_MATRIX=1`),
    /// prints one line per run and a summary line `"<checker> mutants
    /// <gate>: <k> of <n> caught"`, and fails if a control was not caught.
    pub fn expect_failures(&self, test: &str, controls: &[Control]) {
        if let Some((mutant, model)) = child_request() {
            let model = self.model(&model);
            child_run(mutant, model.name, || (model.run)());
            return;
        }
        let survivors: Vec<&str> = controls
            .iter()
            .filter(|control| !self.run_control(test, control))
            .map(|control| control.label.as_str())
            .collect();
        println!(
            "{} mutants {}: {} of {} caught",
            self.checker,
            self.gate,
            controls.len() - survivors.len(),
            controls.len()
        );
        assert!(
            survivors.is_empty(),
            "{} mutants no {} model caught by their property: {survivors:?}",
            self.gate,
            self.checker
        );
    }

    /// [`Suite::mutants`] for this loom suite's catalogued mutants: its
    /// lists in [`LOOM_SUITES`](super::suites::LOOM_SUITES), each mutant
    /// caught as [`loom_catch`](super::suites::loom_catch) says. Before any
    /// child runs, every catcher must be a model of this suite that can fail
    /// its property.
    pub fn loom_controls(&self, test: &str) {
        let mutants = super::suites::loom_mutants(self.gate);
        if child_request().is_none() {
            for &mutant in &mutants {
                let catch = super::suites::loom_catch(mutant);
                for model in &catch.models {
                    self.model(model);
                    assert!(
                        super::suites::loom_can_emit(model, catch.property),
                        "{mutant:?}: catcher {model} cannot fail {}",
                        catch.property.id()
                    );
                }
            }
        }
        self.mutants(test, &mutants, super::suites::loom_catch);
    }

    /// [`Suite::expect_failures`] for `mutants`, each labelled with its name
    /// and caught as `catch(mutant)` says.
    pub fn mutants(&self, test: &str, mutants: &[Mutant], catch: impl Fn(Mutant) -> Catch) {
        let controls: Vec<Control> = mutants
            .iter()
            .map(|&mutant| Control {
                mutant,
                label: format!("{mutant:?}"),
                catch: catch(mutant),
            })
            .collect();
        self.expect_failures(test, &controls);
    }

    /// Runs one control's catching models (or, in matrix mode, every model)
    /// and prints one line per run; returns whether one caught it.
    fn run_control(&self, test: &str, control: &Control) -> bool {
        let matrix = std::env::var("CRTC_MUTANT_MATRIX").is_ok_and(|v| v == "1");
        let models: Vec<&str> = if matrix {
            self.models.iter().map(|m| m.name).collect()
        } else {
            control.catch.models.clone()
        };
        let expected = control.catch.property;
        let mut caught = false;
        for model in models {
            let start = Instant::now();
            let verdict = spawn_child(test, control.mutant, model);
            let secs = start.elapsed().as_secs_f64();
            let label = &control.label;
            let gate = self.gate;
            let why = verdict.panic.unwrap_or_default();
            if let ChildOutcome::Failed(Some(p)) = verdict.outcome {
                assert!(
                    super::suites::can_emit(self.checker, model, p),
                    "{model} failed {} under {label}, which the catalogue (`loom_emits`, \
                     `SHUTTLE_EMITS`) says it cannot: fix it in models/suites.rs",
                    p.id()
                );
            }
            match verdict.outcome {
                ChildOutcome::Failed(Some(p)) if p == expected => {
                    println!(
                        "mutant {label} [{gate}]: caught by {model} on {} in {secs:.1} s ({why})",
                        expected.id()
                    );
                    caught = true;
                    if !matrix {
                        break;
                    }
                }
                ChildOutcome::Failed(other) => println!(
                    "mutant {label} [{gate}]: {model} failed, but not on {expected} \
                     (failed on {}) in {secs:.1} s ({why})",
                    other.map_or("an untagged panic", Property::id)
                ),
                ChildOutcome::Crashed => println!(
                    "mutant {label} [{gate}]: {model} crashed, not a verdict on {expected} \
                     in {secs:.1} s ({})",
                    verdict.detail
                ),
                ChildOutcome::Survived => println!(
                    "mutant {label} [{gate}]: survived {model} in {secs:.1} s ({})",
                    verdict.detail
                ),
            }
        }
        caught
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The property a child's output shows: its first panic message's tag.
    fn judged(output: &str) -> Option<Property> {
        first_panic(output)
            .as_deref()
            .and_then(Property::in_message)
    }

    #[test]
    fn only_the_first_panic_message_counts() {
        let tagged = "failing schedule:\n\"\n91a\"\nthread 'main' panicked at src/a.rs:1:1:\n\
                      [property read-bounds] C1: rank 1 scored 3\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(judged(tagged), Some(Property::ReadBounds));
        let untagged_first = "thread 'main' panicked at src/a.rs:1:1:\nindex out of bounds\n\
                              note: run with `RUST_BACKTRACE=1`\n\
                              thread 'main' panicked at src/b.rs:2:2:\n[property read-bounds] late\n";
        assert_eq!(judged(untagged_first), None);
        assert_eq!(
            judged("[property read-bounds] printed, never panicked"),
            None
        );
        let checker = "thread 'main' panicked at loom/src/rt/cell.rs:1:1:\n\
                       Causality violation: Concurrent read and write accesses.\n";
        assert_eq!(judged(checker), Some(Property::RaceFree));
    }
}
