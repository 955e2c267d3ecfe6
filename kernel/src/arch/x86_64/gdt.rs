//! Per-core GDT and TSS.
//!
//! Each core builds its own descriptor table and task-state segment in its own memory. The
//! TSS carries `RSP0` (the stack for entries from user mode, used from the processes layer
//! on) and three interrupt stacks: NMI, double fault and machine check can arrive while the
//! kernel's own stack is unusable, so they always switch to a known-good stack.
//!
//! Selector layout follows what `syscall`/`sysret` need: kernel code, kernel data, user
//! data, user code.

use alloc::boxed::Box;
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::VirtAddr;

/// IST slot (1-based in the IDT, 0-based in the TSS array) of each critical vector.
pub const IST_NMI: u8 = 1;
pub const IST_DOUBLE_FAULT: u8 = 2;
pub const IST_MACHINE_CHECK: u8 = 3;
pub const IST_DEBUG: u8 = 4;

pub const KERNEL_CS: u16 = 0x08;
pub const KERNEL_DS: u16 = 0x10;
pub const USER_DS: u16 = 0x18 | 3;
pub const USER_CS: u16 = 0x20 | 3;

/// Build and load this core's GDT and TSS (leaked from the core's own heap: they live for
/// the rest of the run). `ist` are the tops of the NMI, double-fault, machine-check and
/// debug stacks, `rsp0` the top of the stack for entries from user mode.
pub fn init_this_core(ist: [u64; 4], rsp0: u64) {
    let mut tss = TaskStateSegment::new();
    tss.interrupt_stack_table[usize::from(IST_NMI - 1)] = VirtAddr::new(ist[0]);
    tss.interrupt_stack_table[usize::from(IST_DOUBLE_FAULT - 1)] = VirtAddr::new(ist[1]);
    tss.interrupt_stack_table[usize::from(IST_MACHINE_CHECK - 1)] = VirtAddr::new(ist[2]);
    tss.interrupt_stack_table[usize::from(IST_DEBUG - 1)] = VirtAddr::new(ist[3]);
    tss.privilege_stack_table[0] = VirtAddr::new(rsp0);
    let tss: &'static mut TaskStateSegment = Box::leak(Box::new(tss));
    let tss_ptr: *mut TaskStateSegment = tss;
    super::core_header::this().set_tss(tss_ptr);
    // SAFETY: the TSS is leaked ('static); from here on it is written only through
    // `set_rsp0` on this core, by raw pointer, never through a Rust reference.
    let tss: &'static TaskStateSegment = unsafe { &*tss_ptr };

    let mut gdt = GlobalDescriptorTable::new();
    let kcode = gdt.append(Descriptor::kernel_code_segment());
    let kdata = gdt.append(Descriptor::kernel_data_segment());
    let udata = gdt.append(Descriptor::user_data_segment());
    let ucode = gdt.append(Descriptor::user_code_segment());
    let tss_sel = gdt.append(Descriptor::tss_segment(tss));
    assert_eq!(
        (kcode.0, kdata.0, udata.0, ucode.0),
        (KERNEL_CS, KERNEL_DS, USER_DS, USER_CS),
        "GDT layout changed"
    );
    let gdt: &'static GlobalDescriptorTable = Box::leak(Box::new(gdt));
    gdt.load();
    // SAFETY: the selectors name the descriptors just loaded: a 64-bit code segment, a data
    // segment and an available TSS.
    unsafe {
        CS::set_reg(SegmentSelector(KERNEL_CS));
        SS::set_reg(SegmentSelector(KERNEL_DS));
        DS::set_reg(SegmentSelector(KERNEL_DS));
        ES::set_reg(SegmentSelector(KERNEL_DS));
        load_tss(tss_sel);
    }
}

/// Set the stack the CPU switches to on an interrupt from user mode (the running thread's
/// kernel stack: a kernel address, canonical, so it is stored without the check every
/// switch would pay). Every switch to a thread pays this, so it is inlined and the TSS's
/// presence is checked in debug builds only (`init_this_core` makes it before any thread
/// exists, and a null TSS would fault at once on the write). `header` is this core's,
/// which the caller holds already.
#[inline(always)]
pub fn set_rsp0(header: &super::core_header::CoreHeader, top: u64) {
    let tss = header.tss();
    debug_assert!(!tss.is_null(), "set_rsp0 before the TSS exists");
    // SAFETY: this core's TSS, leaked in `init_this_core`; only this core writes it, and
    // the CPU reads RSP0 only when entering from user mode, never concurrently with us.
    unsafe {
        core::ptr::addr_of_mut!((*tss).privilege_stack_table[0])
            .write_volatile(VirtAddr::new_truncate(top))
    };
}
