//! Collective MPI-IO in virtual time: every rank runs lanefs-mpiio's
//! two-phase I/O ([`TwoPhase`]), the code a job under `mpirun` runs, as a
//! future this loop polls.
//!
//! A rank's [`SimIo`] posts each operation to the [`Hub`] and waits for its
//! answer:
//! - a barrier or all-gather (the call's requests, the close's counters)
//!   completes `ceil(log2 n)` MPI latencies after every rank has posted it;
//! - a round's all-to-all, once every rank with a part in it has posted it
//!   (a rank with none goes on to its next: the plan says who takes part,
//!   as Open MPI's linear all-to-all skips empty messages), when its
//!   messages have crossed the simulated network
//!   ([`crate::world::World::mpi_send`]: each node's links carry one
//!   message at a time; on one host each is a copy on its cores; above
//!   the eager limit one to a sleeping rank waits for its next test), for
//!   the ranks that send or receive them. A round
//!   starts when all its ranks are in, as ROMIO's rounds do (each begins
//!   with an all-to-all of sizes);
//! - a file operation goes to the rank's node's client, and completes when
//!   the client answers (a read's copy into the rank's buffer added);
//! - lock requests (lockahead, lock-no-expand) are sent, not waited for.
//!
//! The loop polls a rank's future when an answer for it is due, then
//! carries out what it posted, in order. Data is [`Phantom`]: lengths, no
//! bytes.

use super::{Collective, Ev, PhaseSpec, Run, SimError, St, WorkEv};
use crate::cpu_ledger::CpuUse;
use crate::mpi_waits::{self, MpiWaits, Wake};
use crate::world::{plus, transfer};
use lanefs_core::client::ladvise::Advice;
use lanefs_core::client::OpOutput;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::Payload;
use lanefs_core::units::{Duration, Instant};
use lanefs_mpiio::comm::CommError;
use lanefs_mpiio::plan::aggregator_ranks;
use lanefs_mpiio::plan::{plan_collective, CollectivePlan};
use lanefs_mpiio::two_phase::{DataOf, ExchangeId, Part, Phantom, RankIo, Requests, Striping, TwoPhase};
use lanefs_mpiio::{CloseReport, CollectiveError};
use rand::Rng;
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What a rank's two-phase code asked of its world.
#[derive(Debug)]
enum Post {
    Barrier,
    Allgather(Vec<u8>),
    /// This rank's request of a collective call, gathered from every rank.
    Request {
        offset: u64,
        len: u64,
    },
    /// A round's all-to-all: `(rank, bytes)` of each message this rank
    /// sends and receives.
    Exchange {
        id: ExchangeId,
        sends: Vec<(u32, u64)>,
        receives: Vec<(u32, u64)>,
    },
    Write {
        offset: u64,
        len: u64,
    },
    Read {
        offset: u64,
        len: u64,
    },
    /// Lock requests, sent without waiting.
    Advise(Vec<Advice>),
    GroupLock(u64),
    GroupUnlock(u64),
    Sync,
    /// The rank's transfers (and its sync) are over: IOR's close begins.
    TransfersDone,
    /// A collective call of the rank's returned, having moved `bytes` of
    /// its own (posted only while the run records its time series).
    Transferred {
        write: bool,
        bytes: u64,
    },
}

impl Post {
    /// Posted by every rank, and answered when all have.
    fn is_global(&self) -> bool {
        matches!(self, Post::Barrier | Post::Allgather(_) | Post::Request { .. })
    }
}

#[derive(Debug)]
enum Answer {
    Done,
    Gathered(Rc<Vec<Vec<u8>>>),
    Requests(Requests),
}

/// Between the ranks' futures and the loop.
pub(super) struct Hub {
    now: Instant,
    /// Operations posted since the loop last looked, in order.
    posted: VecDeque<(u32, Post)>,
    /// Each rank's answer, set when it is due (the rank is polled then).
    answers: Vec<Option<Answer>>,
    /// The current call's plan: every rank makes the same from the same
    /// requests, so it is made once a call.
    plan: Option<SharedPlan>,
    /// The aggregators' ranks, by their count.
    aggregators: HashMap<u32, Arc<[u32]>>,
}

/// A call's plan with what it was made from (the requests every rank was
/// handed, the stripe size and the aggregator count), and how many ranks
/// take part in each round's exchange.
struct SharedPlan {
    requests: Requests,
    stripe_size: u64,
    avail: u32,
    plan: Rc<CollectivePlan>,
    participants: HashMap<u64, u32>,
}

type Task = Pin<Box<dyn Future<Output = Result<Option<CloseReport>, CollectiveError>>>>;

pub(super) struct CollState {
    pub(super) setup: Collective,
    hub: Rc<RefCell<Hub>>,
    /// Each rank's call, while it runs.
    tasks: Vec<Option<Task>>,
    /// The barrier or all-gather being posted: each rank's post.
    gathering: Vec<Option<Post>>,
    gathered: u32,
    /// The exchanges being posted: each participant's post so far.
    exchanges: HashMap<ExchangeId, Vec<(u32, Post)>>,
    /// Rank 0's close report.
    pub(super) report: Option<CloseReport>,
    /// Ranks that sleep while they wait (where they do).
    waits: Option<MpiWaits>,
}

impl CollState {
    /// `spin`: where ranks sleep while they wait, how long each tests
    /// before its first sleep.
    pub(super) fn new(setup: Collective, ranks: u32, spin: Option<Duration>) -> CollState {
        let hub = Hub {
            now: Instant::default(),
            posted: VecDeque::new(),
            answers: (0..ranks).map(|_| None).collect(),
            plan: None,
            aggregators: HashMap::default(),
        };
        CollState {
            setup,
            hub: Rc::new(RefCell::new(hub)),
            tasks: (0..ranks).map(|_| None).collect(),
            gathering: (0..ranks).map(|_| None).collect(),
            gathered: 0,
            exchanges: HashMap::default(),
            report: None,
            waits: spin.map(|spin| MpiWaits::new(ranks, spin)),
        }
    }
}

/// One rank's communicator and file in the simulated world.
struct SimIo {
    rank: u32,
    size: u32,
    per_node: u32,
    hub: Rc<RefCell<Hub>>,
}

/// The answer to this rank's last post, once the loop has set it.
struct Answered {
    hub: Rc<RefCell<Hub>>,
    rank: u32,
}

impl Future for Answered {
    type Output = Answer;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Answer> {
        match self.hub.borrow_mut().answers[self.rank as usize].take() {
            Some(answer) => Poll::Ready(answer),
            None => Poll::Pending,
        }
    }
}

impl SimIo {
    fn post(&self, post: Post) {
        self.hub.borrow_mut().posted.push_back((self.rank, post));
    }

    async fn ask(&self, post: Post) -> Answer {
        self.post(post);
        Answered { hub: self.hub.clone(), rank: self.rank }.await
    }
}

impl RankIo for SimIo {
    type Buffer = Phantom;
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn ranks_per_node(&self) -> u32 {
        self.per_node
    }
    fn wtime(&self) -> f64 {
        self.hub.borrow().now.as_secs_f64()
    }
    fn abort(&self, _reason: &str) {
        // The rank's future ends with the error, which ends the whole run.
    }
    fn plan(&mut self, requests: &Requests, stripe_size: u64, avail: u32) -> Rc<CollectivePlan> {
        if let Some(shared) = &self.hub.borrow().plan {
            if Rc::ptr_eq(&shared.requests, requests) && shared.stripe_size == stripe_size && shared.avail == avail {
                return shared.plan.clone();
            }
        }
        let plan = Rc::new(plan_collective(requests, stripe_size, avail));
        let ranks = self.aggregator_ranks(avail);
        let participants = participants(&plan, &ranks, self.size);
        let requests = requests.clone();
        self.hub.borrow_mut().plan =
            Some(SharedPlan { requests, stripe_size, avail, plan: plan.clone(), participants });
        plan
    }
    fn aggregator_ranks(&mut self, avail: u32) -> Arc<[u32]> {
        let (size, per_node) = (self.size, self.per_node);
        let mut hub = self.hub.borrow_mut();
        hub.aggregators.entry(avail).or_insert_with(|| aggregator_ranks(avail, size, per_node).into()).clone()
    }
    fn skips_empty_exchanges(&self) -> bool {
        true
    }
    async fn gather_requests(&mut self, offset: u64, len: u64) -> Result<Requests, CommError> {
        match self.ask(Post::Request { offset, len }).await {
            Answer::Requests(all) => Ok(all),
            other => unreachable!("a call's requests are answered with every rank's, not {other:?}"),
        }
    }
    async fn barrier(&mut self) -> Result<(), CommError> {
        self.ask(Post::Barrier).await;
        Ok(())
    }
    async fn allgather_same(&mut self, mine: &[u8]) -> Result<Rc<Vec<Vec<u8>>>, CommError> {
        match self.ask(Post::Allgather(mine.to_vec())).await {
            Answer::Gathered(all) => Ok(all),
            other => unreachable!("an all-gather is answered with what it gathered, not {other:?}"),
        }
    }
    async fn alltoallv(
        &mut self,
        id: ExchangeId,
        _send: &Phantom,
        to: &[Part],
        _recv: &mut Phantom,
        from: &[Part],
    ) -> Result<(), CommError> {
        if to.is_empty() && from.is_empty() {
            // No part in this round: nothing to wait for (the plan did not
            // count this rank in).
            return Ok(());
        }
        let sizes = |parts: &[Part]| parts.iter().map(|(rank, range)| (*rank, range.len() as u64)).collect();
        self.ask(Post::Exchange { id, sends: sizes(to), receives: sizes(from) }).await;
        Ok(())
    }
    async fn write_at(&mut self, offset: u64, data: &DataOf<Self>) -> Result<(), String> {
        self.ask(Post::Write { offset, len: data.0 as u64 }).await;
        Ok(())
    }
    async fn read_at(&mut self, offset: u64, buf: &mut DataOf<Self>) -> Result<(), String> {
        self.ask(Post::Read { offset, len: buf.0 as u64 }).await;
        Ok(())
    }
    async fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String> {
        self.post(Post::Advise(advices.to_vec()));
        Ok(())
    }
    async fn no_expand(&mut self) -> Result<(), String> {
        self.post(Post::Advise(vec![Advice::lock_no_expand(true)]));
        Ok(())
    }
    async fn group_lock(&mut self, gid: u64) -> Result<(), String> {
        self.ask(Post::GroupLock(gid)).await;
        Ok(())
    }
    async fn group_unlock(&mut self, gid: u64) -> Result<(), String> {
        self.ask(Post::GroupUnlock(gid)).await;
        Ok(())
    }
    async fn sync(&mut self) -> Result<(), String> {
        self.ask(Post::Sync).await;
        Ok(())
    }
}

impl Run<'_> {
    fn coll(&mut self) -> &mut CollState {
        self.coll.as_deref_mut().expect("a collective phase")
    }

    /// A rank has opened the file: its collective program starts (IOR's
    /// `MPI_File_open`, its transfers as collective calls, `-e`'s
    /// `MPI_File_sync`, `MPI_File_close`).
    pub(super) fn start_collective(&mut self, rank: u32) -> Result<(), SimError> {
        // The program keeps what it needs of the phase (not the aggregator
        // list, which every rank would otherwise hold a copy of).
        let spec = PhaseSpec { collective: None, ..self.spec.clone() };
        let (n, per_node, pretend) = (self.job.ranks, self.job.ranks_per_node, self.pretend(rank));
        let recording = self.job.world.series.is_some();
        let coll = self.coll();
        let hints = coll.setup.hints.clone();
        let mut io = SimIo { rank, size: n, per_node, hub: coll.hub.clone() };
        let striping = Striping { stripe_size: spec.stripe_size, stripe_count: spec.stripe_count };
        let task: Task = Box::pin(async move {
            let mut file = TwoPhase::<Phantom>::open(&mut io, striping, &hints).await?;
            let transfer = Phantom(spec.transfer as usize);
            for k in 0..spec.transfers_per_rank() {
                let offset = spec.offset(n, pretend, k);
                if spec.write {
                    file.write_at_all(&mut io, offset, &transfer).await?;
                } else {
                    file.read_at_all(&mut io, offset, &mut transfer.clone()).await?;
                }
                if recording {
                    io.post(Post::Transferred { write: spec.write, bytes: spec.transfer });
                }
            }
            if spec.write && spec.fsync {
                file.sync(&mut io).await?;
            }
            io.post(Post::TransfersDone);
            file.close(&mut io).await
        });
        coll.tasks[rank as usize] = Some(task);
        self.ranks[rank as usize].st = St::Coll;
        self.poll_rank(rank)
    }

    /// Run rank `rank`'s program until it waits, then carry out what it posted.
    pub(super) fn poll_rank(&mut self, rank: u32) -> Result<(), SimError> {
        let now = self.now();
        let coll = self.coll();
        coll.hub.borrow_mut().now = now;
        let mut task = coll.tasks[rank as usize].take().expect("a rank is polled while its program runs");
        let polled = task.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        match polled {
            Poll::Pending => coll.tasks[rank as usize] = Some(task),
            Poll::Ready(Err(error)) => return Err(SimError::Collective { rank, error }),
            Poll::Ready(Ok(report)) => {
                if report.is_some() {
                    coll.report = report;
                }
                self.run_posts()?;
                let spec = self.spec;
                let r = &mut self.ranks[rank as usize];
                r.r.transfers = spec.transfers_per_rank();
                r.r.bytes = r.r.transfers * spec.transfer;
                r.st = St::Closing;
                return self.close(rank);
            }
        }
        self.run_posts()
    }

    fn run_posts(&mut self) -> Result<(), SimError> {
        loop {
            let next = self.coll().hub.borrow_mut().posted.pop_front();
            let Some((rank, post)) = next else { return Ok(()) };
            self.run_post(rank, post)?;
        }
    }

    fn run_post(&mut self, rank: u32, post: Post) -> Result<(), SimError> {
        let now = self.now();
        if post.is_global() || matches!(post, Post::Exchange { .. }) {
            self.begin_wait(rank);
        }
        if post.is_global() {
            let coll = self.coll();
            debug_assert!(coll.gathering[rank as usize].is_none(), "rank {rank} posted two collectives at once");
            coll.gathering[rank as usize] = Some(post);
            coll.gathered += 1;
            if coll.gathered == self.job.ranks {
                return self.complete_collective();
            }
            return Ok(());
        }
        if let Post::Exchange { id, .. } = post {
            let coll = self.coll();
            let expected = {
                let hub = coll.hub.borrow();
                let shared = hub.plan.as_ref().expect("an exchange follows its call's plan");
                shared.participants.get(&id.round).copied().unwrap_or(0)
            };
            let posts = coll.exchanges.entry(id).or_insert_with(|| Vec::with_capacity(expected as usize));
            posts.push((rank, post));
            if posts.len() as u32 == expected {
                let posts = coll.exchanges.remove(&id).expect("just filled");
                return self.complete_exchange(id, posts);
            }
            return Ok(());
        }
        let (node, fh) = (self.ranks[rank as usize].node, self.ranks[rank as usize].fh.expect("open"));
        let client = &mut self.job.world.clients[node as usize];
        let op = match post {
            Post::Write { offset, len } => client.write_payload(now, fh, offset, Payload::Phantom(len)),
            Post::Read { offset, len } => client.read(now, fh, offset, len),
            Post::GroupLock(gid) => client.group_lock(now, fh, GroupId(gid)),
            Post::GroupUnlock(gid) => client.group_unlock(now, fh, GroupId(gid)),
            Post::Sync => client.fsync(now, fh),
            Post::Advise(advices) => return self.advise(rank, &advices),
            Post::TransfersDone => {
                let r = &mut self.ranks[rank as usize].r;
                r.xfer_stop = now;
                r.close_start = now;
                return Ok(());
            }
            Post::Transferred { write, bytes } => {
                if let Some(series) = self.job.world.series.as_mut() {
                    series.note(now, rank, write, bytes);
                }
                return Ok(());
            }
            Post::Barrier | Post::Allgather(_) | Post::Request { .. } | Post::Exchange { .. } => {
                unreachable!("collectives are gathered above")
            }
        };
        self.track(rank, op);
        self.job.world.pump_client(node);
        Ok(())
    }

    /// Every rank has posted the same barrier or all-gather: answer each
    /// when it is done.
    fn complete_collective(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let n = self.job.ranks;
        let at = now + allgather_cost(n, self.job.world.model.mpi_latency);
        let coll = self.coll();
        coll.gathered = 0;
        let posts: Vec<Post> = coll.gathering.iter_mut().map(|p| p.take().expect("every rank posted")).collect();
        let answer = match &posts[0] {
            Post::Barrier => {
                if let Some(other) = posts.iter().find(|p| !matches!(p, Post::Barrier)) {
                    return Err(diverged("a barrier", other));
                }
                None
            }
            Post::Allgather(_) => {
                let all = posts.iter().map(|p| match p {
                    Post::Allgather(mine) => Ok(mine.clone()),
                    other => Err(diverged("an all-gather", other)),
                });
                Some(Answer::Gathered(Rc::new(all.collect::<Result<_, _>>()?)))
            }
            Post::Request { .. } => {
                let all = posts.iter().enumerate().map(|(rank, p)| match p {
                    Post::Request { offset, len } => Ok((rank as u32, *offset, *len)),
                    other => Err(diverged("a call's request", other)),
                });
                Some(Answer::Requests(Rc::new(all.collect::<Result<_, _>>()?)))
            }
            other => unreachable!("{other:?} is not posted by every rank"),
        };
        let hub = coll.hub.clone();
        let mut hub = hub.borrow_mut();
        for rank in 0..n {
            hub.answers[rank as usize] = Some(match &answer {
                None => Answer::Done,
                Some(Answer::Gathered(all)) => Answer::Gathered(all.clone()),
                Some(Answer::Requests(all)) => Answer::Requests(all.clone()),
                Some(Answer::Done) => Answer::Done,
            });
            self.job.world.push(at, Ev::Work(WorkEv::Answer { rank }));
        }
        Ok(())
    }

    /// Every rank with a part in exchange `id` has posted it: its messages
    /// leave, the aggregators' side in rank order (a write's receivers, a
    /// read's senders), each as its node's links allow; a rank is done when
    /// what it sends and receives is across. A message above the eager
    /// limit (`[mpi] rendezvous_bytes`) to a rank asleep in its wait leaves
    /// when that rank next tests, which then copies what comes, one message
    /// after another, awake until it is all in.
    fn complete_exchange(&mut self, id: ExchangeId, mut posts: Vec<(u32, Post)>) -> Result<(), SimError> {
        let now = self.now();
        posts.sort_unstable_by_key(|(rank, _)| *rank);
        let mut done: Vec<(u32, Instant)> = posts.iter().map(|(rank, _)| (*rank, now)).collect();
        let index = |done: &[(u32, Instant)], rank: u32| {
            done.binary_search_by_key(&rank, |d| d.0).expect("both ends of a message take part")
        };
        let jitter = self.job.world.model.round_jitter.as_ns();
        let eager = self.job.world.model.mpi_rendezvous_bytes;
        // Messages that wait for their receiver's test: (start, from, to, bytes).
        let mut waiting: Vec<(Instant, usize, usize, u64)> = Vec::new();
        for (i, (_, post)) in posts.iter().enumerate() {
            let Post::Exchange { sends, receives, .. } = post else { unreachable!("only exchanges are matched here") };
            // The aggregator's side: a write's receiver or a read's sender.
            let (aggregator_side, peers) =
                if id.writing { (!receives.is_empty(), receives) } else { (!sends.is_empty(), sends) };
            if !aggregator_side {
                continue;
            }
            for &(peer, bytes) in peers {
                let p = index(&done, peer);
                let (from, to) = if id.writing { (p, i) } else { (i, p) };
                let start = match eager {
                    Some(eager) if bytes > eager => self.next_test(done[to].0, now),
                    _ => now,
                };
                if start > now {
                    waiting.push((start, from, to, bytes));
                    continue;
                }
                let arrived = self.send(done[from].0, done[to].0, bytes, now);
                done[p].1 = done[p].1.max(arrived);
                done[i].1 = done[i].1.max(arrived);
            }
            // OS noise and uneven exchange completion (zero unless asked for).
            if jitter > 0 {
                done[i].1 = done[i].1 + Duration(self.job.rng.gen_range(0..jitter));
            }
        }
        // Each receiver copies its messages in turn, from its test on.
        waiting.sort_by_key(|&(start, _, to, _)| (to, start));
        let mut copied: Option<(usize, Instant)> = None;
        for (start, from, to, bytes) in waiting {
            let start = match copied {
                Some((receiver, until)) if receiver == to => start.max(until),
                _ => start,
            };
            let arrived = self.send(done[from].0, done[to].0, bytes, start);
            done[from].1 = done[from].1.max(arrived);
            done[to].1 = done[to].1.max(arrived);
            copied = Some((to, arrived));
            if let Some(waits) = self.coll().waits.as_mut() {
                waits.copying(done[to].0, arrived);
            }
        }
        let hub = self.coll().hub.clone();
        let mut hub = hub.borrow_mut();
        for (rank, at) in done {
            hub.answers[rank as usize] = Some(Answer::Done);
            self.job.world.push(at, Ev::Work(WorkEv::Answer { rank }));
        }
        Ok(())
    }

    /// A message of an exchange from rank `from` to rank `to`, leaving at `start`.
    fn send(&mut self, from: u32, to: u32, bytes: u64, start: Instant) -> Instant {
        let (from, to) = (self.ranks[from as usize].node, self.ranks[to as usize].node);
        self.job.world.mpi_send(from, to, bytes, start)
    }

    /// When rank `rank`, in an exchange at `now`, next tests it: at once
    /// unless it sleeps in its wait.
    fn next_test(&mut self, rank: u32, now: Instant) -> Instant {
        self.coll().waits.as_ref().map_or(now, |waits| waits.next_test(rank, now))
    }

    /// Rank `rank` waits in MPI: where ranks sleep while they wait, its
    /// first sleep begins.
    fn begin_wait(&mut self, rank: u32) {
        let now = self.now();
        let Some(waits) = self.coll().waits.as_mut() else { return };
        let (wait, first) = waits.begin(rank, now);
        let pause = mpi_waits::FIRST_PAUSE;
        self.job.world.push(first, Ev::Work(WorkEv::MpiWake { rank, wait, pause }));
    }

    /// Rank `rank`'s answer is due: whether it goes on now (it did not
    /// sleep in its wait, or its wait is over); a sleeping rank sees the
    /// answer at its next test ([`Run::mpi_wake`]).
    pub(super) fn answered(&mut self, rank: u32) -> bool {
        let now = self.now();
        let Some(CollState { waits: Some(waits), .. }) = self.coll.as_deref_mut() else { return true };
        // With the tests of its spin up to now: all of them if it sleeps
        // already (its first wake-up then finds them taken).
        let (asleep, spun) = waits.answer(rank, now);
        self.charge_tests(rank, now, spun);
        !asleep
    }

    /// Rank `rank`'s tests of `spun` in all, from `now`: on its node's
    /// cores where they yield the core (see [`crate::mpi_waits`]), else
    /// nothing. When the rank is through them.
    fn charge_tests(&mut self, rank: u32, now: Instant, spun: Duration) -> Instant {
        if !self.job.world.model.mpi_tests_yield {
            return now;
        }
        let node = self.ranks[rank as usize].node;
        self.job.world.node_cpu(node, now, spun, CpuUse::Mpi)
    }

    /// Rank `rank` wakes from a sleep of `pause` in wait `wait`: if it
    /// still waits, the wake-up costs its node's cores and it tests: if
    /// its answer came, it goes on once awake, else it sleeps again.
    pub(super) fn mpi_wake(&mut self, rank: u32, wait: u32, pause: Duration) -> Result<(), SimError> {
        let now = self.now();
        let Some(waits) = self.coll().waits.as_ref() else { return Ok(()) };
        let wake = waits.wake(rank, wait, pause);
        if wake == Wake::Stale {
            return Ok(());
        }
        let node = self.ranks[rank as usize].node;
        // Its spin before its first sleep, then its wake-up and its test.
        let spun = self.coll().waits.as_mut().expect("waits modelled").take_spin(rank, now);
        let spun = self.charge_tests(rank, now, spun);
        let woke = self.job.world.rank_wake_up(node, spun);
        let test = self.job.world.model.mpi_test;
        let awake = self.charge_tests(rank, woke, test);
        match wake {
            Wake::Again(next) => {
                let at = awake + MpiWaits::slept(next);
                self.coll().waits.as_mut().expect("waits modelled").sleep_until(rank, at);
                self.job.world.push(at, Ev::Work(WorkEv::MpiWake { rank, wait, pause: next }));
            }
            Wake::Answered => {
                let check = self.job.world.check;
                let waits = self.coll().waits.as_mut().expect("waits modelled");
                waits.end(rank);
                if check {
                    waits.check_invariants();
                }
                self.job.world.push(awake, Ev::Work(WorkEv::Answer { rank }));
            }
            Wake::Stale => unreachable!("handled above"),
        }
        Ok(())
    }

    /// A client answered one of rank `rank`'s file operations.
    pub(super) fn coll_op_done(&mut self, rank: u32, output: OpOutput) -> Result<(), SimError> {
        let now = self.now();
        let node = self.ranks[rank as usize].node;
        let call = self.job.world.model.client_cpu_per_call;
        let at = match output {
            // The copy from the page cache into the rank's buffer, and
            // the call's own CPU time.
            OpOutput::ReadPhantom(bytes) => {
                let copy = transfer(bytes, self.job.world.model.copy_bw);
                self.job.world.node_cpu(node, now, plus(copy, call), CpuUse::Calls)
            }
            // The faults of the frames the write touched first, and the
            // call's own CPU time.
            OpOutput::Written(_) => {
                let touch = self.job.world.first_touch(node);
                self.job.world.node_cpu(node, now, plus(touch, call), CpuUse::Calls)
            }
            OpOutput::GroupLocked | OpOutput::GroupUnlocked | OpOutput::Synced => now,
            other => unreachable!("rank {rank}'s collective program got {other:?}"),
        };
        self.coll().hub.borrow_mut().answers[rank as usize] = Some(Answer::Done);
        if at == now {
            return self.poll_rank(rank);
        }
        self.job.world.push(at, Ev::Work(WorkEv::Answer { rank }));
        Ok(())
    }
}

/// How many ranks take part in each round's exchange of `plan`: those with
/// a piece in it and the aggregators (at `ranks`) with a stripe in it.
fn participants(plan: &CollectivePlan, ranks: &[u32], size: u32) -> HashMap<u64, u32> {
    let mut counts: HashMap<u64, u32> = HashMap::default();
    let mut seen = vec![u64::MAX; size as usize];
    for write in plan.writes() {
        let round = write.round;
        let count = counts.entry(round).or_default();
        let aggregator = ranks[write.aggregator as usize];
        for rank in plan.pieces_of(write).iter().map(|p| p.rank).chain([aggregator]) {
            if seen[rank as usize] != round {
                seen[rank as usize] = round;
                *count += 1;
            }
        }
    }
    counts
}

/// Ranks that reached different collectives: a lanefs bug, not a user's error.
fn diverged(expected: &str, got: &Post) -> SimError {
    SimError::Setup(format!("simulated ranks diverged: one posted {got:?} where another posted {expected}"))
}

/// An allgather or a barrier: `ceil(log2 n)` latencies.
fn allgather_cost(n: u32, latency: Duration) -> Duration {
    let steps = u64::from(32 - n.max(1).saturating_sub(1).leading_zeros());
    Duration(steps * latency.as_ns())
}
