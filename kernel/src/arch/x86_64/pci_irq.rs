//! PCI interrupt lines for user-mode drivers: each legacy INTx line a device's
//! configuration names is routed through the IOAPIC to core 0 at its own vector
//! ([`VEC_DEV_BASE`] + GSI), starts masked, and is masked again by the interrupt itself, so
//! a level-triggered line cannot storm while the driver (a user process) has not yet
//! served its device; the driver's acknowledgement unmasks it (`res/device.rs`).
//!
//! Why here: the IOAPIC registers are shared hardware the bootstrap core programs; this
//! file remembers the IOAPICs and the firmware's overrides once at boot so the device
//! resource can route, mask and unmask one line without naming the boot state.

use super::acpi::IrqOverride;
use super::ioapic::IoApic;
use spin::{Mutex, Once};

/// First vector of device lines; GSI `g` arrives at `VEC_DEV_BASE + g`.
pub const VEC_DEV_BASE: u64 = 0x50;
/// Lines served (GSIs `0..LINES`).
pub const LINES: u32 = 24;

struct Routing {
    ioapics: heapless::Vec<IoApic, 8>,
    overrides: heapless::Vec<IrqOverride, 16>,
    apic_id: u32,
}

static ROUTING: Once<Routing> = Once::new();
/// Serialises the redirection-register writes (the IOAPIC window is one device).
static LOCK: Mutex<()> = Mutex::new(());

/// Remember the IOAPICs and ISA overrides, and core 0's APIC id (boot, core 0).
pub fn init(ioapics: &[IoApic], overrides: &[IrqOverride], apic_id: u32) {
    ROUTING.call_once(|| Routing {
        ioapics: ioapics.iter().copied().collect(),
        overrides: overrides.iter().copied().collect(),
        apic_id,
    });
}

/// The GSI, polarity and trigger of legacy line `line`: the firmware's override, else the
/// PCI default (level, active low).
fn resolve(r: &Routing, line: u8) -> IrqOverride {
    r.overrides
        .iter()
        .copied()
        .find(|o| o.irq == line)
        .unwrap_or(IrqOverride {
            irq: line,
            gsi: u32::from(line),
            active_low: true,
            level: true,
        })
}

/// Route legacy line `line` to core 0, masked or not. `None` if no IOAPIC serves it.
pub fn set(line: u8, masked: bool) -> Option<u32> {
    let r = ROUTING.get()?;
    let o = resolve(r, line);
    if o.gsi >= LINES {
        return None;
    }
    let io = r.ioapics.iter().find(|io| io.serves(o.gsi))?;
    let _g = LOCK.lock();
    io.route_masked(
        o.gsi,
        (VEC_DEV_BASE + u64::from(o.gsi)) as u8,
        r.apic_id,
        o.active_low,
        o.level,
        masked,
    );
    Some(o.gsi)
}

/// Core 0's local APIC id (where device interrupts go), once known.
pub fn core0_apic_id() -> Option<u32> {
    ROUTING.get().map(|r| r.apic_id)
}

/// The GSI legacy line `line` arrives on, if routable.
pub fn gsi_of(line: u8) -> Option<u32> {
    let r = ROUTING.get()?;
    Some(resolve(r, line).gsi).filter(|&g| g < LINES)
}

/// Is legacy line `line` masked at its IOAPIC now (`None` if no IOAPIC serves it)? For
/// tests: the hardware's own word, not the device resource's record.
pub fn is_masked(line: u8) -> Option<bool> {
    let r = ROUTING.get()?;
    let gsi = gsi_of(line)?;
    let io = r.ioapics.iter().find(|io| io.serves(gsi))?;
    let _g = LOCK.lock();
    Some(io.is_masked(gsi))
}
