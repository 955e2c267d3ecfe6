//! The registry's table: the records of its slots ([`Slot`]: a function's [`Entry`] and
//! the version a copy compares) and the rules every change obeys ([`FnTable`]), kept apart
//! from where the table lives and how changes travel (the parent module), so the rules
//! can be read, and tested, on their own.

#![deny(unsafe_code)]

use super::*;
/// A valid function name, as the registry stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    pub(super) bytes: [u8; FN_NAME_MAX],
    pub(super) len: u8,
}

impl Name {
    /// `name` if it follows the rules (`abi::fnid::valid_name`), else `BadName`.
    pub fn new(name: &[u8]) -> Result<Name, Error> {
        if !abi::fnid::valid_name(name) {
            return Err(Error::BadName);
        }
        let mut bytes = [0; FN_NAME_MAX];
        bytes[..name.len()].copy_from_slice(name);
        Ok(Name {
            bytes,
            len: name.len() as u8,
        })
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A registered function.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub(super) name: Name,
    /// The user that registered it (who may register it again or unregister it).
    pub(super) user: UserId,
    /// Where its requests go now, and the process that receives there.
    pub(super) endpoint: ResId,
    pub(super) server: Pid,
    /// 1 for the first server, one more for each that registered the name again.
    pub(super) server_generation: u64,
    /// The state ICA (a vregion id), 0 if none.
    pub(super) state_ica: u64,
    /// False once the server ended or closed its endpoint (requests get `Gone`).
    pub(super) up: bool,
    /// Restart after a crash (`FN_RESTART`), kept across servers.
    pub(super) restart: Restart,
    /// When the server now serving it started to (ns since reset, the home's clock).
    pub(super) since_ns: u64,
}

/// A function's restart policy and what it has used (`abi::fnid`'s `FN_RESTART`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Restart {
    /// Most restarts in a window (0: off), and the window's length.
    pub(super) max: u32,
    pub(super) window_ns: u64,
    /// Restarts so far; the start of the current window and the restarts in it.
    pub(super) count: u32,
    pub(super) window_start: u64,
    pub(super) in_window: u32,
    /// The server crashed and is being restarted (with `up` false): requests get `Again`.
    pub(super) restarting: bool,
}

/// One slot of the registry, as the home keeps it and pushes it.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Changes made to this slot at home; a copy takes a pushed record only if newer.
    pub(super) version: u64,
    /// Generation of the latest function id issued in this slot (0: never used).
    pub(super) generation: u32,
    pub(super) entry: Option<Entry>,
}

/// One core's copy of the registry (the home's is the registry), and the requests this
/// core's servers took per function.
pub struct FnTable {
    pub(super) slots: [Slot; MAX_FNIDS],
    /// Per slot: the function id counted and the requests taken under it here.
    pub(super) served: [(u64, u64); MAX_FNIDS],
}

impl FnTable {
    pub const fn new() -> Self {
        FnTable {
            slots: [Slot {
                version: 0,
                generation: 0,
                entry: None,
            }; MAX_FNIDS],
            served: [(0, 0); MAX_FNIDS],
        }
    }

    /// The slot index and entry of function id `raw`, or the error a request to it gets
    /// before its state is looked at.
    pub(super) fn find(&self, raw: u64) -> Result<(usize, &Entry), Error> {
        let i = self.index(raw)?;
        match &self.slots[i].entry {
            Some(e) => Ok((i, e)),
            None => Err(Error::StaleResource),
        }
    }

    pub(super) fn find_mut(&mut self, raw: u64) -> Result<(usize, &mut Slot), Error> {
        let i = self.index(raw)?;
        let slot = &mut self.slots[i];
        if slot.entry.is_none() {
            return Err(Error::StaleResource);
        }
        Ok((i, slot))
    }

    /// The slot of function id `raw` if it is the slot's current id: `NoSuchResource` for
    /// an id never issued (forged), `StaleResource` for an older one.
    pub(super) fn index(&self, raw: u64) -> Result<usize, Error> {
        let id = FnId::from_raw(raw).ok_or(Error::NoSuchResource)?;
        let i = id.slot() as usize;
        let issued = self.slots[i].generation;
        let g = id.generation();
        if g == 0 || g > issued {
            return Err(Error::NoSuchResource);
        }
        if g < issued {
            return Err(Error::StaleResource);
        }
        Ok(i)
    }

    pub(super) fn id_of(&self, i: usize) -> FnId {
        FnId::new(i as u32, self.slots[i].generation)
    }

    /// Slot `slot`, as the home pushes it.
    pub(crate) fn record(&self, slot: usize) -> Slot {
        self.slots[slot]
    }

    /// A copy's rule: take `record` for slot `slot` if it is newer than the one held.
    pub(crate) fn take(&mut self, slot: u32, record: Slot) -> bool {
        match self.slots.get_mut(slot as usize) {
            Some(s) if record.version > s.version => {
                *s = record;
                true
            }
            _ => false,
        }
    }

    /// The endpoint function id `raw` maps to in this table.
    pub(crate) fn resolve(&self, raw: u64) -> Result<ResId, Error> {
        let (_, e) = self.find(raw)?;
        if e.up {
            Ok(e.endpoint)
        } else if e.restart.restarting {
            Err(Error::Again)
        } else {
            Err(Error::Gone)
        }
    }

    /// At home: `endpoint`, where `fnid`'s requests went, is gone: the function is down if
    /// that endpoint still serves it. Returns the slot changed.
    pub(crate) fn mark_down(&mut self, fnid: u64, endpoint: ResId) -> Option<usize> {
        let (i, slot) = self.find_mut(fnid).ok()?;
        let e = slot.entry.as_mut()?;
        if !(e.up || e.restart.restarting) || e.endpoint != endpoint {
            return None;
        }
        e.up = false;
        e.restart.restarting = false;
        slot.version += 1;
        Some(i)
    }
}

impl Default for FnTable {
    fn default() -> Self {
        Self::new()
    }
}

impl Slot {
    /// The function is served from `endpoint` by `server` from now on: up, the next server
    /// generation (returned). The caller gives the slot its new version.
    pub(super) fn serve(&mut self, endpoint: ResId, server: Pid) -> Result<u64, Error> {
        let e = self.entry.as_mut().ok_or(Error::StaleResource)?;
        e.endpoint = endpoint;
        e.server = server;
        e.server_generation += 1;
        e.since_ns = crate::time::now_ns();
        e.up = true;
        // Each server opts in to restart for itself (`FN_RESTART`); the counts stay.
        e.restart.restarting = false;
        e.restart.max = 0;
        Ok(e.server_generation)
    }
}
