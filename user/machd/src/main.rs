//! `machd K N [udp]`: the machine server of issue 17, one per machine: machine K of N
//! machines joined by a network (`cargo xtask run --machines N` starts it at boot with these
//! arguments at server priority, `server=C:machd,K,N`). Its messages travel in Ethernet
//! frames of its own type through the driver, or with `udp` as UDP datagrams through
//! `net.udp` ([`link`] says why the first is the default).
//!
//! It makes the machines one system the way P4 says inter-machine RPCC should work, "the
//! same flow over a network": a program on this machine asks `machd` (the function
//! [`FN_MACH`], `abi::mach` has the local protocol) to do something on machine M; `machd`
//! sends an `libs/mrpc` request to M's `machd`, which performs it there as the requester's
//! user and answers. `libs/mrpc` gives each request at most one execution (a reply cache),
//! retransmission with a bounded backoff, a deadline (`TimedOut`), and epochs (a rebooted
//! machine's old ids are refused). Membership comes from heartbeats ([`net`]).
//!
//! # Threads
//!
//! The *local* thread (main) receives requests from this machine's programs on the `mach`
//! endpoint and starts mrpc requests; the *network* thread ([`net`]) receives messages,
//! performs other machines' requests, sends heartbeats and retransmissions, and answers the
//! local callers when their requests end. A pool of [`WORKERS`] threads performs requests
//! that wait (a remote `wait`), [`files::FS_WORKERS`] others the file requests, and
//! [`calls::CALL_WORKERS`] the calls to this machine's functions by name. All share [`State`] behind a `ulib::cell::Local` lock.
#![no_std]
#![no_main]

extern crate alloc;

mod calls;
mod files;
mod follow;
mod link;
mod moves;
mod net;
mod ops;
mod resops;
mod streams;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use mrpc::client::{Client, Done, Retry, Ticket};
use mrpc::members::{Members, State as Member};
use mrpc::server::Server;
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::mach::{self, FN_MACH};
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::{Error, Pid};
use ulib::cell::Local;
use ulib::net::Ipv4;
use ulib::{fnid, ipc, println, sys};

ulib::main!(main);

/// An endpoint others may send to (write) and only its owner receives on.
pub(crate) const ENDPOINT_RIGHTS: Rights = Rights(0x2f);
/// Threads performing requests that wait.
const WORKERS: u64 = 4;
/// How long `machd` waits for `net.udp` at start (x 10 ms).
const NET_TRIES: u32 = 3000;

/// What a local caller asked of another machine, kept until it is answered.
pub(crate) struct Call {
    /// The `RECV` handle to answer.
    request: u64,
    op: u64,
    /// When it was asked (`OP_PING` answers the time since).
    started: u64,
    /// An `OP_FS` request's ICA and what its answer changes.
    fs: Option<files::Waiting>,
    /// A remote wait, made in slices: what is left of it, and the program waiting (the
    /// slices stop once it has ended).
    wait: Option<(ops::WaitLeft, Pid)>,
}

/// A local caller whose request to another machine is in flight.
struct Waiter {
    /// The user it acts as (its place in the window counts in that user's share).
    user: u32,
    ticket: Ticket,
    call: Call,
}

/// A local caller whose request waits for room in the window to its machine (mrpc's
/// `WINDOW` requests in flight past the oldest one not yet answered): started as soon as
/// there is room, in the order the callers came.
struct Held {
    remote: ops::RemoteCall,
    user: u32,
    /// When it was asked: its deadline counts from then.
    asked: u64,
    call: Call,
}

/// Most local requests held for room in the window to one machine; beyond, `Busy` (so one
/// slow machine cannot hold up requests to the others).
const MAX_HELD: usize = 64;
/// How the requests to one machine, in flight and held together, are shared out among the
/// local users ([`shares`]): a user other than the administrator and the kernel has at
/// most half of the window's places, all such users three quarters, `Busy` beyond. So one
/// user's many requests cannot take every place of the window. (The window is a span of
/// sequence numbers past the oldest request not answered, so one long request of anyone
/// can still hold the later ones: design.md section 17, "The window and long requests".)
/// The looks at followed programs' output count too (`follow`), one per user and machine
/// going regardless.
pub(crate) const WINDOW_SHARES: shares::Shares = shares::Shares::of(mrpc::WINDOW as usize);
/// How the [`MAX_ICAS`] places for requests with an ICA are shared out among the users.
const ICA_SHARES: shares::Shares = shares::Shares::of(MAX_ICAS);
/// Most local requests with an ICA (file and stream requests) in flight or held at once;
/// beyond, `Busy`: each ICA stays mapped here until its answer, and an address space holds
/// at most 64 attachments (the socket pages, the file workers' and the call workers' own
/// ICAs among them).
const MAX_ICAS: usize = 32;

/// What the threads share.
pub(crate) struct State {
    pub me: u8,
    pub n: u8,
    pub epoch: u32,
    pub client: Client,
    pub server: Server,
    pub members: Members,
    /// The link requests, replies and heartbeats go out on.
    tx: link::Out,
    waiters: Vec<Waiter>,
    /// Requests waiting for room in their machine's window.
    held: VecDeque<Held>,
    pub next_heartbeat: u64,
    pub heartbeats: u64,
    /// Which machines were up at the last tick.
    pub was_up: [bool; mrpc::MAX_MACHINES],
    /// Requests that wait, for the workers.
    pub jobs: VecDeque<ops::Job>,
    /// Processes spawned here for other machines, and as which user.
    pub spawned: Vec<(Pid, UserId)>,
    /// Of those, the ones a wait collected: its answer (how, code), the newest last.
    pub reaped: VecDeque<(Pid, UserId, Vec<u8>)>,
    /// Processes spawned with their output relayed: (pid, its output pipe, the user).
    pub outputs: Vec<(Pid, ResId, UserId)>,
    /// Processes spawned with their input from the requester (`SPAWN_STDIN`): (pid, its
    /// input pipe, of which this machd holds the writing end, the user).
    pub inputs: Vec<(Pid, ResId, UserId)>,
    /// This process's own user (it acts as others only around one call).
    pub my_user: UserId,
    /// Datagrams that were not mrpc messages for this machine.
    pub malformed: u64,
    /// Per requesting machine: how many `R_COUNT` requests were performed.
    pub counters: [u64; mrpc::MAX_MACHINES],
    /// Files of this machine open for programs of others (`files`).
    pub served: Vec<files::Served>,
    /// Programs of this one that opened files of other machines (`files`).
    pub opened: Vec<files::Opener>,
    /// Other machines' file requests, for the file workers (`files`).
    pub fs_jobs: VecDeque<files::Job>,
    /// Remote background programs whose output this machine's console shows (`follow`).
    pub followed: follow::List,
    /// Other machines' calls to this machine's functions, for the call workers (`calls`),
    /// with when each came.
    pub call_jobs: VecDeque<(mrpc::Header, Vec<u8>, u64)>,
    /// The users of the calls the call workers are making (`calls`).
    pub calls_under_way: Vec<u32>,
    /// Tickets of calls whose answer came too late (`calls`): collected and let go later.
    pub given_up: Vec<u64>,
    /// Pipe ends held here for programs of other machines (`resops`).
    pub holds: Vec<resops::Hold>,
    /// Images of processes moving here from other machines (`moves`).
    pub arriving: Vec<moves::Arriving>,
    /// Moves started here, the newest last (`moves`).
    pub started: Vec<moves::Started>,
}

pub(crate) static STATE: Local<Option<State>> = Local::new(None);
/// The link's receiving half, until the network thread takes it.
static RX: Local<Option<link::In>> = Local::new(None);
/// Counts the jobs for the workers.
static JOBS: Local<Option<ResId>> = Local::new(None);
/// Counts the jobs for the file workers.
static FS_JOBS: Local<Option<ResId>> = Local::new(None);
/// Counts the jobs for the call workers.
static CALL_JOBS: Local<Option<ResId>> = Local::new(None);

/// Run `f` on the shared state (which exists once `main` set it up).
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(s.as_mut().expect("machd: state used before it was set up")))
}

pub(crate) fn now() -> u64 {
    sys::clock_ns().unwrap_or(0)
}

/// Machine `m`'s address.
pub(crate) fn addr_of(m: u8) -> Ipv4 {
    Ipv4(mach::addr(usize::from(m)))
}

impl State {
    /// Send `bytes` to machine `to`'s `machd`. A failed send is a lost datagram: the
    /// protocol sends requests again, and a lost reply is asked for again.
    pub fn send(&mut self, to: u8, bytes: &[u8]) {
        let _ = self.tx.send(to, bytes);
    }

    /// Request `h` of another machine was performed with `result`: its reply is kept for
    /// duplicates and sent (unless its requester has given it up or moved to a new life).
    pub fn finish(&mut self, h: &mrpc::Header, result: &Result<Vec<u8>, Error>) {
        let reply = match result {
            Ok(p) => self.server.finish(h, Ok(p)),
            Err(e) => self.server.finish(h, Err(*e)),
        };
        if let Some(b) = reply {
            self.send(h.from, &b);
        }
    }

    /// Requests that ended: answer their local callers (a remote wait's slice that ended
    /// with its program still running goes on with the next slice), then start what was
    /// held for room in a window.
    pub fn complete(&mut self, done: Vec<Done>) {
        let now = now();
        for d in done {
            let Some(d) = follow::done(self, d, now) else {
                continue;
            };
            let Some(i) = self.waiters.iter().position(|w| w.ticket == d.ticket) else {
                continue;
            };
            let Waiter { ticket, call, .. } = self.waiters.swap_remove(i);
            let next = match (&d.result, call.wait) {
                (Err(Error::TimedOut), Some((left, caller))) if alive(caller) => {
                    left.next(ticket.to, now)
                }
                _ => None,
            };
            match next {
                Some((remote, user)) => {
                    if let Err((e, call)) = self.place(call, remote, user, now) {
                        self.answer(call, ticket.to, Err(e));
                    }
                }
                None => self.answer(call, ticket.to, d.result),
            }
        }
        self.start_held();
    }

    /// Answer local `call` to machine `to` with `result` (the reply's payload).
    fn answer(&mut self, call: Call, to: u8, result: Result<Vec<u8>, Error>) {
        let epoch = self.client.known_epoch(to);
        if let Some(fs) = call.fs {
            match fs.kind {
                files::Kind::Call => calls::answer(call.request, fs, result),
                files::Kind::Res => resops::answer(call.request, epoch, fs, result),
                _ => files::answer(call.request, epoch, fs, result),
            }
            return;
        }
        let r =
            result.and_then(|payload| ops::local_answer(call.op, &payload, call.started, epoch));
        let _ = match r {
            Ok(words) => ipc::reply(call.request, 0, &Msg { label: 0, words }),
            Err(e) => ipc::reply_error(call.request, e),
        };
    }

    /// Start a request for the local caller of `request` (`op`, acting as `user`): `remote`
    /// is what [`ops::remote_request`] makes of it. Held if its machine's window is full;
    /// an error is for the caller to answer.
    fn start(
        &mut self,
        request: u64,
        op: u64,
        remote: ops::RemoteCall,
        user: u32,
        fs: Option<files::Waiting>,
    ) -> Result<(), Error> {
        let now = now();
        let call = Call {
            request,
            op,
            started: now,
            fs,
            wait: None,
        };
        self.place(call, remote, user, now).map_err(|(e, _)| e)
    }

    /// Send `remote` for `call` (asked at `asked`), or hold it while its machine's window
    /// is full (behind the requests held for that machine before it); the call back with
    /// the error otherwise.
    fn place(
        &mut self,
        call: Call,
        remote: ops::RemoteCall,
        user: u32,
        asked: u64,
    ) -> Result<(), (Error, Call)> {
        let to = remote.0 .0;
        // The ICAs held here, for requests to any machine: within their number and the
        // user's share of it (one user's file requests to several machines could take
        // them all: found by a review).
        let icas = self
            .held
            .iter()
            .filter(|h| h.call.fs.is_some())
            .map(|h| h.user)
            .chain(
                self.waiters
                    .iter()
                    .filter(|w| w.call.fs.is_some())
                    .map(|w| w.user),
            );
        if call.fs.is_some() && (icas.clone().count() >= MAX_ICAS || !ICA_SHARES.allows(user, icas))
        {
            return Err((Error::Busy, call));
        }
        if !WINDOW_SHARES.allows(user, self.window_users(to)) {
            return Err((Error::Busy, call));
        }
        let held_there = self.held.iter().filter(|h| h.remote.0 .0 == to).count();
        let r = if held_there > 0 {
            Err(Error::Busy)
        } else {
            self.send_call(&remote, user, asked)
        };
        match r {
            Ok(ticket) => {
                self.waiters.push(Waiter { ticket, call, user });
                Ok(())
            }
            Err(Error::Busy) if held_there < MAX_HELD => {
                self.held.push_back(Held {
                    remote,
                    user,
                    asked,
                    call,
                });
                Ok(())
            }
            Err(e) => Err((e, call)),
        }
    }

    /// The users of the requests to machine `to` that count in its window's shares: in
    /// flight, held, and the looks at followed programs' output under way (`follow`).
    pub(crate) fn window_users(&self, to: u8) -> impl Iterator<Item = u32> + Clone + '_ {
        let waiting = self.waiters.iter().filter(move |w| w.ticket.to == to);
        let held = self.held.iter().filter(move |h| h.remote.0 .0 == to);
        waiting
            .map(|w| w.user)
            .chain(held.map(|h| h.user))
            .chain(follow::asking_to(&self.followed, to))
    }

    /// Start mrpc request `remote` asked at `asked`, its deadline counted from then: its
    /// ticket. `Busy`: the machine's window is full.
    fn send_call(
        &mut self,
        remote: &ops::RemoteCall,
        user: u32,
        asked: u64,
    ) -> Result<Ticket, Error> {
        let ((to, rop, ref payload), deadline_ns, epoch) = *remote;
        if to >= self.n {
            return Err(Error::InvalidArgument);
        }
        let now = now();
        if self.members.state(to, now) == Some(Member::Down) {
            // Known down: say so at once rather than at the deadline.
            return Err(Error::Gone);
        }
        let deadline = asked.saturating_add(deadline_ns);
        if now >= deadline {
            return Err(Error::TimedOut);
        }
        let (ticket, bytes) = self
            .client
            .start_in(now, to, rop, user, payload, deadline, epoch)?;
        self.send(to, &bytes);
        Ok(ticket)
    }

    /// Start the held requests whose machine has room in its window again, in the order
    /// they came; answer those whose deadline passed meanwhile (`TimedOut`) or whose
    /// machine went down (`Gone`), whether or not there is room. A remote wait's slice is
    /// made as it is sent, its deadline counted from then. Called whenever requests end
    /// and at every tick.
    pub fn start_held(&mut self) {
        let now = now();
        let mut full = [false; mrpc::MAX_MACHINES];
        let mut i = 0;
        while let Some(mut h) = self.held.remove(i) {
            let to = h.remote.0 .0;
            if let Some(e) = self.expired(&h, now) {
                self.answer(h.call, to, Err(e));
                continue;
            }
            if full.get(usize::from(to)) == Some(&true) {
                self.held.insert(i, h);
                i += 1;
                continue;
            }
            if let Some((left, _)) = h.call.wait {
                match left.next(to, now) {
                    Some((remote, _)) => {
                        h.remote = remote;
                        h.asked = now;
                    }
                    None => {
                        self.answer(h.call, to, Err(Error::TimedOut));
                        continue;
                    }
                }
            }
            match self.send_call(&h.remote, h.user, h.asked) {
                Ok(ticket) => self.waiters.push(Waiter {
                    ticket,
                    call: h.call,
                    user: h.user,
                }),
                Err(Error::Busy) => {
                    // Still no room: it keeps its place, and so do the later ones for
                    // that machine.
                    if let Some(f) = full.get_mut(usize::from(to)) {
                        *f = true;
                    }
                    self.held.insert(i, h);
                    i += 1;
                }
                Err(e) => self.answer(h.call, to, Err(e)),
            }
        }
    }

    /// Why held request `h` ends now without being sent, if it does: its machine is down
    /// (`Gone`), or its deadline (a wait: the caller's timeout) has passed (`TimedOut`).
    fn expired(&self, h: &Held, now: u64) -> Option<Error> {
        if self.members.state(h.remote.0 .0, now) == Some(Member::Down) {
            return Some(Error::Gone);
        }
        let over = match h.call.wait {
            Some((left, _)) => left.over(now),
            None => now >= h.asked.saturating_add(h.remote.1),
        };
        over.then_some(Error::TimedOut)
    }

    /// This machine's remote waits in flight, and the requests held for room in a window
    /// (`OP_SELF`).
    fn in_flight(&self) -> (u64, u64) {
        let waits = self
            .waiters
            .iter()
            .filter(|w| w.call.wait.is_some())
            .count();
        (waits as u64, self.held.len() as u64)
    }
}

fn main(args: &[&str]) -> i32 {
    let (parsed, kind) = match args {
        [_, k, n] => (
            k.parse::<u8>().ok().zip(n.parse::<u8>().ok()),
            link::Kind::Ethernet,
        ),
        [_, k, n, "udp"] => (
            k.parse::<u8>().ok().zip(n.parse::<u8>().ok()),
            link::Kind::Udp,
        ),
        _ => (None, link::Kind::Ethernet),
    };
    let Some((me, n)) = parsed.filter(|(k, n)| (1..=mach::MAX_MACHINES as u8).contains(n) && k < n)
    else {
        println!("machd: usage: machd K N [udp] (machine K of N, N at most 4)");
        return 2;
    };
    match run(me, n, kind) {
        Ok(()) => 0,
        Err(e) => {
            println!("machd: {e}");
            1
        }
    }
}

fn run(me: u8, n: u8, kind: link::Kind) -> Result<(), alloc::string::String> {
    use alloc::format;
    // netd may still be waiting for its driver: wait for `net.udp` to have an address.
    let mut tries = 0;
    while kind == link::Kind::Udp && !ulib::net::info().is_ok_and(|i| i[0] != 0) {
        tries += 1;
        if tries > NET_TRIES {
            return Err(format!(
                "no {} with an address after 30 s",
                ulib::net::FN_UDP
            ));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
    let (tx, rx) = link::open(kind, me)?;
    // Names nobody can guess (`res::open_fresh`): under `machd-SERIAL`, a program started
    // first could take them and keep machd from starting (serials come in order).
    let ep = ulib::res::open_fresh("here/endpoint/machd", &[], ENDPOINT_RIGHTS)
        .map_err(|e| format!("endpoint: {e}"))?;
    let sem = |prefix: &str| {
        ulib::res::open_fresh(prefix, &0u64.to_le_bytes(), Rights::OWNER_ALL)
            .map_err(|e| format!("semaphore: {e}"))
    };
    let jobs = sem("here/sem/machd")?;
    let fs_jobs = sem("here/sem/machd-fs")?;
    let call_jobs = sem("here/sem/machd-call")?;
    let started = now();
    // A new epoch every start: the clock at this instant differs from boot to boot (TCG
    // timing and the boot's own work), and `epoch_from` spreads close values apart.
    let epoch = mrpc::epoch_from(started ^ (u64::from(me) << 56));
    let my_user = ulib::res::getuser().map_err(|e| format!("getuser: {e}"))?;
    STATE.with(|s| {
        *s = Some(State {
            me,
            n,
            epoch,
            client: Client::new(me, epoch, Retry::default()),
            server: Server::new(me, epoch),
            members: Members::new(me, n, mach::DOWN_AFTER_NS),
            tx,
            waiters: Vec::new(),
            held: VecDeque::new(),
            next_heartbeat: started,
            heartbeats: 0,
            was_up: [false; mrpc::MAX_MACHINES],
            jobs: VecDeque::new(),
            spawned: Vec::new(),
            reaped: VecDeque::new(),
            outputs: Vec::new(),
            inputs: Vec::new(),
            my_user,
            malformed: 0,
            counters: [0; mrpc::MAX_MACHINES],
            served: Vec::new(),
            opened: Vec::new(),
            fs_jobs: VecDeque::new(),
            followed: Vec::new(),
            call_jobs: VecDeque::new(),
            calls_under_way: Vec::new(),
            given_up: Vec::new(),
            holds: Vec::new(),
            arriving: Vec::new(),
            started: Vec::new(),
        })
    });
    RX.with(|r| *r = Some(rx));
    JOBS.with(|j| *j = Some(jobs));
    FS_JOBS.with(|j| *j = Some(fs_jobs));
    CALL_JOBS.with(|j| *j = Some(call_jobs));
    // The threads run as long as the program: never joined (detached).
    let _ = ulib::thread::spawn(net::main, 0).map_err(|e| format!("network thread: {e}"))?;
    for i in 0..WORKERS {
        let _ = ulib::thread::spawn(ops::worker, i).map_err(|e| format!("worker: {e}"))?;
    }
    for i in 0..files::FS_WORKERS {
        let _ = ulib::thread::spawn(files::worker, i).map_err(|e| format!("file worker: {e}"))?;
    }
    for i in 0..calls::CALL_WORKERS {
        let _ = ulib::thread::spawn(calls::worker, i).map_err(|e| format!("call worker: {e}"))?;
    }
    let id = fnid::register(FN_MACH, ep).map_err(|e| format!("register {FN_MACH}: {e}"))?;
    println!(
        "machd: machine {me} of {n}, address {}, epoch {epoch:08x}, serving {FN_MACH} as {id}, link: {}",
        addr_of(me),
        kind.name()
    );
    loop {
        let r = match ipc::recv(ep, u64::MAX) {
            Ok(r) => r,
            Err(e) => {
                println!("machd: receive: {e}");
                let _ = sys::sleep_ns(10_000_000);
                continue;
            }
        };
        if r.request == 0 {
            // One-way messages (none are defined): nothing to answer; an ICA one carried
            // goes back to its creator, else it would stay mapped here (64 would fill the
            // ICA window, and every file request and frame would be refused).
            ipc::let_go(&r.msg);
            continue;
        }
        if let Err(e) = local(&r) {
            let _ = ipc::reply_error(r.request, e);
        }
    }
}

/// A request from a program on this machine: answered now, or once its request to another
/// machine ends ([`State::complete`]).
fn local(r: &Received) -> Result<(), Error> {
    let w = r.msg.words;
    let user = u32::try_from(r.sender_user).map_err(|_| Error::InvalidArgument);
    if let Some((region, _)) = ipc::ica_at(&r.msg) {
        // Every ICA goes back with its answer, whatever the request (else each one would
        // stay mapped here, and a full ICA window would refuse every file request).
        let refused = match (ipc::label(&r.msg), user) {
            (mach::OP_FS, _) if ipc::ica_read_only(&r.msg) => Error::InvalidArgument,
            (mach::OP_FS, Ok(user)) => {
                with(|s| files::local(s, r, user));
                return Ok(());
            }
            (mach::OP_FS, Err(e)) => e,
            (mach::OP_OUTPUT, _) if ipc::ica_read_only(&r.msg) => Error::InvalidArgument,
            (mach::OP_OUTPUT, Ok(user)) => {
                with(|s| streams::output_local(s, r, user));
                return Ok(());
            }
            (mach::OP_OUTPUT, Err(e)) => e,
            (mach::OP_INPUT, Ok(user)) => {
                with(|s| streams::input_local(s, r, user));
                return Ok(());
            }
            (mach::OP_INPUT, Err(e)) => e,
            (mach::OP_CALL, _) if ipc::ica_read_only(&r.msg) => Error::InvalidArgument,
            (mach::OP_CALL, Ok(user)) => {
                with(|s| calls::local(s, r, user));
                return Ok(());
            }
            (mach::OP_CALL, Err(e)) => e,
            (mach::OP_RES, _) if ipc::ica_read_only(&r.msg) => Error::InvalidArgument,
            (mach::OP_RES, Ok(user)) => {
                with(|s| resops::local(s, r, user));
                return Ok(());
            }
            (mach::OP_RES, Err(e)) => e,
            (mach::OP_MOVE, _) if ipc::ica_read_only(&r.msg) => Error::InvalidArgument,
            (mach::OP_MOVE, Ok(user)) => {
                with(|s| moves::local(s, r, user));
                return Ok(());
            }
            (mach::OP_MOVE, Err(e)) => e,
            _ => Error::NoSuchCall,
        };
        let _ = ipc::reply(
            r.request,
            refused as u64,
            &ipc::with_ica(Msg::default(), region),
        );
        return Ok(());
    }
    let user = user?;
    let reply = |words: [u64; 6]| ipc::reply(r.request, 0, &Msg { label: 0, words });
    let machine = |s: &State| u8::try_from(w[0]).ok().filter(|m| *m < s.n);
    match r.msg.label {
        // A file request, a call or a resource operation without its ICA.
        mach::OP_FS | mach::OP_CALL | mach::OP_RES | mach::OP_MOVE => Err(Error::InvalidArgument),
        mach::OP_FOLLOW => with(|s| follow::follow(s, r, user)),
        mach::OP_UNFOLLOW => with(|s| follow::unfollow(s, r, user)),
        mach::OP_SELF => {
            let (me, n, e, f, (waits, held)) =
                with(|s| (s.me, s.n, s.epoch, s.followed.len() as u64, s.in_flight()));
            reply([u64::from(me), u64::from(n), u64::from(e), f, waits, held])
        }
        mach::OP_MEMBER => {
            let words = with(|s| {
                let m = machine(s).ok_or(Error::InvalidArgument)?;
                let now = now();
                let info = s.members.get(m).ok_or(Error::InvalidArgument)?;
                let (state, epoch, ago) = match s.members.state(m, now) {
                    _ if m == s.me => (mach::UP, s.epoch, 0),
                    Some(Member::Up) => (mach::UP, info.epoch, now - info.last_heard),
                    Some(Member::Down) => (mach::DOWN, info.epoch, now - info.last_heard),
                    _ => (mach::NEVER, 0, u64::MAX),
                };
                Ok::<_, Error>([
                    Ipv4(mach::addr(usize::from(m))).to_word(),
                    state,
                    u64::from(epoch),
                    ago,
                    s.client.sent,
                    s.client.retransmissions,
                ])
            })?;
            reply(words)
        }
        mach::OP_WAIT => with(|s| {
            let m = machine(s).ok_or(Error::InvalidArgument)?;
            let now = now();
            let left = ops::WaitLeft::new(&w, user, now)?;
            let (remote, _) = left.next(m, now).ok_or(Error::InvalidArgument)?;
            let call = Call {
                request: r.request,
                op: mach::OP_WAIT,
                started: now,
                fs: None,
                wait: Some((left, r.sender)),
            };
            s.place(call, remote, user, now).map_err(|(e, _)| e)
        }),
        op @ (mach::OP_PING
        | mach::OP_SPAWN
        | mach::OP_KILL
        | mach::OP_PS
        | mach::OP_COUNT
        | mach::OP_OUTPUT) => with(|s| {
            let m = machine(s).ok_or(Error::InvalidArgument)?;
            let call = ops::remote_request(op, m, &w)?;
            s.start(r.request, op, call, user, None)
        }),
        _ => Err(Error::NoSuchCall),
    }
}

/// Is process `pid` of this machine still running? (Yes if it cannot be told.)
fn alive(pid: Pid) -> bool {
    sys::live_processes().map_or(true, |live| live.iter().any(|p| p.pid == pid))
}

/// The semaphore the workers wait on.
pub(crate) fn jobs_sem() -> Option<ResId> {
    JOBS.with(|j| *j)
}

/// The semaphore the file workers wait on.
pub(crate) fn fs_jobs_sem() -> Option<ResId> {
    FS_JOBS.with(|j| *j)
}

/// The semaphore the call workers wait on.
pub(crate) fn call_jobs_sem() -> Option<ResId> {
    CALL_JOBS.with(|j| *j)
}

/// The link's receiving half (the network thread takes it once).
pub(crate) fn take_rx() -> Option<link::In> {
    RX.with(|r| r.take())
}
