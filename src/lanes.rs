//! Lane threads with sticky per-rank routing: the part of the [`Indexer`]
//! that is not about the tree, so the benchmarks' global-lock baseline runs
//! behind the same lanes (through `crate::harness`).
//!
//! Protocol. Each lane is an OS thread that drains its own FIFO channel of
//! tasks. A rank is routed to one lane, chosen round-robin the first time the
//! rank is seen and kept for the pool's lifetime, so one rank's tasks run in
//! order while lanes run concurrently. [`LaneThreads::broadcast`] sends every
//! lane a task carrying an acknowledgement channel and waits for each answer,
//! so everything enqueued before it has run. Dropping the pool closes every
//! channel and joins the threads once they drained their queues.
//!
//! [`Indexer`]: crate::Indexer

use crate::types::WorkerWithDpRank;
use crtc_strategies::sync::atomic::{AtomicUsize, Ordering};
use crtc_strategies::sync::mpsc::{channel, Receiver, Sender};
use crtc_strategies::sync::{thread, Mutex};
use rustc_hash::FxHashMap;

/// A pool of lane threads running tasks of type `T`.
#[derive(Debug)]
pub struct LaneThreads<T: Send + 'static> {
    tasks: Vec<Sender<T>>,
    threads: Vec<thread::JoinHandle<()>>,
    routes: Mutex<FxHashMap<WorkerWithDpRank, usize>>,
    next_lane: AtomicUsize,
}

impl<T: Send + 'static> LaneThreads<T> {
    /// Starts `count` lanes (at least 1), named `{prefix}{index}`; lane
    /// `index` runs `make(index)` on its task channel. A lane whose thread
    /// could not start drops its channel, so sends to it fail.
    pub fn spawn<W>(count: usize, prefix: &str, mut make: impl FnMut(usize) -> W) -> Self
    where
        W: FnOnce(Receiver<T>) + Send + 'static,
    {
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        for index in 0..count.max(1) {
            let (sender, receiver) = channel();
            let run = make(index);
            let spawned = thread::Builder::new()
                .name(format!("{prefix}{index}"))
                .spawn(move || run(receiver));
            tasks.push(sender);
            threads.extend(spawned.ok());
        }
        Self {
            tasks,
            threads,
            routes: Mutex::new(FxHashMap::default()),
            next_lane: AtomicUsize::new(0),
        }
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Always false: a pool has at least one lane.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The lane of `rank`, assigned round-robin on first sight.
    pub fn lane_of(&self, rank: WorkerWithDpRank) -> usize {
        *self.routes.lock().entry(rank).or_insert_with(|| {
            // Relaxed: only spreads ranks over lanes; the map lock orders the rest.
            self.next_lane.fetch_add(1, Ordering::Relaxed) % self.tasks.len()
        })
    }

    /// Enqueues `task` on `lane`; gives it back if the lane is gone.
    pub fn send(&self, lane: usize, task: T) -> Result<(), T> {
        self.tasks[lane].send(task).map_err(|unsent| unsent.0)
    }

    /// Sends every lane `task(ack)` and waits until each acknowledged (lanes
    /// that are gone are skipped).
    pub fn broadcast(&self, task: impl Fn(Sender<()>) -> T) {
        let acks: Vec<_> = (0..self.tasks.len())
            .filter_map(|lane| {
                let (ack, done) = channel();
                self.send(lane, task(ack)).ok().map(|()| done)
            })
            .collect();
        acks.into_iter().for_each(|done| {
            let _ = done.recv();
        });
    }
}

impl<T: Send + 'static> Drop for LaneThreads<T> {
    fn drop(&mut self) {
        self.tasks.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
