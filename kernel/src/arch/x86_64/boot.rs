//! First instructions: the PVH entry, the switch to long mode, and the hand-off to Rust.
//!
//! QEMU's `-kernel` finds the entry point in the `.note.Xen` ELF note (type 18,
//! `XEN_ELFNOTE_PHYS32_ENTRY`) and jumps there in 32-bit protected mode with paging off and
//! `%ebx` holding the physical address of the `hvm_start_info` structure (see
//! [`super::pvh`]). The code here:
//!
//! 1. fills a 2 MiB-page directory that maps physical 0..1 GiB, and hooks it into a boot PML4
//!    at three places: identity (so the next instruction still runs), the direct map
//!    `PHYS_OFFSET` and the kernel's link address `KERNEL_VMA`;
//! 2. turns on PAE, long mode, no-execute, write protection and paging, and far-jumps into
//!    64-bit code;
//! 3. jumps to the higher half, clears `.bss`, turns on SSE (the prebuilt `core` uses it),
//!    sets up the boot stack and calls [`crate::entry::boot::bsp_entry`].
//!
//! The same boot page tables serve the application processors while they climb out of real
//! mode (see [`super::trampoline`]); once in the higher half every core switches to the
//! kernel's real page tables built by [`super::paging`].

use core::arch::global_asm;

/// Bytes of the bootstrap processor's first stack (in `.bss`).
pub const BOOT_STACK_SIZE: usize = 64 * 1024;

#[repr(C, align(16))]
pub struct BootStack(pub [u8; BOOT_STACK_SIZE]);

/// The stack `kmain_bsp` starts on. Later each core moves to its own guarded stack.
#[no_mangle]
pub static mut BOOT_STACK: BootStack = BootStack([0; BOOT_STACK_SIZE]);

global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .balign 4
    .long pvh_start32
    .balign 4

    .section .boot.text, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    movl %ebx, %esi

    /* boot_pd[i] = i * 2 MiB | PRESENT | WRITABLE | HUGE, i = 0..512 */
    movl $boot_pd, %edi
    movl $0x83, %eax
    movl $512, %ecx
2:
    movl %eax, (%edi)
    movl $0, 4(%edi)
    addl $0x200000, %eax
    addl $8, %edi
    loop 2b

    /* CR4: PAE | PGE */
    movl %cr4, %eax
    orl $0xa0, %eax
    movl %eax, %cr4

    movl $boot_pml4, %eax
    movl %eax, %cr3

    /* EFER: LME (bit 8) | NXE (bit 11) */
    movl $0xc0000080, %ecx
    rdmsr
    orl $0x900, %eax
    wrmsr

    /* CR0: PE | WP | PG */
    movl %cr0, %eax
    orl $0x80010001, %eax
    movl %eax, %cr0

    lgdt boot_gdt_ptr
    ljmpl $0x08, $boot_long64

    .code64
boot_long64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorl %eax, %eax
    movw %ax, %fs
    movw %ax, %gs
    movabsq $kernel_start64, %rax
    jmpq *%rax

    .section .boot.data, "aw"
    .balign 4096
    .global boot_pml4
boot_pml4:
    .quad boot_pdpt_low + 3
    .fill 255, 8, 0
    .quad boot_pdpt_low + 3
    .fill 254, 8, 0
    .quad boot_pdpt_high + 3
boot_pdpt_low:
    .quad boot_pd + 3
    .fill 511, 8, 0
boot_pdpt_high:
    .fill 510, 8, 0
    .quad boot_pd + 3
    .quad 0
boot_pd:
    .fill 512, 8, 0

    .balign 8
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff
    .quad 0x00cf92000000ffff
boot_gdt_ptr:
    .word 23
    .long boot_gdt

    .section .text.entry, "ax"
    .global kernel_start64
kernel_start64:
    /* clear .bss (the boot stack is in it, so before using any stack) */
    movabsq $__bss_start, %rdi
    movabsq $__bss_end, %rcx
    subq %rdi, %rcx
    xorl %eax, %eax
    rep stosb

    movabsq $BOOT_STACK + {stack_size}, %rsp
    call enable_sse
    xorl %ebp, %ebp
    movl %esi, %edi
    call {kmain}
    ud2
    "#,
    stack_size = const BOOT_STACK_SIZE,
    kmain = sym crate::entry::boot::bsp_entry,
    options(att_syntax)
);
