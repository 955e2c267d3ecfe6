//! The cells of the matrix, in the order they run (the owner's destructive ones last).

use super::{
    eventually, state, submitted, that, Actor, Check, Role, Want, Wants, ADMIN_ONLY, DENIED,
    EVERYONE, INTO_KEEPER_AT, NOBODY, OK, OWNER_ONLY, OWN_AT, UNSUPPORTED,
};
use crate::{
    alive, pattern, ADMIN, ADMIN_SEED, ANSWER, KEEPER_AT, KEEPER_SEED, OTHER, OWNER, PATIENCE_NS,
    PRIVATE, STRANGER,
};
use alloc::format;
use alloc::string::String;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::syscall::control;
use ulib::abi::{self, Error, Pid, Priority};
use ulib::{ipc, res, sys};

impl Actor {
    pub(super) fn matrix(&mut self, first: bool) {
        self.vregion_cells();
        self.vspace_cells();
        self.process_and_compute_cells();
        self.endpoint_and_sem_cells();
        self.escalation_cells();
        self.process_ops();
        if first {
            self.user_cells();
        }
        self.destructive_cells();
    }

    fn vregion_cells(&mut self) {
        let loc = self.loc;
        let keeper = pattern(KEEPER_SEED);
        let other = keeper.map(|b| !b);
        self.cell(
            "vregion read",
            loc,
            OWNER_ONLY,
            |a| a.read_into(a.region),
            |a, n| {
                that(n == 64 && a.buf == keeper, || {
                    String::from("not its contents")
                })
            },
        );
        self.cell(
            "vregion write",
            loc,
            OWNER_ONLY,
            |a| res::write(a.region, &other, 0).map(|n| n as u64),
            |a, _| Self::written(a.region, &other, &keeper),
        );
        self.cell(
            "vregion write (SUBMIT, split-phase)",
            loc,
            OWNER_ONLY,
            |a| {
                let args = [other.as_ptr() as u64, other.len() as u64, 0, 0];
                submitted(&ipc::op(api::SUBMIT_RES_WRITE, a.region.0, args))
            },
            |a, _| Self::written(a.region, &other, &keeper),
        );
        self.cell(
            "vregion control INFO",
            loc,
            OWNER_ONLY,
            |a| res::size(a.region),
            |_, v| that(v == 4096, || format!("size {v}")),
        );
    }

    fn vspace_cells(&mut self) {
        let loc = self.loc;
        self.cell(
            "vspace read (attachments)",
            loc,
            OWNER_ONLY,
            |a| {
                let mut pairs = [[0u64; 2]; 4];
                res::attachments(a.vspace, &mut pairs).map(|n| n as u64)
            },
            |_, n| that(n == 1, || format!("{n} attachments")),
        );
        self.plain("vspace write", [UNSUPPORTED, DENIED, DENIED], |a| {
            res::write(a.vspace, b"x", 0).map(|n| n as u64)
        });
        self.cell(
            "vspace ATTACH own vregion, DETACH",
            loc,
            OWNER_ONLY,
            |a| res::attach(a.vspace, a.mine, INTO_KEEPER_AT, true).map(|()| 0),
            |a, _| {
                let attached = res::size(a.vspace);
                let detached = res::detach(a.vspace, INTO_KEEPER_AT);
                that(attached == Ok(2) && detached.is_ok(), || {
                    format!("attachments {attached:?}, detach {detached:?}")
                })
            },
        );
        self.cell(
            "vspace control INFO",
            loc,
            OWNER_ONLY,
            |a| res::size(a.vspace),
            |_, v| that(v == 1, || format!("{v} attachments")),
        );
        // Rights for everyone to a handle do not open the process to everyone: reaching
        // into it needs its user.
        self.cell(
            "vspace rwcx/rwcx read (attachments)",
            loc,
            EVERYONE,
            |a| {
                let mut pairs = [[0u64; 2]; 4];
                res::attachments(a.open_vspace, &mut pairs).map(|n| n as u64)
            },
            |_, n| that(n == 1, || format!("{n} attachments")),
        );
        self.cell(
            "vspace rwcx/rwcx ATTACH own vregion",
            loc,
            OWNER_ONLY,
            |a| res::attach(a.open_vspace, a.mine, INTO_KEEPER_AT, true).map(|()| 0),
            |a, _| {
                let attached = res::size(a.open_vspace);
                let detached = res::detach(a.open_vspace, INTO_KEEPER_AT);
                that(attached == Ok(2) && detached.is_ok(), || {
                    format!("attachments {attached:?}, detach {detached:?}")
                })
            },
        );
        self.cell(
            "vspace rwcx/rwcx DETACH pv-shared",
            loc,
            OWNER_ONLY,
            |a| res::detach(a.open_vspace, KEEPER_AT).map(|()| 0),
            |a, _| {
                let left = res::size(a.open_vspace);
                let again = res::attach(a.open_vspace, a.shared, KEEPER_AT, true);
                that(left == Ok(0) && again.is_ok(), || {
                    format!("attachments {left:?}, attaching again {again:?}")
                })
            },
        );
    }

    fn process_and_compute_cells(&mut self) {
        let loc = self.loc;
        self.cell(
            "process read (ProcInfo)",
            loc,
            OWNER_ONLY,
            |a| res::process_info(a.process).map(|p| u64::from(p.state)),
            |_, s| that(s == u64::from(abi::STATE_STOPPED), || format!("state {s}")),
        );
        self.cell(
            "process write (arguments)",
            loc,
            OWNER_ONLY,
            |a| res::write(a.process, b"again", 0).map(|n| n as u64),
            |a, _| {
                that(state(a.stopped) == Some(abi::STATE_STOPPED), || {
                    "it ran".into()
                })
            },
        );
        self.cell(
            "compute read (bind pv-proc)",
            loc,
            OWNER_ONLY,
            |a| res::bind(a.compute, a.stopped).map(|()| 0),
            |a, _| {
                let bound = res::info(a.compute).map(|i| i.detail);
                let s = state(a.stopped);
                that(
                    bound == Ok(a.stopped.0) && s != Some(abi::STATE_STOPPED),
                    || format!("bound to {bound:?}, state {s:?}"),
                )
            },
        );
        self.cell(
            "compute write (unbind)",
            loc,
            OWNER_ONLY,
            |a| res::unbind(a.compute).map(|()| 0),
            |a, _| {
                let stopped = eventually(|| state(a.stopped) == Some(abi::STATE_STOPPED));
                let bound = res::info(a.compute).map(|i| i.detail);
                that(stopped && bound == Ok(0), || {
                    format!("bound {bound:?}, stopped {stopped}")
                })
            },
        );
        self.cell(
            "compute rwcx/rwcx read (bind pv-proc)",
            loc,
            OWNER_ONLY,
            |a| res::bind(a.open_compute, a.stopped).map(|()| 0),
            |a, _| {
                let ran = state(a.stopped) != Some(abi::STATE_STOPPED);
                let unbound = res::unbind(a.open_compute);
                let stopped = eventually(|| state(a.stopped) == Some(abi::STATE_STOPPED));
                that(ran && unbound.is_ok() && stopped, || {
                    format!("ran {ran}, unbind {unbound:?}, stopped again {stopped}")
                })
            },
        );
        self.cell(
            "compute control SET_MIPS",
            loc,
            OWNER_ONLY,
            |a| res::set_mips(a.compute, 500).map(|()| 0),
            |a, _| {
                let set = res::size(a.compute);
                let back = res::set_mips(a.compute, 100);
                that(set == Ok(500) && back.is_ok(), || {
                    format!("mips {set:?}, {back:?}")
                })
            },
        );
    }

    /// The keeper's endpoint received one more request than before.
    fn one_more(&mut self) -> Check {
        self.got += 1;
        let (_, got) = self.verify()?;
        that(got == self.got, || {
            format!("pv-ep received {got}, {} expected", self.got)
        })
    }

    fn endpoint_and_sem_cells(&mut self) {
        let loc = self.loc;
        let m = Msg::default();
        self.cell(
            "endpoint CALL",
            loc,
            OWNER_ONLY,
            |a| ipc::call(a.ep, &m).map(|(v, _)| v),
            |a, v| that(v == ANSWER, || format!("answer {v}")).and_then(|()| a.one_more()),
        );
        self.cell(
            "endpoint SEND",
            loc,
            OWNER_ONLY,
            |a| ipc::send(a.ep, &m).map(|()| 0),
            |a, _| a.one_more(),
        );
        self.cell(
            "endpoint CALL (SUBMIT, split-phase)",
            loc,
            OWNER_ONLY,
            |a| submitted(&ipc::op(api::SUBMIT_CALL, a.ep.0, [0; 4])),
            |a, v| that(v == ANSWER, || format!("answer {v}")).and_then(|()| a.one_more()),
        );
        // Only the opening process receives: its user's other processes are strangers to
        // it. The owner queues a request first; it must reach the keeper, not the actor.
        self.plain("endpoint RECV (not the opener)", NOBODY, |a| {
            if a.role == Role::Owner {
                ipc::send(a.ep, &m)?;
                a.got += 1;
            }
            ipc::recv(a.ep, 0).map(|r| r.request)
        });
        self.plain("endpoint rwcx/rwcx RECV (not opener)", NOBODY, |a| {
            ipc::recv(a.open_ep, 0).map(|r| r.request)
        });
        self.cell(
            "endpoint control INFO",
            loc,
            OWNER_ONLY,
            |a| res::size(a.ep),
            |a, v| that(v == a.keeper.0, || format!("owner {v:#x}")),
        );
        let count = |a: &Actor| res::info(a.sem).map(|i| i.size);
        self.cell(
            "sem control SEM_P",
            loc,
            OWNER_ONLY,
            |a| res::control(a.sem, control::SEM_P, 0, 0),
            |a, _| that(count(a) == Ok(0), || format!("count {:?}", count(a))),
        );
        self.cell(
            "sem control SEM_V",
            loc,
            OWNER_ONLY,
            |a| res::control(a.sem, control::SEM_V, 0, 0),
            |a, _| that(count(a) == Ok(1), || format!("count {:?}", count(a))),
        );
        self.plain("sem read", [UNSUPPORTED, DENIED, DENIED], |a| {
            a.read_into(a.sem)
        });
    }

    /// Reaching what others own through one's own resources, and rights that give others
    /// more than oneself.
    fn escalation_cells(&mut self) {
        let loc = self.loc;
        let (k, name) = (self.k, self.name);
        self.cell(
            "ATTACH pv-priv to own vspace",
            loc,
            OWNER_ONLY,
            |a| res::attach(a.own_vs, a.region, OWN_AT, false).map(|()| 0),
            |a, _| {
                // SAFETY: the kernel has just mapped the 4 KiB vregion at OWN_AT, where
                // nothing else of this program lives; it stays mapped until the detach.
                let seen = unsafe { core::ptr::read_volatile(OWN_AT as *const [u8; 64]) };
                let detached = res::detach(a.own_vs, OWN_AT);
                that(seen == pattern(KEEPER_SEED) && detached.is_ok(), || {
                    format!("mapped memory differs, detach {detached:?}")
                })
            },
        );
        let close_made = |_: &mut Actor, id: u64| {
            let r = res::close(ResId(id));
            that(r.is_ok(), || format!("close {r:?}"))
        };
        self.cell(
            "open vspace of the keeper",
            loc,
            OWNER_ONLY,
            |a| {
                let args = a.keeper.0.to_le_bytes();
                res::open(&format!("c{k}/vspace/pv-vsk-{name}"), &args, PRIVATE).map(|id| id.0)
            },
            close_made,
        );
        self.cell(
            "open vspace of admin's sleeper",
            loc,
            ADMIN_ONLY,
            |a| {
                let args = a.admin_sleeper.0.to_le_bytes();
                res::open(&format!("c{k}/vspace/pv-vsa-{name}"), &args, PRIVATE).map(|id| id.0)
            },
            close_made,
        );
        let own = res::open_compute(&format!("c{k}/compute/pv-cpu-{name}"), 100, PRIVATE);
        self.cell(
            "bind own compute to pv-proc",
            loc,
            OWNER_ONLY,
            |a| own.and_then(|c| res::bind(c, a.stopped)).map(|()| 0),
            |a, _| {
                let ran = state(a.stopped) != Some(abi::STATE_STOPPED);
                let unbound = own.and_then(res::unbind);
                let stopped = eventually(|| state(a.stopped) == Some(abi::STATE_STOPPED));
                that(ran && unbound.is_ok() && stopped, || {
                    format!("ran {ran}, unbind {unbound:?}, stopped again {stopped}")
                })
            },
        );
        if let Ok(c) = own {
            let _ = res::close(c);
        }
        let lopsided = Rights(0xf1); // r---/rwcx
        self.cell(
            "open own r---/rwcx vregion",
            loc,
            EVERYONE,
            |a| {
                let id = res::open_vregion(&format!("c{k}/vregion/pv-esc-{name}"), 4096, lopsided)?;
                a.made = Some(id.0);
                Ok(id.0)
            },
            |a, id| {
                let info = res::info(ResId(id));
                that(
                    info.is_ok_and(|i| i.creator == a.user && i.rights == lopsided.0),
                    || format!("{info:?}"),
                )
            },
        );
        let esc = self.made.take().map_or(ResId(0), ResId);
        self.plain("write own r---/rwcx vregion", NOBODY, |_| {
            res::write(esc, b"x", 0).map(|n| n as u64)
        });
        self.cell(
            "close own r---/rwcx vregion",
            loc,
            EVERYONE,
            |_| res::close(esc).map(|()| 0),
            |_, _| that(res::info(esc).is_err(), || "still there".into()),
        );
        // The administrator may act as any user: that is how it reaches others' resources.
        let keeper = pattern(KEEPER_SEED);
        let inverted = keeper.map(|b| !b);
        self.cell(
            "SETUSER 1000, then vregion write",
            loc,
            [OK, DENIED, OK],
            |a| {
                res::setuser(OWNER)?;
                let r = res::write(a.region, &inverted, 0);
                if r.is_err() {
                    let _ = res::setuser(a.user);
                }
                r.map(|n| n as u64)
            },
            |a, _| {
                let w = Self::written(a.region, &inverted, &keeper);
                let back = res::setuser(a.user);
                w.and_then(|()| that(back.is_ok(), || format!("back: {back:?}")))
            },
        );
        let admin = pattern(ADMIN_SEED);
        let other = admin.map(|b| !b);
        self.cell(
            "pv-adm read",
            loc,
            ADMIN_ONLY,
            |a| a.read_into(a.adm),
            |a, _| that(a.buf == admin, || "not its contents".into()),
        );
        self.cell(
            "pv-adm write",
            loc,
            ADMIN_ONLY,
            |a| res::write(a.adm, &other, 0).map(|n| n as u64),
            |a, _| Self::written(a.adm, &other, &admin),
        );
    }

    fn process_ops(&mut self) {
        let (k, alt) = (self.k, self.alt);
        self.plain("KILL the keeper's child", NOBODY, |a| {
            sys::kill(a.sleeper).map(|()| 0)
        });
        self.plain("KILL the admin's sleeper", NOBODY, |a| {
            sys::kill(a.admin_sleeper).map(|()| 0)
        });
        self.plain(
            "WAIT for the keeper's child",
            [Want::Err(Error::NoSuchProcess); 3],
            |a| sys::wait_timeout(Some(a.sleeper), 0).map(|(p, _)| p.0),
        );
        self.plain("MIGRATE the keeper's child", NOBODY, |a| {
            sys::migrate(Some(a.sleeper), alt).map(|p| p.0)
        });
        self.plain("MIGRATE the admin's sleeper", NOBODY, |a| {
            sys::migrate(Some(a.admin_sleeper), alt).map(|p| p.0)
        });
        let loc = self.loc;
        self.cell(
            "SPAWN_ON above own priority",
            loc,
            NOBODY,
            |_| sys::spawn_on("privcheck", &["sleeper"], Priority::Driver, k).map(|p| p.0),
            |_, p| {
                let _ = sys::kill(Pid(p));
                let _ = sys::wait(Some(Pid(p)));
                Ok(())
            },
        );
        let child = sys::spawn_on("spin", &[], Priority::App, k);
        self.cell(
            "MIGRATE own child",
            loc,
            EVERYONE,
            |a| {
                let new = child.and_then(|c| sys::migrate(Some(c), alt))?;
                a.made = Some(new.0);
                Ok(new.0)
            },
            |_, new| {
                let (new, old) = (Pid(new), child.unwrap_or(Pid(0)));
                that(new.core() == alt && alive(new) && !alive(old), || {
                    format!("now {new} (alive {}), was {old}", alive(new))
                })
            },
        );
        let target = self.made.take().map(Pid).or(child.ok());
        self.cell(
            "KILL own child",
            loc,
            EVERYONE,
            |_| {
                target
                    .ok_or(Error::NoSuchProcess)
                    .and_then(sys::kill)
                    .map(|()| 0)
            },
            |_, _| {
                let s = target.map(|t| sys::wait_timeout(Some(t), PATIENCE_NS));
                that(
                    matches!(s, Some(Ok((_, s))) if s.how == abi::ENDED_KILLED),
                    || format!("ended {s:?}"),
                )
            },
        );
    }

    /// Changing users (the rule: only a process the administrator or the kernel created
    /// may, and never to the kernel; anyone may "change" to the user it is) and powering
    /// off.
    fn user_cells(&mut self) {
        let me = self.user;
        let sideways = if self.role == Role::Other {
            OWNER
        } else {
            OTHER
        };
        let to = |user: UserId| move |_: &mut Actor| res::setuser(user).map(|()| u64::from(user.0));
        let became = |a: &mut Actor, user: u64| became_then_back(a, user, res::setuser);
        self.cell(
            "SETUSER 0 (the kernel)",
            "-",
            NOBODY,
            to(UserId::KERNEL),
            became,
        );
        self.cell(
            "SETUSER 1 (administrator)",
            "-",
            ADMIN_ONLY,
            to(ADMIN),
            became,
        );
        self.cell(
            "SETUSER sideways (1000/2000)",
            "-",
            ADMIN_ONLY,
            to(sideways),
            became,
        );
        self.cell(
            "SETUSER 5000 (a fresh user)",
            "-",
            ADMIN_ONLY,
            to(STRANGER),
            became,
        );
        self.cell("SETUSER own user", "-", EVERYONE, to(me), became);
        // The same rule for the calling thread alone (`THREAD_SETUSER`; back with `None`).
        let to_alone = |user: UserId| {
            move |_: &mut Actor| res::thread_setuser(Some(user)).map(|()| u64::from(user.0))
        };
        let alone_became =
            |a: &mut Actor, user: u64| became_then_back(a, user, |_| res::thread_setuser(None));
        self.cell(
            "THREAD_SETUSER 1 (administrator)",
            "-",
            ADMIN_ONLY,
            to_alone(ADMIN),
            alone_became,
        );
        self.cell(
            "THREAD_SETUSER sideways (1000/2000)",
            "-",
            ADMIN_ONLY,
            to_alone(sideways),
            alone_became,
        );
        self.cell(
            "THREAD_SETUSER own user",
            "-",
            EVERYONE,
            to_alone(me),
            alone_became,
        );
        self.cell(
            "POWEROFF",
            "-",
            [DENIED, DENIED, Want::Untried],
            |_| Err(sys::poweroff()),
            |_, _| Ok(()),
        );
        self.plain("KILL parent (admin's, as the shell)", NOBODY, |a| {
            sys::kill(a.parent).map(|()| 0)
        });
    }

    /// Closing is last: after the owner's, the keeper's targets are gone. (The
    /// administrator's own pv-adm goes first, so that the owner's refusal there is still
    /// checked against intact targets.)
    fn destructive_cells(&mut self) {
        let loc = self.loc;
        self.close_cell("close pv-adm", ADMIN_ONLY, self.adm);
        self.cell(
            "process control KILL (pv-proc)",
            loc,
            OWNER_ONLY,
            |a| res::kill(a.process).map(|()| 0),
            |a, _| that(eventually(|| !alive(a.stopped)), || "still alive".into()),
        );
        for (what, id) in [
            ("close vregion", self.region),
            ("close vspace", self.vspace),
            ("close process", self.process),
            ("close compute", self.compute),
            ("close endpoint", self.ep),
            ("close sem", self.sem),
        ] {
            self.close_cell(what, OWNER_ONLY, id);
        }
    }

    fn close_cell(&mut self, what: &str, wants: Wants, id: ResId) {
        let loc = self.loc;
        self.cell(
            what,
            loc,
            wants,
            |_| res::close(id).map(|()| 0),
            |a, _| {
                a.snapshot.retain(|r| r.id != id);
                let r = res::info(id);
                that(r.err() == Some(Error::StaleResource), || {
                    format!("then {r:?}")
                })
            },
        );
    }
}

/// After an allowed change of user: it acts as `user`, and after `back` (given the actor's
/// own user) as its own user again.
fn became_then_back(a: &Actor, user: u64, back: impl FnOnce(UserId) -> Result<(), Error>) -> Check {
    let now = res::getuser();
    let back = back(a.user);
    that(now == Ok(UserId(user as u32)) && back.is_ok(), || {
        format!("user {now:?}, back {back:?}")
    })?;
    let after = res::getuser();
    that(after == Ok(a.user), || format!("back as {after:?}"))
}
