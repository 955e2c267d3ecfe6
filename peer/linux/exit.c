/*
 * exit.c: the child of basics.c's spawn+wait case, installed as /exit in the initramfs.
 *
 * A static program whose whole text is exit_group(0): no libc and no start-up code, so that
 * spawn+wait measures the kernel's cost of creating, loading, ending and reaping a process
 * and not a C library's initialisation (musl's adds about 30,000 instructions here).
 *
 * Build: musl-gcc -static -nostdlib -O2 -o exit exit.c
 */
__asm__(".globl _start\n"
	"_start:\n"
	"	mov $231, %eax\n" /* SYS_exit_group */
	"	xor %edi, %edi\n"
	"	syscall\n");
