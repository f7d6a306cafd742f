// SPDX-License-Identifier: MIT

//go:build !go1.21

// Before Go 1.21 there is no MPTCP API: --mptcp is refused.

package main

import "net"

const haveMPTCP = false

func listenTCP(addr string, mptcp bool) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

func dialTCP(addr string, mptcp bool) (net.Conn, error) {
	return net.Dial("tcp", addr)
}

func isMPTCP(c net.Conn) bool { return false }
