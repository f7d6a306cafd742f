// SPDX-License-Identifier: MIT

// A Go net/http server and client for tests/integration/test_runtimes.py
// and test_go.py. Built with CGO_ENABLED=1 it links libc, and under
// `shortcut run` the interposer's Go entry routes its system calls (Go
// makes its own) through the same shims as a C program's.
//
//	rthttp server
//	    listens on 127.0.0.1:0 and prints "listening PORT"; GET /hello
//	    answers a short text, POST /echo the body it got (its SHA-256 in the
//	    X-Sha256 header).
//	rthttp client PORT [REQUESTS] [BIG_BYTES]
//	    a keep-alive Transport (8 connections): REQUESTS requests, 32 at a
//	    time, alternately GET /hello and POST /echo of a random 1..32 KiB
//	    body (compared), then one POST of BIG_BYTES checked by SHA-256.
//	    Prints "result ok=.. errors=.. requests=.. bytes=.. secs=..
//	    req_per_s=.. mb_per_s=.." and exits 0 iff all came back right, 3
//	    after 60 s (a hang).
//	rthttp get URL
//	    one GET with a fresh connection; prints "status=.. bytes=..
//	    sha256=.." (the Go end of a connection to a server run under
//	    shortcut: the server sees a plain client).
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func server() {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("hello from go\n"))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		h := sha256.Sum256(b)
		w.Header().Set("X-Sha256", hex.EncodeToString(h[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Printf("listening %d\n", l.Addr().(*net.TCPAddr).Port)
	fmt.Println(http.Serve(l, mux))
	os.Exit(1)
}

func client(port, n, big int) {
	var done atomic.Int64
	go func() {
		time.Sleep(60 * time.Second)
		fmt.Printf("hang: %d of %d requests done after 60 s\n", done.Load(), n)
		os.Exit(3)
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: 8, MaxConnsPerHost: 8}
	c := &http.Client{Transport: tr}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var mu sync.Mutex
	var errs []string
	fail := func(s string) { mu.Lock(); errs = append(errs, s); mu.Unlock() }
	var nbytes atomic.Int64
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w)))
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if i%2 == 0 {
					resp, err := c.Get(base + "/hello")
					if err != nil {
						fail(fmt.Sprintf("GET %d: %v", i, err))
					} else {
						b, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 || string(b) != "hello from go\n" {
							fail(fmt.Sprintf("GET %d: status %d body %q err %v", i, resp.StatusCode, b, err))
						}
						nbytes.Add(int64(len(b)))
					}
				} else {
					body := make([]byte, 1+rnd.Intn(32*1024))
					rnd.Read(body)
					resp, err := c.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
					if err != nil {
						fail(fmt.Sprintf("POST %d: %v", i, err))
					} else {
						b, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) {
							fail(fmt.Sprintf("POST %d: status %d, %d bytes back of %d, err %v", i, resp.StatusCode, len(b), len(body), err))
						}
						nbytes.Add(int64(2 * len(body)))
					}
				}
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	if big > 0 {
		body := make([]byte, big)
		rand.New(rand.NewSource(99)).Read(body)
		hw := sha256.Sum256(body)
		want := hex.EncodeToString(hw[:])
		resp, err := c.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			fail(fmt.Sprintf("big POST: %v", err))
		} else {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			hg := sha256.Sum256(b)
			got := hex.EncodeToString(hg[:])
			if err != nil || resp.StatusCode != 200 || got != want || resp.Header.Get("X-Sha256") != want {
				fail(fmt.Sprintf("big POST: status %d, %d of %d bytes, sha256 %s (server saw %s) want %s, err %v",
					resp.StatusCode, len(b), big, got, resp.Header.Get("X-Sha256"), want, err))
			}
			nbytes.Add(int64(2 * big))
		}
	}
	secs := time.Since(t0).Seconds()
	tr.CloseIdleConnections()
	for i, e := range errs {
		if i < 20 {
			fmt.Println("error:", e)
		}
	}
	req := n
	if big > 0 {
		req++
	}
	fmt.Printf("result ok=%v errors=%d requests=%d bytes=%d secs=%.3f req_per_s=%.0f mb_per_s=%.1f\n",
		len(errs) == 0, len(errs), req, nbytes.Load(), secs, float64(n)/secs, float64(nbytes.Load())/secs/1e6)
	if len(errs) != 0 {
		os.Exit(1)
	}
}

func get(url string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	h := sha256.Sum256(b)
	fmt.Printf("status=%d bytes=%d sha256=%s\n", resp.StatusCode, len(b), hex.EncodeToString(h[:]))
}

func atoi(args []string, i, dflt int) int {
	if len(args) > i {
		v, err := strconv.Atoi(args[i])
		if err != nil {
			fmt.Println("bad number:", args[i])
			os.Exit(2)
		}
		return v
	}
	return dflt
}

func main() {
	a := os.Args
	switch {
	case len(a) > 1 && a[1] == "server":
		server()
	case len(a) > 2 && a[1] == "get":
		get(a[2])
	case len(a) > 2 && a[1] == "client":
		client(atoi(a, 2, 0), atoi(a, 3, 4000), atoi(a, 4, 16<<20))
	default:
		fmt.Fprintln(os.Stderr, "usage: rthttp server | client PORT [REQUESTS] [BIG] | get URL")
		os.Exit(2)
	}
}
