// SPDX-License-Identifier: MIT

//go:build go1.21

// MPTCP (--mptcp): ListenConfig and Dialer's SetMultipathTCP, Go 1.21 on.
// Without --mptcp neither is called, so the toolchain's default holds.

package main

import (
	"context"
	"net"
)

const haveMPTCP = true

func listenTCP(addr string, mptcp bool) (net.Listener, error) {
	var lc net.ListenConfig
	if mptcp {
		lc.SetMultipathTCP(true)
	}
	return lc.Listen(context.Background(), "tcp", addr)
}

func dialTCP(addr string, mptcp bool) (net.Conn, error) {
	var d net.Dialer
	if mptcp {
		d.SetMultipathTCP(true)
	}
	return d.Dial("tcp", addr)
}

// whether the kernel says the connection is MPTCP (not fallen back to TCP)
func isMPTCP(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	m, err := tc.MultipathTCP()
	return err == nil && m
}
