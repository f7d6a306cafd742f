// SPDX-License-Identifier: MIT

// gobench: Go's side of make bench's Go rows (bench/interposed.py), the
// obvious Go program: a server with a goroutine per connection echoing
// with io.Copy, and a client measuring request/response or a stream.
// bench/echo.c is the same in C, for the Go <-> C rows.
//
//	gobench server tcp|unix ADDR          prints the address it listens on
//	gobench rr     tcp|unix ADDR SECONDS SIZE
//	gobench stream tcp|unix ADDR SECONDS SIZE
//
// A client prints one JSON line: {"ops", "seconds", "ops_per_s", "gbytes_per_s"}.
// stream: the server echoes, the client writes SIZE-byte blocks from one
// goroutine and reads them back on another; bytes counted one way.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "gobench: "+f+"\n", a...)
	os.Exit(1)
}

func serve(network, addr string) {
	l, err := net.Listen(network, addr)
	if err != nil {
		die("listen: %v", err)
	}
	fmt.Println(l.Addr().String())
	for {
		c, err := l.Accept()
		if err != nil {
			die("accept: %v", err)
		}
		go func() {
			io.Copy(c, c)
			c.Close()
		}()
	}
}

func rr(c net.Conn, d time.Duration, size int) int64 {
	b := make([]byte, size)
	var ops int64
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 100; i++ {
			if _, err := c.Write(b); err != nil {
				die("write: %v", err)
			}
			if _, err := io.ReadFull(c, b); err != nil {
				die("read: %v", err)
			}
		}
		ops += 100
	}
	return ops
}

func stream(c net.Conn, d time.Duration, size int) int64 {
	var stop atomic.Bool
	go func() {
		b := make([]byte, size)
		for !stop.Load() {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	b := make([]byte, size)
	var n int64
	end := time.Now().Add(d)
	// a stream that stops says so (read: i/o timeout) instead of hanging
	// until the bench's own bound kills it with nothing said
	c.SetReadDeadline(end.Add(10 * time.Second))
	for time.Now().Before(end) {
		k, err := c.Read(b)
		if err != nil {
			die("read: %v", err)
		}
		n += int64(k)
	}
	stop.Store(true)
	return n
}

func main() {
	if len(os.Args) < 4 {
		die("usage: gobench server|rr|stream tcp|unix ADDR [SECONDS SIZE]")
	}
	mode, network, addr := os.Args[1], os.Args[2], os.Args[3]
	if mode == "server" {
		serve(network, addr)
	}
	if len(os.Args) != 6 {
		die("usage: gobench rr|stream tcp|unix ADDR SECONDS SIZE")
	}
	secs, err1 := strconv.ParseFloat(os.Args[4], 64)
	size, err2 := strconv.Atoi(os.Args[5])
	if err1 != nil || err2 != nil || secs <= 0 || size <= 0 {
		die("SECONDS and SIZE: positive numbers")
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		die("dial: %v", err)
	}
	d := time.Duration(secs * float64(time.Second))
	t := time.Now()
	var ops, bytes int64
	if mode == "rr" {
		ops = rr(c, d, size)
	} else {
		bytes = stream(c, d, size)
		ops = bytes / int64(size)
	}
	el := time.Since(t).Seconds()
	c.Close()
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"ops": ops, "seconds": el, "ops_per_s": float64(ops) / el,
		"gbytes_per_s": float64(bytes) / el / 1e9,
	})
}
