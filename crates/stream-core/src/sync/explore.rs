//! The bounded search every model-check program of braid runs under (the `model-check`
//! feature): every schedule of a program's threads that preempts a running thread at most a
//! given number of times, as CHESS does (Musuvathi and Qadeer, PLDI 2007). Switches at a
//! blocked lock are free; within the bound the search is exhaustive and deterministic.
//!
//! One copy for every crate's programs: `braid-conformance`'s `model_check` test (the front
//! layer, the allocator, the simulator) and `braid-backend-acl`'s (its device and stream
//! locks over a mocked ACL).

use shuttle::scheduler::{Schedule, Scheduler, Task, TaskId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Depth-first search over the schedules with at most `bound` preemptions. At each
/// scheduling point the choices are the running thread first (when it can go on), then,
/// while the schedule has preemptions left or when the running thread is blocked, every
/// other runnable thread.
struct PreemptionBounded {
    bound: usize,
    /// The choices made so far by the schedule being run: (the choices there, the one taken).
    levels: Vec<(Vec<TaskId>, usize)>,
    /// Scheduling points passed in the schedule being run.
    step: usize,
    /// Preemptions made in the schedule being run.
    preemptions: usize,
    runs: usize,
}

impl PreemptionBounded {
    /// A search allowing at most `bound` preemptions per schedule (`usize::MAX`: every
    /// schedule, as `shuttle::check_dfs`).
    fn new(bound: usize) -> Self {
        PreemptionBounded {
            bound,
            levels: Vec::new(),
            step: 0,
            preemptions: 0,
            runs: 0,
        }
    }
}

impl Scheduler for PreemptionBounded {
    fn new_execution(&mut self) -> Option<Schedule> {
        if self.runs > 0 {
            // Take the next choice at the deepest level that has one left.
            loop {
                let (choices, taken) = self.levels.last_mut()?;
                if *taken + 1 < choices.len() {
                    *taken += 1;
                    break;
                }
                self.levels.pop();
            }
        }
        self.runs += 1;
        self.step = 0;
        self.preemptions = 0;
        Some(Schedule::new(0))
    }

    fn next_task(
        &mut self,
        runnable: &[&Task],
        current: Option<TaskId>,
        _is_yielding: bool,
    ) -> Option<TaskId> {
        let running = current.filter(|c| runnable.iter().any(|t| t.id() == *c));
        if self.step == self.levels.len() {
            let mut choices: Vec<TaskId> = running.into_iter().collect();
            if running.is_none() || self.preemptions < self.bound {
                choices.extend(
                    runnable
                        .iter()
                        .map(|t| t.id())
                        .filter(|id| Some(*id) != running),
                );
            }
            self.levels.push((choices, 0));
        }
        let (choices, taken) = &self.levels[self.step];
        let next = choices[*taken];
        assert!(
            runnable.iter().any(|t| t.id() == next),
            "the program is not deterministic: a replayed choice is not runnable"
        );
        if running.is_some_and(|r| r != next) {
            self.preemptions += 1;
        }
        self.step += 1;
        Some(next)
    }

    fn next_u64(&mut self) -> u64 {
        panic!("the model-check programs use no shuttle randomness")
    }
}

/// Runs `program` in every schedule with at most `preemptions` preemptions; returns how many
/// there were.
pub fn explore(program: fn(), preemptions: usize) -> usize {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let runner = shuttle::Runner::new(
        PreemptionBounded::new(preemptions),
        shuttle::Config::default(),
    );
    runner.run(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        program();
    });
    runs.load(Ordering::Relaxed)
}

/// [`explore`]s `program` and checks that each of `outcomes` (a name, and the counter the
/// program bumps when a schedule ends that way) was reached in some schedule: a program whose
/// race can end two ways proves little if the search never saw one of them. Prints `what`
/// with the number of schedules run, and returns it.
pub fn explore_reaching(
    what: &str,
    program: fn(),
    preemptions: usize,
    outcomes: &[(&str, &AtomicUsize)],
) -> usize {
    let runs = explore(program, preemptions);
    let counts: Vec<String> = outcomes
        .iter()
        .map(|(name, count)| format!("{name} in {}", count.load(Ordering::Relaxed)))
        .collect();
    assert!(
        outcomes
            .iter()
            .all(|(_, count)| count.load(Ordering::Relaxed) > 0),
        "{what}: an outcome was never reached in {runs} schedules ({})",
        counts.join(", ")
    );
    eprintln!(
        "{what}: {runs} interleavings explored ({})",
        counts.join(", ")
    );
    runs
}
