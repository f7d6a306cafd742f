// SPDX-License-Identifier: MIT

// goaccel: Go TCP servers and clients for tests/integration/test_go.py
// (standard library only, go.mod says go 1.19 so every toolchain builds it).
// Built with CGO_ENABLED=1 they link libc, and `shortcut run` can route
// their socket calls through the interposer; built with CGO_ENABLED=0 they
// stay on kernel TCP.
//
// Servers listen on 127.0.0.1:0 and print "listening PORT". With --conns N
// a server ends once N connections have ended and prints
// "server conns=N errors=E bytes=B" (bytes it read); without, it runs until
// killed.
//
//	goaccel echo  [--conns N] [--copy splice|buf]
//	    a goroutine per connection: io.Copy(conn, conn) (splice: the
//	    TCPConn's own ReadFrom, which splices; buf: a plain read/write loop)
//	goaccel sink  [--conns N]
//	    reads to EOF, then writes the byte count (8 bytes, big-endian)
//	goaccel relay UPSTREAM_PORT [--conns N] [--copy splice|buf]
//	    per connection dials 127.0.0.1:UPSTREAM_PORT and io.Copy both ways
//	    (splice between two TCP connections), half-closing each way at EOF
//
// Servers and clients take --mptcp: IPPROTO_MPTCP sockets (Go 1.21 and
// later; older toolchains exit 4 saying so); "mptcp=N" in their lines
// counts the connections the kernel reports as MPTCP.
//
// Clients print one line "result ok=true|false errors=N key=value ..." and
// exit 0 iff ok, 3 when the --timeout hang guard (default 90 s) fires,
// after printing what each connection was doing, the goroutines' stacks
// (stderr) and "hang: end" (with --hold it then waits for its standard
// input to end: the connections are still there to look at).
//
//	goaccel client PORT [--conns 8] [--msgs 16] [--max 1048576] [--seed 1]
//	    N connections at once, each sending M messages of random size (1 B
//	    to --max, log-uniform) while reading the echo, every byte compared;
//	    then a half-close and EOF expected
//	goaccel stress PORT [--conns 320] [--msgs 8] [--max 65536] [--execs 10]
//	    the client's traffic plus, while it runs: runtime.GC() in a loop,
//	    deep recursion before every message (stack growth), goroutines that
//	    allocate, a CPU-bound spinner (asynchronous preemption) and os/exec of
//	    /bin/true (at least --execs, until the traffic ends)
//	goaccel rr PORT [--size 64] [--secs 2]       ping-pong against echo: msg/s
//	goaccel stream PORT [--size 1048576] [--secs 2]
//	    one-way writes against sink, its byte count checked: MB/s
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func die(f string, a ...interface{}) {
	fmt.Printf("error: "+f+"\n", a...)
	os.Exit(2)
}

// ---- servers ----------------------------------------------------------------

type counter struct {
	mu     sync.Mutex
	want   int
	conns  int
	errors int
	bytes  int64
	mptcp  int
}

func (c *counter) end(conn net.Conn, n int64, err error) {
	mp := isMPTCP(conn)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns++
	c.bytes += n
	if mp {
		c.mptcp++
	}
	if err != nil {
		c.errors++
		fmt.Fprintf(os.Stderr, "conn %d: %v\n", c.conns, err)
	}
	if c.want > 0 && c.conns == c.want {
		fmt.Printf("server conns=%d errors=%d bytes=%d mptcp=%d\n", c.conns, c.errors, c.bytes, c.mptcp)
		if c.errors > 0 {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// hide a TCPConn's ReadFrom/WriteTo: io.Copy then loops on Read and Write
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

func copyConn(dst, src net.Conn, how string) (int64, error) {
	if how == "buf" {
		return io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, make([]byte, 64<<10))
	}
	return io.Copy(dst, src)
}

var useMPTCP bool // --mptcp: listen and dial with IPPROTO_MPTCP (Go >= 1.21)

func mptcpFlag(fs *flag.FlagSet) {
	fs.BoolVar(&useMPTCP, "mptcp", false, "MPTCP sockets (Go >= 1.21)")
}

func checkMPTCP() {
	if useMPTCP && !haveMPTCP {
		fmt.Printf("error: --mptcp needs Go 1.21 or later, this is %s\n", runtime.Version())
		os.Exit(4)
	}
}

func listen() net.Listener {
	checkMPTCP()
	l, err := listenTCP("127.0.0.1:0", useMPTCP)
	if err != nil {
		die("listen: %v", err)
	}
	fmt.Printf("listening %d\n", l.Addr().(*net.TCPAddr).Port)
	return l
}

func serve(mode string, args []string) {
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	conns := fs.Int("conns", 0, "end after this many connections")
	how := fs.String("copy", "splice", "splice|buf")
	mptcpFlag(fs)
	upstream := 0
	if mode == "relay" {
		if len(args) < 1 {
			die("relay needs UPSTREAM_PORT")
		}
		upstream = atoi(args[0])
		args = args[1:]
	}
	fs.Parse(args)
	cnt := &counter{want: *conns}
	l := listen()
	for {
		c, err := l.Accept()
		if err != nil {
			die("accept: %v", err)
		}
		switch mode {
		case "echo":
			go func() {
				n, err := copyConn(c, c, *how)
				cnt.end(c, n, err)
				c.Close()
			}()
		case "sink":
			go func() {
				n, err := io.Copy(io.Discard, onlyReader{c})
				if err == nil {
					var b [8]byte
					binary.BigEndian.PutUint64(b[:], uint64(n))
					_, err = c.Write(b[:])
				}
				cnt.end(c, n, err)
				c.Close()
			}()
		case "relay":
			go relay(c, upstream, *how, cnt)
		}
	}
}

func relay(c net.Conn, upstream int, how string, cnt *counter) {
	up, err := dialTCP(fmt.Sprintf("127.0.0.1:%d", upstream), useMPTCP)
	if err != nil {
		cnt.end(c, 0, fmt.Errorf("dial upstream: %v", err))
		c.Close()
		return
	}
	var n int64
	var uerr error
	done := make(chan struct{})
	go func() {
		n, uerr = copyConn(up, c, how)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, derr := copyConn(c, up, how)
	c.(*net.TCPConn).CloseWrite()
	<-done
	if uerr == nil {
		uerr = derr
	}
	cnt.end(c, n, uerr)
	c.Close()
	up.Close()
}

// ---- clients ----------------------------------------------------------------

type report struct {
	mu     sync.Mutex
	errors []string
	msgs   atomic.Int64
	bytes  atomic.Int64
	mptcp  atomic.Int64   // connections the kernel says are MPTCP
	hung   atomic.Bool    // the hang guard fired
	state  []atomic.Value // per connection: what it is doing (for a hang)
}

func (r *report) fail(f string, a ...interface{}) {
	r.mu.Lock()
	r.errors = append(r.errors, fmt.Sprintf(f, a...))
	r.mu.Unlock()
}

func (r *report) set(i int, f string, a ...interface{}) {
	r.state[i].Store(fmt.Sprintf(f, a...))
}

var hold bool // --hold: after a hang report, wait for standard input's end

// a hang guard: after d, print what every connection was doing (and the
// goroutines' stacks on stderr), then "hang: end"; with --hold wait until
// standard input ends (a test reads `shortcut stat` while the connections
// are still there), then exit 3
func (r *report) guard(d time.Duration) {
	go func() {
		time.Sleep(d)
		// from here the run has failed, even if it ends now: the goroutine
		// profile below stops the world, and starting it again polls the
		// network, which can wake a goroutine whose wake-up was lost
		r.hung.Store(true)
		fmt.Printf("hang: after %v: %d messages done, %d bytes\n", d, r.msgs.Load(), r.bytes.Load())
		shown := 0
		for i := range r.state {
			s, _ := r.state[i].Load().(string)
			if s != "done" && shown < 40 {
				fmt.Printf("hang: conn %d: %s\n", i, s)
				shown++
			}
		}
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		fmt.Println("hang: end")
		if hold {
			io.Copy(io.Discard, os.Stdin)
		}
		os.Exit(3)
	}()
}

func msgSize(rnd *rand.Rand, max int) int {
	k := rnd.Intn(21)
	n := 1<<uint(k) + rnd.Intn(1<<uint(k))
	if n > max {
		n = max
	}
	return n
}

func dial(port int) (*net.TCPConn, error) {
	c, err := dialTCP(fmt.Sprintf("127.0.0.1:%d", port), useMPTCP)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// grow: recursion with a frame big enough to make the goroutine's stack
// grow (and be copied) between system calls
//
//go:noinline
func grow(depth int) int {
	var pad [256]byte
	pad[depth%256] = byte(depth)
	if depth == 0 {
		return int(pad[0])
	}
	return grow(depth-1) + int(pad[depth%256])
}

// one connection's echo traffic: msgs messages, each written by a goroutine
// while this one reads the echo and compares it
func echoConn(r *report, i, port, msgs, max int, seed int64, deep bool) {
	r.set(i, "dialing")
	c, err := dial(port)
	if err != nil {
		r.fail("conn %d: dial: %v", i, err)
		r.set(i, "done")
		return
	}
	defer c.Close()
	if isMPTCP(c) {
		r.mptcp.Add(1)
	}
	rnd := rand.New(rand.NewSource(seed + int64(i)*7919))
	out := make([]byte, max)
	in := make([]byte, max)
	for m := 0; m < msgs; m++ {
		if deep {
			grow(50 + rnd.Intn(400))
		}
		n := msgSize(rnd, max)
		rnd.Read(out[:n])
		r.set(i, "message %d: writing and reading %d bytes", m, n)
		werr := make(chan error, 1)
		go func(b []byte) {
			_, err := c.Write(b)
			werr <- err
		}(out[:n])
		got := 0
		var rerr error
		for got < n && rerr == nil {
			var k int
			k, rerr = c.Read(in[got:n])
			got += k
			r.set(i, "message %d: %d of %d bytes read", m, got, n)
		}
		if err := <-werr; err != nil {
			r.fail("conn %d message %d (%d bytes): write: %v", i, m, n, err)
			return
		}
		if rerr != nil {
			r.fail("conn %d message %d: read %d of %d bytes: %v", i, m, got, n, rerr)
			return
		}
		if !bytes.Equal(in[:n], out[:n]) {
			at := 0
			for in[at] == out[at] {
				at++
			}
			r.fail("conn %d message %d (%d bytes): echo differs from byte %d", i, m, n, at)
			return
		}
		r.msgs.Add(1)
		r.bytes.Add(int64(n))
	}
	r.set(i, "half-closed, waiting for EOF")
	if err := c.CloseWrite(); err != nil {
		r.fail("conn %d: shutdown: %v", i, err)
		return
	}
	k, err := c.Read(in[:1])
	if k != 0 || err != io.EOF {
		r.fail("conn %d: after the last echo: %d bytes, %v (want EOF)", i, k, err)
		return
	}
	r.set(i, "done")
}

func atoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		die("bad number %q", s)
	}
	return v
}

func finish(r *report, t0 time.Time, extra string) {
	secs := time.Since(t0).Seconds()
	if r.hung.Load() {
		r.fail("the hang guard fired: the run stalled (it ended after %.1f s)", secs)
	}
	for i, e := range r.errors {
		if i < 20 {
			fmt.Println("error:", e)
		}
	}
	fmt.Printf("result ok=%v errors=%d msgs=%d bytes=%d secs=%.3f mb_per_s=%.1f%s\n",
		len(r.errors) == 0, len(r.errors), r.msgs.Load(), r.bytes.Load(), secs,
		float64(r.bytes.Load())/secs/1e6, extra)
	if len(r.errors) > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

func client(mode string, args []string) {
	if len(args) < 1 {
		die("%s needs PORT", mode)
	}
	port := atoi(args[0])
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	dconns, dmsgs, dmax := 8, 16, 1<<20
	if mode == "stress" {
		dconns, dmsgs, dmax = 320, 8, 64<<10
	}
	conns := fs.Int("conns", dconns, "connections at once")
	msgs := fs.Int("msgs", dmsgs, "messages per connection")
	max := fs.Int("max", dmax, "largest message")
	seed := fs.Int64("seed", 1, "random seed")
	execs := fs.Int("execs", 10, "stress: at least this many os/exec runs")
	timeout := fs.Duration("timeout", 90*time.Second, "hang guard")
	fs.BoolVar(&hold, "hold", false, "after a hang report, wait for standard input's end")
	mptcpFlag(fs)
	fs.Parse(args[1:])
	checkMPTCP()
	r := &report{state: make([]atomic.Value, *conns)}
	for i := range r.state {
		r.set(i, "not started")
	}
	r.guard(*timeout)
	stress := mode == "stress"
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var gcs, nexec, allocs atomic.Int64
	if stress {
		bg.Add(4)
		go func() { // the collector, again and again
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.GC()
				gcs.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
		go func() { // garbage and stack growth
			defer bg.Done()
			var keep [][]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 1+rand.Intn(1<<16)))
				if len(keep) > 64 {
					keep = keep[:0]
				}
				grow(1000)
				allocs.Add(1)
				runtime.Gosched()
			}
		}()
		go func() { // a spinner that only asynchronous preemption stops
			defer bg.Done()
			x := uint64(1)
			for {
				for k := 0; k < 1<<22; k++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
				select {
				case <-stop:
					if x == 42 {
						fmt.Print("")
					}
					return
				default:
				}
			}
		}()
		go func() { // os/exec during the traffic
			defer bg.Done()
			for n := 0; ; n++ {
				if n >= *execs {
					select {
					case <-stop:
						return
					default:
					}
				}
				if err := exec.Command("/bin/true").Run(); err != nil {
					r.fail("exec /bin/true: %v", err)
				}
				nexec.Add(1)
			}
		}()
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			echoConn(r, i, port, *msgs, *max, *seed, stress)
		}(i)
	}
	wg.Wait()
	want := int64(*conns) * int64(*msgs)
	if r.msgs.Load() != want && len(r.errors) == 0 {
		r.fail("%d messages echoed, want %d", r.msgs.Load(), want)
	}
	extra := fmt.Sprintf(" conns=%d mptcp=%d", *conns, r.mptcp.Load())
	if stress {
		close(stop)
		bg.Wait()
		extra += fmt.Sprintf(" gcs=%d execs=%d allocs=%d gomaxprocs=%d", gcs.Load(), nexec.Load(),
			allocs.Load(), runtime.GOMAXPROCS(0))
	}
	finish(r, t0, extra)
}

// ---- benchmarks ---------------------------------------------------------------

func bench(mode string, args []string) {
	if len(args) < 1 {
		die("%s needs PORT", mode)
	}
	port := atoi(args[0])
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	dsize := 64
	if mode == "stream" {
		dsize = 1 << 20
	}
	size := fs.Int("size", dsize, "message or write size")
	secs := fs.Float64("secs", 2, "how long")
	mptcpFlag(fs)
	fs.Parse(args[1:])
	checkMPTCP()
	r := &report{state: make([]atomic.Value, 1)}
	r.set(0, mode)
	r.guard(time.Duration(*secs*float64(time.Second)) + 60*time.Second)
	c, err := dial(port)
	if err != nil {
		die("dial: %v", err)
	}
	out := make([]byte, *size)
	rand.New(rand.NewSource(5)).Read(out)
	in := make([]byte, *size)
	end := time.Now().Add(time.Duration(*secs * float64(time.Second)))
	t0 := time.Now()
	var n int64
	if mode == "rr" {
		for time.Now().Before(end) {
			for k := 0; k < 100; k++ {
				if _, err := c.Write(out); err != nil {
					r.fail("write: %v", err)
					break
				}
				if _, err := io.ReadFull(c, in); err != nil {
					r.fail("read: %v", err)
					break
				}
				if !bytes.Equal(in, out) {
					r.fail("echo %d differs", n)
				}
				n++
			}
			if len(r.errors) > 0 {
				break
			}
		}
		r.msgs.Store(n)
		r.bytes.Store(n * int64(*size))
		s := time.Since(t0).Seconds()
		c.Close()
		finish(r, t0, fmt.Sprintf(" msg_per_s=%.0f size=%d", float64(n)/s, *size))
	}
	for time.Now().Before(end) {
		if _, err := c.Write(out); err != nil {
			r.fail("write: %v", err)
			break
		}
		n++
	}
	c.CloseWrite()
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		r.fail("reading the sink's count: %v", err)
	} else if got := binary.BigEndian.Uint64(b[:]); got != uint64(n)*uint64(*size) {
		r.fail("the sink read %d bytes, %d were written", got, n*int64(*size))
	}
	c.Close()
	r.msgs.Store(n)
	r.bytes.Store(n * int64(*size))
	finish(r, t0, fmt.Sprintf(" size=%d", *size))
}

func main() {
	a := os.Args
	if len(a) < 2 {
		fmt.Fprintln(os.Stderr, "usage: goaccel echo|sink [--conns N] | relay UPSTREAM_PORT | "+
			"client|stress|rr|stream PORT [options]")
		os.Exit(2)
	}
	switch a[1] {
	case "echo", "sink", "relay":
		serve(a[1], a[2:])
	case "client", "stress":
		client(a[1], a[2:])
	case "rr", "stream":
		bench(a[1], a[2:])
	default:
		die("unknown mode %q", a[1])
	}
}
