/* SPDX-License-Identifier: MIT */
/*
 * Go programs.  Go makes its own system calls, so none of them reaches the
 * shims of this library by libc's names.  But since Go 1.21 every network
 * call goes through one assembly function, the funnel (src/core/gofunnel.h
 * finds it).  At start-up, before any Go code runs, its first 13 bytes
 * become a jump to sc__go_tramp (below), which makes the calls this library
 * handles (SC_GO_CALLS) through the same shims C programs use, and every
 * other call itself, as the funnel would have.
 *
 * Only a program whose threads are libc's (cgo: a dynamically linked Go
 * program) is patched: our C code needs the thread's TLS (errno, our own
 * __thread variables).  It cannot run on a goroutine's stack either (a
 * few KiB, and Go's to move), so the trampoline switches to a stack of the
 * thread's own, mapped at its first call and unmapped when the thread
 * ends.  While the call runs the goroutine is at no safe point: Go's
 * preemption signal finds a PC outside Go and leaves it be, and a signal
 * handler runs on Go's signal stack.  A routed call made while the thread
 * is on our stack (from a signal handler) goes to the kernel directly.
 *
 * A child of os/exec runs in Go's vfork child, on the parent thread's
 * memory and TLS: its dup3, fcntl and execve come here too, and the shims
 * know a vfork child (in_vfork_child).  The "on our stack" flag is the
 * parent's, so the child clears it before execve, which does not come
 * back.
 *
 * x86-64 only; elsewhere a Go program stays on TCP (gofunnel.h says so).
 */
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "config.h"
#include "gofunnel.h"
#include "interposer.h"
#include "rawsys.h"

#if defined(__x86_64__)

struct io_uring_params;
int io_uring_setup(unsigned entries, struct io_uring_params *p);      /* uring.c */

typedef long r_t;       /* every argument as Go passes it: a register */

/* The system calls Go may make on a socket or an epoll set, each with the
 * shim it goes to (calls.h), declared once: the routing table and the
 * dispatch below are made from it. */
#define SC_GO_CALLS(X) \
	X(SYS_read, read((int)a1, (void *)a2, (size_t)a3)) \
	X(SYS_write, write((int)a1, (const void *)a2, (size_t)a3)) \
	X(SYS_readv, readv((int)a1, (const struct iovec *)a2, (int)a3)) \
	X(SYS_writev, writev((int)a1, (const struct iovec *)a2, (int)a3)) \
	X(SYS_sendto, sendto((int)a1, (const void *)a2, (size_t)a3, (int)a4, \
			     (const struct sockaddr *)a5, (socklen_t)a6)) \
	X(SYS_recvfrom, recvfrom((int)a1, (void *)a2, (size_t)a3, (int)a4, \
				 (struct sockaddr *)a5, (socklen_t *)a6)) \
	X(SYS_sendmsg, sendmsg((int)a1, (const struct msghdr *)a2, (int)a3)) \
	X(SYS_recvmsg, recvmsg((int)a1, (struct msghdr *)a2, (int)a3)) \
	X(SYS_sendmmsg, sendmmsg((int)a1, (struct mmsghdr *)a2, (unsigned)a3, (int)a4)) \
	X(SYS_recvmmsg, recvmmsg((int)a1, (struct mmsghdr *)a2, (unsigned)a3, (int)a4, \
				 (struct timespec *)a5)) \
	X(SYS_sendfile, sendfile((int)a1, (int)a2, (off_t *)a3, (size_t)a4)) \
	X(SYS_splice, splice((int)a1, (loff_t *)a2, (int)a3, (loff_t *)a4, (size_t)a5, \
			     (unsigned)a6)) \
	X(SYS_socket, socket((int)a1, (int)a2, (int)a3)) \
	X(SYS_connect, connect((int)a1, (const struct sockaddr *)a2, (socklen_t)a3)) \
	X(SYS_listen, listen((int)a1, (int)a2)) \
	X(SYS_accept, accept((int)a1, (struct sockaddr *)a2, (socklen_t *)a3)) \
	X(SYS_accept4, accept4((int)a1, (struct sockaddr *)a2, (socklen_t *)a3, (int)a4)) \
	X(SYS_getsockopt, getsockopt((int)a1, (int)a2, (int)a3, (void *)a4, (socklen_t *)a5)) \
	X(SYS_setsockopt, setsockopt((int)a1, (int)a2, (int)a3, (const void *)a4, \
				     (socklen_t)a5)) \
	X(SYS_ioctl, ioctl((int)a1, (unsigned long)a2, a3)) \
	X(SYS_fcntl, fcntl((int)a1, (int)a2, a3)) \
	X(SYS_shutdown, shutdown((int)a1, (int)a2)) \
	X(SYS_close, close((int)a1)) \
	X(SYS_close_range, close_range((unsigned)a1, (unsigned)a2, (int)a3)) \
	X(SYS_dup, dup((int)a1)) \
	X(SYS_dup2, dup2((int)a1, (int)a2)) \
	X(SYS_dup3, dup3((int)a1, (int)a2, (int)a3)) \
	X(SYS_poll, poll((struct pollfd *)a1, (nfds_t)a2, (int)a3)) \
	X(SYS_ppoll, ppoll((struct pollfd *)a1, (nfds_t)a2, (const struct timespec *)a3, \
			   (const sigset_t *)a4)) \
	X(SYS_select, select((int)a1, (fd_set *)a2, (fd_set *)a3, (fd_set *)a4, \
			     (struct timeval *)a5)) \
	X(SYS_pselect6, pselect((int)a1, (fd_set *)a2, (fd_set *)a3, (fd_set *)a4, \
				(const struct timespec *)a5, pselect_mask(a6))) \
	X(SYS_epoll_create, epoll_create((int)a1)) \
	X(SYS_epoll_create1, epoll_create1((int)a1)) \
	X(SYS_epoll_ctl, epoll_ctl((int)a1, (int)a2, (int)a3, (struct epoll_event *)a4)) \
	X(SYS_epoll_wait, epoll_wait((int)a1, (struct epoll_event *)a2, (int)a3, (int)a4)) \
	X(SYS_epoll_pwait, epoll_pwait((int)a1, (struct epoll_event *)a2, (int)a3, (int)a4, \
				       (const sigset_t *)a5)) \
	X(SYS_epoll_pwait2, epoll_pwait2((int)a1, (struct epoll_event *)a2, (int)a3, \
					 (const struct timespec *)a4, (const sigset_t *)a5)) \
	X(SYS_io_uring_setup, io_uring_setup((unsigned)a1, (struct io_uring_params *)a2)) \
	X(SYS_execve, go_execve((const char *)a1, (char *const *)a2, (char *const *)a3)) \
	X(SYS_execveat, go_execveat((int)a1, (const char *)a2, (char *const *)a3, \
				    (char *const *)a4, (int)a5))

/* Numbers below this may be routed (the trampoline's table). */
#define GO_NR_MAX 512
#define GO_STACK (256 << 10)    /* our stack, per thread */
#define GO_GUARD 4096           /* below it, PROT_NONE */
#define GO_FITS(n, call) _Static_assert((n) < GO_NR_MAX, "the routing table holds " #n);
SC_GO_CALLS(GO_FITS)
#undef GO_FITS

/* The thread's stack: top (0: none yet), and whether we are on it. */
struct go_stack {
	uintptr_t top, busy;
};
__attribute__((visibility("hidden"), tls_model("initial-exec")))
__thread struct go_stack sc__go_stack;
__attribute__((visibility("hidden"))) unsigned char sc__go_routed[GO_NR_MAX];

static pthread_key_t go_key;    /* the thread's stack, unmapped when it ends */
static __thread bool go_keyed;

long sc__go_call(r_t nr, r_t a1, r_t a2, r_t a3, r_t a4, r_t a5, r_t a6)
	__attribute__((visibility("hidden")));

/* pselect6's sixth argument: { const sigset_t *, size_t } or NULL. */
static const sigset_t *pselect_mask(r_t a6)
{
	return a6 ? *(const sigset_t *const *)a6 : NULL;
}

/* Before an exec: in a vfork child the on-our-stack flag is its
 * parent's (above), cleared now, as the exec does not come back; the
 * child runs with every signal blocked (Go's forkAndExecInChild), so
 * nothing comes here on top of it.  Anywhere else it stays set: a failed
 * exec comes back through the trampoline. */
static void go_exec_prepare(void)
{
	if (in_vfork_child())
		sc__go_stack.busy = 0;
}

static int go_execve(const char *path, char *const argv[], char *const envp[])
{
	go_exec_prepare();
	return execve(path, argv, envp);
}

static int go_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	go_exec_prepare();
	return execveat(dirfd, path, argv, envp, flags);
}

/* From the trampoline, on our stack: the call's result or -errno. */
long sc__go_call(r_t nr, r_t a1, r_t a2, r_t a3, r_t a4, r_t a5, r_t a6)
{
	if (__builtin_expect(!go_keyed, 0)) {
		go_keyed = true;
		pthread_setspecific(go_key, (void *)(sc__go_stack.top - GO_STACK - GO_GUARD));
	}
	long r;
	errno = 0;
	switch (nr) {
#define GO_CASE(n, call) case n: r = (long)(call); break;
	SC_GO_CALLS(GO_CASE)
#undef GO_CASE
	default:
		return -ENOSYS;         /* not routed: the table says which are */
	}
	if (r != -1)
		return r;
	return errno ? -errno : -EIO;
}

static void go_stack_free(void *base)
{
	sc__go_stack.top = 0;
	munmap(base, GO_STACK + GO_GUARD);
}

/* Go's Syscall6, ABIInternal: AX the number, BX CX DI SI R8 R9 the
 * arguments; AX r1, BX r2, CX the errno back.  R14 (g), RBP and RSP are
 * kept, X15 is zero again; every other register is the caller's to lose,
 * as Go's own funnel loses them. */
#define S_(x) #x
#define S(x) S_(x)
__asm__(
	"	.text\n"
	"	.p2align 5\n"
	"	.globl sc__go_tramp\n"
	"	.hidden sc__go_tramp\n"
	"	.type sc__go_tramp, @function\n"
	"sc__go_tramp:\n"
	"	cmpq	$" S(GO_NR_MAX) ", %rax\n"
	"	jae	1f\n"
	"	leaq	sc__go_routed(%rip), %r11\n"
	"	cmpb	$0, (%r11,%rax)\n"
	"	je	1f\n"
	"	movq	sc__go_stack@gottpoff(%rip), %r12\n"
	"	cmpq	$0, %fs:8(%r12)\n"      /* on our stack already: a signal handler's */
	"	jne	1f\n"
	"	movq	%fs:(%r12), %r10\n"
	"	testq	%r10, %r10\n"
	"	jz	3f\n"
	"2:	movq	$1, %fs:8(%r12)\n"
	"	movq	%rsp, %r13\n"
	"	leaq	-16(%r10), %rsp\n"
	"	movq	%r9, (%rsp)\n"          /* a6: the seventh argument, on the stack */
	"	movq	%r8, %r9\n"
	"	movq	%rsi, %r8\n"
	"	movq	%rcx, %rdx\n"
	"	movq	%rdi, %rcx\n"
	"	movq	%rbx, %rsi\n"
	"	movq	%rax, %rdi\n"
	"	call	sc__go_call\n"
	"	movq	%r13, %rsp\n"
	"	movq	$0, %fs:8(%r12)\n"
	"	xorps	%xmm15, %xmm15\n"
	"	cmpq	$-4095, %rax\n"
	"	ja	4f\n"
	"	xorl	%ebx, %ebx\n"
	"	xorl	%ecx, %ecx\n"
	"	ret\n"
	/* not ours: the funnel's own body */
	"1:	movq	%rsi, %r10\n"
	"	movq	%rdi, %rdx\n"
	"	movq	%rcx, %rsi\n"
	"	movq	%rbx, %rdi\n"
	"	syscall\n"
	"	cmpq	$-4095, %rax\n"
	"	ja	4f\n"
	"	movq	%rdx, %rbx\n"
	"	xorl	%ecx, %ecx\n"
	"	ret\n"
	"4:	negq	%rax\n"
	"	movq	%rax, %rcx\n"
	"	movq	$-1, %rax\n"
	"	xorl	%ebx, %ebx\n"
	"	ret\n"
	/* the thread's first routed call: map its stack, the arguments kept
	 * in X0-X5 meanwhile (no stack to keep them on) */
	"3:	movq	%rax, %xmm0\n"
	"	movq	%rcx, %xmm1\n"
	"	movq	%rdi, %xmm2\n"
	"	movq	%rsi, %xmm3\n"
	"	movq	%r8, %xmm4\n"
	"	movq	%r9, %xmm5\n"
	"	movl	$" S(SYS_mmap) ", %eax\n"
	"	xorl	%edi, %edi\n"
	"	movl	$" S(GO_STACK + GO_GUARD) ", %esi\n"
	"	movl	$" S(PROT_READ | PROT_WRITE) ", %edx\n"
	"	movl	$" S(MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK) ", %r10d\n"
	"	movq	$-1, %r8\n"
	"	xorl	%r9d, %r9d\n"
	"	syscall\n"
	"	cmpq	$-4095, %rax\n"
	"	ja	5f\n"
	"	movq	%rax, %rdi\n"
	"	movl	$" S(SYS_mprotect) ", %eax\n"
	"	movl	$" S(GO_GUARD) ", %esi\n"
	"	xorl	%edx, %edx\n"
	"	syscall\n"
	"	leaq	" S(GO_STACK + GO_GUARD) "(%rdi), %r10\n"
	"	movq	%r10, %fs:(%r12)\n"
	"	movq	%xmm0, %rax\n"
	"	movq	%xmm1, %rcx\n"
	"	movq	%xmm2, %rdi\n"
	"	movq	%xmm3, %rsi\n"
	"	movq	%xmm4, %r8\n"
	"	movq	%xmm5, %r9\n"
	"	jmp	2b\n"
	"5:	movq	$-1, %rax\n"            /* no memory for a stack: ENOMEM */
	"	movl	$" S(ENOMEM) ", %ecx\n"
	"	xorl	%ebx, %ebx\n"
	"	ret\n"
	"	.size sc__go_tramp, .-sc__go_tramp\n");
void sc__go_tramp(void) __attribute__((visibility("hidden")));

/* The program's own file, mapped; its size in *len.  NULL if it cannot be
 * read (then the program stays as it is). */
static const unsigned char *self_image(size_t *len)
{
	int fd = (int)SC_SYSCALL(SYS_openat, AT_FDCWD, "/proc/self/exe", O_RDONLY | O_CLOEXEC, 0, 0, 0);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && st.st_size > 0)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	SC_SYSCALL(SYS_close, fd, 0, 0, 0, 0, 0);   /* not our close(): nothing of ours */
	if (p == MAP_FAILED)
		return NULL;
	*len = (size_t)st.st_size;
	return p;
}

/* Where the program is loaded: the address of its program headers
 * (AT_PHDR) less the address its file gives them (in the PT_LOAD that
 * holds them; gofunnel.c has checked the headers).  0, or -ENOEXEC if no
 * PT_LOAD holds them. */
static int load_bias(const unsigned char *img, uintptr_t *bias)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	uintptr_t at = getauxval(AT_PHDR);
	for (unsigned i = 0; at && i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || eh->e_phoff < ph[i].p_offset ||
		    eh->e_phoff - ph[i].p_offset >= ph[i].p_filesz)
			continue;
		*bias = at - (ph[i].p_vaddr + (eh->e_phoff - ph[i].p_offset));
		return 0;
	}
	return -ENOEXEC;
}

/* The funnel at f, in memory, starts as it does in the file: make it jump
 * to the trampoline (MOVABS $sc__go_tramp, R11; JMP R11).  No other thread
 * runs Go code yet.  0 or -errno. */
static int patch(unsigned char *f)
{
	unsigned char jump[13] = { 0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0xff, 0xe3 };
	uintptr_t to = (uintptr_t)sc__go_tramp;
	memcpy(jump + 2, &to, sizeof(to));
	if (memcmp(f, sc__go_prologue, SC_GO_PROLOGUE_LEN))
		return -ENOEXEC;
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)f & ~(uintptr_t)(pg - 1);
	size_t span = (uintptr_t)f + sizeof(jump) - lo;
	if (mprotect((void *)lo, span, PROT_READ | PROT_WRITE))
		return -errno;
	memcpy(f, jump, sizeof(jump));
	int rc = mprotect((void *)lo, span, PROT_READ | PROT_EXEC) ? -errno : 0;
	__builtin___clear_cache((char *)f, (char *)f + sizeof(jump));
	return rc;
}

/* Whether the program's notes, in memory, have Go's build id (type 4,
 * owner "Go"): a program without one is not read from its file (no system
 * call at start-up where nothing can come of it).  True when it cannot be
 * told (no PT_PHDR): then the file says. */
static bool go_note(void)
{
	const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);
	uintptr_t bias = 0;
	bool have = false;
	for (unsigned long i = 0; ph && i < n && !have; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr, have = true;
	if (!have)
		return true;
	for (unsigned long i = 0; i < n; i++) {
		if (ph[i].p_type != PT_NOTE)
			continue;
		size_t align = ph[i].p_align == 8 ? 8 : 4;
		const unsigned char *p = (const unsigned char *)(bias + ph[i].p_vaddr);
		const unsigned char *end = p + ph[i].p_memsz;
		while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
			Elf64_Nhdr nh;
			memcpy(&nh, p, sizeof(nh));
			size_t name = (nh.n_namesz + align - 1) & ~(align - 1);
			size_t desc = (nh.n_descsz + align - 1) & ~(align - 1);
			if (name > (size_t)(end - p) - sizeof(nh))
				break;
			if (nh.n_type == 4 && (nh.n_namesz == 3 || nh.n_namesz == 4) &&
			    !memcmp(p + sizeof(nh), "Go", 3))
				return true;
			if (desc > (size_t)(end - p) - sizeof(nh) - name)
				break;
			p += sizeof(nh) + name + desc;
		}
	}
	return false;
}

void go_start(void)
{
	if (!sc__cfg.go || !go_note())
		return;
	size_t len = 0;
	const unsigned char *img = self_image(&len);
	if (!img)
		return;
	struct sc_go_funnel fn;
	uintptr_t bias = 0;
	sc__go_funnel(img, len, &fn);
	int rc = fn.kind == SC_GO_OK ? load_bias(img, &bias) : 0;
	munmap((void *)img, len);
	if (fn.kind == SC_GO_NOT_GO)
		return;
	if (fn.kind != SC_GO_OK) {
		LOG(1, "a Go program, left on TCP: %s", fn.why);
		return;
	}
#define GO_ROUTE(n, call) sc__go_routed[n] = 1;
	SC_GO_CALLS(GO_ROUTE)
#undef GO_ROUTE
	if (!rc)
		rc = -pthread_key_create(&go_key, go_stack_free);
	if (!rc)
		rc = patch((unsigned char *)(bias + fn.vaddr));
	if (rc)
		LOG(1, "a Go program, left on TCP: its system-call funnel cannot be patched (%s)",
		    strerror(rc < 0 ? -rc : rc));
	else
		LOG(1, "a Go program: its system calls go through us (the funnel found by %s)",
		    fn.found_by);
}

#else

void go_start(void)
{
}

#endif
